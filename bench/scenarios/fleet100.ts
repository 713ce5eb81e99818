/**
 * Scenarios 9 (`fleet100`, a hundred workload clusters, issue 29 item 3) and `fleet1000` (a thousand, issue 52 item 2):
 * the watch-forwarder alone (as in scenario 4, `capi` mode) over K workload clusters of N Nodes each and their K × N
 * Machines, the fleet split by the product's own shards (FORWARDER_SHARDS = S), each shard's forwarder measured alone.
 * fleet100 (full: 100 × 200 = 20 000 Nodes over 4 shards) is one fleet; fleet1000 is the growth comparison, 100 and
 * then 1 000 clusters of 20 Nodes, each at two shard counts (full: 1 and 4 shards at 100, 4 and 8 at 1 000).
 *
 * Sharding is the product's: a forwarder given FORWARDER_SHARDS = S and FORWARDER_SHARD = i watches only the Clusters
 * that `shardOf('<namespace>/<name>', S)` (shared/policy/shards.ts) puts in shard i, whatever their namespace, and
 * keeps its state in a Lease of its own (`<LEASE_NAME>-<i>-of-<S>`). So the fleet's Clusters are spread over two
 * namespaces (the shards must not care), every forwarder watches every namespace (no MACHINE_NAMESPACE), and the
 * benchmark computes each shard's clusters with the product's `shardOf` to aim its heartbeats and changes. The whole
 * fleet is in the management cluster from the start (every Cluster, Secret and Machine, all K stand-ins serving their
 * Nodes); the shards' forwarders are measured one after the other, each alone, so that each one's peak memory, CPU
 * and latency are its own on this 2-core machine (deployed, they run side by side, each its own rota of Lambda
 * invocations). A shard's forwarder that lists or watches a stand-in of another shard, or misses one of its own,
 * fails the scenario. A shard the hash left empty (small fleets) is reported with no forwarder run.
 *
 * What is real and what is a stand-in:
 * - real: the management cluster (the run's kube-apiserver + etcd) with the K `Cluster` objects, their
 *   `<cluster>-kubeconfig` Secrets (type `cluster.x-k8s.io/secret`) and the K × N Machines (`spec.clusterName`,
 *   `spec.taints`, `status.nodeRef`); the forwarder (production composition in a child process, esbuild bundle,
 *   deployed NODE_OPTIONS), which reads those Secrets, builds a client per cluster, lists and watches each cluster's
 *   Nodes and the Machines, and publishes through the product's SQS publisher into a counting stand-in;
 * - stand-ins: the K workload API servers (bench/lib/standin-apiserver.ts: loopback HTTPS servers, one per cluster,
 *   in this process, serving the Node list (paged) and watch with bookmarks and resourceVersions, as a kube-apiserver
 *   does), and SQS (a counter, as in scenario 4).
 * After each shard's initial sync (every Node and Machine of its clusters announced once), the window of scenario 4
 * over its clusters: heartbeats at the profile's rate (the whole fleet's rate, on one shard: harsher than its share of
 * it) over every Node of its clusters in turn, and its share of the real changes spread over its clusters (foreign
 * Node taint edits in the stand-ins and Machine taint edits in the management cluster, alternately); the latency of
 * each change is its write sent → its message handed to the queue. The forwarder's requests to the management API
 * server are counted in its KubeConfig (initial sync and window, and per second of each).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { shardOf } from '#shared/policy/shards.ts';
import type { BenchContext } from '../lib/context.ts';
import { registerWorkloadCluster, MACHINES_PATH, RawKube, cleanup, createNamespace, createPairs, loadKubeConfig, mapConcurrent, runId, type Pair } from '../lib/kube.ts';
import { startStandinApiServers, type StandinApiServer, type StandinStats } from '../lib/standin-apiserver.ts';
import { round, since } from '../lib/stats.ts';
import { DECLARED, bundleChild, measureForwarder, shippedForwarderMemoryMiB, type ForwarderRun } from './forwarder.ts';

/** One shard of a layout: its clusters (the product's hash) and its forwarder measured alone. */
export interface Fleet100Shard {
  /** 0-based, as FORWARDER_SHARD. */
  readonly shard: number;
  readonly clusters: number;
  /** Its forwarder's run (`nodes`: the shard's Nodes, as many Machines); absent when the hash gave it no cluster. */
  readonly forwarder?: ForwarderRun;
  /** The shipped memory (serverless.yml `forwarderMemorySize`) less the peak, in MiB. */
  readonly headroomMiB?: number;
  /** What the shard's stand-ins served (list pages, watches, 410s, requests they do not serve). */
  readonly standins: StandinStats;
  /** Real changes per cluster of the shard in its window: min and max (the spread). */
  readonly changesPerCluster: { readonly min: number; readonly max: number };
  /** The machine's 1-minute load average when the shard's measurement ended (the cores may be shared). */
  readonly loadAverage1m?: number;
}

