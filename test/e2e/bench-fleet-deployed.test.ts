/**
 * Smoke run of scenario fleet1000's deployed form (bench/scenarios/fleet-deployed.ts) at tiny size: one shard of the
 * smoke fleet run by the packaged forwarder zip under the Lambda runner, so that the benchmark never rots. It asserts
 * what the run must produce (the shard's own objects announced, every edit's message, the packaged shard count and
 * memory); never a timing.
 */
import { expect, it } from 'vitest';
import { runBench, type BenchResults } from '../../bench/lib/bench.ts';
import { shippedForwarderMemoryMiB } from '../../bench/scenarios/forwarder.ts';
import { describeWithControlPlane, requireControlPlane } from '#test/support/control-plane.ts';

describeWithControlPlane('Benchmarks: fleet1000 in the deployed form, smoke size', () => {
  it('runs the largest shard of the smoke fleet through the packaged forwarder: its objects announced once, no edit lost', async () => {
    // Prepare
    const cp = requireControlPlane();
    const lines: string[] = [];

    // Act
    const results: BenchResults = await runBench({ profile: 'smoke', kubeconfigPath: cp.kubeconfigPath, etcdEndpoint: cp.etcdEndpoint, only: ['fleet1000'], deployed: 'shipped', log: (l) => lines.push(l) });

    // Assess
    expect(results.failures, lines.join('\n')).toEqual({});
    const d = results.scenarios.fleet1000Deployed;
    // The smoke profile's largest fleet: 4 clusters × 2 Nodes on 2 shards; the shard measured holds the most clusters.
    expect(d).toMatchObject({ clusters: 4, nodesPerCluster: 2, shards: 2, memoryMiB: shippedForwarderMemoryMiB(), errors: 0 });
    expect(d?.shardClusters).toBeGreaterThanOrEqual(2);
    // Quiet first list: each of the shard's Nodes (2 per cluster; none in sync yet) is announced, its Machine judged with it.
    expect(d?.initialMessages).toBe(2 * (d?.shardClusters ?? 0));
    expect(d?.toQueue).toMatchObject({ lost: 0, observed: d?.edits });
    expect(d?.peakRssMiB).toBeGreaterThan(0);
    expect(d?.managementRequests.initialSync).toBeGreaterThan(0);
  }, 300_000);
});
