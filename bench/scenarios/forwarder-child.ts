/**
 * Child process of scenario 4: the watch-forwarder core (production composition: real watch sources, real Lease,
 * the SQS event publisher; windows of a rota of one, as `npm run forwarder` runs them) against the API server, publishing into a counting stand-in for SQS that keeps nothing.
 * Alone in its process, so that its peak memory (VmHWM) and CPU are the forwarder's own.
 *
 * IPC protocol (parent → child): `status`, `mark` (start of the measuring window), `report`, `stop`.
 * Environment: BENCH_KUBECONFIG, BENCH_NAMESPACE, BENCH_LEASE, BENCH_LABEL_SELECTOR, BENCH_CLUSTER_MODE (`self`, or
 * `capi`: the namespace's Clusters, each one's Nodes in its workload cluster through its `<cluster>-kubeconfig` Secret;
 * requests to workload clusters are counted apart), and for scenario 9's product shards BENCH_SHARDS / BENCH_SHARD
 * (FORWARDER_SHARDS / FORWARDER_SHARD) with BENCH_MACHINE_NAMESPACE empty (every namespace).
 */
import { readFileSync } from 'node:fs';
import type { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { composeWatchForwarder } from '#functions/watch-forwarder/compose.ts';
import { WatchForwarder } from '#functions/watch-forwarder/forward-watch-events.ts';
import { LOCAL_WATCH_MEMBERS, localRota, runWindows } from '#local/forwarder-rota.ts';
import { logger } from '#shared/observability/logger.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import { createForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';
import { CallCounter, countingKubeConfig, countingWorkloadLoader } from '../lib/kube.ts';

/** RSS once every module is loaded and before the forwarder starts: the floor under the forwarder's own memory. */
const baselineRss = process.memoryUsage().rss;
const env = process.env;
const counter = new CallCounter();
const workloadCounter = new CallCounter();
const kc = countingKubeConfig(env['BENCH_KUBECONFIG'] ?? '', counter);
const telemetry = createForwarderTelemetry();
const config = loadForwarderConfig({
  QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/bench-forwarder.fifo',
  CLUSTER_MODE: env['BENCH_CLUSTER_MODE'] ?? 'self',
  STATE_NAMESPACE: env['BENCH_NAMESPACE'],
  LEASE_NAME: env['BENCH_LEASE'],
  FORWARDER_ID: `bench-${process.pid}`,
  // Scenario 9's product shards watch every namespace (BENCH_MACHINE_NAMESPACE empty) and only their shard's clusters.
  MACHINE_NAMESPACE: env['BENCH_MACHINE_NAMESPACE'] ?? env['BENCH_NAMESPACE'],
  FORWARDER_SHARDS: env['BENCH_SHARDS'],
  FORWARDER_SHARD: env['BENCH_SHARD'],
  NODE_LABEL_SELECTOR: env['BENCH_LABEL_SELECTOR'],
  // A bare API server: no Cluster API controller propagates spec.taints, the product does (as the benchmarks' reconcile).
  SPEC_TAINTS_OWNER: 'product',
  WATCH_MEMBERS: String(LOCAL_WATCH_MEMBERS),
});

let messages = 0;
let windowIds: string[] | undefined;
/** When each window message was handed to the queue (epoch ms, as the parent's clock reads it), by its position in windowIds. */
let windowTimes: number[] | undefined;
const sqs = {
  async send(command: SendMessageBatchCommand) {
    const entries = command.input.Entries ?? [];
    messages += entries.length;
    const at = performance.timeOrigin + performance.now();
    if (windowIds) for (const e of entries) windowIds.push(e.MessageDeduplicationId ?? '');
    if (windowTimes) for (let i = 0; i < entries.length; i++) windowTimes.push(at);
    return { Successful: entries.map((e, i) => ({ Id: e.Id, MessageId: `m${messages}-${i}`, MD5OfMessageBody: '', SequenceNumber: '1' })), Failed: [] };
  },
};

function vmHwmMiB(): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) / 1024 : process.memoryUsage().rss / 2 ** 20;
}

let maxRss = 0;
const sampler = setInterval(() => {
  maxRss = Math.max(maxRss, process.memoryUsage().rss);
}, 100);

// What composeWatchForwarder builds by default (the Secrets read through the pooled management KubeConfig), with the
// KubeConfigs it hands out counted.
const workload = workloadKubeConfigs(kc);
const countedWorkload = { get: countingWorkloadLoader((c: ClusterRef) => workload.get(c), workloadCounter) };
const deps = composeWatchForwarder({ config, managementKubeConfig: kc, sqs, telemetry, ...(config.clusterMode === 'capi' ? { workloadKubeConfigs: countedWorkload } : {}) });
const forwarder = new WatchForwarder(deps);
const stop = new AbortController();
const started = performance.now();
const cpuAtStart = process.cpuUsage();
let mark: { at: number; cpu: NodeJS.CpuUsage; counts: Record<string, number>; messages: number; calls: number } | undefined;
const running = runWindows(forwarder, { signal: stop.signal, rota: localRota(config), retryMs: 2_000, logger });

process.on('message', (msg: { type: string }) => {
  const counts = telemetry.counts() as Record<string, number>;
  switch (msg.type) {
    case 'status':
      process.send?.({ type: 'status', messages, counts, active: forwarder.isActive(), elapsedMs: performance.now() - started });
      return;
    case 'mark': {
      const cpu = process.cpuUsage(cpuAtStart);
      mark = { at: performance.now(), cpu, counts, messages, calls: counter.snapshot().total };
      windowIds = [];
      windowTimes = [];
      process.send?.({ type: 'marked', syncCpuMs: (cpu.user + cpu.system) / 1000, syncMs: performance.now() - started, messages, syncCalls: mark.calls });
      return;
    }
    case 'report': {
      const m = mark;
      const now = performance.now();
      const cpu = process.cpuUsage(cpuAtStart);
      const windowCpuMs = m ? (cpu.user + cpu.system - (m.cpu.user + m.cpu.system)) / 1000 : 0;
      const delta = Object.fromEntries(Object.entries(counts).map(([k, v]) => [k, v - (m?.counts[k] ?? 0)]));
      process.send?.({
        type: 'report',
        windowMs: m ? now - m.at : 0,
        windowCpuMs,
        windowCounts: delta,
        windowMessages: messages - (m?.messages ?? 0),
        windowIds: windowIds ?? [],
        windowTimes: windowTimes ?? [],
        windowCalls: counter.snapshot().total - (m?.calls ?? 0),
        calls: counter.snapshot(),
        workloadCalls: workloadCounter.snapshot(),
        peakMiB: vmHwmMiB(),
        maxSampledRssMiB: Math.max(maxRss, process.memoryUsage().rss) / 2 ** 20,
        heapUsedMiB: process.memoryUsage().heapUsed / 2 ** 20,
        baselineRssMiB: baselineRss / 2 ** 20,
      });
      return;
    }
    case 'stop':
      shutdown();
      return;
  }
});

function shutdown(): void {
  stop.abort();
  const exit = (): void => {
    clearInterval(sampler);
    if (process.connected) process.disconnect();
    process.exit(0);
  };
  void running.then(exit, exit);
  setTimeout(exit, 15_000).unref();
}
process.on('disconnect', shutdown);
process.send?.({ type: 'started' });
