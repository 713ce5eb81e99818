/**
 * Scenario 8, a fleet: K workload clusters, each with an API server of its own (`startWorkloadApiServer`: own CA and
 * certificates, sharing the control plane's etcd under its own prefix), N Nodes each (kubelet-like status) and their
 * N Machines in the management cluster, in `capi` mode. The benchmark plays Cluster API and the provider: it creates
 * each Cluster object (no Cluster API manager runs), its `<cluster>-kubeconfig` Secret (type `cluster.x-k8s.io/secret`,
 * holding the workload API server's `capi-admin` kubeconfig, as the local provider writes it), the Machines (with
 * `spec.clusterName` and `status.nodeRef`) and the Nodes (with the CAPI annotations), and plays the kubelets.
 * (a) The forwarder alone in a child process, as in scenario 4, across the K clusters: peak memory (VmHWM),
 *     initial sync (K × N Nodes + K × N Machines announced), then the same heartbeat window over every cluster.
 * (b) End-to-end latency through the whole pipeline in `capi` mode (forwarder → SQS FIFO queue (fauxqs) → reconcile,
 *     which reads each cluster's Secret and writes the Node in that cluster): Machine edits at the profile's rate,
 *     round-robin over the clusters; latency = edit PATCH sent → a watch on that cluster's API server sees the Node
 *     carry the value; p50/p99 per cluster and overall. The pipeline's forwarder takes over the Lease of (a)'s and
 *     resumes from its checkpoint, as each Lambda window does, so it does not announce the fleet again.
 * The workload API servers are stopped by the scenario (their `stop()`), after their Nodes are deleted.
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveBinaries } from '#local/control-plane/assets.ts';
import type { Child } from '#local/control-plane/children.ts';
import { startWorkloadApiServer, type WorkloadApiServer } from '#local/control-plane/workload-servers.ts';
import type { BenchContext } from '../lib/context.ts';
import { registerWorkloadCluster, BENCH_LABEL, CallCounter, MACHINES_PATH, RawKube, cleanup, countingKubeConfig, createNamespace, createPairs, loadKubeConfig, mapConcurrent, observeTaintValues, runId, setMachineTaints, type CallCounts, type Pair } from '../lib/kube.ts';
import { ReconcilePipeline, startCountedForwarder } from '../lib/pipeline.ts';
import { quantile, round, sleep, since } from '../lib/stats.ts';
import type { E2eLatencyResult } from './e2e-latency.ts';
import { DECLARED, bundleChild, measureForwarder, type ForwarderRun } from './forwarder.ts';

/** The latency figures of scenario 3, per cluster and overall. */
export type LatencySummary = Pick<E2eLatencyResult, 'edits' | 'observed' | 'lost' | 'superseded' | 'p50Ms' | 'p90Ms' | 'p99Ms' | 'maxMs'>;

export interface FleetClusterLatency extends LatencySummary {
  /** The Cluster (`<namespace>/<name>`) and its workload API server. */
  readonly cluster: string;
  readonly server: string;
  readonly machines: number;
}

export interface FleetResult {
  readonly clusters: number;
  readonly nodesPerCluster: number;
  /** Starting the K workload API servers (in parallel). */
  readonly serversStartMs: number;
  /** Creating the Clusters, Secrets, Nodes and Machines. */
  readonly setupMs: number;
  /** (a) The forwarder alone across the fleet. */
  readonly forwarder: ForwarderRun;
  /** (b) End-to-end latency through the whole pipeline, edits round-robin over the clusters. */
  readonly e2e: {
    readonly targetRatePerSec: number;
    readonly achievedRatePerSec: number;
    readonly machines: number;
    readonly overall: LatencySummary;
    readonly perCluster: readonly FleetClusterLatency[];
    readonly messagesPerEdit: number;
    readonly reconcileCallsPerEdit: number;
    /** The reconcile function's calls to the management cluster (Machines, Events, kubeconfig Secrets). */
    readonly managementCalls: CallCounts;
    /** Its calls to the workload clusters (Nodes). */
    readonly workloadCalls: CallCounts;
    /** Warm-up: every edited Machine's declaration set, until every one of their Nodes carries it. */
    readonly warmupMs: number;
    /** Messages the pipeline's forwarder sent before the edits (its resume from (a)'s checkpoint plus the warm-up). */
    readonly warmupMessages: number;
    /** Where the time goes: the forwarder's largest lag (watch event → message sent) since it started, and the most messages in the queue (waiting + in flight), sampled every 250 ms from the first edit until drained. */
    readonly forwarderMaxLagMs: number;
    readonly maxQueueDepth: number;
    /**
     * CPU from the first edit until drained, as a share of one core: this process (forwarder, SQS server, reconcile
     * and observers share its one event loop) and the K workload API servers together.
     */
    readonly benchProcessCpuShare: number;
    readonly workloadServersCpuShare: number;
    /** New connections undici opened in this process from the first edit until drained (the reconcile function's and the forwarder's; pooled: a handful). */
    readonly connectionsOpened: number;
  };
}

