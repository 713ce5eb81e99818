import { describe, expect, it } from 'vitest';
import { reconcileNodeTaints, type ReconcileDeps } from '#functions/reconcile-node-taints/reconcile-node-taints.ts';
import { MemoryClusterConnections, MemoryEventRecorder, MemoryMachineStore } from '#test/support/memory-cluster.ts';
import type { NodeState, TaintEvent } from '#shared/domain/cloud-event.ts';
import type { MachinePoolSnapshot, MachineSnapshot, NodeSnapshot } from '#shared/domain/snapshots.ts';
import { OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';
import { PatchConflictError } from '#shared/errors.ts';
import { machineBuilder, machineTaint, nodeTaint } from '#test/support/builders.ts';
import { machineEvent, machinePoolEvent, nodeEvent } from '#test/support/sqs-records.ts';
import type { ScalableResourceSnapshot } from '#shared/domain/autoscaler.ts';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';

const ENABLED_AT = new Date('2026-01-01T00:00:00Z');
const inCluster = (m: MachineSnapshot): MachineSnapshot => ({ ...m, clusterName: 'wc1' });

function setup(settings: Partial<ReconcileDeps['settings']> = {}) {
  const machines = new MemoryMachineStore();
  const clusters = new MemoryClusterConnections();
  const recorder = new MemoryEventRecorder();
  const deps: ReconcileDeps = {
    machines,
    clusters,
    recorder,
    enablement: { enabledAt: async () => ENABLED_AT },
    clock: { now: () => new Date('2026-11-22T10:00:00Z') },
    // These cases exercise the product's own propagation of every source; the upstream split has its own cases.
    settings: { clusterMode: 'capi', dryRun: false, startupTaint: { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' }, specTaintsOwner: 'product', ...settings },
  };
  return { deps, machines, nodes: clusters.cluster('default/wc1'), recorder };
}

const NEW_NODE = '2026-11-22T09:59:00Z';
const OLD_NODE = '2025-06-01T00:00:00Z';

describe('Function: reconcileNodeTaints()', () => {
  it('writes the declared taints and removes the startup gate in one write, then records a Normal Event', async () => {
    // Prepare
    const { deps, machines, nodes, recorder } = setup();
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100'), machineTaint('boot', 'x', 'NoSchedule', 'OnInitialization')]).build()));
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [nodeTaint(UNINITIALIZED_TAINT_KEY), nodeTaint('foreign', 'keep', 'NoExecute')] });

    // Act
    const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect(result.outcome).toBe('patched');
    expect(nodes.writes).toBe(1);
    expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('foreign', 'keep', 'NoExecute'), nodeTaint('gpu', 'a100'), nodeTaint('boot', 'x')]);
    expect(nodes.peek('n1')?.annotations[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
    expect(recorder.events).toHaveLength(1);
    expect(recorder.events[0]).toMatchObject({ type: 'Normal', reason: 'TaintsPropagated' });
    expect(recorder.events[0]?.message).toContain('added gpu=a100:NoSchedule, boot=x:NoSchedule');
    expect(recorder.events[0]?.message).toContain(`removed ${UNINITIALIZED_TAINT_KEY}:NoSchedule`);
  });

  it('does not write a Node that already matches (zero writes, two reads)', async () => {
    // Prepare
    const { deps, machines, nodes, recorder } = setup();
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' }, taints: [nodeTaint('gpu', 'a100')] });

    // Act
    const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect(result.outcome).toBe('unchanged');
    expect({ machineReads: machines.reads, nodeReads: nodes.reads, writes: nodes.writes }).toEqual({ machineReads: 1, nodeReads: 1, writes: 0 });
    expect(recorder.events).toEqual([]);
  });

  it('refuses an invalid declaration: no write, previously applied taints stay, a Warning Event names the problem', async () => {
    // Prepare
    const { deps, machines, nodes, recorder } = setup();
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([{ key: 'node.kubernetes.io/bad', effect: 'NoSchedule', propagation: 'Always' }]).build()));
    const before = nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' }, taints: [nodeTaint('gpu', 'a100')] });

    // Act
    const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect(result.outcome).toBe('invalid-declaration');
    expect(result.issues?.[0]?.field).toBe('spec.taints[0].key');
    expect(nodes.writes).toBe(0);
    expect(nodes.peek('n1')).toEqual(before);
    expect(recorder.events).toMatchObject([{ type: 'Warning', reason: 'InvalidTaintDeclaration' }]);
    expect(recorder.events[0]?.message).toContain('node.kubernetes.io/');
  });

  it('refuses to write a Node whose tracking annotation is malformed and reports it on the Machine', async () => {
    // Prepare
    const { deps, machines, nodes, recorder } = setup();
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').build()));
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: { [OWN_TRACKING_ANNOTATION]: 'a:NoSchedule,broken' }, taints: [nodeTaint('a')] });

    // Act
    const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect(result.outcome).toBe('malformed-annotation');
    expect(result.reason).toBe('invalid taint format: "broken"');
    expect(nodes.writes).toBe(0);
    expect(recorder.events).toMatchObject([{ type: 'Warning', reason: 'MalformedTrackingAnnotation' }]);
  });

  it('in dry-run mode plans the write, reports before and after, and writes nothing', async () => {
    // Prepare
    const { deps, machines, nodes } = setup({ dryRun: true });
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });

    // Act
    const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect(result.outcome).toBe('dry-run');
    expect(result.planned).toEqual({
      before: { taints: [], trackingAnnotation: undefined },
      after: { taints: [nodeTaint('gpu', 'a100')], trackingAnnotation: 'gpu:NoSchedule' },
    });
    expect(nodes.writes).toBe(0);
  });

  it('adopts a Node that predates the first enablement without its OnInitialization taints', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100'), machineTaint('boot', 'x', 'NoSchedule', 'OnInitialization')]).build()));
    nodes.put({ name: 'n1', creationTimestamp: OLD_NODE, annotations: {}, taints: [] });

    // Act
    const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect(result).toMatchObject({ outcome: 'patched', adopted: true });
    expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('gpu', 'a100')]);
    expect(nodes.peek('n1')?.annotations[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
  });

  it('never adopts a Node that still carries the startup gate, however old: it registered waiting for its taints', async () => {
    // Prepare: found in a real npm start — the first Nodes are created a second before the first reconcile records enablement.
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100'), machineTaint('boot', 'x', 'NoSchedule', 'OnInitialization')]).build()));
    nodes.put({ name: 'n1', creationTimestamp: OLD_NODE, annotations: {}, taints: [nodeTaint(UNINITIALIZED_TAINT_KEY)] });

    // Act
    const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect(result).toMatchObject({ outcome: 'patched', adopted: false });
    expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('gpu', 'a100'), nodeTaint('boot', 'x')]);
    expect(nodes.peek('n1')?.annotations[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
  });

  it('lets a conflict escape as PatchConflictError so the queue retries it, leaving the foreign change in place', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu')]).build()));
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });
    nodes.beforeWrite = () => {
      nodes.put({ ...nodes.peek('n1')!, taints: [nodeTaint('foreign')] });
    };

    // Act
    const attempt = reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    await expect(attempt).rejects.toBeInstanceOf(PatchConflictError);
    expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('foreign')]);
  });

  it('resolves a Node event to its Machine through the Node annotations, or by nodeRef when it has none', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu')]).build()));
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });

    // Act
    const viaAnnotation = await reconcileNodeTaints(deps, nodeEvent('n1', { machine: { namespace: 'default', name: 'm1' } }));
    const viaNodeRef = await reconcileNodeTaints(deps, nodeEvent('n1'));

    // Assess
    expect(viaAnnotation.outcome).toBe('patched');
    expect(viaNodeRef).toMatchObject({ outcome: 'unchanged', machine: 'default/m1' });
  });

  it("taints a joining Node before Cluster API's nodeRef when its spec.providerID is the Machine's (Cluster API's own link)", async () => {
    // Prepare: the Machine has its provider ID but no nodeRef yet; the Node joined with the startup gate.
    const { deps, machines, nodes } = setup();
    machines.put({ ...inCluster(machineBuilder().named('m1').withSpecTaints([machineTaint('gpu')]).build()), providerID: 'local:///default/m1' });
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [nodeTaint(UNINITIALIZED_TAINT_KEY)], providerID: 'local:///default/m1' });

    // Act: the Node's addition, naming the Machine the forwarder matched; then the Machine's own event naming the Node.
    const viaNode = await reconcileNodeTaints(deps, nodeEvent('n1', { machine: { namespace: 'default', name: 'm1' } }));
    const viaMachine = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect(viaNode).toMatchObject({ outcome: 'patched', machine: 'default/m1', node: 'n1' });
    expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('gpu')]);
    expect(viaMachine).toMatchObject({ outcome: 'unchanged', node: 'n1' });
  });

  it.each([
    { name: 'another provider ID', nodeProviderId: 'local:///default/other' as string | undefined, machineProviderId: 'local:///default/m1' as string | undefined },
    { name: 'a Node without a provider ID', nodeProviderId: undefined, machineProviderId: 'local:///default/m1' },
    { name: 'a Machine without a provider ID', nodeProviderId: 'local:///default/m1', machineProviderId: undefined },
    { name: 'both empty', nodeProviderId: '', machineProviderId: '' },
  ])('does not link a joining Node to a Machine without nodeRef on $name: no write', async ({ nodeProviderId, machineProviderId }) => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.put({ ...inCluster(machineBuilder().named('m1').withSpecTaints([machineTaint('gpu')]).build()), ...(machineProviderId !== undefined ? { providerID: machineProviderId } : {}) });
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [nodeTaint(UNINITIALIZED_TAINT_KEY)], ...(nodeProviderId !== undefined ? { providerID: nodeProviderId } : {}) });

    // Act
    const viaNode = await reconcileNodeTaints(deps, nodeEvent('n1', { machine: { namespace: 'default', name: 'm1' } }));
    const viaMachine = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect([viaNode.outcome, viaMachine.outcome]).toEqual(['no-node', 'no-node']);
    expect(nodes.writes).toBe(0);
  });

  it("does not link by provider ID across workload clusters, and a Machine's nodeRef always wins", async () => {
    // Prepare: m1's Node is n0 (nodeRef); n1 carries m1's provider ID. m2 (no nodeRef) is in another cluster than the event.
    const { deps, machines, nodes } = setup();
    machines.put({ ...inCluster(machineBuilder().named('m1').withNodeName('n0').withSpecTaints([machineTaint('gpu')]).build()), providerID: 'p1' });
    machines.put({ ...machineBuilder().named('m2').withSpecTaints([machineTaint('gpu')]).build(), clusterName: 'wc2', providerID: 'p2' });
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [], providerID: 'p1' });
    nodes.put({ name: 'n2', creationTimestamp: NEW_NODE, annotations: {}, taints: [], providerID: 'p2' });

    // Act
    const nodeRefWins = await reconcileNodeTaints(deps, nodeEvent('n1', { machine: { namespace: 'default', name: 'm1' } }));
    const otherCluster = await reconcileNodeTaints(deps, nodeEvent('n2', { machine: { namespace: 'default', name: 'm2' } }));

    // Assess
    expect(nodeRefWins.outcome).toBe('machine-gone');
    expect(otherCluster.outcome).toBe('no-node');
    expect(nodes.writes).toBe(0);
  });

  it.each([
    { name: 'Machine deleted event', event: () => machineEvent('default', 'm1', { nodeName: 'n1', change: 'deleted' }), outcome: 'machine-gone' },
    { name: 'Machine no longer exists', event: () => machineEvent('default', 'missing', { nodeName: 'n1' }), outcome: 'machine-gone' },
    { name: 'Node deleted event', event: () => nodeEvent('n1', { change: 'deleted' }), outcome: 'node-gone' },
    { name: 'Node of no Machine', event: () => nodeEvent('stray'), outcome: 'machine-gone' },
    { name: 'Machine without nodeRef', event: () => machineEvent('default', 'no-ref'), outcome: 'no-node' },
    { name: 'Machine being deleted', event: () => machineEvent('default', 'deleting', { nodeName: 'n1' }), outcome: 'machine-deleting' },
    { name: 'Node missing although referenced', event: () => machineEvent('default', 'm-ghost', { nodeName: 'ghost' }), outcome: 'node-gone' },
  ])('ends without a write when: $name', async ({ event, outcome }) => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('no-ref').build()));
    machines.put({ ...inCluster(machineBuilder().named('deleting').withNodeName('n1').build()), deleting: true });
    machines.put(inCluster(machineBuilder().named('m-ghost').withNodeName('ghost').withSpecTaints([machineTaint('gpu')]).build()));
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });

    // Act
    const result = await reconcileNodeTaints(deps, event());

    // Assess
    expect(result.outcome).toBe(outcome);
    expect(nodes.writes).toBe(0);
  });

  describe('next to upstream CAPI (spec.taints owned by upstream, the default)', () => {
    const UPSTREAM = 'cluster.x-k8s.io/taints-from-machine';

    it("writes only its own taints and annotation, leaving spec.taints and CAPI's annotation to CAPI", async () => {
      // Prepare
      const { deps, machines, nodes } = setup({ specTaintsOwner: 'upstream' });
      machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).withAnnotation('taints.capi-taint-propagator.dev/machine', 'pool=edge:NoSchedule').build()));
      nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: { [UPSTREAM]: 'gpu:NoSchedule' }, taints: [nodeTaint('gpu', 'a100'), nodeTaint(UNINITIALIZED_TAINT_KEY)] });

      // Act
      const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

      // Assess
      expect(result.outcome).toBe('patched');
      expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('gpu', 'a100'), nodeTaint('pool', 'edge')]);
      expect(nodes.peek('n1')?.annotations).toEqual({ [UPSTREAM]: 'gpu:NoSchedule', [OWN_TRACKING_ANNOTATION]: 'pool:NoSchedule' });
    });

    it('applies an annotation-declared OnInitialization taint to a Node that CAPI initialized first', async () => {
      // Prepare
      const { deps, machines, nodes } = setup({ specTaintsOwner: 'upstream' });
      machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withAnnotation('taints.capi-taint-propagator.dev/class', 'warming:PreferNoSchedule@OnInitialization').build()));
      nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: { [UPSTREAM]: '' }, taints: [] });

      // Act
      const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

      // Assess
      expect(result.outcome).toBe('patched');
      expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('warming', undefined, 'PreferNoSchedule')]);
      expect(nodes.peek('n1')?.annotations[OWN_TRACKING_ANNOTATION]).toBe('');
    });

    it('records TaintRestored when it puts back an Always taint someone removed', async () => {
      // Prepare
      const { deps, machines, nodes, recorder } = setup({ specTaintsOwner: 'upstream' });
      machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withAnnotation('taints.capi-taint-propagator.dev/machine', 'pool=edge:NoSchedule').build()));
      nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: { [OWN_TRACKING_ANNOTATION]: 'pool:NoSchedule' }, taints: [] });

      // Act
      const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

      // Assess
      expect(result.outcome).toBe('patched');
      expect(recorder.events).toHaveLength(1);
      expect(recorder.events[0]).toMatchObject({ type: 'Normal', reason: 'TaintRestored' });
      expect(recorder.events[0]?.message).toContain('put back pool=edge:NoSchedule');
    });

    it('records DeclarationValid when the forwarder saw the declaration invalid before: with the write it brought, or in sync', async () => {
      // Prepare
      const { deps, machines, nodes, recorder } = setup({ specTaintsOwner: 'upstream' });
      machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withAnnotation('taints.capi-taint-propagator.dev/machine', 'pool=edge:NoSchedule').build()));
      nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });

      // Act
      const first = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1', declarationRecovered: true }));
      const again = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1', declarationRecovered: true, rv: '11' }));
      const plain = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1', rv: '12' }));

      // Assess
      expect([first.outcome, again.outcome, plain.outcome]).toEqual(['patched', 'unchanged', 'unchanged']);
      expect(recorder.events.map((e) => `${e.type} ${e.reason}: ${e.message}`)).toEqual([
        'Normal DeclarationValid: Taint declaration is valid again; Node n1: added pool=edge:NoSchedule; taints.capi-taint-propagator.dev/applied: null -> "pool:NoSchedule"',
        'Normal DeclarationValid: Taint declaration is valid again; Node n1 is in sync',
      ]);
    });

    it('records no DeclarationValid for a hint when the declaration is (still) invalid: the Warning says why', async () => {
      // Prepare
      const { deps, machines, nodes, recorder } = setup({ specTaintsOwner: 'upstream' });
      machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withAnnotation('taints.capi-taint-propagator.dev/machine', 'pool=edge:NoSchedul').build()));
      nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });

      // Act
      const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1', declarationRecovered: true }));

      // Assess
      expect(result.outcome).toBe('invalid-declaration');
      expect(recorder.events.map((e) => `${e.type} ${e.reason}`)).toEqual(['Warning InvalidTaintDeclaration']);
    });
  });

  describe('reads the Machine and the Node in parallel', () => {
    it('reads the Node only after the Machine when asked to (a retried record: the freshest Node for its write)', async () => {
      // Prepare
      const { deps, machines, nodes } = setup();
      machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
      nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });
      const nodeReadsWhenMachineAnswered: number[] = [];
      const sequential = {
        ...deps,
        machines: {
          getMachine: async (ns: string, name: string) => {
            await new Promise((r) => setImmediate(r));
            nodeReadsWhenMachineAnswered.push(nodes.reads);
            return machines.getMachine(ns, name);
          },
          findMachineByNodeName: machines.findMachineByNodeName.bind(machines),
          getMachinePool: machines.getMachinePool.bind(machines),
          findMachinePoolByNodeName: machines.findMachinePoolByNodeName.bind(machines),
          getCluster: machines.getCluster.bind(machines),
        },
      };

      // Act
      const result = await reconcileNodeTaints(sequential, machineEvent('default', 'm1', { nodeName: 'n1' }), { parallelReads: false });

      // Assess
      expect(result.outcome).toBe('patched');
      expect(nodeReadsWhenMachineAnswered).toEqual([0]);
      expect(nodes.reads).toBe(1);
    });

    it('starts the Node read before the Machine read has answered (one round trip for both), and uses it', async () => {
      // Prepare: a Machine store that answers only once the Node has been read.
      const { deps, machines, nodes } = setup();
      machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
      nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });
      const order: string[] = [];
      const slow = {
        ...deps,
        machines: {
          getMachine: async (ns: string, name: string) => {
            order.push('machine read started');
            while (nodes.reads === 0) await new Promise((r) => setImmediate(r));
            order.push('machine read answered');
            return machines.getMachine(ns, name);
          },
          findMachineByNodeName: machines.findMachineByNodeName.bind(machines),
          getMachinePool: machines.getMachinePool.bind(machines),
          findMachinePoolByNodeName: machines.findMachinePoolByNodeName.bind(machines),
          getCluster: machines.getCluster.bind(machines),
        },
      };

      // Act
      const result = await reconcileNodeTaints(slow, machineEvent('default', 'm1', { nodeName: 'n1' }));

      // Assess
      expect(result.outcome).toBe('patched');
      expect(order).toEqual(['machine read started', 'machine read answered']);
      expect(nodes.reads).toBe(1);
      expect(nodes.writes).toBe(1);
    });

    it('does not trust an event that names another Node: reads the Machine’s own Node (one extra read, the right write)', async () => {
      // Prepare
      const { deps, machines, nodes } = setup();
      machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
      nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });
      nodes.put({ name: 'victim', creationTimestamp: NEW_NODE, annotations: {}, taints: [nodeTaint('foreign', 'keep', 'NoExecute')] });

      // Act: a forged (or outdated) message points at another Node.
      const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'victim' }));

      // Assess
      expect(result).toMatchObject({ outcome: 'patched', node: 'n1' });
      expect(nodes.reads).toBe(2);
      expect(nodes.peek('victim')?.taints).toEqual([nodeTaint('foreign', 'keep', 'NoExecute')]);
      expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('gpu', 'a100')]);
    });

    it('does not trust an event that names another cluster: reads in the Machine’s cluster', async () => {
      // Prepare
      const { deps, machines, nodes } = setup();
      const other = (deps.clusters as MemoryClusterConnections).cluster('default/elsewhere');
      machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
      nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });
      other.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });

      // Act
      const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1', cluster: { mode: 'capi', namespace: 'default', name: 'elsewhere' } }));

      // Assess
      expect(result).toMatchObject({ outcome: 'patched', cluster: 'default/wc1' });
      expect(other.writes).toBe(0);
      expect(nodes.writes).toBe(1);
    });
  });
});

