/**
 * Scenario `noexecute` (issue 51, point 6): a NoExecute taint declared on a node group of N Nodes × P pods under three
 * PodDisruptionBudgets, applied immediately (no opt-in: the taint-eviction controller deletes the pods) and staged
 * (`rollout.capi-taint-propagator.dev/no-execute: "10%"`: the product evicts through the Eviction API, a bounded number
 * of Nodes at a time), each on a fresh group.
 *
 * Real parts: a control plane of its own with kube-controller-manager (taint-eviction and disruption controllers), as
 * test/integration/eviction/noexecute-rollout.test.ts starts it; the product runs through the local pipeline
 * (bench/lib/pipeline.ts: production's `processBatch` + `composeReconcile`, an SQS FIFO queue; a record that is to
 * come back does so through the queue after its `retryInSeconds`), `self` mode, with production's rollout timings
 * (the smoke size uses the integration test's short ones). Machines are declared as the integration test declares
 * them: bare Machines labelled with their MachineDeployment, carrying the declaration annotation; the clock starts when
 * their events are published (what the forwarder would send).
 *
 * Stand-ins, said plainly: no kubelet and no scheduler run; pods are bound to their Node directly and made Ready
 * through the status subresource. No ReplicaSet controller runs either: for every pod of the group that goes, the
 * benchmark creates a replacement on a spare Node outside the group and marks it Ready after
 * `--noexecute-ready-seconds` (default 0: at once), what a ReplicaSet, the scheduler and a kubelet would do, in both
 * modes. Without it a staged rollout could never finish under the budgets. The control plane (and everything in it) is
 * stopped at the end, so a failed phase leaves nothing behind.
 */
import type { TaintId } from '#shared/domain/taint.ts';
import { startControlPlane } from '#local/control-plane/control-plane.ts';
import { ROLLOUT_ANNOTATION, ROLLOUT_EVICTING_TAINT, ROLLOUT_MARK_LABEL } from '#shared/domain/noexecute-rollout.ts';
import type { RolloutTimings } from '#functions/reconcile-node-taints/noexecute-rollout.ts';
import type { BenchContext } from '../lib/context.ts';
import { BENCH_LABEL, MACHINES_PATH, RawKube, createNamespace, loadKubeConfig, mapConcurrent, runId } from '../lib/kube.ts';
import { ReconcilePipeline, machineModified, publishAll } from '../lib/pipeline.ts';
import { round, since, sleep } from '../lib/stats.ts';

const DECLARE = 'taints.capi-taint-propagator.dev/machine';
const TAINT = { key: 'bench.capi-tp/maintenance', value: 'yes', effect: 'NoExecute' } as const;
/** The integration test's short rollout timings, for the smoke size only (production's at quick and full). */
const SMOKE_TIMINGS: RolloutTimings = { claimedSeconds: 0, waitSeconds: 1, evictingSeconds: 1, refusedSeconds: 1, stuckAfterSeconds: 300 };
/** Share of each pod set a budget lets go at once (minAvailable = size − ceil(size × share)): three different budgets. */
const BUDGET_SHARES = [0.12, 0.2, 0.3] as const;
const SPARE_NODES = 5;

/** A budget over one pod set: its name and its minimum (integer `minAvailable`: pods without a controller allow no percentages). */
export interface BudgetSpec {
  readonly name: string;
  readonly minAvailable: number;
}

/** One pod's state as a watch event shows it. */
export interface PodSample {
  readonly name: string;
  /** The budget whose selector matches the pod. */
  readonly budget: string;
  /** Ready and not being deleted (what the disruption controller counts as healthy). */
  readonly healthy: boolean;
  readonly deleted: boolean;
}

export interface BudgetViolation {
  readonly budget: string;
  readonly minAvailable: number;
  /** The fewest healthy pods of the set at any moment, replayed event by event. */
  readonly fewestHealthy: number;
  /** How far below the minimum that went (0: kept). */
  readonly shortfall: number;
}

/**
 * Replays pod watch samples in order and returns, per budget, the fewest healthy pods at any moment and the shortfall
 * below its minimum. Counting starts at `baseline` (the pods Ready when the taint was declared), so the set-up's
 * creations never count as a violation.
 */
