/**
 * Scenario 9, a hundred workload clusters (issue 29, item 3): the watch-forwarder alone (as in scenario 4, `capi`
 * mode) over K workload clusters of N Nodes each (full: 100 × 200 = 20 000 Nodes) and their K × N Machines, the fleet
 * sharded over S forwarders (full: 4; `--fleet100-shards=1` measures one forwarder over the whole fleet).
 *
 * Sharding is the product's, not the benchmark's: a forwarder with `MACHINE_NAMESPACE=<ns>` watches only that
 * namespace's Clusters and Machines (watch-sources.ts scopes both streams to it), hence only those Clusters' workload
 * clusters, and keeps its state in a Lease of its own (`LEASE_NAME`). So the K clusters are split into S contiguous
 * shares, each registered in a namespace of its own (`<run>-s<i>`), and each share gets its own forwarder child
 * (measureForwarder: BENCH_NAMESPACE is its MACHINE_NAMESPACE and STATE_NAMESPACE, BENCH_LEASE its LEASE_NAME).
 * The whole fleet is in the management cluster from the start (every shard's Clusters, Secrets and Machines, all K
 * stand-ins serving their Nodes); the shards' forwarders are measured one after the other, each alone, so that each
 * one's peak memory, CPU and latency are its own on this 2-core machine (deployed, they would run side by side, each
 * in its own Lambda function, as the per-forwarder target is stated).
 *
 * What is real and what is a stand-in:
 * - real: the management cluster (the run's kube-apiserver + etcd) with the K `Cluster` objects, their
 *   `<cluster>-kubeconfig` Secrets (type `cluster.x-k8s.io/secret`) and the K × N Machines (`spec.clusterName`,
 *   `spec.taints`, `status.nodeRef`); the forwarder (production composition in a child process, esbuild bundle,
 *   deployed NODE_OPTIONS), which reads those Secrets, builds a client per cluster, lists and watches each cluster's
 *   Nodes and the Machines, and publishes through the product's SQS publisher into a counting stand-in;
 * - stand-ins: the K workload API servers (bench/lib/standin-apiserver.ts: loopback HTTPS servers, one per cluster,
 *   in this process, serving the Node list (paged) and watch with bookmarks and resourceVersions, as a kube-apiserver
 *   does) — 100 kube-apiservers do not fit on the machine — and SQS (a counter, as in scenario 4).
 * After each shard's initial sync (every Node and Machine of its share announced once), the window of scenario 4 over
 * its share: heartbeats at the profile's rate (the whole fleet's rate, on one shard: harsher than its share of it)
 * over every Node of its clusters in turn, and its share of the real changes spread over its clusters (foreign Node
 * taint edits in the stand-ins and Machine taint edits in the management cluster, alternately); the latency of each
 * change is its write sent → its message handed to the queue.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import type { BenchContext } from '../lib/context.ts';
import { registerWorkloadCluster, MACHINES_PATH, RawKube, cleanup, createNamespace, createPairs, loadKubeConfig, runId, type Pair } from '../lib/kube.ts';
import { startStandinApiServers, type StandinApiServer, type StandinStats } from '../lib/standin-apiserver.ts';
import { round, since } from '../lib/stats.ts';
import { DECLARED, bundleChild, measureForwarder, type ForwarderRun } from './forwarder.ts';

/** One shard: its share of the clusters, in a namespace of its own, and its forwarder measured alone. */
export interface Fleet100Shard {
  /** 1-based. */
  readonly shard: number;
  readonly clusters: number;
  /** Its forwarder's run (`nodes`: the share's Nodes, as many Machines; `setupMs`: creating the share's objects). */
  readonly forwarder: ForwarderRun;
  /** What the share's stand-ins served (list pages, watches, 410s, requests they do not serve). */
  readonly standins: StandinStats;
  /** Real changes per cluster of the share in its window: min and max (the spread). */
  readonly changesPerCluster: { readonly min: number; readonly max: number };
}

export interface Fleet100Result {
  readonly clusters: number;
  readonly nodesPerCluster: number;
  /** Forwarders the fleet is sharded over (each with its own namespace, Lease and contiguous share of the clusters). */
  readonly shards: number;
  /** Starting the K stand-in API servers. */
  readonly serversStartMs: number;
  /** Creating the Clusters, Secrets, Machines (real API server) and Nodes (stand-ins) of every shard. */
  readonly setupMs: number;
  /** Per shard, in order; each forwarder measured alone. */
  readonly perShard: readonly Fleet100Shard[];
  /** Across the shards, what the per-forwarder figures are judged on: the largest peak, initial sync and p50 / p99. */
  readonly largest: { readonly peakMiB: number; readonly initialSyncMs: number; readonly p50Ms: number; readonly p99Ms: number };
  /** What the stand-ins served, summed over the fleet. */
  readonly standins: StandinStats;
}

