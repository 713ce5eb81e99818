/**
 * Scenario 9, a hundred workload clusters (issue 29, item 3): the watch-forwarder alone (as in scenario 4, `capi`
 * mode) over K workload clusters of N Nodes each (full: 100 × 200 = 20 000 Nodes) and their K × N Machines.
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
 * After the initial sync (every Node and Machine announced once), the window of scenario 4: heartbeats at the
 * profile's rate over every Node of every cluster in turn, and real changes spread over the clusters (foreign Node
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

export interface Fleet100Result {
  readonly clusters: number;
  readonly nodesPerCluster: number;
  /** Starting the K stand-in API servers. */
  readonly serversStartMs: number;
  /** Creating the Clusters, Secrets, Machines (real API server) and Nodes (stand-ins). */
  readonly setupMs: number;
  readonly forwarder: ForwarderRun;
  /** What the stand-ins served, summed over the fleet (list pages, watches, 410s, requests they do not serve). */
  readonly standins: StandinStats;
  /** Real changes per cluster in the window: min and max (the spread). */
  readonly changesPerCluster: { readonly min: number; readonly max: number };
}

export async function runFleet100(ctx: BenchContext): Promise<Fleet100Result> {
  const { fleet100Clusters: k, fleet100NodesPerCluster: perCluster, fleet100Changes: changes } = ctx.sizes;
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 64);
  const run = runId('f100');
  const ns = run;
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

    const setupStart = performance.now();
    await createNamespace(raw, ns, run);
    const members: Array<{ cluster: string; raw: RawKube; pairs: Pair[] }> = [];
    for (const server of servers) {
      const cluster = server.name;
      const kc = new KubeConfig();
      kc.loadFromString(server.kubeconfigYaml);
      const client = await RawKube.from(kc, 8);
      clients.push(client);
      members.push({ cluster, raw: client, pairs: [] });
      await registerWorkloadCluster(raw, ns, run, cluster, server.server, server.kubeconfigYaml);
    }
    // A few clusters at a time, each with a few requests in flight: 48 requests in flight to the real API server at most.
    const parallelClusters = Math.min(k, 8);
    for (let i = 0; i < members.length; i += parallelClusters) {
      await Promise.all(
        members.slice(i, i + parallelClusters).map(async (m) => {
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
      if ((i / parallelClusters) % 4 === 3) ctx.log(`  … ${Math.min(k, i + parallelClusters)} of ${k} clusters populated`);
    }
    const setupMs = since(setupStart);
    ctx.log(`  ${k} Clusters with kubeconfig Secrets, ${k * perCluster} Machines (management API server) + ${k} × ${perCluster} Nodes (stand-ins, kubelet-like status) in ${(setupMs / 1000).toFixed(1)} s`);

    childScript = await bundleChild();
    // Heartbeats and changes walk this list: interleaved, cluster after cluster.
    const targets = Array.from({ length: perCluster * k }, (_, j) => {
      const m = members[j % k] as (typeof members)[number];
      return { nodeKube: m.raw, pair: m.pairs[Math.floor(j / k)] as Pair, cluster: m.cluster };
    });
    // The changes: cluster after cluster, a different Node each round, so that every cluster gets its share (1 000
    // changes over 100 clusters: 10 each); each round starts one cluster further, so that each cluster gets Machine
    // edits and Node edits (they alternate).
    const changeTargets = Array.from({ length: changes }, (_, c) => {
      const m = members[(c + Math.floor(c / k)) % k] as (typeof members)[number];
      return { nodeKube: m.raw, pair: m.pairs[Math.floor(c / k) % perCluster] as Pair, cluster: m.cluster };
    });
    const forwarder = { ...(await measureForwarder(ctx, { run, namespace: ns, leaseName: `forwarder-${run}`, mode: 'capi', childScript, management: raw, targets, changeTargets, realChanges: changes })), clusters: k, setupMs: round(setupMs, 0) };
    const perClusterChanges = new Map<string, number>();
    for (const t of changeTargets.slice(0, forwarder.realChanges)) perClusterChanges.set(t.cluster, (perClusterChanges.get(t.cluster) ?? 0) + 1);
    const counts = names.map((n) => perClusterChanges.get(n) ?? 0);
    const standins = servers.map((s) => s.stats()).reduce<StandinStats>(
      (a, b) => ({ lists: a.lists + b.lists, listPages: a.listPages + b.listPages, watches: a.watches + b.watches, writes: a.writes + b.writes, gets: a.gets + b.gets, unknownRequests: a.unknownRequests + b.unknownRequests, expired: a.expired + b.expired }),
      { lists: 0, listPages: 0, watches: 0, writes: 0, gets: 0, unknownRequests: 0, expired: 0 },
    );
    if (standins.unknownRequests > 0) throw new Error(`the forwarder sent ${standins.unknownRequests} requests the stand-ins do not serve`);
    const l = forwarder.changeLatency;
    ctx.log(`  changes: ${l.observed} forwarded of ${forwarder.realChanges} (lost ${l.lost}); write sent → message: p50 ${l.p50Ms} ms, p99 ${l.p99Ms} ms, max ${l.maxMs} ms; stand-ins served ${standins.listPages} list pages, ${standins.watches} watches`);
    return { clusters: k, nodesPerCluster: perCluster, serversStartMs: round(serversStartMs, 0), setupMs: round(setupMs, 0), forwarder, standins, changesPerCluster: { min: Math.min(...counts), max: Math.max(...counts) } };
  } finally {
    if (childScript) await rm(childScript, { force: true });
    for (const c of clients) c.close();
    await Promise.all(servers.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
    await raw.request('DELETE', `${MACHINES_PATH}/namespaces/${ns}/clusters`).catch(() => undefined);
    await raw.request('DELETE', `/api/v1/namespaces/${ns}/secrets`).catch(() => undefined);
    await cleanup(raw, run, [ns]);
    raw.close();
  }
}
