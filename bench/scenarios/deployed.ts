/**
 * Scenarios 3 and 8 in the deployed form (`npm run bench -- --deployed --only=e2e-latency,fleet`): the zips and the
 * template of `npx serverless package` (the worked SSM parameter set) run by the Lambda runner (local/lambda/) at real
 * time, the schedule firing at random points of its minutes, the management kubeconfig read from the runner's SSM
 * endpoint, in `capi` mode as shipped. The benchmark plays Cluster API as scenario 8 does: Cluster objects, their
 * `<cluster>-kubeconfig` Secrets, Machines with `status.nodeRef`, Nodes.
 * - e2e (scenario 3): one Cluster whose kubeconfig Secret names the management API server itself (self-hosted, as the
 *   local provider makes them), about rate × 4 Machines.
 * - fleet (scenario 8): K workload API servers of their own (`startWorkloadApiServer`), N Nodes each.
 * Machine edits at the profile's deployed rate for the deployed duration, round-robin over the edited Machines.
 * Measured: change (the PATCH answered, its resourceVersion known) → its queue message (the forwarder's send accepted
 * by SQS, matched by the deduplication id `<uid>:<resourceVersion>:<change>`), and change → an independent watch sees
 * the Node carry the value; invocations, cold starts, the rota's hand-overs (member windows that ended), GB-seconds,
 * log bytes and SQS requests per action (the runner's call log): the inputs of docs/cost.md.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveBinaries } from '#local/control-plane/assets.ts';
import type { Child } from '#local/control-plane/children.ts';
import { startWorkloadApiServer, type WorkloadApiServer } from '#local/control-plane/workload-servers.ts';
import { LambdaRunner, type FunctionStats, type InvocationRecord, type QueueMessage } from '#local/lambda/runner.ts';
import { packagedService, PACKAGE_VARIANTS } from '#local/lambda/serverless-package.ts';
import { functionsEnvironmentValue } from '#local/lambda/template.ts';
import type { BenchContext } from '../lib/context.ts';
import { BENCH_LABEL, MACHINES_PATH, RawKube, cleanup, createNamespace, createPairs, loadKubeConfig, mapConcurrent, observeTaintValues, runId, type Pair } from '../lib/kube.ts';
import { quantile, round, sleep, since } from '../lib/stats.ts';
import { DECLARED } from './forwarder.ts';

/**
 * The worked SSM parameter set with the rota's windows at the smallest the deploy check accepts (270 s, overlap 150 s,
 * timeout 285 s) instead of 885 s, so that a run of ~25 minutes sees 10 hand-overs; `--deployed-defaults` packages the
 * shipped windows instead.
 */
export const BENCH_PACKAGE_SHORT_WINDOWS = [...PACKAGE_VARIANTS.ssm, '--param=watchOverlapSeconds=150', '--param=watchWindowSeconds=270', '--param=forwarderTimeoutSeconds=285'] as const;