/** The fleet split into `shards` shards by the product, each shard measured alone. */
export interface FleetLayout {
  readonly shards: number;
  readonly perShard: readonly Fleet100Shard[];
  /** Across the measured shards, what the per-forwarder figures are judged on: the largest of each. */
  readonly largest: { readonly peakMiB: number; readonly initialSyncMs: number; readonly p50Ms: number; readonly p99Ms: number; readonly maxMs: number; readonly managementReqPerSec: number };
}

export interface Fleet100Result {
  readonly clusters: number;
  readonly nodesPerCluster: number;
  /** Namespaces the Clusters are spread over (the shards ignore them). */
  readonly namespaces: number;
  /** The forwarder function's memory as shipped (serverless.yml `forwarderMemorySize`), MiB: the headroom's reference. */
  readonly shippedMemoryMiB: number;
  /** Starting the K stand-in API servers. */
  readonly serversStartMs: number;
  /** Creating the Clusters, Secrets, Machines (real API server) and Nodes (stand-ins) of the fleet. */
  readonly setupMs: number;
  /** One per shard count, in the order asked. */
  readonly layouts: readonly FleetLayout[];
  /** What the stand-ins served, summed over the fleet and the layouts. */
  readonly standins: StandinStats;
}

/** fleet1000: the same scenario at growing fleet sizes (full: 100 and 1 000 clusters of 20 Nodes). */
export interface Fleet1000Result {
  readonly nodesPerCluster: number;
  readonly fleets: readonly Fleet100Result[];
}

/** The clusters of each of `count` shards (indexes into `keys`, each `<namespace>/<name>`), by the product's hash. */
export function shardMembers(keys: readonly string[], count: number): number[][] {
  if (!Number.isInteger(count) || count < 1) throw new Error(`cannot split a fleet into ${count} shards`);
  const out: number[][] = Array.from({ length: count }, () => []);
  keys.forEach((key, i) => out[shardOf(key, count)]?.push(i));
  return out;
}

/**
 * Where the `changes` real changes of a shard of `clusters` clusters × `perCluster` Nodes go, as [cluster, Node]
 * indexes: cluster after cluster, a different Node each round, so that every cluster gets its share (their counts one
 * apart at most); each round starts one cluster further, so that each cluster gets Machine edits and Node edits (they
 * alternate).
 */
export function changePlan(clusters: number, perCluster: number, changes: number): Array<readonly [number, number]> {
  if (clusters < 1 || perCluster < 1) return [];
  return Array.from({ length: changes }, (_, c) => [(c + Math.floor(c / clusters)) % clusters, Math.floor(c / clusters) % perCluster] as const);
}

/** The largest of each per-forwarder figure over the measured shards (NaN when none was measured). */
export function largestOf(perShard: readonly Fleet100Shard[]): FleetLayout['largest'] {
  const runs = perShard.flatMap((s) => (s.forwarder ? [s.forwarder] : []));
  const max = (f: (r: ForwarderRun) => number): number => (runs.length === 0 ? Number.NaN : Math.max(...runs.map(f)));
  return {
    peakMiB: max((r) => r.peakMiB),
    initialSyncMs: max((r) => r.initialSyncMs),
    p50Ms: max((r) => r.changeLatency.p50Ms),
    p99Ms: max((r) => r.changeLatency.p99Ms),
    maxMs: max((r) => r.changeLatency.maxMs),
    managementReqPerSec: max((r) => Math.max(r.managementRequests.initialSyncPerSec, r.managementRequests.windowPerSec)),
  };
}