describe('Function: reconcileNodeTaints() for MachinePool Nodes', () => {
  const MACHINE_ANN = 'taints.capi-taint-propagator.dev/machine';
  const pool = (extra: Partial<MachinePoolSnapshot> = {}): MachinePoolSnapshot => ({
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    namespace: 'default',
    name: 'mp-0',
    uid: 'uid-mp-0',
    resourceVersion: '30',
    labels: {},
    annotations: { [MACHINE_ANN]: 'gpu=a:NoSchedule, boot:PreferNoSchedule@OnInitialization' },
    templateAnnotations: {},
    specTaints: undefined,
    clusterName: 'wc1',
    nodeNames: ['p1', 'p2'],
    deleting: false,
    ...extra,
  });

  it("gives a joining pool Node the pool's Always and OnInitialization taints, tracks the Always ones, and records the Event on the MachinePool", async () => {
    // Prepare
    const { deps, machines, nodes, recorder } = setup();
    machines.putPool(pool());
    nodes.put({ name: 'p2', creationTimestamp: NEW_NODE, annotations: {}, taints: [nodeTaint(UNINITIALIZED_TAINT_KEY)] });

    // Act
    const result = await reconcileNodeTaints(deps, machinePoolEvent('default', 'mp-0', 'p2', { change: 'added' }));

    // Assess
    expect(result).toMatchObject({ outcome: 'patched', machinePool: 'default/mp-0', node: 'p2', cluster: 'default/wc1' });
    expect(result.machine).toBeUndefined();
    expect(nodes.peek('p2')?.taints).toEqual([nodeTaint('gpu', 'a'), nodeTaint('boot', undefined, 'PreferNoSchedule')]);
    expect(nodes.peek('p2')?.annotations[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
    expect(recorder.events).toHaveLength(1);
    expect(recorder.events[0]?.object).toEqual({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachinePool', namespace: 'default', name: 'mp-0', uid: 'uid-mp-0' });
  });

  it('finds the pool of a Node event when no Machine owns the Node (a pool without Machine objects)', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.putPool(pool());
    nodes.put({ name: 'p1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });

    // Act
    const result = await reconcileNodeTaints(deps, nodeEvent('p1', { change: 'added' }));

    // Assess
    expect(result).toMatchObject({ outcome: 'patched', machinePool: 'default/mp-0' });
    expect(nodes.peek('p1')?.taints.map((t) => t.key)).toEqual(['gpu', 'boot']);
  });

  it("follows the pool, not the Machine's own annotations, for a Machine of a MachinePool (one source per Node)", async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.putPool(pool());
    machines.put(inCluster(machineBuilder().named('mp-0-abc').withNodeName('p1').withLabels({ 'cluster.x-k8s.io/pool-name': 'mp-0' }).withAnnotation(MACHINE_ANN, 'other:NoExecute').build()));
    nodes.put({ name: 'p1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });

    // Act
    const viaMachine = await reconcileNodeTaints(deps, machineEvent('default', 'mp-0-abc', { nodeName: 'p1' }));
    const viaNode = await reconcileNodeTaints(deps, nodeEvent('p1', { machine: { namespace: 'default', name: 'mp-0-abc' } }));

    // Assess
    expect(viaMachine).toMatchObject({ outcome: 'patched', machinePool: 'default/mp-0' });
    expect(viaNode.outcome).toBe('unchanged');
    expect(nodes.peek('p1')?.taints.map((t) => t.key)).toEqual(['gpu', 'boot']);
  });

  it('leaves alone a Node that is no longer in the pool, and a Node of a deleted pool', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.putPool(pool({ nodeNames: ['p1'] }));
    nodes.put({ name: 'p2', creationTimestamp: NEW_NODE, annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' }, taints: [nodeTaint('gpu', 'a')] });

    // Act
    const left = await reconcileNodeTaints(deps, machinePoolEvent('default', 'mp-0', 'p2'));
    const deleted = await reconcileNodeTaints(deps, machinePoolEvent('default', 'mp-0', 'p2', { change: 'deleted' }));
    const gone = await reconcileNodeTaints(deps, machinePoolEvent('default', 'mp-9', 'p2'));

    // Assess
    expect([left.outcome, deleted.outcome, gone.outcome]).toEqual(['machine-gone', 'machine-gone', 'machine-gone']);
    expect(left.reason).toContain("not in the MachinePool's status.nodeRefs");
    expect(nodes.writes).toBe(0);
  });

  it("waits for the pool's status.nodeRefs when a pool Machine's Node is not listed yet", async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.putPool(pool({ nodeNames: [] }));
    machines.put(inCluster(machineBuilder().named('mp-0-new').withNodeName('p3').withLabels({ 'cluster.x-k8s.io/pool-name': 'mp-0' }).build()));
    nodes.put({ name: 'p3', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });

    // Act
    const result = await reconcileNodeTaints(deps, machineEvent('default', 'mp-0-new', { nodeName: 'p3' }));

    // Assess
    expect(result).toMatchObject({ outcome: 'no-node', machinePool: 'default/mp-0' });
    expect(nodes.writes).toBe(0);
  });
});

describe('Function: reconcileNodeTaints(), events that claim the Node state', () => {
  /** The state the forwarder would claim for a Node as stored. */
  const stateOf = (node: NodeSnapshot): NodeState => ({
    uid: node.uid,
    resourceVersion: node.resourceVersion,
    ...(node.creationTimestamp ? { creationTimestamp: node.creationTimestamp } : {}),
    taints: node.taints,
    ...(node.annotations[TRACKING_ANNOTATION] !== undefined ? { trackingAnnotation: node.annotations[TRACKING_ANNOTATION] } : {}),
    ...(node.annotations[OWN_TRACKING_ANNOTATION] !== undefined ? { ownTrackingAnnotation: node.annotations[OWN_TRACKING_ANNOTATION] } : {}),
  });
  const claiming = (event: TaintEvent, state: NodeState): TaintEvent => ({ ...event, data: { ...event.data, nodeState: state } as TaintEvent['data'] });
  const FOREIGN = nodeTaint('foreign', 'keep', 'NoExecute');

  function withNode(settings: Partial<ReconcileDeps['settings']> = {}) {
    const env = setup(settings);
    env.machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
    const node = env.nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: { [OWN_TRACKING_ANNOTATION]: '' }, taints: [FOREIGN] });
    return { ...env, node };
  }

  it('writes a changed Node from a claim that holds without reading it: the Machine read, the write and the Event', async () => {
    // Prepare
    const { deps, machines, nodes, recorder, node } = withNode();

    // Act
    const result = await reconcileNodeTaints(deps, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), stateOf(node)));

    // Assess
    expect(result).toMatchObject({ outcome: 'patched', resourceVersion: node.resourceVersion });
    expect({ machineReads: machines.reads, nodeReads: nodes.reads, nodeWrites: nodes.writes, events: recorder.events.length }).toEqual({ machineReads: 1, nodeReads: 0, nodeWrites: 1, events: 1 });
    expect(nodes.peek('n1')?.taints).toEqual([FOREIGN, nodeTaint('gpu', 'a100')]);
  });

  it('reads the Node and writes from the read when the claim is stale (the write from the claim was refused)', async () => {
    // Prepare: someone adds a taint after the forwarder saw the Node.
    const { deps, nodes, node } = withNode();
    const claim = stateOf(node);
    nodes.put({ ...node, taints: [FOREIGN, nodeTaint('later', 'x')] });

    // Act
    const result = await reconcileNodeTaints(deps, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), claim));

    // Assess
    expect(result).toMatchObject({ outcome: 'patched', claimRefused: true });
    expect({ nodeReads: nodes.reads, nodeWrites: nodes.writes }).toEqual({ nodeReads: 1, nodeWrites: 2 });
    expect(nodes.peek('n1')?.taints).toEqual([FOREIGN, nodeTaint('later', 'x'), nodeTaint('gpu', 'a100')]);
  });

  it('never removes a taint someone else owns on a forged claim: the claim is refused and the Node read', async () => {
    // Prepare: the forgery has the current resourceVersion but leaves out the foreign taint.
    const { deps, nodes, node } = withNode();

    // Act
    const result = await reconcileNodeTaints(deps, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), { ...stateOf(node), taints: [] }));

    // Assess
    expect(result).toMatchObject({ outcome: 'patched', claimRefused: true });
    expect(nodes.peek('n1')?.taints).toEqual([FOREIGN, nodeTaint('gpu', 'a100')]);
  });

  it('reads the Node when the claim says it is in sync (a stale claim must not hide a needed write)', async () => {
    // Prepare: the claim is of an earlier state that had the declared taint; the Node lost it since.
    const { deps, nodes, node } = withNode();
    const inSync = nodes.put({ ...node, annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' }, taints: [FOREIGN, nodeTaint('gpu', 'a100')] });
    const claim = stateOf(inSync);
    nodes.put({ ...inSync, taints: [FOREIGN] });

    // Act
    const result = await reconcileNodeTaints(deps, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), claim));

    // Assess
    expect(result.outcome).toBe('patched');
    expect(result.claimRefused).toBeUndefined();
    expect({ nodeReads: nodes.reads, nodeWrites: nodes.writes }).toEqual({ nodeReads: 1, nodeWrites: 1 });
    expect(nodes.peek('n1')?.taints).toEqual([FOREIGN, nodeTaint('gpu', 'a100')]);
  });

  it("loads the workload cluster's connection beside the Machine read, speculatively (not reported), when the claim saves the Node read", async () => {
    // Prepare: calls in the order they are made; the Machine read answers only once the test lets it.
    const { deps, node } = withNode();
    const calls: string[] = [];
    let answer: () => void = () => undefined;
    const machineAnswered = new Promise<void>((resolve) => (answer = resolve));
    const observed: ReconcileDeps = {
      ...deps,
      clusters: { nodesOf: (cluster, options) => (calls.push(`nodesOf ${cluster.mode === 'capi' ? cluster.name : 'self'} report=${String(options?.report ?? true)}`), deps.clusters.nodesOf(cluster, options)) },
    };
    const read = deps.machines.getMachine.bind(deps.machines);
    deps.machines.getMachine = async (namespace, name) => (calls.push('getMachine'), await machineAnswered, read(namespace, name));

    // Act
    const result = reconcileNodeTaints(observed, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), stateOf(node)));
    const beforeTheMachine = [...calls];
    answer();

    // Assess: the connection was asked for before the Machine answered, then again the ordinary way.
    expect(beforeTheMachine).toEqual(['nodesOf wc1 report=false', 'getMachine']);
    expect((await result).outcome).toBe('patched');
    expect(calls).toEqual(['nodesOf wc1 report=false', 'getMachine', 'nodesOf wc1 report=true']);
  });

  describe('a joining Node (created less than 30 s before the record)', () => {
    const JOINING = '2026-11-22T09:59:50Z';
    function joining() {
      const env = setup();
      env.machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
      const node = env.nodes.put({ name: 'n1', creationTimestamp: JOINING, annotations: { [OWN_TRACKING_ANNOTATION]: '' }, taints: [FOREIGN] });
      return { ...env, node };
    }

    it("plans the claimed write from the Node read beside the Machine when the Node changed after the event (its kubelet's first report): no refused write", async () => {
      // Prepare: the Node moves on after the forwarder saw it.
      const { deps, nodes, node } = joining();
      const claim = stateOf(node);
      const reported = nodes.put({ ...node, taints: [FOREIGN, nodeTaint('later', 'x')] });

      // Act
      const result = await reconcileNodeTaints(deps, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), claim));

      // Assess: one read (beside the Machine), one write, from the read's version; the later taint kept.
      expect(result).toMatchObject({ outcome: 'patched', resourceVersion: reported.resourceVersion });
      expect(result.claimRefused).toBeUndefined();
      expect({ nodeReads: nodes.reads, nodeWrites: nodes.writes }).toEqual({ nodeReads: 1, nodeWrites: 1 });
      expect(nodes.peek('n1')?.taints).toEqual([FOREIGN, nodeTaint('later', 'x'), nodeTaint('gpu', 'a100')]);
    });

    it('writes the claim when the read finds the Node as claimed', async () => {
      // Prepare
      const { deps, nodes, node } = joining();

      // Act
      const result = await reconcileNodeTaints(deps, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), stateOf(node)));

      // Assess
      expect(result).toMatchObject({ outcome: 'patched', resourceVersion: node.resourceVersion });
      expect({ nodeReads: nodes.reads, nodeWrites: nodes.writes }).toEqual({ nodeReads: 1, nodeWrites: 1 });
    });

    it('writes a Node registered without any annotation from that read in one write (an event\'s claim cannot say the map is absent)', async () => {
      // Prepare: as a Node registers without annotations.
      const env = setup();
      env.machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
      const node = env.nodes.put({ name: 'n1', creationTimestamp: JOINING, annotations: {}, taints: [FOREIGN] });

      // Act
      const result = await reconcileNodeTaints(env.deps, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), stateOf(node)));

      // Assess
      expect(result).toMatchObject({ outcome: 'patched', resourceVersion: node.resourceVersion });
      expect(result.claimRefused).toBeUndefined();
      expect({ nodeReads: env.nodes.reads, nodeWrites: env.nodes.writes }).toEqual({ nodeReads: 1, nodeWrites: 1 });
      expect(env.nodes.peek('n1')?.annotations).toEqual({ [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' });
    });

    it('reads the Node again when it changed between that read and the write (the write is refused, not a conflict for the queue)', async () => {
      // Prepare: a writer changes the Node right after the read beside the Machine.
      const { deps, nodes, node } = joining();
      const claim = stateOf(nodes.put({ ...node }));
      const read = nodes.getNode.bind(nodes);
      let first = true;
      nodes.getNode = async (name) => {
        const got = await read(name);
        if (first && got) nodes.put({ ...got, taints: [...got.taints, nodeTaint('later', 'y')] });
        first = false;
        return got;
      };
      nodes.put({ ...node, taints: [FOREIGN, nodeTaint('later', 'x')] });

      // Act
      const result = await reconcileNodeTaints(deps, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), claim));

      // Assess: refused, read again, written from that read; every taint someone else wrote is kept.
      expect(result).toMatchObject({ outcome: 'patched', claimRefused: true });
      expect({ nodeReads: nodes.reads, nodeWrites: nodes.writes }).toEqual({ nodeReads: 2, nodeWrites: 2 });
      expect(nodes.peek('n1')?.taints).toEqual([FOREIGN, nodeTaint('later', 'x'), nodeTaint('later', 'y'), nodeTaint('gpu', 'a100')]);
    });
  });

  it('ignores a claim about another Node than the Machine names, and any claim in a dry run', async () => {
    // Prepare
    const { deps, nodes, node } = withNode();
    const dry = withNode({ dryRun: true });

    // Act
    const other = await reconcileNodeTaints(deps, claiming(nodeEvent('n1', { machine: { namespace: 'default', name: 'm1' }, cluster: { mode: 'capi', namespace: 'default', name: 'wc2' } }), stateOf(node)));
    const planned = await reconcileNodeTaints(dry.deps, claiming(machineEvent('default', 'm1', { nodeName: 'n1' }), stateOf(dry.node)));

    // Assess: the first read its Node (in the Machine's cluster), the dry run read and wrote nothing.
    expect(other.outcome).toBe('patched');
    expect(nodes.reads).toBe(1);
    expect(planned.outcome).toBe('dry-run');
    expect({ nodeReads: dry.nodes.reads, nodeWrites: dry.nodes.writes }).toEqual({ nodeReads: 1, nodeWrites: 0 });
  });
  describe("a MachineSet's template ahead of Cluster API's copy (the event's template hint)", () => {
    const KEY = DECLARATION_ANNOTATIONS[2];
    const machineSet = (name: string, templateAnnotations: Record<string, string>, deleting = false): ScalableResourceSnapshot => ({
      kind: 'MachineSet', apiVersion: 'cluster.x-k8s.io/v1beta2', namespace: 'default', name, uid: `uid-${name}`, resourceVersion: '30',
      annotations: {}, templateAnnotations, templateLabels: {}, specTaints: null, ownedByMachineDeployment: true, clusterName: 'wc1', deleting,
    });
    function withMachineSets(sets: ScalableResourceSnapshot[]) {
      const s = setup({ specTaintsOwner: 'upstream' });
      const reads: string[] = [];
      const deps: ReconcileDeps = { ...s.deps, machineSets: async (namespace, name) => (reads.push(`${namespace}/${name}`), sets.find((m) => m.namespace === namespace && m.name === name)) };
      s.machines.put(inCluster({ ...machineBuilder().named('m1').withNodeName('n1').withAnnotation(KEY, 'p=v1:NoSchedule').build(), machineSet: 'ms1' }));
      s.nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: { [OWN_TRACKING_ANNOTATION]: 'p:NoSchedule', [TRACKING_ANNOTATION]: '' }, taints: [nodeTaint('p', 'v1')] });
      return { ...s, deps, reads };
    }

    it('takes a declaration annotation its MachineSet template sets from the template, for a Machine event and for a Node event', async () => {
      // Prepare
      const { deps, nodes, reads } = withMachineSets([machineSet('ms1', { [KEY]: 'p=v2:NoSchedule', other: 'x' })]);

      // Act
      const fromMachine = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1', template: 'ms1' }));
      nodes.put({ ...(nodes.peek('n1') as NodeSnapshot), taints: [nodeTaint('p', 'v1')] });
      const fromNode = await reconcileNodeTaints(deps, nodeEvent('n1', { machine: { namespace: 'default', name: 'm1' }, template: 'ms1' }));

      // Assess
      expect([fromMachine.outcome, fromNode.outcome]).toEqual(['patched', 'patched']);
      expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('p', 'v2')]);
      expect(reads).toEqual(['default/ms1', 'default/ms1']);
    });

    it('without the hint reads no MachineSet and follows the Machine', async () => {
      // Prepare
      const { deps, nodes, reads } = withMachineSets([machineSet('ms1', { [KEY]: 'p=v2:NoSchedule' })]);

      // Act
      const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

      // Assess
      expect(result.outcome).toBe('unchanged');
      expect(reads).toEqual([]);
      expect(nodes.peek('n1')?.taints).toEqual([nodeTaint('p', 'v1')]);
    });

    it("reads the Machine's own MachineSet when the hint names another (a hint is no fact), and takes nothing from one being deleted or gone", async () => {
      // Prepare
      const own = withMachineSets([machineSet('ms1', { [KEY]: 'p=v3:NoSchedule' }), machineSet('forged', { [KEY]: 'evil=x:NoExecute' })]);
      const deleting = withMachineSets([machineSet('ms1', { [KEY]: 'p=v2:NoSchedule' }, true)]);
      const gone = withMachineSets([]);

      // Act
      await reconcileNodeTaints(own.deps, machineEvent('default', 'm1', { nodeName: 'n1', template: 'forged' }));
      const fromDeleting = await reconcileNodeTaints(deleting.deps, machineEvent('default', 'm1', { nodeName: 'n1', template: 'ms1' }));
      const fromGone = await reconcileNodeTaints(gone.deps, machineEvent('default', 'm1', { nodeName: 'n1', template: 'ms1' }));

      // Assess
      expect(own.nodes.peek('n1')?.taints).toEqual([nodeTaint('p', 'v3')]);
      expect(own.reads).toEqual(['default/forged', 'default/ms1']);
      expect([fromDeleting.outcome, fromGone.outcome]).toEqual(['unchanged', 'unchanged']);
    });
  });
});
