/**
 * The staged NoExecute rollout (docs/noexecute-rollout.md) with Cluster API's own manager: the opt-in and the taint are
 * declared in a MachineDeployment's template metadata, Cluster API copies them to the Machines in place, and the
 * product's whole pipeline (forwarder, queue, reconcile) rolls the taint over the group one Node at a time, evicting
 * each Node's non-tolerating pods through the Eviction API before its taint goes on. No kubelet runs: pods are bound to
 * the Nodes directly, with no grace period, so an accepted eviction removes the pod at once.
 */
import { beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, Watch, type KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { ROLLOUT_ANNOTATION, ROLLOUT_EVICTING_TAINT, ROLLOUT_MARK_ANNOTATION } from '#shared/domain/noexecute-rollout.ts';
import { STARTUP_GATE_TAINT_KEY } from '#shared/domain/taint.ts';
import { createNamespace, MERGE_PATCH, statusOf, waitFor } from '#test/support/control-plane.ts';
import { capiKubeConfig, createMachineDeployment, createSelfHostedCluster, describeWithCapi, drained, MACHINE_DEPLOYMENTS, startProductPipeline, taintText, waitForMachineNodes } from '#test/support/capi.ts';

const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const DECLARE = 'taints.capi-taint-propagator.dev/machine';
const MAINT = 'example.com/maintenance=yes:NoExecute';

function podBody(name: string, nodeName: string, tolerating: boolean): V1Pod {
  return {
    metadata: { name, labels: { app: tolerating ? 'tolerating' : 'web' } },
    spec: { nodeName, terminationGracePeriodSeconds: 0, tolerations: tolerating ? [{ key: 'example.com/maintenance', operator: 'Exists' }] : [], containers: [{ name: 'c', image: 'registry.invalid/pause:never-pulled' }] },
  };
}

describeWithCapi('Cluster API in the loop: a NoExecute taint rolled over a MachineDeployment in stages', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: string;
  let cluster: string;

  beforeAll(async () => {
    kc = capiKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    ns = await createNamespace(kc, 'rollout');
    cluster = await createSelfHostedCluster(kc, ns);
  });

  it('one Node of the MachineDeployment at a time, its pods evicted first, the tolerating pods kept', async () => {
    // Prepare: a MachineDeployment of 3 opted in with a bound of 1, converged; two web pods and a tolerating pod per Node
    const pipeline = await startProductPipeline(kc, ns, { rollout: { claimedSeconds: 0, waitSeconds: 1, evictingSeconds: 1, refusedSeconds: 1, stuckAfterSeconds: 300 } });
    try {
      const md = await createMachineDeployment(kc, ns, { cluster, replicas: 3, startupTaints: [GATE], annotations: { [ROLLOUT_ANNOTATION]: '1' } });
      const nodes = (await waitForMachineNodes(kc, ns, md, 3)).map((p) => p.node.metadata?.name as string);
      for (const node of nodes) await waitFor(async () => !(await core.readNode({ name: node })).spec?.taints?.some((t) => t.key === GATE.key), { timeoutMs: 30_000, description: `the startup gate off ${node}` });
      await drained(pipeline);
      for (const node of nodes) {
        for (const [name, tolerating] of [[`${node}-web-0`, false], [`${node}-web-1`, false], [`${node}-tolerating`, true]] as const) {
          await core.createNamespacedPod({ namespace: ns, body: podBody(name, node, tolerating) });
        }
      }
      const events: { type: string; object: V1Node }[] = [];
      const watch = await new Watch(kc).watch('/api/v1/nodes', {}, (type, object: V1Node) => void events.push({ type, object }), () => undefined);

      // Act: the taint declared in the template; Cluster API copies it to the Machines in place
      await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
        { ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body: { spec: { template: { metadata: { annotations: { [ROLLOUT_ANNOTATION]: '1', [DECLARE]: MAINT } } } } } },
        MERGE_PATCH,
      );
      for (const node of nodes) {
        await waitFor(
          async () => {
            const n = await core.readNode({ name: node });
            return (n.spec?.taints ?? []).map(taintText).includes(MAINT) && n.metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION] === undefined;
          },
          { timeoutMs: 90_000, intervalMs: 250, description: `${MAINT} on ${node}, its mark gone` },
        );
      }
      const counters = await drained(pipeline);
      watch.abort();

      // Assess: never more than one Node evicting, replayed from the Node watch in order
      const evicting = new Set<string>();
      let most = 0;
      for (const e of events) {
        const name = e.object.metadata?.name ?? '';
        if (e.type !== 'DELETED' && (e.object.spec?.taints ?? []).some((t) => t.key === ROLLOUT_EVICTING_TAINT.key)) evicting.add(name);
        else evicting.delete(name);
        most = Math.max(most, evicting.size);
      }
      expect(most).toBe(1);
      // The web pods went through the Eviction API; the tolerating ones stayed; no Node keeps the evicting taint
      for (const node of nodes) {
        for (const name of [`${node}-web-0`, `${node}-web-1`]) expect(statusOf(await core.readNamespacedPod({ namespace: ns, name }).catch((e: unknown) => e))).toBe(404);
        expect((await core.readNamespacedPod({ namespace: ns, name: `${node}-tolerating` })).metadata?.deletionTimestamp).toBeUndefined();
        expect((await core.readNode({ name: node })).spec?.taints?.map(taintText)).toEqual([MAINT]);
      }
      expect(counters.reconciles['rollout-claimed']).toBeGreaterThanOrEqual(9);
      expect(counters.deadLettered).toBe(0);
      console.info(`[rollout e2e-capi] reconciles ${JSON.stringify(Object.fromEntries(Object.entries(counters.reconciles).filter(([, n]) => n > 0)))}`);
    } finally {
      await pipeline.stop();
    }
  });
});