const NO_STATS: StandinStats = { lists: 0, listPages: 0, watches: 0, writes: 0, gets: 0, unknownRequests: 0, expired: 0 };
function sumStats(stats: readonly StandinStats[]): StandinStats {
  return stats.reduce<StandinStats>(
    (a, b) => ({ lists: a.lists + b.lists, listPages: a.listPages + b.listPages, watches: a.watches + b.watches, writes: a.writes + b.writes, gets: a.gets + b.gets, unknownRequests: a.unknownRequests + b.unknownRequests, expired: a.expired + b.expired }),
    NO_STATS,
  );
}
function minus(a: StandinStats, b: StandinStats): StandinStats {
  return { lists: a.lists - b.lists, listPages: a.listPages - b.listPages, watches: a.watches - b.watches, writes: a.writes - b.writes, gets: a.gets - b.gets, unknownRequests: a.unknownRequests - b.unknownRequests, expired: a.expired - b.expired };
}

/** One workload cluster of the fleet: its stand-in, a client of it, and its Machine / Node pairs. */
export interface FleetMember {
  readonly cluster: string;
  readonly namespace: string;
  readonly server: StandinApiServer;
  readonly raw: RawKube;
  pairs: Pair[];
}

export interface FleetOptions {
  readonly clusters: number;
  readonly nodesPerCluster: number;
  /** Real changes over the whole fleet per layout (each shard gets its clusters' share). */
  readonly changes: number;
  /** Shard counts, each measured on the same fleet (every shard of each, one after the other). */
  readonly shardCounts: readonly number[];
  /** Run id prefix. */
  readonly prefix: string;
}

export function runFleet100(ctx: BenchContext): Promise<Fleet100Result> {
  const s = ctx.sizes;
  return runShardedFleet(ctx, { clusters: s.fleet100Clusters, nodesPerCluster: s.fleet100NodesPerCluster, changes: s.fleet100Changes, shardCounts: s.fleet100Shards, prefix: 'f100' });
}

export async function runFleet1000(ctx: BenchContext): Promise<Fleet1000Result> {
  const s = ctx.sizes;
  const fleets: Fleet100Result[] = [];
  for (const f of s.fleet1000Fleets) {
    ctx.log(`  fleet of ${f.clusters} clusters × ${s.fleet1000NodesPerCluster} Nodes, shard counts ${f.shards.join(', ')}`);
    fleets.push(await runShardedFleet(ctx, { clusters: f.clusters, nodesPerCluster: s.fleet1000NodesPerCluster, changes: s.fleet1000Changes, shardCounts: f.shards, prefix: 'f1k' }));
  }
  return { nodesPerCluster: s.fleet1000NodesPerCluster, fleets };
}

/** Two namespaces (one for a single cluster): the product's shards hash `<namespace>/<name>` and ignore the namespace otherwise. */
const NAMESPACES = 2;

/** A fleet set up in the management cluster and its stand-ins; `close()` removes it. */
export interface StandinFleet {
  readonly raw: RawKube;
  readonly run: string;
  readonly namespaces: readonly string[];
  readonly servers: readonly StandinApiServer[];
  readonly members: readonly FleetMember[];
  /** `<namespace>/<name>` of each member: what the product's shards hash. */
  readonly keys: readonly string[];
  readonly serversStartMs: number;
  readonly setupMs: number;
  close(): Promise<void>;
}

/**
 * Starts K stand-in workload API servers and registers them as Cluster API would, spread over two namespaces: each
 * cluster's Cluster and kubeconfig Secret, and N Machines (management API server) with their N Nodes (its stand-in).
 */
