/**
 * Smoke run of every benchmark scenario at tiny sizes against the run's real control plane, so that the benchmarks
 * never rot. It asserts that each scenario ran and produced every figure under its stable key; never timings.
 */
import { expect, it } from 'vitest';
import { FIGURE_KEYS, NOEXECUTE_KEYS, runBench, SCENARIOS, SIDE_BY_SIDE_DEPLOYED_KEYS, SIDE_BY_SIDE_KEYS, type BenchResults } from '../../bench/lib/bench.ts';
import { describeWithControlPlane, requireControlPlane } from '#test/support/control-plane.ts';

describeWithControlPlane('Benchmarks: smoke run of every scenario', () => {
  // Scenario 10 (side by side with Cluster API) runs a control plane of its own with the Cluster API manager: its smoke
  // run is in the e2e-capi tier (test/e2e-capi/bench-side-by-side.test.ts). The NoExecute scenario runs a control plane of
  // its own with kube-controller-manager: its smoke run is test/e2e/bench-noexecute.test.ts.
  it('runs every scenario (all ten on this control plane) and produces every figure of results.json', async () => {
    // Prepare
    const cp = requireControlPlane();
    const lines: string[] = [];

    // Act
    const only = SCENARIOS.filter((s) => s !== 'side-by-side' && s !== 'noexecute');
    const results: BenchResults = await runBench({ profile: 'smoke', kubeconfigPath: cp.kubeconfigPath, etcdEndpoint: cp.etcdEndpoint, only, log: (l) => lines.push(l) });

    // Assess
    expect(results.failures, lines.join('\n')).toEqual({});
    expect(Object.keys(results.scenarios).sort()).toEqual(['apiCost', 'coldStart', 'conflictStorm', 'e2eLatency', 'fleet', 'fleet100', 'fleet1000', 'forwarder', 'incidentStorm', 'throughput']);
    expect(SCENARIOS).toHaveLength(12);
    // Noise costs nothing, and the marker after it went through (the scenario throws otherwise).
    expect(results.scenarios.incidentStorm).toMatchObject({ noiseMessages: 0, noiseCalls: 0 });
    for (const key of FIGURE_KEYS.filter((k) => !SIDE_BY_SIDE_KEYS.includes(k) && !SIDE_BY_SIDE_DEPLOYED_KEYS.includes(k) && !NOEXECUTE_KEYS.includes(k))) {
      expect(Number.isFinite(results[key]), `${key} = ${results[key]}`).toBe(true);
    }
    expect(results.targets.map((t) => t.figure)).toEqual([...FIGURE_KEYS]);
    expect(results.targets.every((t) => t.measured === results[t.figure])).toBe(true);
    expect(results.versions).toMatchObject({ node: expect.any(String), 'kube-apiserver': expect.stringMatching(/^v1\./), etcd: expect.any(String) });
    expect(results.scenarios.throughput?.runs.every((r) => r.converged === r.n)).toBe(true);
    // The contract floor made its 4 calls per Node (GET Machine ‖ GET Node, merge PATCH Node with its resourceVersion, POST Event), none refused.
    expect(results.scenarios.throughput?.runs.map((r) => r.contractFloorCallsPerNode)).toEqual([4]);
    expect(results.scenarios.e2eLatency?.lost).toBe(0);
    // Scenario 4 ran at each size of the profile; the fleet's edits reached every cluster, none lost.
    expect(results.scenarios.forwarder?.runs.map((r) => r.nodes)).toEqual([3, 6]);
    const fleet = results.scenarios.fleet;
    // Quiet first lists: each Node (none in sync yet) is announced, its Machine judged with it: 2 clusters × 5 Nodes.
    expect(fleet?.forwarder.initialMessages).toBe(2 * 5);
    expect(fleet?.e2e.perCluster.map((c) => [c.lost, c.observed > 0])).toEqual([
      [0, true],
      [0, true],
    ]);
    // Scenario 9: 3 stand-in clusters × 3 Nodes split by the product's shards into 2 (by the hash: the split varies
    // with the run's namespaces), each shard's forwarder announcing its clusters' Nodes only (Machines are judged from their Nodes' side) (the scenario
    // fails if it reaches another shard's stand-in) and forwarding its share of the 6 changes; the keys take the largest shard's.
    const f100 = results.scenarios.fleet100;
    const layout = f100?.layouts[0];
    expect(layout?.shards).toBe(2);
    expect(layout?.perShard.reduce((n, s) => n + s.clusters, 0)).toBe(3);
    const measured = (layout?.perShard ?? []).filter((s) => s.forwarder !== undefined);
    expect(measured.map((s) => [s.forwarder?.initialMessages, s.forwarder?.changeLatency.lost])).toEqual(measured.map((s) => [s.clusters * 3, 0]));
    expect(measured.every((s) => (s.forwarder?.managementRequests.initialSync ?? 0) > 0 && s.standins.watches >= s.clusters)).toBe(true);
    expect(results.forwarderPeakMiB100Clusters).toBe(Math.max(...measured.map((s) => s.forwarder?.peakMiB ?? 0)));
    expect(f100?.standins.unknownRequests).toBe(0);
    // fleet1000 at smoke size: 2 clusters on one shard, then 4 on 2 shards; every cluster in exactly one shard.
    const f1k = results.scenarios.fleet1000;
    expect(f1k?.fleets.map((f) => [f.clusters, f.layouts.map((l) => [l.shards, l.perShard.reduce((n, s) => n + s.clusters, 0)])])).toEqual([
      [2, [[1, 2]]],
      [4, [[2, 4]]],
    ]);
    expect(f1k?.fleets[0]?.layouts[0]?.perShard[0]?.forwarder?.initialMessages).toBe(2 * 2);
  }, 300_000);
});
