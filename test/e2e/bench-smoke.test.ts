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
  it('runs every scenario (all nine on this control plane) and produces every figure of results.json', async () => {
    // Prepare
    const cp = requireControlPlane();
    const lines: string[] = [];

    // Act
    const only = SCENARIOS.filter((s) => s !== 'side-by-side' && s !== 'noexecute');
    const results: BenchResults = await runBench({ profile: 'smoke', kubeconfigPath: cp.kubeconfigPath, etcdEndpoint: cp.etcdEndpoint, only, log: (l) => lines.push(l) });

    // Assess
    expect(results.failures, lines.join('\n')).toEqual({});
    expect(Object.keys(results.scenarios).sort()).toEqual(['apiCost', 'coldStart', 'conflictStorm', 'e2eLatency', 'fleet', 'fleet100', 'forwarder', 'incidentStorm', 'throughput']);
    expect(SCENARIOS).toHaveLength(11);
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
    expect(fleet?.forwarder.initialMessages).toBe(2 * 2 * 5);
    expect(fleet?.e2e.perCluster.map((c) => [c.lost, c.observed > 0])).toEqual([
      [0, true],
      [0, true],
    ]);
    // Scenario 9: 3 stand-in clusters × 3 Nodes sharded over 2 forwarders (1 + 2 clusters), each announcing its share's
    // Nodes and Machines only and forwarding its share of the 6 changes with their latency; the keys take the largest shard's.
    const f100 = results.scenarios.fleet100;
    expect(f100?.perShard.map((s) => [s.clusters, s.forwarder.initialMessages, s.forwarder.changeLatency.observed, s.forwarder.changeLatency.lost])).toEqual([
      [1, 2 * 1 * 3, 2, 0],
      [2, 2 * 2 * 3, 4, 0],
    ]);
    expect(results.forwarderPeakMiB100Clusters).toBe(Math.max(...(f100?.perShard ?? []).map((s) => s.forwarder.peakMiB)));
    expect(f100?.standins.unknownRequests).toBe(0);
    expect(f100?.perShard.map((s) => s.standins.watches >= s.clusters)).toEqual([true, true]);
  }, 300_000);
});
