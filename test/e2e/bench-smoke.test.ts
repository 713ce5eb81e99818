/**
 * Smoke run of every benchmark scenario at tiny sizes against the run's real control plane, so that the benchmarks
 * never rot. It asserts that each scenario ran and produced every figure under its stable key; never timings.
 */
import { expect, it } from 'vitest';
import { FIGURE_KEYS, runBench, SCENARIOS, type BenchResults } from '../../bench/lib/bench.ts';
import { describeWithControlPlane, requireControlPlane } from '#test/support/control-plane.ts';

describeWithControlPlane('Benchmarks: smoke run of every scenario', () => {
  it('runs every scenario (all seven) and produces every figure of results.json', async () => {
    // Prepare
    const cp = requireControlPlane();
    const lines: string[] = [];

    // Act
    const results: BenchResults = await runBench({ profile: 'smoke', kubeconfigPath: cp.kubeconfigPath, etcdEndpoint: cp.etcdEndpoint, log: (l) => lines.push(l) });

    // Assess
    expect(results.failures, lines.join('\n')).toEqual({});
    expect(Object.keys(results.scenarios).sort()).toEqual(['apiCost', 'coldStart', 'conflictStorm', 'e2eLatency', 'forwarder', 'incidentStorm', 'throughput']);
    expect(SCENARIOS).toHaveLength(7);
    // Noise costs nothing, and the marker after it went through (the scenario throws otherwise).
    expect(results.scenarios.incidentStorm).toMatchObject({ noiseMessages: 0, noiseCalls: 0 });
    for (const key of FIGURE_KEYS) {
      expect(Number.isFinite(results[key]), `${key} = ${results[key]}`).toBe(true);
    }
    expect(results.targets.map((t) => t.figure)).toEqual([...FIGURE_KEYS]);
    expect(results.targets.every((t) => t.measured === results[t.figure])).toBe(true);
    expect(results.versions).toMatchObject({ node: expect.any(String), 'kube-apiserver': expect.stringMatching(/^v1\./), etcd: expect.any(String) });
    expect(results.scenarios.throughput?.runs.every((r) => r.converged === r.n)).toBe(true);
    expect(results.scenarios.e2eLatency?.lost).toBe(0);
  }, 240_000);
});