export function budgetViolations(budgets: readonly BudgetSpec[], baseline: readonly PodSample[], samples: readonly PodSample[]): BudgetViolation[] {
  const healthy = new Map<string, Map<string, boolean>>(budgets.map((b) => [b.name, new Map()]));
  for (const s of baseline) healthy.get(s.budget)?.set(s.name, s.healthy && !s.deleted);
  const count = (b: string): number => [...(healthy.get(b)?.values() ?? [])].filter(Boolean).length;
  const fewest = new Map(budgets.map((b) => [b.name, count(b.name)]));
  for (const s of samples) {
    const set = healthy.get(s.budget);
    if (!set) continue;
    set.set(s.name, s.healthy && !s.deleted);
    fewest.set(s.budget, Math.min(fewest.get(s.budget) ?? Infinity, count(s.budget)));
  }
  return budgets.map((b) => {
    const fewestHealthy = fewest.get(b.name) ?? 0;
    return { budget: b.name, minAvailable: b.minAvailable, fewestHealthy, shortfall: Math.max(0, b.minAvailable - fewestHealthy) };
  });
}

/** The most members at once of a set replayed from (member, in) transitions, in order. */
export function mostAtOnce(transitions: readonly { readonly member: string; readonly in: boolean }[]): number {
  const current = new Set<string>();
  let most = 0;
  for (const t of transitions) {
    if (t.in) current.add(t.member);
    else current.delete(t.member);
    most = Math.max(most, current.size);
  }
  return most;
}

export interface NoExecutePhase {
  readonly mode: 'immediate' | 'staged';
  /** Pods of the group deleted (deletion seen on the watch). */
  readonly podsDeleted: number;
  /** First to last deletion of a group pod. */
  readonly deletionSpanMs: number;
  readonly podsDeletedPerSecond: number;
  /** Declaration published → every Node of the group carries the taint (seen on a Node watch). */
  readonly allTaintedMs: number;
  /**
   * Most Nodes holding a place at once (staged; 0 in immediate mode): carrying the product's evicting taint, which is on
   * from the moment a Node may evict until its NoExecute taint goes on. This is what the opt-in's bound limits.
   */
  readonly mostInProgress: number;
  /**
   * Most Nodes carrying the product's in-progress label at once: every Node of the rollout that has claimed, including
   * those still waiting for a place (no evictions), so it exceeds the bound by design.
   */
  readonly mostMarked: number;
  readonly budgets: readonly BudgetViolation[];
  /** Budgets whose healthy pods fell below their minimum at any moment. */
  readonly budgetsViolated: number;
  /** The disruption controller's own view: the lowest `currentHealthy − desiredHealthy` per budget seen on a PDB watch. */
  readonly lowestHealthyMarginByStatus: Readonly<Record<string, number>>;
  /** Ready replacements the benchmark created on spare Nodes (standing in for a ReplicaSet, the scheduler and a kubelet). */
  readonly replacements: number;
}

export interface NoExecuteResult {
  readonly nodes: number;
  readonly podsPerNode: number;
  /** Seconds from a replacement's creation until the benchmark marks it Ready (`--noexecute-ready-seconds`; 0: at once). */
  readonly replacementReadySeconds: number;
  readonly rollout: string;
  readonly maxInProgressBound: number;
  readonly rolloutTimings: 'production' | 'short (smoke)';
  readonly immediate: NoExecutePhase;
  readonly staged: NoExecutePhase;
}

export const NOEXECUTE_SIZES = { full: { nodes: 50, podsPerNode: 20 }, quick: { nodes: 10, podsPerNode: 10 }, smoke: { nodes: 3, podsPerNode: 4 } } as const;
const ROLLOUT = '10%';

export async function runNoExecute(ctx: BenchContext): Promise<NoExecuteResult> {
  const { nodes, podsPerNode } = NOEXECUTE_SIZES[ctx.profile];
  const cp = await startControlPlane({ build: false, controllerManager: true, handleSignals: false, log: (line) => ctx.log(`  ${line}`) });
  try {
    const timings = ctx.profile === 'smoke' ? SMOKE_TIMINGS : undefined;
    const readySeconds = ctx.sizes.noExecuteReplacementReadySeconds;
    const immediate = await runPhase(ctx, cp.kubeconfigPath, 'immediate', nodes, podsPerNode, timings, readySeconds);
    const staged = await runPhase(ctx, cp.kubeconfigPath, 'staged', nodes, podsPerNode, timings, readySeconds);
    return { nodes, podsPerNode, replacementReadySeconds: readySeconds, rollout: ROLLOUT, maxInProgressBound: Math.max(1, Math.floor((10 * nodes) / 100)), rolloutTimings: timings ? 'short (smoke)' : 'production', immediate, staged };
  } finally {
    await cp.stop();
  }
}