export async function setupStandinFleet(ctx: BenchContext, o: { readonly clusters: number; readonly nodesPerCluster: number; readonly prefix: string }): Promise<StandinFleet> {
  const { clusters: k, nodesPerCluster: perCluster } = o;
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 64);
  const run = runId(o.prefix);
  const namespaces = Array.from({ length: Math.min(NAMESPACES, k) }, (_, i) => `${run}-${String.fromCharCode(97 + i)}`);
  const dir = await mkdtemp(join(tmpdir(), 'capi-tp-bench-fleet-'));
  let servers: StandinApiServer[] = [];
  const clients: RawKube[] = [];
  const close = async (): Promise<void> => {
    for (const c of clients) c.close();
    await Promise.all(servers.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
    for (const ns of namespaces) {
      await raw.request('DELETE', `${MACHINES_PATH}/namespaces/${ns}/clusters`).catch(() => undefined);
      await raw.request('DELETE', `/api/v1/namespaces/${ns}/secrets`).catch(() => undefined);
    }
    await cleanup(raw, run, namespaces);
    raw.close();
  };
  try {
    const serversStart = performance.now();
    servers = await startStandinApiServers({ dir, names: Array.from({ length: k }, (_, i) => `wc-${i + 1}`) });
    const serversStartMs = since(serversStart);
    ctx.log(`  ${k} stand-in workload API servers started in ${(serversStartMs / 1000).toFixed(1)} s`);

    const setupStart = performance.now();
    for (const ns of namespaces) await createNamespace(raw, ns, run);
    // A stand-in client keeps at most 4 connections: with 1 000 clusters this process holds both ends of each.
    const members: FleetMember[] = [];
    for (const [j, server] of servers.entries()) {
      const kc = new KubeConfig();
      kc.loadFromString(server.kubeconfigYaml);
      const client = await RawKube.from(kc, 4);
      clients.push(client);
      members.push({ cluster: server.name, namespace: namespaces[j % namespaces.length] as string, server, raw: client, pairs: [] });
    }
    await mapConcurrent(members, 16, (m) => registerWorkloadCluster(raw, m.namespace, run, m.cluster, m.server.server, m.server.kubeconfigYaml));
    // A few clusters at a time, each with a few requests in flight: 48 requests in flight to the real API server at most.
    const perClusterConcurrency = Math.min(6, perCluster);
    const parallelClusters = Math.max(1, Math.floor(48 / perClusterConcurrency));
    let populated = 0;
    await mapConcurrent(members, parallelClusters, async (m) => {
      m.pairs = await createPairs(raw, {
        run,
        namespace: m.namespace,
        count: perCluster,
        clusterName: m.cluster,
        machinePrefix: `${m.cluster}-m`,
        nodePrefix: `${run}-${m.cluster}-n`,
        nodeKube: m.raw,
        machineTaints: [DECLARED],
        nodeTaints: [DECLARED],
        nodeStatus: true,
        concurrency: perClusterConcurrency,
      });
      if (++populated % Math.max(1, Math.round(k / 5)) === 0) ctx.log(`  … ${populated} of ${k} clusters populated`);
    });
    const setupMs = since(setupStart);
    ctx.log(
      `  ${k} Clusters with kubeconfig Secrets, ${k * perCluster} Machines (management API server) + ${k} × ${perCluster} Nodes (stand-ins, kubelet-like status) in ${(setupMs / 1000).toFixed(1)} s, ` +
        `in ${namespaces.length} namespace(s)`,
    );
    return { raw, run, namespaces, servers, members, keys: members.map((m) => `${m.namespace}/${m.cluster}`), serversStartMs, setupMs, close };
  } catch (e) {
    await close();
    throw e;
  }
}

