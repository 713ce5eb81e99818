import { describe, expect, it } from 'vitest';
import { reconcileNodeTaints, type ReconcileDeps } from '#functions/reconcile-node-taints/reconcile-node-taints.ts';
import { MemoryClusterConnections, MemoryEventRecorder, MemoryMachineStore } from '#test/support/memory-cluster.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';
import type { MachineFacts, MachinePoolFacts } from '#shared/model/views.ts';
import { OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';
import { PatchConflictError } from '#shared/errors.ts';
import { machineBuilder, machineTaint, nodeTaint } from '#test/support/builders.ts';
import { machineEvent, machinePoolEvent, nodeEvent } from '#test/support/sqs-records.ts';

const ENABLED_AT = new Date('2026-01-01T00:00:00Z');
const inCluster = (m: MachineFacts): MachineFacts => ({ ...m, clusterName: 'wc1' });

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

  it('does not write a Node that already matches (zero writes; the Machine, its Cluster and the Node read)', async () => {
    // Prepare
    const { deps, machines, nodes, recorder } = setup();
    machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' }, taints: [nodeTaint('gpu', 'a100')] });

    // Act
    const result = await reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    expect(result.outcome).toBe('unchanged');
    expect({ managementReads: machines.reads, nodeReads: nodes.reads, writes: nodes.writes }).toEqual({ managementReads: 2, nodeReads: 1, writes: 0 });
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

  it('lets a second conflict escape as PatchConflictError so the queue retries it, leaving the foreign change in place', async () => {
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

  describe('takes the event as a hint only', () => {
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
  const pool = (extra: Partial<MachinePoolFacts> = {}): MachinePoolFacts => ({
    kind: 'MachinePool',
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    namespace: 'default',
    name: 'mp-0',
    uid: 'uid-mp-0',
    resourceVersion: '30',
    labels: {},
    annotations: { [MACHINE_ANN]: 'gpu=a:NoSchedule, boot:PreferNoSchedule@OnInitialization' },
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

describe('Function: reconcileNodeTaints(), record → outcome', () => {
  const PAUSED = 'cluster.x-k8s.io/paused';
  const MACHINE_ANN = 'taints.capi-taint-propagator.dev/machine';
  const gpuMachine = () => machineBuilder().named('m1').withNodeName('n1').withSpecTaints([machineTaint('gpu', 'a100')]);
  const invalidMachine = () => machineBuilder().named('m1').withNodeName('n1').withSpecTaints([{ key: 'node.kubernetes.io/bad', effect: 'NoSchedule', propagation: 'Always' }]);
  const pool = (annotations: Record<string, string>): MachinePoolFacts => ({
    kind: 'MachinePool', apiVersion: 'cluster.x-k8s.io/v1beta2', namespace: 'default', name: 'mp-0', uid: 'uid-mp-0', resourceVersion: '30', labels: {},
    annotations: { [MACHINE_ANN]: 'gpu=a100:NoSchedule', ...annotations }, specTaints: undefined, clusterName: 'wc1', nodeNames: ['n1'], deleting: false,
  });
  type Setup = ReturnType<typeof setup>;
  const cases: ReadonlyArray<{
    name: string;
    settings?: Partial<ReconcileDeps['settings']>;
    prepare: (s: Setup) => void;
    event: TaintEvent;
    want: { outcome: string; reason?: RegExp; taints: string[]; eventReasons: string[] };
  }> = [
    // Pause, as Cluster API means it: no write, no Event.
    {
      name: 'a Machine whose Cluster has spec.paused is left alone',
      prepare: ({ machines }) => {
        machines.put(inCluster(gpuMachine().build()));
        machines.putCluster({ namespace: 'default', name: 'wc1', paused: true });
      },
      event: machineEvent('default', 'm1', { nodeName: 'n1' }),
      want: { outcome: 'paused', reason: /Cluster default\/wc1 has spec.paused/, taints: [], eventReasons: [] },
    },
    {
      name: 'a Machine with the paused annotation is left alone',
      prepare: ({ machines }) => machines.put(inCluster(gpuMachine().withAnnotation(PAUSED, '').build())),
      event: machineEvent('default', 'm1', { nodeName: 'n1' }),
      want: { outcome: 'paused', reason: /Machine default\/m1/, taints: [], eventReasons: [] },
    },
    {
      name: 'a MachinePool with the paused annotation leaves its Node alone',
      prepare: ({ machines }) => machines.putPool(pool({ [PAUSED]: 'true' })),
      event: machinePoolEvent('default', 'mp-0', 'n1'),
      want: { outcome: 'paused', reason: /MachinePool default\/mp-0/, taints: [], eventReasons: [] },
    },
    {
      name: "a pool Machine's Node is left alone when its MachinePool is paused",
      prepare: ({ machines }) => {
        machines.putPool(pool({ [PAUSED]: '' }));
        machines.put(inCluster(machineBuilder().named('m1').withNodeName('n1').withLabels({ 'cluster.x-k8s.io/pool-name': 'mp-0' }).build()));
      },
      event: machineEvent('default', 'm1', { nodeName: 'n1' }),
      want: { outcome: 'paused', taints: [], eventReasons: [] },
    },
    {
      name: 'a paused Machine with an invalid declaration gets no Warning Event (no storm while paused)',
      prepare: ({ machines }) => {
        machines.put(inCluster(invalidMachine().build()));
        machines.putCluster({ namespace: 'default', name: 'wc1', paused: true });
      },
      event: machineEvent('default', 'm1', { nodeName: 'n1' }),
      want: { outcome: 'paused', taints: [], eventReasons: [] },
    },
    {
      name: 'the Machine’s own Cluster decides, not the one a forged event names',
      prepare: ({ machines }) => {
        machines.put(inCluster(gpuMachine().build()));
        machines.putCluster({ namespace: 'default', name: 'elsewhere', paused: true });
        machines.putCluster({ namespace: 'default', name: 'wc1', paused: false });
      },
      event: machineEvent('default', 'm1', { nodeName: 'n1', cluster: { mode: 'capi', namespace: 'default', name: 'elsewhere' } }),
      want: { outcome: 'patched', taints: ['gpu'], eventReasons: ['TaintsPropagated'] },
    },
    {
      name: 'a Cluster that does not exist pauses nothing',
      prepare: ({ machines }) => machines.put(inCluster(gpuMachine().build())),
      event: machineEvent('default', 'm1', { nodeName: 'n1' }),
      want: { outcome: 'patched', taints: ['gpu'], eventReasons: ['TaintsPropagated'] },
    },
    {
      name: 'once unpaused, the Node converges',
      prepare: ({ machines }) => {
        machines.put(inCluster(gpuMachine().withAnnotation('other', 'x').build()));
        machines.putCluster({ namespace: 'default', name: 'wc1', paused: false });
      },
      event: machineEvent('default', 'm1', { nodeName: 'n1' }),
      want: { outcome: 'patched', taints: ['gpu'], eventReasons: ['TaintsPropagated'] },
    },
    {
      name: 'an unpaused invalid declaration still gets its Warning Event',
      prepare: ({ machines }) => machines.put(inCluster(invalidMachine().build())),
      event: machineEvent('default', 'm1', { nodeName: 'n1' }),
      want: { outcome: 'invalid-declaration', taints: [], eventReasons: ['InvalidTaintDeclaration'] },
    },
    // Optimistic concurrency: a 409 is read and planned again within the record, once.
    {
      name: 'a 409 from another writer is re-read and re-planned in the record: one write, both changes kept',
      prepare: ({ machines, nodes }) => {
        machines.put(inCluster(gpuMachine().build()));
        let first = true;
        nodes.beforeWrite = () => {
          if (first) nodes.put({ ...nodes.peek('n1')!, taints: [nodeTaint('foreign')] });
          first = false;
        };
      },
      event: machineEvent('default', 'm1', { nodeName: 'n1' }),
      want: { outcome: 'patched', taints: ['foreign', 'gpu'], eventReasons: ['TaintsPropagated'] },
    },
    // The event's Node is a hint, used only when the Machine confirms it.
    {
      name: 'an event naming another Node (forged or outdated): the Machine’s own Node is read and written',
      prepare: ({ machines, nodes }) => {
        machines.put(inCluster(gpuMachine().build()));
        nodes.put({ name: 'victim', creationTimestamp: NEW_NODE, annotations: {}, taints: [nodeTaint('foreign', 'keep', 'NoExecute')] });
      },
      event: machineEvent('default', 'm1', { nodeName: 'victim' }),
      want: { outcome: 'patched', taints: ['gpu'], eventReasons: ['TaintsPropagated'] },
    },
    // Self mode (Machines and Nodes in one cluster): the Machines still belong to a Cluster, whose pause holds too.
    {
      name: 'self mode: a Machine with the paused annotation is left alone',
      settings: { clusterMode: 'self' },
      prepare: ({ machines }) => machines.put(gpuMachine().withAnnotation(PAUSED, '').build()),
      event: machineEvent('default', 'm1', { nodeName: 'n1', cluster: { mode: 'self' } }),
      want: { outcome: 'paused', taints: [], eventReasons: [] },
    },
    {
      name: "self mode: a Machine of a paused Cluster is left alone (its Cluster is read although the event names none)",
      settings: { clusterMode: 'self' },
      prepare: ({ machines }) => {
        machines.put(inCluster(gpuMachine().build()));
        machines.putCluster({ namespace: 'default', name: 'wc1', paused: true });
      },
      event: machineEvent('default', 'm1', { nodeName: 'n1', cluster: { mode: 'self' } }),
      want: { outcome: 'paused', reason: /spec\.paused/, taints: [], eventReasons: [] },
    },
    {
      name: 'self mode: a Machine of an unpaused Cluster is written',
      settings: { clusterMode: 'self' },
      prepare: ({ machines }) => {
        machines.put(inCluster(gpuMachine().build()));
        machines.putCluster({ namespace: 'default', name: 'wc1', paused: false });
      },
      event: machineEvent('default', 'm1', { nodeName: 'n1', cluster: { mode: 'self' } }),
      want: { outcome: 'patched', taints: ['gpu'], eventReasons: ['TaintsPropagated'] },
    },
  ];

  it.each(cases)('$name', async ({ settings, prepare, event, want }) => {
    // Prepare
    const s = setup(settings);
    const nodes = settings?.clusterMode === 'self' ? (s.deps.clusters as MemoryClusterConnections).cluster('self') : s.nodes;
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });
    prepare({ ...s, nodes });

    // Act
    const result = await reconcileNodeTaints(s.deps, event);

    // Assess
    expect(result.outcome).toBe(want.outcome);
    if (want.reason) expect(result.reason).toMatch(want.reason);
    expect(nodes.peek('n1')?.taints.map((t) => t.key)).toEqual(want.taints);
    expect(s.recorder.events.map((e) => e.reason)).toEqual(want.eventReasons);
  });

  it('lets a second 409 escape as PatchConflictError (the queue takes over), after exactly two write attempts', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(gpuMachine().build()));
    nodes.put({ name: 'n1', creationTimestamp: NEW_NODE, annotations: {}, taints: [] });
    nodes.beforeWrite = () => void nodes.put({ ...nodes.peek('n1')!, labels: { bumped: String(nodes.writes) } });

    // Act
    const attempt = reconcileNodeTaints(deps, machineEvent('default', 'm1', { nodeName: 'n1' }));

    // Assess
    await expect(attempt).rejects.toBeInstanceOf(PatchConflictError);
    expect(nodes.writes).toBe(2);
    expect(nodes.peek('n1')?.taints).toEqual([]);
  });
});