/** Splits `k` items into `shards` contiguous shares whose sizes differ by one at most: the [start, end) of each. */
export function shardRanges(k: number, shards: number): Array<readonly [number, number]> {
  if (!Number.isInteger(shards) || shards < 1 || shards > k) throw new Error(`cannot shard ${k} clusters over ${shards} forwarders`);
  return Array.from({ length: shards }, (_, i) => [Math.floor((i * k) / shards), Math.floor(((i + 1) * k) / shards)] as const);
}

const NO_STATS: StandinStats = { lists: 0, listPages: 0, watches: 0, writes: 0, gets: 0, unknownRequests: 0, expired: 0 };
function sumStats(stats: readonly StandinStats[]): StandinStats {
  return stats.reduce<StandinStats>(
    (a, b) => ({ lists: a.lists + b.lists, listPages: a.listPages + b.listPages, watches: a.watches + b.watches, writes: a.writes + b.writes, gets: a.gets + b.gets, unknownRequests: a.unknownRequests + b.unknownRequests, expired: a.expired + b.expired }),
    NO_STATS,
  );
}

interface Member {
  readonly cluster: string;
  readonly server: StandinApiServer;
  readonly raw: RawKube;
  pairs: Pair[];
}

export async function runFleet100(ctx: BenchContext): Promise<Fleet100Result> {
  const { fleet100Clusters: k, fleet100NodesPerCluster: perCluster, fleet100Changes: changes, fleet100Shards: shardCount } = ctx.sizes;
  const ranges = shardRanges(k, shardCount);
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 64);
  const run = runId('f100');
  const namespaces = ranges.map((_, i) => `${run}-s${i + 1}`);
  const dir = await mkdtemp(join(tmpdir(), 'capi-tp-bench-fleet100-'));
  let servers: StandinApiServer[] = [];
  const clients: RawKube[] = [];
  let childScript: string | undefined;
  try {
    const serversStart = performance.now();
    const names = Array.from({ length: k }, (_, i) => `wc-${i + 1}`);
    servers = await startStandinApiServers({ dir, names });
    const serversStartMs = since(serversStart);
    ctx.log(`  ${k} stand-in workload API servers started in ${(serversStartMs / 1000).toFixed(1)} s`);

    // The whole fleet first, shard after shard: while one shard's forwarder is measured, the management cluster holds
    // every shard's objects, as it would deployed (the other namespaces are outside its watches).
    const setupStart = performance.now();
    const shards: Array<{ ns: string; members: Member[]; setupMs: number }> = [];
    for (const [i, [from, to]] of ranges.entries()) {
      const shardStart = performance.now();
      const ns = namespaces[i] as string;
      await createNamespace(raw, ns, run);
      const members: Member[] = [];
      for (const server of servers.slice(from, to)) {
        const kc = new KubeConfig();
        kc.loadFromString(server.kubeconfigYaml);
        const client = await RawKube.from(kc, 8);
        clients.push(client);
        members.push({ cluster: server.name, server, raw: client, pairs: [] });
        await registerWorkloadCluster(raw, ns, run, server.name, server.server, server.kubeconfigYaml);
      }
      // A few clusters at a time, each with a few requests in flight: 48 requests in flight to the real API server at most.
      const parallelClusters = Math.min(members.length, 8);
      for (let j = 0; j < members.length; j += parallelClusters) {
        await Promise.all(
          members.slice(j, j + parallelClusters).map(async (m) => {
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
              concurrency: 6,
            });
          }),
        );
        if ((j / parallelClusters) % 4 === 3) ctx.log(`  … shard ${i + 1}: ${Math.min(members.length, j + parallelClusters)} of ${members.length} clusters populated`);
      }
      shards.push({ ns, members, setupMs: since(shardStart) });
    }
    const setupMs = since(setupStart);
    ctx.log(
      `  ${k} Clusters with kubeconfig Secrets, ${k * perCluster} Machines (management API server) + ${k} × ${perCluster} Nodes (stand-ins, kubelet-like status) in ${(setupMs / 1000).toFixed(1)} s, ` +
        `in ${shardCount} namespaces of ${ranges.map(([a, b]) => b - a).join(' / ')} clusters`,
    );

    childScript = await bundleChild();
    const perShard: Fleet100Shard[] = [];
    for (const [i, shard] of shards.entries()) {
      const { members } = shard;
      const n = members.length;
      const label = `shard ${i + 1}/${shardCount}`;
      const shardCtx: BenchContext = { ...ctx, log: (line) => ctx.log(line.replace(/^ */, `  ${label}: `)) };
      // This shard's share of the fleet's real changes, in proportion to its clusters.
      const shardChanges = Math.max(1, Math.round((changes * n) / k));
      ctx.log(`  ${label}: ${n} clusters (${members[0]?.cluster}…${members[n - 1]?.cluster}), ${n * perCluster} Nodes + ${n * perCluster} Machines in ${shard.ns}, Lease forwarder-${run}-s${i + 1}, ${shardChanges} real changes`);
      // Heartbeats and changes walk this list: interleaved, cluster after cluster.
      const targets = Array.from({ length: perCluster * n }, (_, j) => {
        const m = members[j % n] as Member;
        return { nodeKube: m.raw, pair: m.pairs[Math.floor(j / n)] as Pair, cluster: m.cluster };
      });
      // The changes: cluster after cluster, a different Node each round, so that every cluster gets its share (500
      // changes over 50 clusters: 10 each); each round starts one cluster further, so that each cluster gets Machine
      // edits and Node edits (they alternate).
      const changeTargets = Array.from({ length: shardChanges }, (_, c) => {
        const m = members[(c + Math.floor(c / n)) % n] as Member;
        return { nodeKube: m.raw, pair: m.pairs[Math.floor(c / n) % perCluster] as Pair, cluster: m.cluster };
      });
      // The clusters outside the share: its forwarder must not reach them (it sees only its namespace's Clusters).
      const outside = servers.filter((srv) => !members.some((m) => m.server === srv));
      const outsideBefore = sumStats(outside.map((srv) => srv.stats()));
      const measured = await measureForwarder(shardCtx, {
        run,
        namespace: shard.ns,
        leaseName: `forwarder-${run}-s${i + 1}`,
        mode: 'capi',
        childScript,
        management: raw,
        targets,
        changeTargets,
        realChanges: shardChanges,
      });
      const outsideAfter = sumStats(outside.map((srv) => srv.stats()));
      if (outsideAfter.lists !== outsideBefore.lists || outsideAfter.watches !== outsideBefore.watches || outsideAfter.gets !== outsideBefore.gets) {
        throw new Error(`${label}: its forwarder listed or watched Nodes of clusters outside its share (namespace ${shard.ns})`);
      }
      const forwarder: ForwarderRun = { ...measured, clusters: n, setupMs: round(shard.setupMs, 0) };
      const perClusterChanges = new Map<string, number>();
      for (const t of changeTargets.slice(0, forwarder.realChanges)) perClusterChanges.set(t.cluster, (perClusterChanges.get(t.cluster) ?? 0) + 1);
      const counts = members.map((m) => perClusterChanges.get(m.cluster) ?? 0);
      const standins = sumStats(members.map((m) => m.server.stats()));
      if (standins.unknownRequests > 0) throw new Error(`${label}: the forwarder sent ${standins.unknownRequests} requests the stand-ins do not serve`);
      const l = forwarder.changeLatency;
      ctx.log(`  ${label}: changes: ${l.observed} forwarded of ${forwarder.realChanges} (lost ${l.lost}); write sent → message: p50 ${l.p50Ms} ms, p99 ${l.p99Ms} ms, max ${l.maxMs} ms; stand-ins served ${standins.listPages} list pages, ${standins.watches} watches`);
      perShard.push({ shard: i + 1, clusters: n, forwarder, standins, changesPerCluster: { min: Math.min(...counts), max: Math.max(...counts) } });
    }
    const runs = perShard.map((s) => s.forwarder);
    const largest = {
      peakMiB: Math.max(...runs.map((r) => r.peakMiB)),
      initialSyncMs: Math.max(...runs.map((r) => r.initialSyncMs)),
      p50Ms: Math.max(...runs.map((r) => r.changeLatency.p50Ms)),
      p99Ms: Math.max(...runs.map((r) => r.changeLatency.p99Ms)),
    };
    for (const s of perShard) {
      const f = s.forwarder;
      ctx.log(
        `  shard ${s.shard}/${shardCount}: ${s.clusters} clusters × ${perCluster} Nodes: peak ${f.peakMiB} MiB, initial sync ${f.initialSyncMs} ms, ` +
          `p50 ${f.changeLatency.p50Ms} ms, p99 ${f.changeLatency.p99Ms} ms (${f.changeLatency.observed} of ${f.realChanges} changes, ${f.changeLatency.lost} lost)`,
      );
    }
    ctx.log(`  per forwarder, largest of ${shardCount} shards: peak ${largest.peakMiB} MiB, initial sync ${largest.initialSyncMs} ms, p99 ${largest.p99Ms} ms`);
    return {
      clusters: k,
      nodesPerCluster: perCluster,
      shards: shardCount,
      serversStartMs: round(serversStartMs, 0),
      setupMs: round(setupMs, 0),
      perShard,
      largest,
      standins: sumStats(servers.map((s) => s.stats())),
    };
  } finally {
    if (childScript) await rm(childScript, { force: true });
    for (const c of clients) c.close();
    await Promise.all(servers.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
    for (const ns of namespaces) {
      await raw.request('DELETE', `${MACHINES_PATH}/namespaces/${ns}/clusters`).catch(() => undefined);
      await raw.request('DELETE', `/api/v1/namespaces/${ns}/secrets`).catch(() => undefined);
    }
    await cleanup(raw, run, namespaces);
    raw.close();
  }
}
