/**
 * Scenario 3, end-to-end latency: a Machine edit → the Node's taints updated, through the whole pipeline on this
 * machine: the watch-forwarder (production composition, real watches, real Lease) publishing into the local SQS
 * FIFO queue, and the reconcile handler fed by the Lambda event-source emulator, against the real API server.
 * Edits arrive at a steady rate, round-robin over M Machines (each Machine is edited every M / rate seconds, far
 * longer than a reconcile). Latency = from just before the edit's PATCH is sent to the moment an independent watch
 * (another connection) sees the Node carry the edited taint.
 */
import type { BenchContext } from '../lib/context.ts';
import { BENCH_LABEL, CallCounter, RawKube, cleanup, countingKubeConfig, createNamespace, createPairs, listNodes, loadKubeConfig, runId, setMachineTaints, type BenchTaint, type CallCounts, type RawNode } from '../lib/kube.ts';
import { ReconcilePipeline, startCountedForwarder } from '../lib/pipeline.ts';
import { quantile, round, sleep, since } from '../lib/stats.ts';

export interface E2eLatencyResult {
  readonly machines: number;
  readonly targetRatePerSec: number;
  readonly achievedRatePerSec: number;
  readonly edits: number;
  readonly observed: number;
  /** Edits not reflected within 30 s after the last edit. */
  readonly lost: number;
  /** Edits reflected by a later edit's value (the Node skipped them: level-triggered reconcile behind a backlog). */
  readonly superseded: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Queue messages sent by the forwarder per edit (the Machine change, plus the echo of our own Node write). */
  readonly messagesPerEdit: number;
  readonly reconcileCallsPerEdit: number;
  readonly reconcileCalls: CallCounts;
  readonly warmupMs: number;
}

const KEY = 'bench.capi-tp/e2e';

export async function runE2eLatency(ctx: BenchContext): Promise<E2eLatencyResult> {
  const rate = ctx.sizes.e2eRate;
  const m = Math.max(8, rate * 4);
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath));
  const run = runId('e2e');
  const ns = run;
  const stop = new AbortController();
  let forwarderRun: Promise<unknown> | undefined;
  let pipeline: ReconcilePipeline | undefined;
  let observer: Promise<void> | undefined;
  try {
    await createNamespace(raw, ns, run);
    const initial: BenchTaint = { key: KEY, value: 'v0', effect: 'NoSchedule' };
    const pairs = await createPairs(raw, { run, namespace: ns, count: m, machineTaints: [initial] });

    // The pipeline: forwarder → local SQS FIFO queue (fauxqs, over HTTP) → reconcile.
    const counter = new CallCounter();
    pipeline = await ReconcilePipeline.create({ kubeConfig: countingKubeConfig(ctx.kubeconfigPath, counter) });
    const forwarder = startCountedForwarder({ pipeline, kubeConfig: loadKubeConfig(ctx.kubeconfigPath), namespace: ns, run, nodeLabel: BENCH_LABEL, signal: stop.signal });
    forwarderRun = forwarder.done;
    pipeline.start();

    // Warm-up: the forwarder's initial sync announces every object; wait until every Node carries v0.
    const warmStart = performance.now();
    for (;;) {
      const nodes = await listNodes(raw, run);
      if (nodes.length === m && nodes.every((n) => taintValue(n) === 'v0')) break;
      if (since(warmStart) > 120_000) throw new Error('warm-up did not converge in 120 s');
      await sleep(200);
    }
    await pipeline.drain(60_000);
    const warmupMs = since(warmStart);

    // Observer: an independent watch on the Nodes of the run.
    // Per Node, the edits not yet reflected: (edit number, sent at). Reconcile is level-triggered, so an edit is
    // reflected once the Node carries its value or a later one (a backlog lets a later edit supersede it).
    const pending = new Map<string, Array<{ k: number; sentAt: number }>>();
    const latencies: number[] = [];
    let superseded = 0;
    let outstanding = 0;
    const list = await raw.get<{ metadata: { resourceVersion: string } }>(`/api/v1/nodes?labelSelector=${encodeURIComponent(`${BENCH_LABEL}=${run}`)}&limit=1`);
    observer = raw
      .watch(
        `/api/v1/nodes?watch=1&labelSelector=${encodeURIComponent(`${BENCH_LABEL}=${run}`)}&resourceVersion=${list.metadata.resourceVersion}`,
        (type, node) => {
          if (type !== 'MODIFIED') return;
          const k = Number(taintValue(node)?.slice(1));
          const list = pending.get(node.metadata.name);
          if (!list || !Number.isFinite(k)) return;
          const now = performance.now();
          while (list.length > 0 && (list[0]?.k ?? Infinity) <= k) {
            const edit = list.shift();
            if (!edit) break;
            latencies.push(now - edit.sentAt);
            outstanding--;
            if (edit.k < k) superseded++;
          }
        },
        stop.signal,
      )
      .catch(() => undefined);

    const before = counter.snapshot();
    const messagesBefore = forwarder.messages();
    const total = Math.max(1, Math.round(rate * ctx.sizes.e2eSeconds));
    const start = performance.now();
    const inflight: Promise<void>[] = [];
    for (let i = 0; i < total; i++) {
      const wait = start + (i * 1000) / rate - performance.now();
      if (wait > 0) await sleep(wait);
      const pair = pairs[i % m];
      if (!pair) continue;
      const value = `v${i + 1}`;
      const list = pending.get(pair.node) ?? [];
      list.push({ k: i + 1, sentAt: performance.now() });
      pending.set(pair.node, list);
      outstanding++;
      inflight.push(setMachineTaints(raw, ns, pair.machine, [{ key: KEY, value, effect: 'NoSchedule' }]).then(() => undefined));
    }
    await Promise.all(inflight);
    const achievedRate = (total * 1000) / since(start);
    for (let waited = 0; outstanding > 0 && waited < 30_000; waited += 100) await sleep(100);
    await pipeline.drain(30_000).catch(() => undefined);
    const calls = counter.since(before);
    const sent = forwarder.messages() - messagesBefore;

    const result: E2eLatencyResult = {
      machines: m,
      targetRatePerSec: rate,
      achievedRatePerSec: round(achievedRate, 1),
      edits: total,
      observed: latencies.length,
      lost: outstanding,
      superseded,
      p50Ms: round(quantile(latencies, 0.5), 1),
      p90Ms: round(quantile(latencies, 0.9), 1),
      p99Ms: round(quantile(latencies, 0.99), 1),
      maxMs: round(quantile(latencies, 1), 1),
      messagesPerEdit: round(sent / total, 2),
      reconcileCallsPerEdit: round(calls.total / total, 2),
      reconcileCalls: calls,
      warmupMs: round(warmupMs, 0),
    };
    ctx.log(
      `  ${total} edits at ${result.achievedRatePerSec}/s over ${m} Machines: p50 ${result.p50Ms} ms, p90 ${result.p90Ms} ms, p99 ${result.p99Ms} ms, ` +
        `max ${result.maxMs} ms, lost ${result.lost}, superseded ${result.superseded}; ${result.messagesPerEdit} messages and ${result.reconcileCallsPerEdit} reconcile calls per edit`,
    );
    return result;
  } finally {
    stop.abort();
    await pipeline?.stop();
    await forwarderRun?.catch(() => undefined);
    await observer;
    await cleanup(raw, run, [ns]);
    raw.close();
  }
}

function taintValue(node: RawNode): string | undefined {
  return node.spec?.taints?.find((t) => t.key === KEY)?.value;
}