const KEY = 'bench.capi-tp/fleet';

interface Member {
  readonly cluster: string;
  readonly server: WorkloadApiServer;
  readonly raw: RawKube;
  pairs: Pair[];
}

export async function runFleet(ctx: BenchContext): Promise<FleetResult> {
  const { fleetClusters: k, fleetNodesPerCluster: perCluster } = ctx.sizes;
  if (!ctx.etcdEndpoint) throw new Error('the fleet scenario starts workload API servers on the control plane\'s etcd: pass --etcd=<url> with --kubeconfig');
  const binaries = await resolveBinaries({ build: false, log: ctx.log });
  if (!binaries.available) throw new Error(`no kube-apiserver for the workload clusters: ${binaries.reason}`);
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 64);
  const run = runId('fleet');
  const ns = run;
  const dir = await mkdtemp(join(tmpdir(), 'capi-tp-bench-fleet-'));
  const children: Child[] = [];
  const servers: WorkloadApiServer[] = [];
  const members: Member[] = [];
  let childScript: string | undefined;
  try {
    // K API servers of their own, named after the run (their etcd prefix is `/workload/<name>`).
    const serversStart = performance.now();
    const started = await Promise.allSettled(
      Array.from({ length: k }, (_, i) => startWorkloadApiServer({ name: `${run}-wc-${i + 1}`, dir, kubeApiserver: binaries.value.kubeApiserver, etcdEndpoint: ctx.etcdEndpoint as string, children, timeoutMs: 90_000 })),
    );
    for (const s of started) if (s.status === 'fulfilled') servers.push(s.value);
    const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const serversStartMs = since(serversStart);
    ctx.log(`  ${k} workload API servers started in ${(serversStartMs / 1000).toFixed(1)} s`);

    const setupStart = performance.now();
    await createNamespace(raw, ns, run);
    for (const [i, server] of servers.entries()) {
      const cluster = `wc-${i + 1}`;
      members.push({ cluster, server, raw: await RawKube.from(loadKubeConfig(server.adminKubeconfigPath), 64), pairs: [] });
      await registerWorkloadCluster(raw, ns, run, cluster, server.server, server.kubeconfigYaml);
    }
    await Promise.all(
      members.map(async (m) => {
        m.pairs = await createPairs(raw, {
          run,
          namespace: ns,
          count: perCluster,
          clusterName: m.cluster,
          machinePrefix: `${m.cluster}-m`,
          nodePrefix: `${run}-${m.cluster}-n`,
          nodeKube: m.raw,
          machineTaints: [DECLARED],
          nodeTaints: [DECLARED],
          nodeStatus: true,
          concurrency: Math.max(8, Math.ceil(48 / k)),
        });
      }),
    );
    const setupMs = since(setupStart);
    ctx.log(`  ${k} Clusters with their kubeconfig Secrets, ${k} × ${perCluster} Nodes (kubelet-like status, in their clusters) + ${k * perCluster} Machines created in ${(setupMs / 1000).toFixed(1)} s`);

    // (a) The forwarder alone. Heartbeats interleave the clusters.
    const leaseName = `forwarder-${run}`;
    childScript = await bundleChild();
    const targets = Array.from({ length: perCluster * k }, (_, j) => {
      const m = members[j % k] as Member;
      return { nodeKube: m.raw, pair: m.pairs[Math.floor(j / k)] as Pair };
    });
    ctx.log(`  (a) forwarder alone across ${k} clusters`);
    const forwarder = { ...(await measureForwarder(ctx, { run, namespace: ns, leaseName, mode: 'capi', childScript, management: raw, targets })), clusters: k, setupMs: round(setupMs, 0) };

    // (b) The whole pipeline.
    ctx.log(`  (b) end-to-end latency across ${k} clusters`);
    const pids = children.map((c) => c.proc.pid).filter((pid): pid is number => pid !== undefined);
    const e2e = await measureLatency(ctx, { run, namespace: ns, leaseName, members, serverPids: pids });
    return { clusters: k, nodesPerCluster: perCluster, serversStartMs: round(serversStartMs, 0), setupMs: round(setupMs, 0), forwarder, e2e };
  } finally {
    if (childScript) await rm(childScript, { force: true });
    for (const m of members) {
      await m.raw.request('DELETE', `/api/v1/nodes?labelSelector=${encodeURIComponent(`${BENCH_LABEL}=${run}`)}`).catch(() => undefined);
      m.raw.close();
    }
    await Promise.all(servers.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
    await raw.request('DELETE', `${MACHINES_PATH}/namespaces/${ns}/clusters`).catch(() => undefined);
    await raw.request('DELETE', `/api/v1/namespaces/${ns}/secrets`).catch(() => undefined);
    await cleanup(raw, run, [ns]);
    raw.close();
  }
}

