/**
 * Scenario fleet1000 in the deployed form (`npm run bench -- --deployed --only=fleet1000`, issue 52 item 2): one shard
 * of the largest fleet of the profile (full: 1 000 stand-in workload clusters × 20 Nodes, 20 000 Machines), run by the
 * packaged forwarder zip (`npx serverless package`, the worked SSM parameter set with `forwarderShards` = the fleet's
 * first shard count) under the Lambda runner (local/lambda/), with the packaged template's memory, timeout and
 * environment (NODE_OPTIONS included). The benchmark invokes the forwarder once with the scheduled event of the shard
 * that holds the most clusters (`{ "shard": i }`, as that shard's EventBridge rule delivers it); the reconcile
 * function's queue trigger is not started (its work is not what is measured, and the stand-ins serve no Events).
 *
 * Measured, as in the local form (bench/scenarios/fleet100.ts): the container's peak RSS (VmHWM, the runner's
 * sampling) against the function's MemorySize; invocation → every Node of the shard announced once
 * (initial sync, a cold start included); then a window of heartbeats at the profile's rate over the shard's Nodes and
 * Machine edits spread over its clusters (the declaration annotation: as packaged, `spec.taints` belong to upstream
 * Cluster API), each edit's PATCH sent → its queue message accepted by SQS; and the requests to the management API
 * server, from its `apiserver_request_total` (all verbs but PATCH, which only the benchmark's edits use there; the API
 * server's own few requests, e.g. its identity Lease, are included).
 */
import https from 'node:https';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { randomBytes } from 'node:crypto';
import { LambdaRunner, type InvocationRecord, type QueueMessage } from '#local/lambda/runner.ts';
import { packagedService, PACKAGE_VARIANTS } from '#local/lambda/serverless-package.ts';
import { functionsEnvironmentValue } from '#local/lambda/template.ts';
import type { BenchContext } from '../lib/context.ts';
import { MACHINES_PATH, kubeletStatus, loadKubeConfig, mapConcurrent } from '../lib/kube.ts';
import { quantile, round, sleep, since } from '../lib/stats.ts';
import { changePlan, setupStandinFleet, shardMembers, type FleetMember } from './fleet100.ts';

export interface FleetDeployedResult {
  readonly packageArgs: readonly string[];
  readonly clusters: number;
  readonly nodesPerCluster: number;
  readonly shards: number;
  /** The shard measured (0-based) and its clusters. */
  readonly shard: number;
  readonly shardClusters: number;
  readonly memoryMiB: number;
  readonly timeoutSeconds: number;
  readonly nodeOptions: string;
  readonly peakRssMiB: number;
  readonly headroomMiB: number;
  /** Invocation → 2 × the shard's Nodes announced (cold start, Secrets, lists, announcements). */
  readonly initialSyncMs: number;
  readonly initialMessages: number;
  readonly windowMs: number;
  readonly heartbeats: number;
  readonly edits: number;
  readonly toQueue: { readonly observed: number; readonly lost: number; readonly p50Ms: number; readonly p90Ms: number; readonly p99Ms: number; readonly maxMs: number };
  /** Requests to the management API server (its own counter, PATCH excluded) in the initial sync and in the window. */
  readonly managementRequests: { readonly initialSync: number; readonly window: number; readonly initialSyncPerSec: number; readonly windowPerSec: number };
  readonly coldStart: boolean;
  readonly errors: number;
  /** The machine's 1-minute load average at the end of the window (the cores may be shared). */
  readonly loadAverage1m: number;
}

const ANNOTATION = 'taints.capi-taint-propagator.dev/machine';
const KEY = 'bench.capi-tp/deployed';

