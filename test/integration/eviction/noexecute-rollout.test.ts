/**
 * The staged NoExecute rollout (docs/noexecute-rollout.md) against a real kube-apiserver and kube-controller-manager
 * v1.34.3 (disruption and taint-eviction controllers): the Eviction API answers from the disruption controller's real
 * budget accounting. No kubelet and no scheduler run: pods are bound to their Node directly and made Ready through the
 * status subresource; a "ReplicaSet" of this file puts a Ready replacement on a spare Node for every web pod that goes
 * (what a Deployment and the scheduler would do). Every record runs in a fresh container (new dependencies) and is
 * delivered twice at once, so a killed container or a redelivered record mid-rollout is part of every step.
 * The test drives the use case as the queue does: a result with `retryInSeconds` comes back after that delay.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SQSClient } from '@aws-sdk/client-sqs';
import { CoreV1Api, CustomObjectsApi, PolicyV1Api, Watch } from '@kubernetes/client-node';
import type { KubeConfig, V1Node, V1Pod, V1Toleration } from '@kubernetes/client-node';
import { findBinaries } from '#local/control-plane/assets.ts';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { reconcileNodeTaints, type ReconcileDeps, type ReconcileResult } from '#functions/reconcile-node-taints/reconcile-node-taints.ts';
import type { RolloutTimings } from '#functions/reconcile-node-taints/noexecute-rollout.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { ROLLOUT_ANNOTATION, ROLLOUT_EVICTING_TAINT, ROLLOUT_MARK_ANNOTATION, ROLLOUT_MARK_LABEL } from '#shared/domain/noexecute-rollout.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { PatchConflictError } from '#shared/errors.ts';
import { controlPlane, createMachine, createNamespace, createNode, kubeConfigFromFile, MACHINES, MERGE_PATCH, statusOf, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { machineEvent, TEST_DLQ_URL, TEST_QUEUE_URL } from '#test/support/sqs-records.ts';

const found = findBinaries();
const runnable = controlPlane().available && ((found.available && found.value.kubeControllerManager !== undefined) || process.env['CI'] === 'true');

const DECLARE = 'taints.capi-taint-propagator.dev/machine';
const MAINT = 'example.com/maintenance=yes:NoExecute';
const FAST: RolloutTimings = { claimedSeconds: 0, waitSeconds: 1, evictingSeconds: 1, refusedSeconds: 1, stuckAfterSeconds: 300 };

function podBody(name: string, nodeName: string, labels: Record<string, string>, tolerations: V1Toleration[] = []): V1Pod {
  return { metadata: { name, labels }, spec: { nodeName, terminationGracePeriodSeconds: 0, tolerations, containers: [{ name: 'c', image: 'registry.invalid/pause:never-pulled' }] } };
}

const isReady = (p: V1Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && !p.metadata?.deletionTimestamp;
const hasTaint = (n: V1Node, key: string): boolean => (n.spec?.taints ?? []).some((t) => t.key === key);

describe.skipIf(!runnable)('staged NoExecute rollout: Eviction API, disruption budgets, bounded pace', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: string;
  beforeAll(async () => {
    cp = await startControlPlane({ build: false, controllerManager: true, log: () => undefined });
    kc = kubeConfigFromFile(cp.kubeconfigPath);
    core = kc.makeApiClient(CoreV1Api);
    ns = await createNamespace(kc, 'rollout');
  });
  afterAll(async () => {
    await cp?.stop();
  });

  /** A container's dependencies, made anew for each record: nothing survives between records but the cluster. */
  const container = (timings: RolloutTimings = FAST): ReconcileDeps => {
    const workload = workloadKubeConfigs(kc);
    const deps = composeReconcile({
      config: { queueUrl: TEST_QUEUE_URL, deadLetterQueueUrl: TEST_DLQ_URL, dryRun: false, specTaintsOwner: 'product', startupTaint: undefined, retryBaseSeconds: 1, retryMaxSeconds: 5, stateNamespace: 'default', firstEnabledAt: new Date('2000-01-01T00:00:00Z') },
      clusterMode: 'self',
      managementKubeConfig: kc,
      workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }),
      sqs: new SQSClient({ region: 'eu-west-1' }),
    });
    return { ...deps, settings: { ...deps.settings, rollout: timings } };
  };

  /** Runs a Machine's record as the queue would until it stops coming back (or `until` says so); returns the outcomes. */
  const drive = async (machine: string, node: string, until: (r: ReconcileResult) => boolean = () => false, timings: RolloutTimings = FAST): Promise<ReconcileResult[]> => {
    const results: ReconcileResult[] = [];
    for (let i = 0; i < 300; i++) {
      let result: ReconcileResult;
      try {
        result = await reconcileNodeTaints(container(timings), machineEvent(ns, machine, { nodeName: node, cluster: { mode: 'self' } }));
      } catch (error) {
        // A 409 after the in-record retry goes back to the queue, as in production.
        if (!(error instanceof PatchConflictError)) throw error;
        await new Promise((r) => setTimeout(r, 100));
        continue;
      }
      results.push(result);
      if (result.retryInSeconds === undefined || until(result)) return results;
      await new Promise((r) => setTimeout(r, Math.max(50, (result.retryInSeconds ?? 0) * 1000)));
    }
    throw new Error(`the record of ${machine} kept coming back`);
  };

  /** Collects every watch event of a path until stopped. */
  const record = async <T>(path: string, query: Record<string, string>): Promise<{ events: { type: string; object: T }[]; stop: () => void }> => {
    const events: { type: string; object: T }[] = [];
    const controller = await new Watch(kc).watch(path, query, (type, object: T) => void events.push({ type, object }), () => undefined);
    return { events, stop: () => controller.abort() };
  };

  const makeReady = async (name: string): Promise<void> => {
    await core.patchNamespacedPodStatus({ namespace: ns, name, body: { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }] } } }, MERGE_PATCH);
  };

  it('rolls a NoExecute taint over a group with at most its bound (50%) of Nodes in progress and every budget kept, through killed containers and duplicate records', async () => {
    // Prepare: a MachineDeployment "md" of 4 Nodes opted in with a bound of 50% (2 of its 4 Machines); a spare Node
    const group = uniqueName('md');
    const nodes = [0, 1, 2, 3].map((i) => uniqueName(`g${i}`));
    const spare = uniqueName('spare');
    await createNode(kc, spare);
    for (const [i, node] of nodes.entries()) {
      await createNode(kc, node);
      await createMachine(kc, ns, `${group}-${i}`, { nodeName: node, labels: { 'cluster.x-k8s.io/deployment-name': group }, annotations: { [ROLLOUT_ANNOTATION]: '50%', [DECLARE]: MAINT } });
    }
    // Two web pods per Node under a budget keeping 6 of 8; one pod per Node that tolerates the taint.
    const app = uniqueName('web');
    for (const node of nodes) {
      for (const k of [0, 1]) {
        await core.createNamespacedPod({ namespace: ns, body: podBody(`${node}-web-${k}`, node, { app }) });
        await makeReady(`${node}-web-${k}`);
      }
      await core.createNamespacedPod({ namespace: ns, body: podBody(`${node}-tolerating`, node, { app: `${app}-t` }, [{ key: 'example.com/maintenance', operator: 'Exists' }]) });
    }
    const policy = kc.makeApiClient(PolicyV1Api);
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: app }, spec: { minAvailable: 6, selector: { matchLabels: { app } } } } });
    await waitFor(async () => (await policy.readNamespacedPodDisruptionBudget({ namespace: ns, name: app })).status?.disruptionsAllowed === 2, { timeoutMs: 30_000, description: 'the budget to be computed' });
    // The "ReplicaSet": a Ready replacement on the spare Node for each web pod that goes.
    const pods = await record<V1Pod>(`/api/v1/namespaces/${ns}/pods`, { labelSelector: `app=${app}` });
    const nodeWatch = await record<V1Node>('/api/v1/nodes', {});
    let replacements = 0;
    let replacing = true;
    const replicaSet = (async () => {
      let handled = 0;
      while (replacing) {
        const deleted = pods.events.slice(handled).filter((e) => e.type === 'DELETED' && e.object.spec?.nodeName !== spare);
        handled = pods.events.length;
        for (const _ of deleted) {
          const name = `${app}-r${replacements++}`;
          await core.createNamespacedPod({ namespace: ns, body: podBody(name, spare, { app }) });
          await makeReady(name);
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    })();

    // Act: every Machine's record, delivered twice at once
    const outcomes = (await Promise.all(nodes.flatMap((node, i) => [drive(`${group}-${i}`, node), drive(`${group}-${i}`, node)]))).flat();
    // A marker: the replacements are all there before the watches stop (nothing else happened after).
    await waitFor(async () => (await core.listNamespacedPod({ namespace: ns, labelSelector: `app=${app}` })).items.filter(isReady).length === 8, { timeoutMs: 20_000, description: 'all replacements' });
    replacing = false;
    await replicaSet;
    pods.stop();
    nodeWatch.stop();

    // Assess: every Node carries the taint, no mark, no evicting taint; the tolerating pods stayed
    for (const node of nodes) {
      const n = await core.readNode({ name: node });
      expect((n.spec?.taints ?? []).map((t) => `${t.key}=${t.value}:${t.effect}`)).toEqual([MAINT]);
      expect(n.metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION]).toBeUndefined();
      expect(n.metadata?.labels?.[ROLLOUT_MARK_LABEL]).toBeUndefined();
      expect((await core.readNamespacedPod({ namespace: ns, name: `${node}-tolerating` })).metadata?.deletionTimestamp).toBeUndefined();
    }
    // At most 2 Nodes evicting at any moment (the evicting taint marks the Nodes that hold a place), replayed in order
    const evicting = new Set<string>();
    let mostEvicting = 0;
    for (const e of nodeWatch.events) {
      const name = e.object.metadata?.name ?? '';
      if (e.type !== 'DELETED' && hasTaint(e.object, ROLLOUT_EVICTING_TAINT.key)) evicting.add(name);
      else evicting.delete(name);
      mostEvicting = Math.max(mostEvicting, evicting.size);
    }
    expect(mostEvicting).toBeGreaterThanOrEqual(1);
    expect(mostEvicting).toBeLessThanOrEqual(2);
    // The budget never went below its minimum: Ready web pods, replayed event by event
    const ready = new Map<string, boolean>();
    let fewestReady = Infinity;
    for (const e of pods.events) {
      ready.set(e.object.metadata?.name ?? '', e.type !== 'DELETED' && isReady(e.object));
      const count = [...ready.values()].filter(Boolean).length;
      if (ready.size >= 8) fewestReady = Math.min(fewestReady, count);
    }
    expect(fewestReady).toBeGreaterThanOrEqual(6);
    // Every web pod of the group went through the Eviction API, none deleted by the taint-eviction controller
    expect(replacements).toBe(8);
    const taintManagerDeletions = (await core.listNamespacedEvent({ namespace: ns })).items.filter((e) => e.reason === 'TaintManagerEviction' && (e.involvedObject.name ?? '').includes('-web-'));
    expect(taintManagerDeletions).toEqual([]);
    expect(outcomes.filter((o) => o.outcome === ReconcileOutcome.patched).length).toBeGreaterThanOrEqual(4);
    console.info(`[rollout] outcomes: ${JSON.stringify(countBy(outcomes.map((o) => o.outcome)))}; most Nodes evicting at once ${mostEvicting}; fewest Ready web pods ${fewestReady}`);
  });

  it('holds a Node whose budget refuses, reports it (status, Event, outcome) and keeps the rest of the group waiting at its bound', async () => {
    // Prepare: a group of 2 with a bound of 1; the first Node's pod is under a budget allowing no disruption
    const group = uniqueName('md');
    const [a, b] = [uniqueName('ra'), uniqueName('rb')];
    for (const [i, node] of [a, b].entries()) {
      await createNode(kc, node);
      await createMachine(kc, ns, `${group}-${i}`, { nodeName: node, labels: { 'cluster.x-k8s.io/deployment-name': group }, annotations: { [ROLLOUT_ANNOTATION]: '1' } });
    }
    const app = uniqueName('db');
    await core.createNamespacedPod({ namespace: ns, body: podBody(`${a}-db`, a, { app }) });
    await makeReady(`${a}-db`);
    const policy = kc.makeApiClient(PolicyV1Api);
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: app }, spec: { minAvailable: 1, selector: { matchLabels: { app } } } } });
    await waitFor(async () => {
      const s = (await policy.readNamespacedPodDisruptionBudget({ namespace: ns, name: app })).status;
      return s?.currentHealthy === 1 && s.disruptionsAllowed === 0;
    }, { timeoutMs: 30_000, description: 'the budget to be computed' });
    const custom = kc.makeApiClient(CustomObjectsApi);
    for (const i of [0, 1]) await custom.patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name: `${group}-${i}`, body: { metadata: { annotations: { [DECLARE]: MAINT } } } }, MERGE_PATCH);

    // Act: a's record until a budget refuses; then b's until it waits
    const first = await drive(`${group}-0`, a, (r) => r.outcome === ReconcileOutcome.rolloutRefused);
    const second = await drive(`${group}-1`, b, (r) => r.outcome === ReconcileOutcome.rolloutWaiting || r.outcome === ReconcileOutcome.rolloutRefused);

    // Assess
    expect(first.at(-1)?.outcome).toBe(ReconcileOutcome.rolloutRefused);
    expect(first.at(-1)?.evictions).toEqual({ evicted: 0, refused: 1 });
    expect(second.at(-1)?.outcome).toBe(ReconcileOutcome.rolloutWaiting);
    expect(second.at(-1)?.rollout?.ahead).toEqual([a]);
    const nodeA = await core.readNode({ name: a });
    expect(hasTaint(nodeA, 'example.com/maintenance')).toBe(false);
    expect(JSON.parse(nodeA.metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION] ?? '{}')).toMatchObject({ group: `MachineDeployment/${ns}/${group}`, taints: [MAINT], refused: [`${ns}/${a}-db`] });
    expect(hasTaint(await core.readNode({ name: b }), 'example.com/maintenance')).toBe(false);
    expect((await core.readNamespacedPod({ namespace: ns, name: `${a}-db` })).metadata?.deletionTimestamp).toBeUndefined();
    const events = (await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${group}-0` })).items.map((e) => [e.type, e.reason]);
    expect(events).toContainEqual(['Warning', 'EvictionRefused']);

    // Act: the declaration is withdrawn mid-way
    for (const i of [0, 1]) await custom.patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name: `${group}-${i}`, body: { metadata: { annotations: { [DECLARE]: null } } } }, MERGE_PATCH);
    const stopped = await drive(`${group}-0`, a);
    const other = await drive(`${group}-1`, b);

    // Assess: the marks and the evicting taint are gone; nothing was evicted
    expect(stopped.map((r) => r.outcome)).toEqual([ReconcileOutcome.rolloutWithdrawn]);
    expect(other.map((r) => r.outcome)).toEqual([ReconcileOutcome.rolloutWithdrawn]);
    const after = await core.readNode({ name: a });
    expect(after.spec?.taints ?? []).toEqual([]);
    expect(after.metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION]).toBeUndefined();
    expect(after.metadata?.labels?.[ROLLOUT_MARK_LABEL]).toBeUndefined();
    expect((await core.readNamespacedPod({ namespace: ns, name: `${a}-db` })).metadata?.deletionTimestamp).toBeUndefined();
  });

  it('reports a pod stuck terminating after the bound; its Node then holds only itself and the rest of the group goes on', async () => {
    // Prepare: a group of 2 with a bound of 1; the first Node's pod has a finalizer nobody removes
    const stuckAfter: RolloutTimings = { ...FAST, stuckAfterSeconds: 1 };
    const group = uniqueName('md');
    const [a, b] = [uniqueName('sa'), uniqueName('sb')];
    for (const [i, node] of [a, b].entries()) {
      await createNode(kc, node);
      await createMachine(kc, ns, `${group}-${i}`, { nodeName: node, labels: { 'cluster.x-k8s.io/deployment-name': group }, annotations: { [ROLLOUT_ANNOTATION]: '1', [DECLARE]: MAINT } });
    }
    const stuck = `${a}-stuck`;
    await core.createNamespacedPod({ namespace: ns, body: { ...podBody(stuck, a, { app: uniqueName('s') }), metadata: { name: stuck, finalizers: ['example.com/never'] } } });
    await core.createNamespacedPod({ namespace: ns, body: podBody(`${b}-web`, b, { app: uniqueName('w') }) });

    // Act: a's record until its pod is reported stuck; then b's to the end
    const first = await drive(`${group}-0`, a, (r) => r.outcome === ReconcileOutcome.rolloutStuck, stuckAfter);
    const second = await drive(`${group}-1`, b, () => false, stuckAfter);

    // Assess: a is reported and keeps waiting for its pod; b went through (a no longer counts against the bound)
    expect(first.at(-1)?.rollout?.stuck).toEqual([`${ns}/${stuck}`]);
    expect(second.at(-1)?.outcome).toBe(ReconcileOutcome.patched);
    expect(hasTaint(await core.readNode({ name: b }), 'example.com/maintenance')).toBe(true);
    const nodeA = await core.readNode({ name: a });
    expect(hasTaint(nodeA, 'example.com/maintenance')).toBe(false);
    expect(JSON.parse(nodeA.metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION] ?? '{}')).toMatchObject({ stuck: [`${ns}/${stuck}`] });
    const events = (await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${group}-0` })).items.map((e) => [e.type, e.reason]);
    expect(events).toContainEqual(['Warning', 'EvictionStuck']);

    // Act: someone removes the finalizer; the pod goes, and a's taint follows
    await core.patchNamespacedPod({ namespace: ns, name: stuck, body: { metadata: { finalizers: null } } }, MERGE_PATCH);
    const last = await drive(`${group}-0`, a, () => false, stuckAfter);

    // Assess
    expect(last.at(-1)?.outcome).toBe(ReconcileOutcome.patched);
    const after = await core.readNode({ name: a });
    expect((after.spec?.taints ?? []).map((t) => `${t.key}=${t.value}:${t.effect}`)).toEqual([MAINT]);
    expect(after.metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION]).toBeUndefined();
  });

  it('leaves a group that did not opt in to immediate mode: one write, the taint-eviction controller deletes the pods', async () => {
    // Prepare
    const node = uniqueName('imm');
    await createNode(kc, node);
    await createMachine(kc, ns, node, { nodeName: node, labels: { 'cluster.x-k8s.io/deployment-name': 'plain' }, annotations: { [DECLARE]: MAINT } });
    await core.createNamespacedPod({ namespace: ns, body: podBody(`${node}-web`, node, { app: 'plain' }) });

    // Act
    const results = await drive(node, node);

    // Assess
    expect(results.map((r) => r.outcome)).toEqual([ReconcileOutcome.patched]);
    const n = await core.readNode({ name: node });
    expect((n.spec?.taints ?? []).map((t) => `${t.key}=${t.value}:${t.effect}`)).toEqual([MAINT]);
    expect(n.metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION]).toBeUndefined();
    await waitFor(async () => {
      try {
        await core.readNamespacedPod({ namespace: ns, name: `${node}-web` });
        return false;
      } catch (e) {
        return statusOf(e) === 404;
      }
    }, { timeoutMs: 30_000, description: 'the taint-eviction controller to delete the pod' });
    const reasons = (await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${node}-web` })).items.map((e) => e.reason);
    expect(reasons).toContain('TaintManagerEviction');
  });
});

function countBy(values: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const v of values) out[v] = (out[v] ?? 0) + 1;
  return out;
}
