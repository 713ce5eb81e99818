/**
 * Cluster API in the loop: the upstream core manager (gate MachineTaintPropagation on) and the local provider turn
 * MachineDeployments into Machines and Nodes. Nothing here writes a nodeRef. The last case runs the product while
 * Cluster API deletes a MachineDeployment: a deleting Machine's Node is left alone.
 */
import { beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { LOCAL_MACHINE } from '#local/infrastructure/crds.ts';
import type { Pipeline } from '#local/pipeline.ts';
import type { PipelineCounters } from '#local/pipeline-report.ts';
import { STARTUP_GATE_TAINT_KEY } from '#shared/domain/taint.ts';
import { MACHINE_FINALIZER } from '#local/infrastructure/provider.ts';
import { createNamespace, MERGE_PATCH, statusOf, waitFor } from '#test/support/control-plane.ts';
import {
  CLUSTERS,
  MACHINE_DEPLOYMENTS,
  MACHINES,
  capiControlPlane,
  capiKubeConfig,
  createMachineDeployment,
  createSelfHostedCluster,
  describeWithCapi,
  getObject,
  listObjects,
  scaleMachineDeployment,
  startProductPipeline,
  taintText,
  waitForMachineNodes,
  drained,
} from '#test/support/capi.ts';

const STARTUP = { key: 'example.com/booting', effect: 'NoSchedule' };
const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const DECLARE = 'taints.capi-taint-propagator.dev/machine';
/** Cluster API's pre-drain lifecycle hook: a deleting Machine waits (its Node kept) while an annotation with this prefix is on it. */
const PRE_DRAIN_HOOK = 'pre-drain.delete.hook.machine.cluster.x-k8s.io/e2e-test';
const nodeTaints = (n: V1Node): string => (n.spec?.taints ?? []).map(taintText).sort().join();

const local = (k: typeof LOCAL_MACHINE): { group: string; version: string; plural: string } => ({ group: k.group, version: k.version, plural: k.plural });

describeWithCapi('Cluster API in the loop: MachineDeployment → Machines → Nodes', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: string;
  let cluster: string;

  beforeAll(async () => {
    kc = capiKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    ns = await createNamespace(kc, 'capi');
    cluster = await createSelfHostedCluster(kc, ns);
  });

  it('runs the manager with the gates the tier asked for', () => {
    const cp = capiControlPlane();
    expect(cp.available && cp.featureGates).toEqual({ ClusterTopology: true, MachineTaintPropagation: true });
  });

  it('gives the self-hosted Cluster a labelled kubeconfig Secret that reaches this API server', async () => {
    const secret = await core.readNamespacedSecret({ namespace: ns, name: `${cluster}-kubeconfig` });
    expect(secret.type).toBe('cluster.x-k8s.io/secret');
    expect(secret.metadata?.labels?.['cluster.x-k8s.io/cluster-name']).toBe(cluster);
    const kubeconfig = Buffer.from(secret.data?.['value'] ?? '', 'base64').toString('utf8');
    const cp = capiControlPlane();
    expect(cp.available && kubeconfig).toContain(cp.available ? cp.server : '?');
    const c = await getObject(kc, CLUSTERS, ns, cluster);
    expect(c.spec?.['controlPlaneEndpoint']).toEqual({ host: '127.0.0.1', port: Number(new URL(cp.available ? cp.server : 'https://x:1').port) });
  });

  it('registers one Node per Machine, named like the Machine, as a kubelet would; Cluster API sets nodeRef', async () => {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 2, startupTaints: [STARTUP] });
    const pairs = await waitForMachineNodes(kc, ns, md, 2);
    for (const { machine, node } of pairs) {
      expect(node.metadata?.name).toBe(machine.metadata.name);
      const infra = machine.spec?.['infrastructureRef'] as { name: string };
      const localMachine = await getObject(kc, local(LOCAL_MACHINE), ns, infra.name);
      expect(localMachine.metadata.finalizers).toContain(MACHINE_FINALIZER);
      expect(node.spec?.providerID).toBe(localMachine.spec?.['providerID']);
      expect(machine.spec?.['providerID']).toBe(node.spec?.providerID);
      const conditions = Object.fromEntries((node.status?.conditions ?? []).map((c) => [c.type, c.status]));
      expect(conditions).toEqual({ Ready: 'True', MemoryPressure: 'False', DiskPressure: 'False', PIDPressure: 'False' });
      // The startup taint the template asks for; Cluster API keeps taints it did not put there.
      expect((node.spec?.taints ?? []).map(taintText)).toContain(taintText(STARTUP));
    }
    // Cluster API reports the Machines running once their Nodes are Ready.
    await waitFor(async () => (await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/deployment-name=${md}`)).every((m) => m.status?.['phase'] === 'Running'), {
      timeoutMs: 30_000,
      description: 'Machines in phase Running',
    });
  });

  it('scales up and down: new Machines get Nodes, removed Machines take their Nodes and LocalMachines with them', async () => {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 1 });
    const [first] = await waitForMachineNodes(kc, ns, md, 1);
    await scaleMachineDeployment(kc, ns, md, 3);
    const three = await waitForMachineNodes(kc, ns, md, 3);
    expect(three.map((p) => p.machine.metadata.name)).toContain(first?.machine.metadata.name);
    await scaleMachineDeployment(kc, ns, md, 1);
    const [left] = await waitForMachineNodes(kc, ns, md, 1);
    const removed = three.filter((p) => p.machine.metadata.name !== left?.machine.metadata.name);
    expect(removed).toHaveLength(2);
    for (const { machine } of removed) {
      const name = machine.metadata.name;
      await waitFor(async () => statusOf(await core.readNode({ name }).catch((e: unknown) => e)) === 404, { timeoutMs: 30_000, description: `Node ${name} deleted` });
      const infra = (machine.spec?.['infrastructureRef'] as { name: string }).name;
      await waitFor(async () => statusOf(await getObject(kc, local(LOCAL_MACHINE), ns, infra).catch((e: unknown) => e)) === 404, { timeoutMs: 30_000, description: `LocalMachine ${infra} deleted` });
    }
  });

  it('gate on: spec.taints of the MachineDeployment reach the Nodes through Cluster API, and an edit changes them in place', async () => {
    const md = await createMachineDeployment(kc, ns, {
      cluster,
      replicas: 2,
      startupTaints: [STARTUP],
      taints: [{ key: 'example.com/gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always' }],
    });
    const before = await waitForMachineNodes(kc, ns, md, 2);
    await waitFor(
      async () => {
        const nodes = await Promise.all(before.map((p) => core.readNode({ name: p.node.metadata?.name ?? '' })));
        return nodes.every((n) => (n.spec?.taints ?? []).map(taintText).includes('example.com/gpu=a100:NoSchedule'));
      },
      { timeoutMs: 30_000, description: 'example.com/gpu=a100:NoSchedule on both Nodes' },
    );
    const current = await getObject(kc, MACHINE_DEPLOYMENTS, ns, md);
    const template = current.spec?.['template'] as { spec: Record<string, unknown> };
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      {
        ...MACHINE_DEPLOYMENTS,
        namespace: ns,
        name: md,
        body: { spec: { template: { spec: { ...template.spec, taints: [{ key: 'example.com/gpu', value: 'h100', effect: 'NoSchedule', propagation: 'Always' }] } } } },
      },
      MERGE_PATCH,
    );
    const nodes = await waitFor(
      async () => {
        const got = await Promise.all(before.map((p) => core.readNode({ name: p.node.metadata?.name ?? '' })));
        return got.every((n) => (n.spec?.taints ?? []).map(taintText).includes('example.com/gpu=h100:NoSchedule')) ? got : undefined;
      },
      { timeoutMs: 30_000, description: 'example.com/gpu=h100:NoSchedule on both Nodes' },
    );
    for (const n of nodes) expect((n.spec?.taints ?? []).map(taintText)).not.toContain('example.com/gpu=a100:NoSchedule');
    // In place: the same Machines (and Nodes) still back the MachineDeployment.
    const after = await waitForMachineNodes(kc, ns, md, 2);
    expect(after.map((p) => p.machine.metadata.uid)).toEqual(before.map((p) => p.machine.metadata.uid));
  });

  it("the product, while Cluster API deletes a MachineDeployment: no write to a deleting Machine's Node (a hand edit stays), reconciles end machine-deleting / node-gone / machine-gone, nothing fails", async () => {
    // Prepare: the product's pipeline; a MachineDeployment of 2 declaring a taint, converged; one Machine held in its
    // deletion by a pre-drain hook (Cluster API's lifecycle hook: the Machine and its Node stay while the hook is there).
    const pipeline = await startProductPipeline(kc, ns);
    try {
      const custom = kc.makeApiClient(CustomObjectsApi);
      const md = await createMachineDeployment(kc, ns, { cluster, replicas: 2, startupTaints: [GATE], annotations: { [DECLARE]: 'deleting=v1:NoSchedule' } });
      const pairs = await waitForMachineNodes(kc, ns, md, 2);
      const [held, other] = pairs.map((p) => ({ machine: p.machine.metadata.name, node: p.node.metadata?.name as string })) as [{ machine: string; node: string }, { machine: string; node: string }];
      for (const { node } of [held, other]) {
        await waitFor(async () => nodeTaints(await core.readNode({ name: node })) === 'deleting=v1:NoSchedule', { timeoutMs: 30_000, description: `the declared taint on Node ${node}` });
      }
      await custom.patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name: held.machine, body: { metadata: { annotations: { [PRE_DRAIN_HOOK]: 'e2e' } } } }, MERGE_PATCH);
      const before = await drained(pipeline);

      // Act 1: the MachineDeployment deleted; the held Machine is deleting, the other one goes with its Node.
      await custom.deleteNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: md });
      await waitFor(async () => (await getObject(kc, MACHINES, ns, held.machine)).metadata.deletionTimestamp, { timeoutMs: 60_000, description: `Machine ${held.machine} deleting` });
      await waitFor(async () => statusOf(await core.readNode({ name: other.node }).catch((e: unknown) => e)) === 404, { timeoutMs: 60_000, description: `Node ${other.node} deleted` });
      // Act 2: the product's taint removed by hand from the deleting Machine's Node.
      const node = await core.readNode({ name: held.node });
      await core.patchNode({ name: held.node, body: { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints: (node.spec?.taints ?? []).filter((t) => t.key !== 'deleting') } } }, MERGE_PATCH);

      // Assess 1: the product saw the edit and decided machine-deleting (the positive marker), and wrote nothing.
      const decided = await waitFor(
        async () => {
          const c = await drained(pipeline);
          return c.reconciles['machine-deleting'] > before.reconciles['machine-deleting'] ? c : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200, description: 'a machine-deleting reconcile of the hand edit' },
      );
      expect(nodeTaints(await core.readNode({ name: held.node }))).toBe('');
      expect(decided.writes - before.writes).toBe(0);

      // Act 3: the hook removed: Cluster API deletes the Machine and its Node.
      await custom.patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name: held.machine, body: { metadata: { annotations: { [PRE_DRAIN_HOOK]: null } } } }, MERGE_PATCH);
      await waitFor(async () => statusOf(await core.readNode({ name: held.node }).catch((e: unknown) => e)) === 404, { timeoutMs: 60_000, description: `Node ${held.node} deleted` });
      await waitFor(async () => (await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/deployment-name=${md}`)).length === 0, { timeoutMs: 60_000, description: 'Machines deleted' });

      // Assess 2: every reconcile since the deletion began ended left alone or gone; no write, retry or dead letter.
      const after = await waitFor(
        async () => {
          const c = await drained(pipeline);
          const gone = (x: PipelineCounters): number => x.reconciles['node-gone'] + x.reconciles['machine-gone'];
          return gone(c) - gone(before) >= 2 ? c : undefined;
        },
        { timeoutMs: 30_000, intervalMs: 200, description: 'a node-gone or machine-gone reconcile per deleted Node' },
      );
      const delta = Object.fromEntries(Object.entries(after.reconciles).map(([o, n]) => [o, n - before.reconciles[o as keyof typeof before.reconciles]]).filter(([, n]) => (n as number) > 0));
      expect(Object.keys(delta).every((o) => ['machine-deleting', 'node-gone', 'machine-gone', 'unchanged', 'no-node'].includes(o)), JSON.stringify(delta)).toBe(true);
      expect(after.writes - before.writes).toBe(0);
      expect([after.conflicts - before.conflicts, after.transientErrors - before.transientErrors, after.deadLettered - before.deadLettered]).toEqual([0, 0, 0]);
    } finally {
      await pipeline.stop();
    }
  });
});