async function measureLatency(ctx: BenchContext, o: { run: string; namespace: string; leaseName: string; members: readonly Member[]; serverPids: readonly number[] }): Promise<FleetResult['e2e']> {
  const { run, namespace: ns, members } = o;
  const k = members.length;
  const rate = ctx.sizes.e2eRate;
  // As scenario 3: about rate × 4 Machines edited (each every 4 s), spread evenly over the clusters.
  const perCluster = Math.max(1, Math.min(Math.ceil(Math.max(8, rate * 4) / k), ...members.map((m) => m.pairs.length)));
  const edited = members.map((m) => m.pairs.slice(0, perCluster));
  const management = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 64);
  const stop = new AbortController();
  const counter = new CallCounter();
  const workloadCounter = new CallCounter();
  let pipeline: ReconcilePipeline | undefined;
  let forwarderRun: Promise<unknown> | undefined;
  const observers: Promise<void>[] = [];
  try {
    pipeline = await ReconcilePipeline.create({ kubeConfig: countingKubeConfig(ctx.kubeconfigPath, counter), mode: 'capi', workloadCounter });
    const forwarder = startCountedForwarder({ pipeline, kubeConfig: loadKubeConfig(ctx.kubeconfigPath), namespace: ns, run, nodeLabel: BENCH_LABEL, signal: stop.signal, mode: 'capi', leaseName: o.leaseName });
    forwarderRun = forwarder.done;
    pipeline.start();

    // Per Node (`<cluster>/<node>`), the edits not yet reflected; reconcile is level-triggered (see scenario 3).
    const pending = new Map<string, Array<{ k: number; sentAt: number }>>();
    const values = new Map<string, number>();
    const latencies = members.map(() => [] as number[]);
    const superseded = members.map(() => 0);
    const outstanding = members.map(() => 0);
    for (const [c, m] of members.entries()) {
      const observer = await observeTaintValues({ raw: m.raw, cluster: m.cluster, run, key: KEY, values, signal: stop.signal }, (key, v) => {
        const waiting = pending.get(key);
        if (!waiting) return;
        const now = performance.now();
        while (waiting.length > 0 && (waiting[0]?.k ?? Infinity) <= v) {
          const edit = waiting.shift();
          if (!edit) break;
          (latencies[c] as number[]).push(now - edit.sentAt);
          outstanding[c] = (outstanding[c] ?? 0) - 1;
          if (edit.k < v) superseded[c] = (superseded[c] ?? 0) + 1;
        }
      });
      observers.push(observer.done);
    }

    // Warm-up: every edited Machine declares v0, until all of their Nodes carry it and the queue is empty.
    const warmStart = performance.now();
    await mapConcurrent(
      edited.flatMap((pairs) => pairs),
      16,
      (p) => setMachineTaints(management, ns, p.machine, [DECLARED, { key: KEY, value: 'v0', effect: 'NoSchedule' }]),
    );
    const keys = members.flatMap((m, c) => (edited[c] ?? []).map((p) => `${m.cluster}/${p.node}`));
    for (;;) {
      if (keys.every((key) => values.get(key) === 0)) break;
      if (since(warmStart) > 120_000) throw new Error(`warm-up did not converge in 120 s: ${keys.filter((key) => values.get(key) !== 0).length}/${keys.length} Nodes without v0`);
      await sleep(100);
    }
    await pipeline.drain(60_000);
    const warmupMs = since(warmStart);
    const warmupMessages = forwarder.messages();

    const before = counter.snapshot();
    const workloadBefore = workloadCounter.snapshot();
    const messagesBefore = forwarder.messages();
    const total = Math.max(1, Math.round(rate * ctx.sizes.e2eSeconds));
    let maxQueueDepth = 0;
    let sampling = true;
    const queue = pipeline.queue;
    const localSqs = pipeline.localSqs;
    const sampler = (async () => {
      while (sampling) {
        const d = await localSqs.depth(queue).catch(() => undefined);
        if (d) maxQueueDepth = Math.max(maxQueueDepth, d.visible + d.inFlight);
        await sleep(250);
      }
    })();
    const start = performance.now();
    const cpuStart = process.cpuUsage();
    let connectionsOpened = 0;
    const onConnect = (): void => {
      connectionsOpened++;
    };
    subscribe('undici:client:connected', onConnect);
    const serversCpuStart = cpuMsOf(o.serverPids);
    const inflight: Promise<void>[] = [];
    for (let i = 0; i < total; i++) {
      const wait = start + (i * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait);
      const c = i % k;
      const m = members[c] as Member;
      const pair = edited[c]?.[Math.floor(i / k) % perCluster];
      if (!pair) continue;
      const key = `${m.cluster}/${pair.node}`;
      const waiting = pending.get(key) ?? [];
      waiting.push({ k: i + 1, sentAt: performance.now() });
      pending.set(key, waiting);
      outstanding[c] = (outstanding[c] ?? 0) + 1;
      inflight.push(setMachineTaints(management, ns, pair.machine, [DECLARED, { key: KEY, value: `v${i + 1}`, effect: 'NoSchedule' }]).then(() => undefined));
    }
    await Promise.all(inflight);
    const achievedRate = (total * 1000) / since(start);
    for (let waited = 0; outstanding.some((n) => n > 0) && waited < 30_000; waited += 100) await sleep(100);
    await pipeline.drain(30_000).catch(() => undefined);
    sampling = false;
    await sampler;
    unsubscribe('undici:client:connected', onConnect);
    const windowMs = since(start);
    const cpu = process.cpuUsage(cpuStart);
    const benchProcessCpuShare = round((cpu.user + cpu.system) / 1000 / windowMs, 2);
    const workloadServersCpuShare = round((cpuMsOf(o.serverPids) - serversCpuStart) / windowMs, 2);
    const managementCalls = counter.since(before);
    const workloadCalls = workloadCounter.since(workloadBefore);
    const sent = forwarder.messages() - messagesBefore;

    const edits = members.map((_, c) => Array.from({ length: total }, (_, i) => i).filter((i) => i % k === c).length);
    const perClusterResults: FleetClusterLatency[] = members.map((m, c) => ({
      cluster: `${ns}/${m.cluster}`,
      server: m.server.name,
      machines: perCluster,
      ...summarize(latencies[c] ?? [], edits[c] ?? 0, outstanding[c] ?? 0, superseded[c] ?? 0),
    }));
    const result: FleetResult['e2e'] = {
      targetRatePerSec: rate,
      achievedRatePerSec: round(achievedRate, 1),
      machines: perCluster * k,
      overall: summarize(latencies.flat(), total, outstanding.reduce((a, b) => a + b, 0), superseded.reduce((a, b) => a + b, 0)),
      perCluster: perClusterResults,
      messagesPerEdit: round(sent / total, 2),
      reconcileCallsPerEdit: round((managementCalls.total + workloadCalls.total) / total, 2),
      managementCalls,
      workloadCalls,
      warmupMs: round(warmupMs, 0),
      warmupMessages,
      forwarderMaxLagMs: round(forwarder.telemetry.maxLagMs(), 0),
      maxQueueDepth,
      benchProcessCpuShare,
      workloadServersCpuShare,
      connectionsOpened,
    };
    ctx.log(
      `  ${total} edits at ${result.achievedRatePerSec}/s over ${result.machines} Machines in ${k} clusters: p50 ${result.overall.p50Ms} ms, p99 ${result.overall.p99Ms} ms, ` +
        `lost ${result.overall.lost}; per cluster p99 ${perClusterResults.map((r) => r.p99Ms).join(' / ')} ms; ${result.messagesPerEdit} messages and ${result.reconcileCallsPerEdit} reconcile calls per edit; forwarder max lag ${result.forwarderMaxLagMs} ms, queue depth max ${maxQueueDepth}; CPU (share of a core) of this process ${benchProcessCpuShare}, of the workload API servers ${workloadServersCpuShare}; ${connectionsOpened} connections opened`,
    );
    return result;
  } finally {
    stop.abort();
    await pipeline?.stop();
    await forwarderRun?.catch(() => undefined);
    await Promise.all(observers);
    management.close();
  }
}

/** CPU time (user + system, ms) of processes, from /proc (Linux); 0 for a process that is gone. */
function cpuMsOf(pids: readonly number[]): number {
  const tick = 10; // USER_HZ = 100 on Linux
  let total = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(fields[11]) + Number(fields[12])) * tick;
    } catch {
      // gone
    }
  }
  return total;
}

function summarize(latencies: readonly number[], edits: number, lost: number, superseded: number): LatencySummary {
  return {
    edits,
    observed: latencies.length,
    lost,
    superseded,
    p50Ms: round(quantile(latencies, 0.5), 1),
    p90Ms: round(quantile(latencies, 0.9), 1),
    p99Ms: round(quantile(latencies, 0.99), 1),
    maxMs: round(quantile(latencies, 1), 1),
  };
}