/** Sum of the management API server's `apiserver_request_total`, PATCH excluded (the benchmark's edits are its only PATCHes). */
async function managementRequests(kubeconfigPath: string): Promise<number> {
  const kc = loadKubeConfig(kubeconfigPath);
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const text = await new Promise<string>((resolve, reject) => {
    const req = https.request(new URL('/metrics', cluster.server), { ...opts, method: 'GET' }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks).toString('utf8')) : reject(new Error(`GET /metrics: ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
  return sumRequestTotal(text);
}

/** Sums the `apiserver_request_total` samples of a Prometheus text exposition, leaving out `verb="PATCH"`. */
export function sumRequestTotal(metrics: string): number {
  let sum = 0;
  for (const line of metrics.split('\n')) {
    if (!line.startsWith('apiserver_request_total{') || line.includes('verb="PATCH"')) continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (Number.isFinite(value)) sum += value;
  }
  return sum;
}

/**
 * Runs `call`, once more after a connection reset: a keep-alive socket the stand-in or the API server closed as the
 * request went out (the writes are merge patches of fixed values, so a repeat changes nothing).
 */
async function once<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ECONNRESET' || (e instanceof Error && e.message === 'socket hang up')) return call();
    throw e;
  }
}

export async function runFleetDeployed(ctx: BenchContext, extraPackageArgs: readonly string[] = []): Promise<FleetDeployedResult> {
  const s = ctx.sizes;
  const largest = s.fleet1000Fleets.at(-1);
  if (!largest) throw new Error('the profile has no fleet1000 fleet');
  const k = largest.clusters;
  const perCluster = s.fleet1000NodesPerCluster;
  const shards = largest.shards[0] ?? 1;
  const packageArgs = [...PACKAGE_VARIANTS.ssm, `--param=forwarderShards=${shards}`, `--param=forwarderReservedConcurrency=${Math.max(5, shards * 5)}`, ...extraPackageArgs];
  const fleet = await setupStandinFleet(ctx, { clusters: k, nodesPerCluster: perCluster, prefix: 'f1kd' });
  const { raw, members, keys, namespaces } = fleet;
  let runner: LambdaRunner | undefined;
  let invocation: Promise<InvocationRecord> | undefined;
  try {
    const groups = shardMembers(keys, shards);
    const shard = groups.reduce((best, g, i) => (g.length > (groups[best]?.length ?? 0) ? i : best), 0);
    const group = (groups[shard] ?? []).map((j) => members[j] as FleetMember);
    const n = group.length * perCluster;
    ctx.log(`  ${shards} shard(s) of ${groups.map((g) => g.length).join(' / ')} clusters; measuring shard ${shard} (${group.length} clusters, ${n} Nodes + ${n} Machines) in the deployed form`);

    const packaged = await packagedService(packageArgs);
    ctx.log(`  packaged (${packaged.reused ? 'reused' : `${packaged.seconds.toFixed(1)} s`}): ${packageArgs.join(' ')}`);
    let messages = 0;
    const seenAt = new Map<string, number>();
    // The fleet's own messages (group `<namespace>/<cluster>/…`): the forwarder watches the whole management cluster,
    // where other Clusters (an earlier test's, another tier's) may fall in the same shard.
    const ours = namespaces.map((ns) => `${ns}/`);
    const onMessage = (m: QueueMessage): void => {
      if (m.functionKey !== 'watchForwarder' || !ours.some((p) => m.groupId?.startsWith(p))) return;
      messages++;
      const rv = m.deduplicationId?.split(':')[1];
      if (rv !== undefined && !seenAt.has(rv)) seenAt.set(rv, m.at);
    };
    runner = await LambdaRunner.start({ serviceDir: packaged.serviceDir, startTriggers: false, onQueueMessage: onMessage });
    const fn = runner.fn('watchForwarder');
    const env = fn.env;
    if (env['FORWARDER_SHARDS'] !== String(shards)) throw new Error(`the packaged forwarder has FORWARDER_SHARDS=${env['FORWARDER_SHARDS'] ?? '(none)'}, not ${shards}: serverless.yml needs the forwarderShards parameter`);
    runner.ssm.put(functionsEnvironmentValue(runner.template, 'MANAGEMENT_KUBECONFIG_PARAMETER'), { value: readFileSync(ctx.kubeconfigPath, 'utf8') });
    // The packaged STATE_NAMESPACE, with no Lease of an earlier run (the shard would resume from its checkpoint).
    await raw.post('/api/v1/namespaces', { metadata: { name: 'capi-taint-propagator' } }).catch(() => undefined);
    await raw.request('DELETE', '/apis/coordination.k8s.io/v1/namespaces/capi-taint-propagator/leases').catch(() => undefined);

    // Initial sync: the shard's scheduled event, one member of its rota.
    const requestsBefore = await managementRequests(ctx.kubeconfigPath);
    const start = performance.now();
    invocation = runner.invoke('watchForwarder', { shard });
    const deadline = Date.now() + Math.max(120_000, n * 60);
    // Every Node of the shard is announced once (a first list announces what may need a write: the Nodes, not
    // initialized yet; Machines are judged from their Nodes' side).
    while (messages < n) {
      if (Date.now() > deadline) throw new Error(`deployed initial sync incomplete: ${messages}/${n} messages`);
      await sleep(100);
    }
    const initialSyncMs = since(start);
    const initialMessages = messages;
    const requestsSynced = await managementRequests(ctx.kubeconfigPath);
    ctx.log(`  deployed initial sync: ${initialMessages} messages in ${(initialSyncMs / 1000).toFixed(1)} s (MemorySize ${fn.fn.memoryMiB} MiB)`);

    // Window: heartbeats over the shard's Nodes at the profile's rate, and the shard's share of the edits.
    const targets = Array.from({ length: n }, (_, j) => {
      const m = group[j % group.length] as FleetMember;
      return { m, pair: m.pairs[Math.floor(j / group.length)] };
    });
    const edits = Math.max(1, Math.round((s.fleet1000Changes * group.length) / k));
    const plan = changePlan(group.length, perCluster, edits);
    const total = Math.round(s.heartbeatRate * s.forwarderSeconds);
    const editEvery = Math.max(1, Math.floor(total / edits));
    const sentAt = new Map<string, number>();
    const tag = randomBytes(3).toString('hex');
    let made = 0;
    const windowStart = performance.now();
    await mapConcurrent(
      Array.from({ length: total }, (_, i) => i),
      32,
      async (i) => {
        const wait = windowStart + (i * 1000) / s.heartbeatRate - performance.now();
        if (wait > 0) await sleep(wait);
        const t = targets[i % n];
        const node = t?.pair?.node;
        if (!t || node === undefined) return;
        await once(() => t.m.raw.mergePatch(`/api/v1/nodes/${node}/status`, { status: kubeletStatus(node, new Date()) }));
        if (i % editEvery === 0 && made < edits) {
          const [c, p] = plan[made++] ?? [0, 0];
          const m = group[c] as FleetMember;
          const pair = m.pairs[p];
          if (!pair) return;
          const at = Date.now();
          const value = `${KEY}=e${made}-${tag}:NoSchedule`;
          const out = await once(() => raw.mergePatch<{ metadata: { resourceVersion: string } }>(`${MACHINES_PATH}/namespaces/${m.namespace}/machines/${pair.machine}`, { metadata: { annotations: { [ANNOTATION]: value } } }));
          sentAt.set(out.metadata.resourceVersion, at);
        }
      },
    );
    // Let the forwarder catch up: every edit's message, or 10 s.
    for (let waited = 0; waited < 10_000 && [...sentAt.keys()].some((rv) => !seenAt.has(rv)); waited += 200) await sleep(200);
    const windowMs = since(windowStart);
    const requestsAfter = await managementRequests(ctx.kubeconfigPath);
    const latencies = [...sentAt].flatMap(([rv, at]) => {
      const seen = seenAt.get(rv);
      return seen === undefined ? [] : [seen - at];
    });
    // The member still runs its window: its container's VmHWM now (the runner reads it only when an invocation ends).
    const running = fn.busy()[0];
    const hwm = running?.pid === undefined ? undefined : /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${running.pid}/status`, 'utf8'))?.[1];
    const stats = fn.stats();
    const peakRssMiB = round(Math.max(stats.peakRssMiB, hwm === undefined ? 0 : Number(hwm) / 1024), 1);
    if (!running) throw new Error(`the shard's forwarder is no longer running at the end of the window (${stats.errors} errors): killed over its memory or failed`);
    const record = fn.records.find((r) => r.trigger === 'direct');
    const result: FleetDeployedResult = {
      packageArgs,
      clusters: k,
      nodesPerCluster: perCluster,
      shards,
      shard,
      shardClusters: group.length,
      memoryMiB: fn.fn.memoryMiB,
      timeoutSeconds: fn.fn.timeoutSeconds,
      nodeOptions: env['NODE_OPTIONS'] ?? '',
      peakRssMiB,
      headroomMiB: round(fn.fn.memoryMiB - peakRssMiB, 1),
      initialSyncMs: round(initialSyncMs, 0),
      initialMessages,
      windowMs: round(windowMs, 0),
      heartbeats: total,
      edits: sentAt.size,
      toQueue: {
        observed: latencies.length,
        lost: sentAt.size - latencies.length,
        p50Ms: round(quantile(latencies, 0.5), 1),
        p90Ms: round(quantile(latencies, 0.9), 1),
        p99Ms: round(quantile(latencies, 0.99), 1),
        maxMs: round(quantile(latencies, 1), 1),
      },
      managementRequests: {
        initialSync: requestsSynced - requestsBefore,
        window: requestsAfter - requestsSynced,
        initialSyncPerSec: round(((requestsSynced - requestsBefore) * 1000) / Math.max(1, initialSyncMs), 2),
        windowPerSec: round(((requestsAfter - requestsSynced) * 1000) / Math.max(1, windowMs), 2),
      },
      coldStart: record?.coldStart ?? true,
      errors: stats.errors,
      loadAverage1m: round(loadavg()[0] ?? 0, 2),
    };
    ctx.log(
      `  deployed shard ${shard} of ${shards} (${group.length} clusters × ${perCluster}): peak ${result.peakRssMiB} MiB of ${result.memoryMiB} (headroom ${result.headroomMiB}), initial sync ${result.initialSyncMs} ms; ` +
        `${result.edits} edits: p50 ${result.toQueue.p50Ms} ms, p99 ${result.toQueue.p99Ms} ms, max ${result.toQueue.maxMs} ms (${result.toQueue.lost} lost); ` +
        `management requests ${result.managementRequests.initialSync} (${result.managementRequests.initialSyncPerSec}/s) in the sync, ${result.managementRequests.window} (${result.managementRequests.windowPerSec}/s) in the window; load ${result.loadAverage1m}`,
    );
    return result;
  } finally {
    await runner?.stop();
    await invocation?.catch(() => undefined);
    await fleet.close();
  }
}
