/**
 * Cluster API in the loop: a MachinePool backed by a LocalMachinePool. The local provider registers one Node per
 * replica and keeps `spec.providerIDList`; Cluster API's own MachinePool controller (gate `MachinePool`, beta and on
 * by default) copies the list and sets `status.nodeRefs`. Nothing here writes a nodeRef or a providerIDList. Then the
 * product: taints declared on the MachinePool reach its Nodes (which upstream never built).
 */
import { beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { LOCAL_MACHINE_POOL } from '#local/infrastructure/crds.ts';
import { MACHINE_POOL_ANNOTATION, MACHINE_POOL_FINALIZER, providerIdOf } from '#local/infrastructure/provider.ts';
import { readTaintStatuses } from '#local/cluster-status.ts';
import type { Pipeline } from '#local/pipeline.ts';
import type { PipelineCounters } from '#local/pipeline-report.ts';
import { OWN_TRACKING_ANNOTATION, STARTUP_GATE_TAINT_KEY } from '#shared/domain/taint.ts';
import { createNamespace, MERGE_PATCH, statusOf, waitFor } from '#test/support/control-plane.ts';
import {
  MACHINE_POOLS,
  MACHINES,
  capiControlPlane,
  capiKubeConfig,
  createMachinePool,
  createSelfHostedCluster,
  describeWithCapi,
  getObject,
  listObjects,
  scaleMachinePool,
  startProductPipeline,
  taintText,
  waitForMachinePoolNodes,
  drained,
} from '#test/support/capi.ts';

const STARTUP = { key: 'example.com/booting', effect: 'NoSchedule' };
const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const MACHINE = 'taints.capi-taint-propagator.dev/machine';
/** A finalizer of the test's, holding an object in its deletion. */
const HOLD = 'e2e.capi-taint-propagator.dev/hold';
const local = (k: typeof LOCAL_MACHINE_POOL): { group: string; version: string; plural: string } => ({ group: k.group, version: k.version, plural: k.plural });
const names = (nodes: readonly V1Node[]): string[] => nodes.map((n) => n.metadata?.name ?? '').sort();
const ready = (n: V1Node): boolean => n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

describeWithCapi('Cluster API in the loop: MachinePool → LocalMachinePool → Nodes (status.nodeRefs by Cluster API)', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: string;
  let cluster: string;

  beforeAll(async () => {
    kc = capiKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    ns = await createNamespace(kc, 'capi-mp');
    cluster = await createSelfHostedCluster(kc, ns);
  });

  const gone = async (name: string): Promise<void> => {
    await waitFor(async () => statusOf(await core.readNode({ name }).catch((e: unknown) => e)) === 404, { timeoutMs: 30_000, description: `Node ${name} deleted` });
  };

  it('runs the manager with the MachinePool gate at its default (on)', () => {
    const cp = capiControlPlane();
    expect(cp.available && cp.featureGates['MachinePool']).toBeUndefined();
  });

  it('a pool of 3 gets 3 Ready Nodes with the startup taints; scaled to 5 and back to 3, the removed Nodes are deleted', async () => {
    const pool = await createMachinePool(kc, ns, { cluster, replicas: 3, startupTaints: [STARTUP] });
    const three = await waitForMachinePoolNodes(kc, ns, pool, 3);
    expect(names(three.nodes)).toEqual([`${pool}-0`, `${pool}-1`, `${pool}-2`]);
    const localPool = await getObject(kc, local(LOCAL_MACHINE_POOL), ns, pool);
    const providerIDs = [0, 1, 2].map((i) => providerIdOf(ns, `${pool}-${i}`));
    expect(localPool.spec?.['providerIDList']).toEqual(providerIDs);
    expect(localPool.status).toMatchObject({ initialization: { provisioned: true }, ready: true, replicas: 3 });
    expect(localPool.metadata.finalizers).toContain(MACHINE_POOL_FINALIZER);
    // Cluster API copied the list from the LocalMachinePool, and took status.replicas from it.
    expect(three.pool.spec?.['providerIDList']).toEqual(providerIDs);
    expect(three.pool.status?.['replicas']).toBe(3);
    for (const node of three.nodes) {
      expect(ready(node)).toBe(true);
      expect(providerIDs).toContain(node.spec?.providerID);
      expect((node.spec?.taints ?? []).map(taintText)).toEqual([taintText(STARTUP)]);
    }

    await scaleMachinePool(kc, ns, pool, 5);
    const five = await waitForMachinePoolNodes(kc, ns, pool, 5);
    expect(names(five.nodes)).toEqual([0, 1, 2, 3, 4].map((i) => `${pool}-${i}`));
    // The first three are the same Nodes (same UIDs): scaling up only adds.
    const uids = (nodes: readonly V1Node[]): Record<string, string> => Object.fromEntries(nodes.map((n) => [n.metadata?.name ?? '', n.metadata?.uid ?? '']));
    expect(uids(five.nodes)).toMatchObject(uids(three.nodes));
    for (const node of five.nodes) expect(ready(node) && (node.spec?.taints ?? []).map(taintText)).toEqual([taintText(STARTUP)]);

    await scaleMachinePool(kc, ns, pool, 3);
    const back = await waitForMachinePoolNodes(kc, ns, pool, 3);
    expect(uids(back.nodes)).toEqual(uids(three.nodes));
    for (const removed of [`${pool}-3`, `${pool}-4`]) await gone(removed);
    expect((await getObject(kc, local(LOCAL_MACHINE_POOL), ns, pool)).spec?.['providerIDList']).toEqual(providerIDs);
  });

  it("Cluster API copies the template's annotations nowhere: its Node patch carries only its own four annotations, and no Machines exist", async () => {
    const pool = await createMachinePool(kc, ns, { cluster, replicas: 2, annotations: { 'example.com/from-template': 'yes' } });
    const { nodes } = await waitForMachinePoolNodes(kc, ns, pool, 2);
    // Positive signal that Cluster API's Node patch (machinepool_controller_noderef.go patchNodes) has landed.
    const patched = await waitFor(
      async () => {
        const got = await Promise.all(nodes.map((n) => core.readNode({ name: n.metadata?.name ?? '' })));
        return got.every((n) => n.metadata?.annotations?.['cluster.x-k8s.io/owner-name'] === pool) ? got : undefined;
      },
      { timeoutMs: 30_000, description: 'owner annotations on the pool Nodes' },
    );
    for (const node of patched) {
      expect(node.metadata?.annotations).toEqual({
        'cluster.x-k8s.io/cluster-name': cluster,
        'cluster.x-k8s.io/cluster-namespace': ns,
        'cluster.x-k8s.io/owner-kind': 'MachinePool',
        'cluster.x-k8s.io/owner-name': pool,
        [MACHINE_POOL_ANNOTATION]: `${ns}/${pool}`, // the local provider's, at registration
      });
    }
    // MachinePool Machines (which would carry the template's annotations) exist only for providers reporting
    // status.infrastructureMachineKind; the LocalMachinePool does not.
    expect(await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/pool-name=${pool}`)).toEqual([]);
    const localPool = await getObject(kc, local(LOCAL_MACHINE_POOL), ns, pool);
    expect(localPool.metadata.annotations?.['example.com/from-template']).toBeUndefined();
    const mp = await getObject(kc, MACHINE_POOLS, ns, pool);
    expect((mp.spec?.['template'] as { metadata?: { annotations?: Record<string, string> } }).metadata?.annotations).toEqual({ 'example.com/from-template': 'yes' });
  });

  it("the product, while Cluster API deletes a MachinePool: no write to a Node of the deleting pool (a hand edit stays), reconciles end left alone or gone, nothing fails", async () => {
    // Prepare: the product's pipeline; a pool of 2 declaring a taint, converged; the pool and its first Node held by a
    // finalizer of the test's, so that Cluster API's deletion leaves a deleting pool with a terminating Node.
    const pipeline = await startProductPipeline(kc, ns);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const pool = await createMachinePool(kc, ns, { cluster, replicas: 2, startupTaints: [GATE], annotations: { [MACHINE]: 'deleting=v1:NoSchedule' } });
    const [held, other] = names((await waitForMachinePoolNodes(kc, ns, pool, 2)).nodes) as [string, string];
    const release = async (): Promise<void> => {
      await core.patchNode({ name: held, body: { metadata: { finalizers: null } } }, MERGE_PATCH).catch(() => undefined);
      await custom.patchNamespacedCustomObject({ ...MACHINE_POOLS, namespace: ns, name: pool, body: { metadata: { finalizers: null } } }, MERGE_PATCH).catch(() => undefined);
    };
    try {
      for (const n of [held, other]) {
        await waitFor(async () => ((await core.readNode({ name: n })).spec?.taints ?? []).map(taintText).join() === 'deleting=v1:NoSchedule', { timeoutMs: 30_000, description: `the declared taint on Node ${n}` });
      }
      await core.patchNode({ name: held, body: { metadata: { finalizers: [HOLD] } } }, MERGE_PATCH);
      const current = await getObject(kc, MACHINE_POOLS, ns, pool);
      await custom.patchNamespacedCustomObject({ ...MACHINE_POOLS, namespace: ns, name: pool, body: { metadata: { finalizers: [...(current.metadata.finalizers ?? []), HOLD] } } }, MERGE_PATCH);
      const before = await drained(pipeline);

      // Act 1: the MachinePool deleted; Cluster API finishes its part (its finalizer gone), the other Node goes.
      await custom.deleteNamespacedCustomObject({ ...MACHINE_POOLS, namespace: ns, name: pool });
      await waitFor(async () => JSON.stringify((await getObject(kc, MACHINE_POOLS, ns, pool)).metadata.finalizers) === JSON.stringify([HOLD]), { timeoutMs: 60_000, description: "Cluster API's deletion of the pool done" });
      await gone(other);
      const gone2 = (x: PipelineCounters): number => x.reconciles['node-gone'] + x.reconciles['machine-gone'] + x.reconciles['machine-deleting'];
      const mid = await waitFor(async () => {
        const c = await drained(pipeline);
        return gone2(c) > gone2(before) ? c : undefined;
      }, { timeoutMs: 30_000, intervalMs: 200, description: "the other Node's deletion reconciled" });
      // Act 2: the product's taint removed by hand from the terminating Node of the deleting pool.
      const node = await core.readNode({ name: held });
      expect(node.metadata?.deletionTimestamp).toBeDefined();
      await core.patchNode({ name: held, body: { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints: (node.spec?.taints ?? []).filter((t) => t.key !== 'deleting') } } }, MERGE_PATCH);

      // Assess: the product saw the edit (a reconcile left alone or gone: the positive marker) and wrote nothing.
      const after = await waitFor(async () => {
        const c = await drained(pipeline);
        return gone2(c) > gone2(mid) ? c : undefined;
      }, { timeoutMs: 30_000, intervalMs: 200, description: 'the hand edit reconciled' });
      expect(((await core.readNode({ name: held })).spec?.taints ?? []).map(taintText)).toEqual([]);
      const delta = Object.fromEntries(Object.entries(after.reconciles).map(([o, n]) => [o, n - before.reconciles[o as keyof typeof before.reconciles]]).filter(([, n]) => (n as number) > 0));
      expect(Object.keys(delta).every((o) => ['machine-deleting', 'node-gone', 'machine-gone', 'unchanged'].includes(o)), JSON.stringify(delta)).toBe(true);
      expect(after.writes - before.writes).toBe(0);
      expect([after.conflicts - before.conflicts, after.transientErrors - before.transientErrors, after.deadLettered - before.deadLettered]).toEqual([0, 0, 0]);
    } finally {
      await release();
      await pipeline.stop();
    }
    await gone(held);
  });

  it('the product: pool declarations reach every member; an edit lands in place; OnInitialization taints only on joining Nodes; Events and status name the pool', async () => {
    // Prepare: the declaration sits in the pool's template metadata (where a topology puts it), the product's gate on registration.
    const pipeline = await startProductPipeline(kc, ns);
    try {
      const pool = await createMachinePool(kc, ns, { cluster, replicas: 3, startupTaints: [GATE], annotations: { [MACHINE]: 'p1=1:NoSchedule, p2:PreferNoSchedule@OnInitialization' } });
      const converge = async (node: string, want: string[], tracking: string): Promise<void> => {
        await waitFor(
          async () => {
            const n = await core.readNode({ name: node });
            const taints = (n.spec?.taints ?? []).map(taintText).sort();
            return JSON.stringify(taints) === JSON.stringify([...want].sort()) && n.metadata?.annotations?.[OWN_TRACKING_ANNOTATION] === tracking;
          },
          { timeoutMs: 60_000, description: `Node ${node} to carry ${want.join(', ')} (tracking ${tracking})` },
        );
      };

      // Act 1: three Nodes join.
      const three = await waitForMachinePoolNodes(kc, ns, pool, 3);
      const members = names(three.nodes);

      // Assess 1: each gets the Always and the OnInitialization taint, and loses the gate.
      for (const n of members) await converge(n, ['p1=1:NoSchedule', 'p2=:PreferNoSchedule'], 'p1:NoSchedule');

      // Act 2: an edit on the pool's own metadata (it ranks above the template's): a new value, another OnInitialization taint.
      await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
        { ...MACHINE_POOLS, namespace: ns, name: pool, body: { metadata: { annotations: { [MACHINE]: 'p1=2:NoSchedule, p3:PreferNoSchedule@OnInitialization' } } } },
        MERGE_PATCH,
      );

      // Assess 2: in place on every member; p3 is not applied to initialized Nodes, p2 (no longer declared) stays.
      for (const n of members) await converge(n, ['p1=2:NoSchedule', 'p2=:PreferNoSchedule'], 'p1:NoSchedule');

      // Act 3: scale to 5.
      await scaleMachinePool(kc, ns, pool, 5);
      const five = await waitForMachinePoolNodes(kc, ns, pool, 5);
      const joined = names(five.nodes).filter((n) => !members.includes(n));

      // Assess 3: the joining Nodes get the current declaration, OnInitialization included; the others are unchanged.
      expect(joined).toHaveLength(2);
      for (const n of joined) await converge(n, ['p1=2:NoSchedule', 'p3=:PreferNoSchedule'], 'p1:NoSchedule');
      for (const n of members) await converge(n, ['p1=2:NoSchedule', 'p2=:PreferNoSchedule'], 'p1:NoSchedule');

      // Act 4: back to 3.
      await scaleMachinePool(kc, ns, pool, 3);
      await waitForMachinePoolNodes(kc, ns, pool, 3);
      for (const removed of joined) await gone(removed);

      // Assess 4: the members are as they were; Events on the MachinePool name it; status lists the Nodes under the pool, in sync.
      for (const n of members) await converge(n, ['p1=2:NoSchedule', 'p2=:PreferNoSchedule'], 'p1:NoSchedule');
      const events = await waitFor(
        async () => {
          const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.kind=MachinePool,involvedObject.name=${pool}` });
          const ours = list.items.filter((e) => e.reason === 'TaintsPropagated');
          return ours.length >= 5 ? ours : undefined;
        },
        { timeoutMs: 30_000, description: `TaintsPropagated Events on MachinePool ${pool}` },
      );
      expect(events.map((e) => e.message ?? '').join('\n')).toContain(`Node ${members[0]}: `);
      const statuses = (await readTaintStatuses({ kubeConfig: kc, mode: 'self', machineNamespace: ns, startupTaint: GATE })).filter((s) => s.machine === `${ns}/${pool}`);
      expect(statuses.map((s) => [s.node, s.machinePool, s.state])).toEqual(members.map((n) => [n, true, 'in-sync']));
      expect(pipeline.counters().deadLettered).toBe(0);
    } finally {
      await pipeline.stop();
    }
  });
});