export interface Quantiles {
  readonly observed: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

export interface DeployedLatencyResult {
  readonly form: 'e2e' | 'fleet';
  readonly packageArgs: readonly string[];
  /** The packaged settings that shape the figures (read from the template). */
  readonly template: { readonly schedule: string; readonly forwarderTimeoutSeconds: number; readonly forwarderReservedConcurrency: number | undefined; readonly watchWindowSeconds: string; readonly watchOverlapSeconds: string; readonly reconcileTimeoutSeconds: number; readonly memoryMiB: number };
  readonly clusters: number;
  readonly nodesPerCluster: number;
  readonly machinesEdited: number;
  readonly targetRatePerSec: number;
  readonly achievedRatePerSec: number;
  readonly durationSeconds: number;
  readonly edits: number;
  /** Change → queue message, over every edit that got a message of its own. */
  readonly toQueue: Quantiles;
  /** Edits without a message of their own but a later edit of the same Machine had one (a relist announces the latest state). */
  readonly toQueueSuperseded: number;
  /** Edits with neither: lost. */
  readonly toQueueLost: number;
  /** Change → the Node carries the value (level-triggered: a later value counts). */
  readonly toNode: Quantiles & { readonly lost: number };
  /** Edits that waited more than 1 s / 5 s for their queue message. */
  readonly toQueueOver1s: number;
  readonly toQueueOver5s: number;
  /** Rota member windows that ended during the measured run (a hand-over each). */
  readonly handOvers: number;
  /**
   * One forwarder member killed in the middle of its window (SIGKILL, as a host failure would) at 45 % of the measured
   * run: when, how far into its window, and change → queue message for the edits of the next 60 s.
   */
  readonly killedMidWindow: { readonly atSecond: number; readonly windowAgeSeconds: number; readonly membersLeft: number; readonly next60s: Quantiles } | undefined;
  readonly forwarderRuns: { readonly invocations: number; readonly joined: number; readonly exitedAtOnce: number; readonly coldStarts: number; readonly errors: number };
  readonly forwarder: FunctionStats;
  readonly reconcile: FunctionStats;
  /** SQS requests during the measured run, per `caller action` (from the call log). */
  readonly sqsRequests: Readonly<Record<string, number>>;
  readonly messagesPerEdit: number;
  /** CloudWatch custom metrics (namespace, name, dimension values) the functions' EMF lines defined in the whole run. */
  readonly customMetrics: readonly string[];
  /** Log bytes the two functions wrote per edit in the measured run (Lambda's own START/END/REPORT lines not included). */
  readonly logBytesPerEdit: number;
  /** Forwarder execution time within the measured run (ended invocations plus the running part of open ones), and its GB-seconds. */
  readonly forwarderBusySeconds: number;
  readonly forwarderGbSeconds: number;
}

const KEY = 'bench.capi-tp/deployed';
/**
 * The product's own declaration: as shipped, `spec.taints` belong to upstream Cluster API (specTaintsOwner upstream),
 * which does not run here, so the edits change the annotation the product owns.
 */
const ANNOTATION = 'taints.capi-taint-propagator.dev/machine';

/** Sets the Machine's declaration annotation to `<KEY>=<value>:NoSchedule`; returns its new resourceVersion. */
async function declare(raw: RawKube, namespace: string, machine: string, value: string): Promise<string> {
  const out = await raw.mergePatch<{ metadata: { resourceVersion: string } }>(`${MACHINES_PATH}/namespaces/${namespace}/machines/${machine}`, {
    metadata: { annotations: { [ANNOTATION]: `${KEY}=${value}:NoSchedule` } },
  });
  return out.metadata.resourceVersion;
}

interface Member {
  readonly cluster: string;
  readonly raw: RawKube;
  readonly kubeconfigYaml: string;
  readonly server?: WorkloadApiServer;
  pairs: Pair[];
}

export async function runDeployedLatency(ctx: BenchContext, form: 'e2e' | 'fleet', packageArgs: readonly string[] = BENCH_PACKAGE_SHORT_WINDOWS): Promise<DeployedLatencyResult> {
  const rate = ctx.sizes.deployedRate;
  const seconds = ctx.sizes.deployedSeconds;
  const k = form === 'fleet' ? ctx.sizes.fleetClusters : 1;
  const perCluster = form === 'fleet' ? ctx.sizes.fleetNodesPerCluster : Math.max(8, rate * 4);
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 64);
  const adminYaml = readFileSync(ctx.kubeconfigPath, 'utf8');
  const run = runId(`dep-${form}`);
  const ns = run;
  const dir = await mkdtemp(join(tmpdir(), 'capi-tp-bench-deployed-'));
  const children: Child[] = [];
  const members: Member[] = [];
  const stop = new AbortController();
  const observers: Promise<void>[] = [];
  let runner: LambdaRunner | undefined;
  try {
    const packaged = await packagedService(packageArgs);
    ctx.log(`  packaged (${packaged.reused ? 'reused' : `${packaged.seconds.toFixed(1)} s`}): ${packageArgs.join(' ')}`);
    await createNamespace(raw, ns, run);
    await raw.post('/api/v1/namespaces', { metadata: { name: 'capi-taint-propagator' } }).catch(() => undefined);
    if (form === 'fleet') {
      if (!ctx.etcdEndpoint) throw new Error('the deployed fleet starts workload API servers on the control plane\'s etcd: pass --etcd=<url> with --kubeconfig');
      const binaries = await resolveBinaries({ build: false, log: ctx.log });
      if (!binaries.available) throw new Error(`no kube-apiserver for the workload clusters: ${binaries.reason}`);
      const servers = await Promise.all(
        Array.from({ length: k }, (_, i) => startWorkloadApiServer({ name: `${run}-wc-${i + 1}`, dir, kubeApiserver: binaries.value.kubeApiserver, etcdEndpoint: ctx.etcdEndpoint as string, children, timeoutMs: 90_000 })),
      );
      for (const [i, server] of servers.entries()) members.push({ cluster: `wc-${i + 1}`, server, raw: await RawKube.from(loadKubeConfig(server.adminKubeconfigPath), 64), kubeconfigYaml: server.kubeconfigYaml, pairs: [] });
    } else {
      members.push({ cluster: 'self-hosted', raw, kubeconfigYaml: adminYaml, pairs: [] });
    }
    for (const m of members) {
      const endpoint = new URL(m.server?.server ?? 'https://127.0.0.1:6443');
      await raw.post(`${MACHINES_PATH}/namespaces/${ns}/clusters`, {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'Cluster',
        metadata: { name: m.cluster, namespace: ns, labels: { [BENCH_LABEL]: run } },
        spec: { controlPlaneEndpoint: { host: endpoint.hostname, port: Number(endpoint.port) } },
      });
      await raw.post(`/api/v1/namespaces/${ns}/secrets`, {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'cluster.x-k8s.io/secret',
        metadata: { name: `${m.cluster}-kubeconfig`, namespace: ns, labels: { 'cluster.x-k8s.io/cluster-name': m.cluster, [BENCH_LABEL]: run } },
        data: { value: Buffer.from(m.kubeconfigYaml).toString('base64') },
      });
    }
    await Promise.all(
      members.map(async (m) => {
        m.pairs = await createPairs(raw, { run, namespace: ns, count: perCluster, clusterName: m.cluster, machinePrefix: `${m.cluster}-m`, nodePrefix: `${run}-${m.cluster}-n`, nodeKube: m.raw, machineTaints: [DECLARED], nodeTaints: [DECLARED], nodeStatus: true, concurrency: Math.max(8, Math.ceil(48 / k)) });
      }),
    );
    ctx.log(`  ${k} Cluster(s), ${k} × ${perCluster} Nodes + Machines created`);

    // The deployment. Queue messages are matched to edits by resourceVersion (the deduplication id's second part).
    const invocations: InvocationRecord[] = [];
    const editsByRv = new Map<string, { i: number; machine: string; at: number }>();
    const queueAt = new Map<number, number>();
    /** Messages seen before their edit's PATCH answer was (a watch can be faster than the response). */
    const early = new Map<string, number>();
    let messages = 0;
    const onMessage = (m: QueueMessage): void => {
      if (m.functionKey !== 'watchForwarder') return;
      messages++;
      const rv = m.deduplicationId?.split(':')[1];
      if (rv === undefined) return;
      const edit = editsByRv.get(rv);
      if (!edit) {
        if (!early.has(rv)) early.set(rv, m.at);
      } else if (!queueAt.has(edit.i)) queueAt.set(edit.i, m.at - edit.at);
    };
    runner = await LambdaRunner.start({ serviceDir: packaged.serviceDir, startTriggers: false, onInvocation: (r) => invocations.push(r), onQueueMessage: onMessage });
    const fwd = runner.fn('watchForwarder').fn;
    const env = fwd.environment as Record<string, unknown>;
    runner.ssm.put(functionsEnvironmentValue(runner.template, 'MANAGEMENT_KUBECONFIG_PARAMETER'), { value: adminYaml });
    runner.startTriggers();
    void runner.fireSchedule('watchForwarder');

    // Observers: an independent watch per cluster on the run's Nodes.
    const edited = members.map((m) => m.pairs.slice(0, form === 'fleet' ? Math.max(1, Math.ceil(Math.max(8, rate * 4) / k)) : perCluster));
    const values = new Map<string, number>();
    const pending = new Map<string, Array<{ i: number; at: number }>>();
    const nodeLatencies: number[] = [];
    for (const m of members) {
      const observer = await observeTaintValues({ raw: m.raw, cluster: m.cluster, run, key: KEY, values, signal: stop.signal }, (key, v) => {
        const waiting = pending.get(key);
        const now = Date.now();
        while (waiting && waiting.length > 0 && (waiting[0]?.i ?? Infinity) <= v) {
          const e = waiting.shift();
          if (e) nodeLatencies.push(now - e.at);
        }
      });
      observers.push(observer.done);
    }

    // Warm-up: every edited Machine declares v0 until its Node carries it (the first run's cold start and list).
    const warm = performance.now();
    const targets = members.flatMap((m, c) => (edited[c] ?? []).map((p) => ({ m, p, key: `${m.cluster}/${p.node}` })));
    await mapConcurrent(targets, 16, (t) => declare(raw, ns, t.p.machine, 'v0'));
    while (!targets.every((t) => values.get(t.key) === 0)) {
      if (since(warm) > 300_000) throw new Error('deployed warm-up did not converge in 300 s');
      await sleep(200);
    }
    ctx.log(`  warm-up ${(since(warm) / 1000).toFixed(1)} s; measuring for ${seconds} s at ${rate} edits/s`);

    const callsBefore = runner.callLog.records().length;
    const runsBefore = invocations.length;
    const statsBefore = { f: runner.fn('watchForwarder').stats(), r: runner.fn('reconcileNodeTaints').stats() };
    const messagesBefore = messages;
    const start = Date.now();
    const total = Math.max(1, Math.round(rate * seconds));
    const machineOf: string[] = [];
    const inflight: Promise<void>[] = [];
    const fPoolRun = runner.fn('watchForwarder');
    let killed: { at: number; firstEdit: number; windowAgeSeconds: number; membersLeft: number } | undefined;
    for (let i = 1; i <= total; i++) {
      // One member killed mid-window: the one that joined last among those that have watched for a minute or more.
      if (!killed && Date.now() - start >= seconds * 450) {
        const now = Date.now();
        const members = fPoolRun.busy().filter((c) => c.runningSince !== undefined && now - c.runningSince >= 60_000);
        const victim = members.sort((a, b) => (b.runningSince ?? 0) - (a.runningSince ?? 0))[0];
        if (victim) {
          victim.kill();
          killed = { at: now, firstEdit: i, windowAgeSeconds: round((now - (victim.runningSince ?? now)) / 1000, 0), membersLeft: members.length - 1 };
          ctx.log(`    ${Math.round((now - start) / 1000)} s: killed a forwarder member ${killed.windowAgeSeconds} s into its window (${killed.membersLeft} member(s) left watching)`);
        }
      }
      const wait = start + ((i - 1) * 1000) / rate - Date.now();
      if (wait > 0) await sleep(wait);
      const t = targets[(i - 1) % targets.length];
      if (!t) continue;
      machineOf[i] = t.p.machine;
      const list = pending.get(t.key) ?? [];
      const sentAt = Date.now();
      list.push({ i, at: sentAt });
      pending.set(t.key, list);
      inflight.push(
        declare(raw, ns, t.p.machine, `v${i}`).then((rv) => {
          editsByRv.set(rv, { i, machine: t.p.machine, at: sentAt });
          const seen = early.get(rv);
          if (seen !== undefined) queueAt.set(i, seen - sentAt);
        }),
      );
      if (i % Math.max(1, Math.round(rate * 60)) === 0) ctx.log(`    ${Math.round((Date.now() - start) / 1000)} s: ${i} edits, ${queueAt.size} announced, ${runner.fn('watchForwarder').stats().invocations - statsBefore.f.invocations} forwarder runs`);
    }
    await Promise.all(inflight);
    const achieved = (total * 1000) / (Date.now() - start);
    // Settle: until every edit has its message or a later one of its Machine has, and every Node its last value.
    const settleStart = Date.now();
    const lastOf = new Map<string, number>();
    for (let i = 1; i <= total; i++) if (machineOf[i]) lastOf.set(machineOf[i] as string, i);
    while (Date.now() - settleStart < 120_000) {
      const nodesDone = targets.every((t) => (pending.get(t.key)?.length ?? 0) === 0);
      const lastAnnounced = [...lastOf.values()].every((i) => queueAt.has(i));
      if (nodesDone && lastAnnounced) break;
      await sleep(200);
    }
    const durationSeconds = (Date.now() - start) / 1000;
    const handOvers = invocations.slice(runsBefore).filter((r) => r.functionKey === 'watchForwarder' && joined(r)).length;
    // Forwarder time in the measured run: invocations that ended in it, plus the part of those still running (the
    // rota's windows run for minutes: their GB-seconds would otherwise be missing from the cost inputs).
    const end = Date.now();
    const fPool = runner.fn('watchForwarder');
    const forwarderBusyMs =
      invocations.filter((x) => x.functionKey === 'watchForwarder' && x.startedAt + x.durationMs >= start).reduce((n, x) => n + Math.min(x.durationMs, x.startedAt + x.durationMs - start), 0) +
      fPool.busy().reduce((n, c) => n + (c.runningSince === undefined ? 0 : end - Math.max(start, c.runningSince)), 0);

    const toQueue = [...queueAt.values()];
    let superseded = 0;
    let lost = 0;
    for (let i = 1; i <= total; i++) {
      if (queueAt.has(i)) continue;
      const machine = machineOf[i];
      let later = false;
      for (let j = i + 1; j <= total && !later; j++) if (machineOf[j] === machine && queueAt.has(j)) later = true;
      if (later) superseded++;
      else lost++;
    }
    const sqsRequests: Record<string, number> = {};
    for (const c of runner.callLog.records().slice(callsBefore)) {
      if (c.service !== 'sqs') continue;
      const key = `${c.functionName.endsWith('watch-forwarder') ? 'forwarder' : 'reconcile'} ${c.caller} ${c.action}`;
      sqsRequests[key] = (sqsRequests[key] ?? 0) + 1;
    }
    const fRuns = invocations.slice(runsBefore).filter((r) => r.functionKey === 'watchForwarder');
    const f = runner.fn('watchForwarder').stats();
    const r = runner.fn('reconcileNodeTaints').stats();
    const result: DeployedLatencyResult = {
      form,
      packageArgs,
      template: {
        schedule: fwd.schedules[0]?.expression ?? '',
        forwarderTimeoutSeconds: fwd.timeoutSeconds,
        forwarderReservedConcurrency: fwd.reservedConcurrency,
        watchWindowSeconds: String(env['WATCH_WINDOW_SECONDS'] ?? ''),
        watchOverlapSeconds: String(env['WATCH_OVERLAP_SECONDS'] ?? ''),
        reconcileTimeoutSeconds: runner.fn('reconcileNodeTaints').fn.timeoutSeconds,
        memoryMiB: fwd.memoryMiB,
      },
      clusters: k,
      nodesPerCluster: perCluster,
      machinesEdited: targets.length,
      targetRatePerSec: rate,
      achievedRatePerSec: round(achieved, 2),
      durationSeconds: round(durationSeconds, 0),
      edits: total,
      toQueue: quantiles(toQueue),
      toQueueSuperseded: superseded,
      toQueueLost: lost,
      toNode: { ...quantiles(nodeLatencies), lost: targets.reduce((n, t) => n + (pending.get(t.key)?.length ?? 0), 0) },
      toQueueOver1s: toQueue.filter((ms) => ms > 1000).length,
      toQueueOver5s: toQueue.filter((ms) => ms > 5000).length,
      handOvers,
      killedMidWindow:
        killed === undefined
          ? undefined
          : {
              atSecond: round((killed.at - start) / 1000, 0),
              windowAgeSeconds: killed.windowAgeSeconds,
              membersLeft: killed.membersLeft,
              next60s: quantiles([...queueAt.entries()].filter(([i]) => i >= killed.firstEdit && i < killed.firstEdit + rate * 60).map(([, ms]) => ms)),
            },
      forwarderRuns: { invocations: fRuns.length, joined: fRuns.filter(joined).length, exitedAtOnce: fRuns.filter((x) => x.result.ok && !joined(x)).length, coldStarts: fRuns.filter((x) => x.coldStart).length, errors: fRuns.filter((x) => !x.result.ok).length },
      forwarder: delta(f, statsBefore.f),
      reconcile: delta(r, statsBefore.r),
      sqsRequests,
      messagesPerEdit: round((messages - messagesBefore) / total, 2),
      customMetrics: [...new Set([...fPool.customMetrics(), ...runner.fn('reconcileNodeTaints').customMetrics()])],
      logBytesPerEdit: round((f.logBytes - statsBefore.f.logBytes + r.logBytes - statsBefore.r.logBytes) / total, 0),
      forwarderBusySeconds: round(forwarderBusyMs / 1000, 0),
      forwarderGbSeconds: round((forwarderBusyMs / 1000) * (fwd.memoryMiB / 1024), 1),
    };
    ctx.log(
      `  deployed ${form}: ${total} edits at ${result.achievedRatePerSec}/s over ${targets.length} Machines in ${k} cluster(s), ${round(durationSeconds, 0)} s, ${handOvers} hand-overs: ` +
        `change → queue message p50 ${result.toQueue.p50Ms} ms, p99 ${result.toQueue.p99Ms} ms, max ${result.toQueue.maxMs} ms (${result.toQueueOver1s} > 1 s, ${lost} lost, ${superseded} superseded); ` +
        `change → Node p50 ${result.toNode.p50Ms} ms, p99 ${result.toNode.p99Ms} ms; forwarder ${result.forwarder.invocations} invocations ended (${result.forwarder.coldStarts} cold), ${result.forwarderBusySeconds} s busy, reconcile ${result.reconcile.invocations} (${result.reconcile.coldStarts} cold)`,
    );
    return result;
  } finally {
    stop.abort();
    await runner?.stop();
    await Promise.all(observers);
    for (const m of members) {
      if (m.raw !== raw) {
        await m.raw.request('DELETE', `/api/v1/nodes?labelSelector=${encodeURIComponent(`${BENCH_LABEL}=${run}`)}`).catch(() => undefined);
        m.raw.close();
      }
      await m.server?.stop();
    }
    await rm(dir, { recursive: true, force: true });
    await raw.request('DELETE', `${MACHINES_PATH}/namespaces/${ns}/clusters`).catch(() => undefined);
    await raw.request('DELETE', `/api/v1/namespaces/${ns}/secrets`).catch(() => undefined);
    await cleanup(raw, run, [ns]);
    raw.close();
  }
}

function joined(r: InvocationRecord): boolean {
  return r.result.ok && (r.result.value as { rota?: { joined?: boolean } } | null)?.rota?.joined === true;
}

function quantiles(ms: readonly number[]): Quantiles {
  return { observed: ms.length, p50Ms: round(quantile(ms, 0.5), 1), p90Ms: round(quantile(ms, 0.9), 1), p99Ms: round(quantile(ms, 0.99), 1), maxMs: round(quantile(ms, 1), 1) };
}

/** Counters accumulated over the measured run (peak and memory as they are). */
function delta(now: FunctionStats, before: FunctionStats): FunctionStats {
  return {
    invocations: now.invocations - before.invocations,
    coldStarts: now.coldStarts - before.coldStarts,
    errors: now.errors - before.errors,
    timeouts: now.timeouts - before.timeouts,
    throttles: now.throttles - before.throttles,
    droppedEvents: now.droppedEvents - before.droppedEvents,
    billedMs: now.billedMs - before.billedMs,
    gbSeconds: round(now.gbSeconds - before.gbSeconds, 2),
    logBytes: now.logBytes - before.logBytes,
    peakRssMiB: now.peakRssMiB,
    memoryMiB: now.memoryMiB,
  };
}