export async function runShardedFleet(ctx: BenchContext, o: FleetOptions): Promise<Fleet100Result> {
  const { clusters: k, nodesPerCluster: perCluster, changes } = o;
  const shippedMemoryMiB = shippedForwarderMemoryMiB();
  const fleet = await setupStandinFleet(ctx, o);
  const { raw, run, namespaces, servers, members, keys, serversStartMs, setupMs } = fleet;
  let childScript: string | undefined;
  try {
    childScript = await bundleChild();
    const layouts: FleetLayout[] = [];
    for (const count of o.shardCounts) {
      const groups = shardMembers(keys, count);
      ctx.log(`  ${count} shard(s) of ${groups.map((g) => g.length).join(' / ')} clusters`);
      const perShard: Fleet100Shard[] = [];
      for (const [i, group] of groups.entries()) {
        const shardMembersOf = group.map((j) => members[j] as FleetMember);
        const n = shardMembersOf.length;
        const label = `${count} shards, shard ${i}`;
        if (n === 0) {
          ctx.log(`  ${label}: no cluster hashes to it; not measured`);
          perShard.push({ shard: i, clusters: 0, standins: NO_STATS, changesPerCluster: { min: 0, max: 0 } });
          continue;
        }
        const shardCtx: BenchContext = { ...ctx, log: (line) => ctx.log(line.replace(/^ */, `  ${label}: `)) };
        // This shard's share of the fleet's real changes, in proportion to its clusters.
        const shardChanges = Math.max(1, Math.round((changes * n) / k));
        ctx.log(`  ${label}: ${n} clusters, ${n * perCluster} Nodes + ${n * perCluster} Machines, ${shardChanges} real changes`);
        // Heartbeats walk this list: interleaved, cluster after cluster.
        const targets = Array.from({ length: perCluster * n }, (_, j) => {
          const m = shardMembersOf[j % n] as FleetMember;
          return { nodeKube: m.raw, pair: m.pairs[Math.floor(j / n)] as Pair, namespace: m.namespace };
        });
        const plan = changePlan(n, perCluster, shardChanges);
        const changeTargets = plan.map(([c, p]) => {
          const m = shardMembersOf[c] as FleetMember;
          return { nodeKube: m.raw, pair: m.pairs[p] as Pair, namespace: m.namespace };
        });
        const before = members.map((m) => m.server.stats());
        const measured = await measureForwarder(shardCtx, {
          run,
          namespace: namespaces[0] as string,
          leaseName: `forwarder-${run}-${count}`,
          machineNamespace: '',
          shard: { count, index: i },
          mode: 'capi',
          childScript,
          management: raw,
          targets,
          changeTargets,
          realChanges: shardChanges,
        });
        // Which stand-ins its forwarder listed or watched: exactly its own clusters.
        const inShard = new Set(group);
        const reached = members.flatMap((m, j) => {
          const d = minus(m.server.stats(), before[j] as StandinStats);
          return d.lists + d.watches + d.gets > 0 ? [j] : [];
        });
        const strays = reached.filter((j) => !inShard.has(j));
        const missed = group.filter((j) => !reached.includes(j));
        if (strays.length > 0 || missed.length > 0) {
          throw new Error(`${label}: its forwarder reached ${strays.length} clusters of other shards (${strays.slice(0, 3).map((j) => keys[j]).join(', ')}) and missed ${missed.length} of its own`);
        }
        const forwarder: ForwarderRun = { ...measured, clusters: n, setupMs: round(setupMs, 0) };
        const perClusterChanges = new Map<number, number>();
        for (const [c] of plan.slice(0, forwarder.realChanges)) perClusterChanges.set(c, (perClusterChanges.get(c) ?? 0) + 1);
        const counts = shardMembersOf.map((_, c) => perClusterChanges.get(c) ?? 0);
        const standins = sumStats(group.map((j) => minus((members[j] as FleetMember).server.stats(), before[j] as StandinStats)));
        if (standins.unknownRequests > 0) throw new Error(`${label}: the forwarder sent ${standins.unknownRequests} requests the stand-ins do not serve`);
        const l = forwarder.changeLatency;
        const mr = forwarder.managementRequests;
        ctx.log(
          `  ${label}: ${l.observed} of ${forwarder.realChanges} changes forwarded (lost ${l.lost}); write sent → message p50 ${l.p50Ms} ms, p99 ${l.p99Ms} ms, max ${l.maxMs} ms; ` +
            `peak ${forwarder.peakMiB} MiB of ${shippedMemoryMiB}; load ${round(loadavg()[0] ?? 0, 2)}; management requests ${mr.initialSync} in the initial sync (${mr.initialSyncPerSec}/s), ${mr.window} in the window (${mr.windowPerSec}/s)`,
        );
        perShard.push({ shard: i, clusters: n, forwarder, headroomMiB: round(shippedMemoryMiB - forwarder.peakMiB, 1), standins, changesPerCluster: { min: Math.min(...counts), max: Math.max(...counts) }, loadAverage1m: round(loadavg()[0] ?? 0, 2) });
      }
      const largest = largestOf(perShard);
      ctx.log(`  ${count} shard(s), per forwarder the largest: peak ${largest.peakMiB} MiB (shipped ${shippedMemoryMiB}), initial sync ${largest.initialSyncMs} ms, p99 ${largest.p99Ms} ms, ${largest.managementReqPerSec} management requests/s`);
      layouts.push({ shards: count, perShard, largest });
    }
    return {
      clusters: k,
      nodesPerCluster: perCluster,
      namespaces: namespaces.length,
      shippedMemoryMiB,
      serversStartMs: round(serversStartMs, 0),
      setupMs: round(setupMs, 0),
      layouts,
      standins: sumStats(servers.map((s) => s.stats())),
    };
  } finally {
    if (childScript) await rm(childScript, { force: true });
    await fleet.close();
  }
}