interface RawPod {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  spec?: { nodeName?: string };
  status?: { conditions?: { type: string; status: string }[] };
}
interface RawPdb {
  metadata: { name: string };
  status?: { currentHealthy?: number; desiredHealthy?: number; observedGeneration?: number; disruptionsAllowed?: number };
}

const SET_LABEL = 'bench.capi-tp/set';
const isHealthy = (p: RawPod): boolean => !p.metadata.deletionTimestamp && (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');

async function runPhase(ctx: BenchContext, kubeconfigPath: string, mode: 'immediate' | 'staged', nodes: number, podsPerNode: number, timings: RolloutTimings | undefined, readySeconds: number): Promise<NoExecutePhase> {
  const kc = loadKubeConfig(kubeconfigPath);
  const raw = await RawKube.from(kc);
  const run = runId(`ne${mode[0]}`);
  const ns = run;
  const group = `${run}-md`;
  await createNamespace(raw, ns, run);
  const nodeName = (i: number): string => `${run}-n${i}`;
  const spareName = (i: number): string => `${run}-spare${i}`;
  const sets = BUDGET_SHARES.map((_, i) => `${run}-set${i}`);

  // Nodes (the group and the spares), Machines of the group with the declaration (and the opt-in when staged).
  const createNode = (name: string) => raw.post('/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { [BENCH_LABEL]: run, 'kubernetes.io/hostname': name } } });
  await mapConcurrent(Array.from({ length: SPARE_NODES }, (_, i) => spareName(i)), 8, createNode);
  const machines = await mapConcurrent(Array.from({ length: nodes }, (_, i) => i), 16, async (i) => {
    await createNode(nodeName(i));
    const name = `${group}-${i}`;
    await raw.post(`${MACHINES_PATH}/namespaces/${ns}/machines`, {
      apiVersion: 'cluster.x-k8s.io/v1beta2',
      kind: 'Machine',
      metadata: { name, namespace: ns, labels: { 'cluster.x-k8s.io/cluster-name': 'bench', 'cluster.x-k8s.io/deployment-name': group, [BENCH_LABEL]: run }, annotations: { [DECLARE]: `${TAINT.key}=${TAINT.value}:${TAINT.effect}`, ...(mode === 'staged' ? { [ROLLOUT_ANNOTATION]: ROLLOUT } : {}) } },
      spec: { clusterName: 'bench', bootstrap: { dataSecretName: `${name}-bootstrap` }, infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine', name } },
    });
    const m = await raw.mergePatch<{ metadata: { uid: string; resourceVersion: string } }>(`${MACHINES_PATH}/namespaces/${ns}/machines/${name}/status`, { status: { nodeRef: { name: nodeName(i) } } });
    return { name, node: nodeName(i), uid: m.metadata.uid, resourceVersion: m.metadata.resourceVersion };
  });

  // Pods: P per Node, spread round-robin over the three sets; bound directly, made Ready through the status subresource.
  const createPod = (name: string, node: string, set: string) => raw.post(`/api/v1/namespaces/${ns}/pods`, { apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: { [SET_LABEL]: set } }, spec: { nodeName: node, terminationGracePeriodSeconds: 0, containers: [{ name: 'c', image: 'registry.invalid/pause:never-pulled' }] } });
  const makeReady = (name: string) => raw.mergePatch(`/api/v1/namespaces/${ns}/pods/${name}/status`, { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date().toISOString() }] } });
  const createReadyPod = async (name: string, node: string, set: string): Promise<void> => {
    await createPod(name, node, set);
    await makeReady(name);
  };
  const podIndexes = Array.from({ length: nodes * podsPerNode }, (_, k) => k);
  await mapConcurrent(podIndexes, 32, (k) => createReadyPod(`${nodeName(Math.floor(k / podsPerNode))}-p${k % podsPerNode}`, nodeName(Math.floor(k / podsPerNode)), sets[k % sets.length] as string));
  const setSize = (s: number): number => podIndexes.filter((k) => k % sets.length === s).length;
  const budgets: BudgetSpec[] = sets.map((name, s) => ({ name, minAvailable: setSize(s) - Math.ceil(setSize(s) * (BUDGET_SHARES[s] as number)) }));
  for (const b of budgets) await raw.post(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`, { apiVersion: 'policy/v1', kind: 'PodDisruptionBudget', metadata: { name: b.name }, spec: { minAvailable: b.minAvailable, selector: { matchLabels: { [SET_LABEL]: b.name } } } });
  // The disruption controller has computed every budget over all its pods (its own view, before anything happens).
  const computed = Date.now();
  for (;;) {
    const list = await raw.get<{ items: RawPdb[] }>(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`);
    if (list.items.length === budgets.length && list.items.every((p) => p.status?.currentHealthy === setSize(sets.indexOf(p.metadata.name)) && (p.status.disruptionsAllowed ?? 0) > 0)) break;
    if (Date.now() - computed > 60_000) throw new Error(`the disruption controller did not compute the budgets: ${JSON.stringify(list.items.map((p) => p.status))}`);
    await sleep(200);
  }

  // Watches: pods, Nodes of the run, budgets, each from the list's resourceVersion.
  const watching = new AbortController();
  const podList = await raw.get<{ metadata: { resourceVersion: string }; items: RawPod[] }>(`/api/v1/namespaces/${ns}/pods`);
  const sampleOf = (p: RawPod, deleted: boolean): PodSample => ({ name: p.metadata.name, budget: p.metadata.labels?.[SET_LABEL] ?? '', healthy: isHealthy(p), deleted });
  const baseline = podList.items.map((p) => sampleOf(p, false));
  const samples: PodSample[] = [];
  const deletedAt = new Map<string, number>();
  const groupNodes = new Set(machines.map((m) => m.node));
  const toReplace: RawPod[] = [];
  const onPod = (type: string, p: RawPod): void => {
    if (type !== 'ADDED' && type !== 'MODIFIED' && type !== 'DELETED') return;
    samples.push(sampleOf(p, type === 'DELETED'));
    const going = type === 'DELETED' || p.metadata.deletionTimestamp !== undefined;
    if (going && groupNodes.has(p.spec?.nodeName ?? '') && !deletedAt.has(p.metadata.name)) {
      deletedAt.set(p.metadata.name, performance.now());
      toReplace.push(p);
    }
  };
  const nodeList = await raw.get<{ metadata: { resourceVersion: string } }>(`/api/v1/nodes?labelSelector=${BENCH_LABEL}%3D${run}`);
  const marked: { member: string; in: boolean }[] = [];
  const evicting: { member: string; in: boolean }[] = [];
  const tainted = new Set<string>();
  let allTaintedAt: number | undefined;
  const onNode = (type: string, n: { metadata: { name: string; labels?: Record<string, string> }; spec?: { taints?: TaintId[] } }): void => {
    if (!groupNodes.has(n.metadata.name)) return;
    marked.push({ member: n.metadata.name, in: type !== 'DELETED' && n.metadata.labels?.[ROLLOUT_MARK_LABEL] !== undefined });
    evicting.push({ member: n.metadata.name, in: type !== 'DELETED' && (n.spec?.taints ?? []).some((t) => t.key === ROLLOUT_EVICTING_TAINT.key) });
    if ((n.spec?.taints ?? []).some((t) => t.key === TAINT.key && t.effect === TAINT.effect)) tainted.add(n.metadata.name);
    if (allTaintedAt === undefined && tainted.size === groupNodes.size) allTaintedAt = performance.now();
  };
  const pdbList = await raw.get<{ metadata: { resourceVersion: string }; items: RawPdb[] }>(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`);
  const lowestMargin: Record<string, number> = {};
  const onPdb = (_type: string, p: RawPdb): void => {
    const { currentHealthy, desiredHealthy } = p.status ?? {};
    if (currentHealthy === undefined || desiredHealthy === undefined) return;
    lowestMargin[p.metadata.name] = Math.min(lowestMargin[p.metadata.name] ?? Infinity, currentHealthy - desiredHealthy);
  };
  for (const p of pdbList.items) onPdb('ADDED', p);
  const watches = [
    raw.watch(`/api/v1/namespaces/${ns}/pods?watch=1&allowWatchBookmarks=false&resourceVersion=${podList.metadata.resourceVersion}`, (t, o) => onPod(t, o as unknown as RawPod), watching.signal),
    raw.watch(`/api/v1/nodes?watch=1&labelSelector=${BENCH_LABEL}%3D${run}&resourceVersion=${nodeList.metadata.resourceVersion}`, (t, o) => onNode(t, o as unknown as Parameters<typeof onNode>[1]), watching.signal),
    raw.watch(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets?watch=1&resourceVersion=${pdbList.metadata.resourceVersion}`, (t, o) => onPdb(t, o as unknown as RawPdb), watching.signal),
  ];

  // The stand-in ReplicaSet: a replacement on a spare Node for every group pod that goes, Ready `readySeconds` after
  // its creation (the stand-in kubelet's start-up: 0 = at once).
  let replacements = 0;
  let replacing = true;
  const readying: Promise<unknown>[] = [];
  const replicaSet = (async () => {
    while (replacing || toReplace.length > 0) {
      const batch = toReplace.splice(0);
      await mapConcurrent(batch, 16, async (p) => {
        const r = replacements++;
        const name = `${run}-r${r}`;
        await createPod(name, spareName(r % SPARE_NODES), p.metadata.labels?.[SET_LABEL] ?? '');
        if (readySeconds > 0) readying.push(sleep(readySeconds * 1000).then(() => makeReady(name)));
        else await makeReady(name);
      });
      if (batch.length === 0) await sleep(20);
    }
    await Promise.all(readying);
  })();

  const pipeline = await ReconcilePipeline.create({ kubeConfig: kc, ...(timings ? { wrapDeps: (deps) => ({ ...deps, settings: { ...deps.settings, rollout: timings } }) } : {}) });
  const start = performance.now();
  const total = nodes * podsPerNode;
  try {
    // Declare: the Machines' events, as the forwarder would publish them.
    const at = new Date();
    await publishAll(pipeline.publisher, machines.map((m) => machineModified(ns, m.name, m.uid, m.resourceVersion, m.node, at)));
    pipeline.start();
    const deadline = start + (ctx.profile === 'full' ? 900_000 : 300_000);
    while (!(allTaintedAt !== undefined && deletedAt.size >= total && replacements >= total && toReplace.length === 0)) {
      if (performance.now() > deadline) throw new Error(`${mode}: not done after ${round(since(start) / 1000, 0)} s: ${tainted.size}/${nodes} Nodes tainted, ${deletedAt.size}/${total} pods gone`);
      await sleep(100);
    }
    // A marker: the replacements are all Ready in the budgets' own view before the watches stop.
    for (;;) {
      const list = await raw.get<{ items: RawPdb[] }>(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`);
      if (list.items.every((p) => p.status?.currentHealthy === setSize(sets.indexOf(p.metadata.name)))) break;
      if (performance.now() > deadline) throw new Error(`${mode}: the budgets did not recover: ${JSON.stringify(list.items.map((p) => p.status))}`);
      await sleep(200);
    }
  } finally {
    await pipeline.stop();
    replacing = false;
    await replicaSet;
    watching.abort();
    await Promise.allSettled(watches);
  }

  const times = [...deletedAt.values()].sort((a, b) => a - b);
  const deletionSpanMs = (times.at(-1) ?? 0) - (times[0] ?? 0);
  const violations = budgetViolations(budgets, baseline, samples);
  const phase: NoExecutePhase = {
    mode,
    podsDeleted: deletedAt.size,
    deletionSpanMs: round(deletionSpanMs, 0),
    podsDeletedPerSecond: round(deletedAt.size / (Math.max(deletionSpanMs, 1) / 1000), 1),
    allTaintedMs: round((allTaintedAt ?? Number.NaN) - start, 0),
    mostInProgress: mostAtOnce(evicting),
    mostMarked: mostAtOnce(marked),
    budgets: violations,
    budgetsViolated: violations.filter((v) => v.shortfall > 0).length,
    lowestHealthyMarginByStatus: lowestMargin,
    replacements,
  };
  ctx.log(
    `  ${mode}: ${phase.podsDeleted} pods deleted over ${phase.deletionSpanMs} ms (${phase.podsDeletedPerSecond}/s); every Node tainted after ${phase.allTaintedMs} ms; ` +
      `most Nodes holding a place ${phase.mostInProgress} (marked ${phase.mostMarked}); budgets violated ${phase.budgetsViolated} (${violations.map((v) => `${v.budget.slice(-4)} min ${v.minAvailable} fewest ${v.fewestHealthy}`).join(', ')}); status margins ${JSON.stringify(lowestMargin)}`,
  );
  // Delete the Nodes first (by their label), then the namespace: the pods go with it, nothing left running.
  await raw.request('DELETE', `/api/v1/nodes?labelSelector=${encodeURIComponent(`${BENCH_LABEL}=${run}`)}`).catch(() => undefined);
  await raw.request('DELETE', `${MACHINES_PATH}/namespaces/${ns}/machines`).catch(() => undefined);
  await raw.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
  raw.close();
  return phase;
}
