import { describe, expect, it } from 'vitest';
import { judge } from '../../../bench/lib/bench.ts';
import { changePlan, largestOf, shardMembers, type Fleet100Shard } from '../../../bench/scenarios/fleet100.ts';
import type { ForwarderRun } from '../../../bench/scenarios/forwarder.ts';
import { shardOf } from '#shared/policy/shards.ts';

describe('Function: shardMembers()', () => {
  it("puts every cluster in exactly one shard, the one the product's shardOf names", () => {
    // Prepare
    const keys = Array.from({ length: 1000 }, (_, i) => `ns-${i % 2}/wc-${i + 1}`);

    // Act
    const groups = shardMembers(keys, 8);

    // Assess
    expect(groups).toHaveLength(8);
    expect(groups.flat().sort((a, b) => a - b)).toEqual(keys.map((_, i) => i));
    groups.forEach((g, shard) => expect(g.every((i) => shardOf(keys[i] as string, 8) === shard)).toBe(true));
    expect(shardMembers(keys, 1)).toEqual([keys.map((_, i) => i)]);
  });

  it('refuses a shard count below one', () => {
    expect(() => shardMembers(['a/b'], 0)).toThrow('cannot split a fleet into 0 shards');
  });
});

describe('Function: changePlan()', () => {
  it('spreads the changes over every cluster, their counts one apart at most, on different Nodes of each', () => {
    // Act
    const plan = changePlan(125, 20, 1000);

    // Assess
    const perCluster = new Map<number, number>();
    for (const [c] of plan) perCluster.set(c, (perCluster.get(c) ?? 0) + 1);
    expect([...perCluster.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 125 }, (_, i) => i));
    expect(new Set(perCluster.values())).toEqual(new Set([8]));
    expect(new Set(plan.map(([c, n]) => `${c}/${n}`)).size).toBe(1000);
    const uneven = changePlan(3, 2, 7).map(([c]) => c);
    const counts = [0, 1, 2].map((c) => uneven.filter((x) => x === c).length);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
  });

  it('plans nothing for an empty shard', () => {
    expect(changePlan(0, 20, 5)).toEqual([]);
  });
});

describe('Function: largestOf()', () => {
  const run = (peakMiB: number, p99Ms: number, syncPerSec: number, windowPerSec: number): ForwarderRun =>
    ({ peakMiB, initialSyncMs: peakMiB * 10, changeLatency: { observed: 1, lost: 0, p50Ms: p99Ms / 2, p90Ms: p99Ms, p99Ms, maxMs: p99Ms + 1 }, managementRequests: { initialSync: 1, window: 1, initialSyncPerSec: syncPerSec, windowPerSec } }) as unknown as ForwarderRun;
  const shard = (forwarder?: ForwarderRun): Fleet100Shard => ({ shard: 0, clusters: forwarder ? 1 : 0, ...(forwarder ? { forwarder } : {}), standins: { lists: 0, listPages: 0, watches: 0, writes: 0, gets: 0, unknownRequests: 0, expired: 0 }, changesPerCluster: { min: 0, max: 0 } });

  it('takes the largest of each figure over the measured shards, skipping empty ones', () => {
    // Act
    const largest = largestOf([shard(run(200, 90, 30, 2)), shard(), shard(run(180, 120, 12, 5))]);

    // Assess
    expect(largest).toEqual({ peakMiB: 200, initialSyncMs: 2000, p50Ms: 60, p99Ms: 120, maxMs: 121, managementReqPerSec: 30 });
  });

  it('is NaN when no shard was measured', () => {
    expect(largestOf([shard()]).peakMiB).toBeNaN();
  });
});

describe('Function: judge(), scenario 9', () => {
  const at = { throughputAtN: undefined, e2eRate: undefined, forwarderObjects: undefined, forwarder20kObjects: undefined, fleet: undefined };

  it('judges the peak per forwarder at the fleet size, naming the shards', () => {
    // Act
    const targets = judge({ forwarderPeakMiB100Clusters: 142.3, fleet100E2eP99Ms: 250 }, { ...at, fleet100: { clusters: 100, objects: 20000, shards: 4 } });

    // Assess
    const peak = targets.find((t) => t.figure === 'forwarderPeakMiB100Clusters');
    expect(peak).toMatchObject({ measured: 142.3, met: true });
    expect(peak?.target).toContain('per forwarder, the largest of 4 product shards');
    expect(targets.find((t) => t.figure === 'fleet100E2eP99Ms')).toMatchObject({ measured: 250, met: true });
  });

  it('names no shard count when scenario 9 did not run, and leaves its figures unjudged', () => {
    // Act
    const targets = judge({}, at);

    // Assess
    const peak = targets.find((t) => t.figure === 'forwarderPeakMiB100Clusters');
    expect(peak).toMatchObject({ measured: undefined, met: undefined, target: expect.stringContaining('per forwarder; scenario 9 not run here') });
    expect(targets.filter((t) => t.target.includes('whole fleet') || t.target.includes(' shards'))).toEqual([]);
  });

  it('says one forwarder over the whole fleet when unsharded, and does not judge a smaller fleet', () => {
    // Act
    const whole = judge({ forwarderPeakMiB100Clusters: 236.8 }, { ...at, fleet100: { clusters: 100, objects: 20000, shards: 1 } });
    const small = judge({ forwarderPeakMiB100Clusters: 104.4 }, { ...at, fleet100: { clusters: 3, objects: 9, shards: 2 } });

    // Assess
    expect(whole.find((t) => t.figure === 'forwarderPeakMiB100Clusters')).toMatchObject({ measured: 236.8, met: false, target: expect.stringContaining('one forwarder over the whole fleet') });
    expect(small.find((t) => t.figure === 'forwarderPeakMiB100Clusters')).toMatchObject({ measured: 104.4, met: undefined });
  });
});

describe('Function: judge(), scenario fleet1000', () => {
  const at = { throughputAtN: undefined, e2eRate: undefined, forwarderObjects: undefined, forwarder20kObjects: undefined, fleet: undefined };

  it('judges the peak against the shipped memory and p99 against 1 s at 1 000 clusters × 20 Nodes only', () => {
    // Act
    const full = judge({ fleet1000PeakMiB: 300, fleet1000E2eP99Ms: 1200, fleet1000ManagementReqPerSec: 40 }, { ...at, fleet1000: { clusters: 1000, nodesPerCluster: 20, shards: 4, memoryMiB: 512 } });
    const small = judge({ fleet1000PeakMiB: 600 }, { ...at, fleet1000: { clusters: 4, nodesPerCluster: 2, shards: 2, memoryMiB: 512 } });

    // Assess
    expect(full.find((t) => t.figure === 'fleet1000PeakMiB')).toMatchObject({ measured: 300, met: true, target: expect.stringContaining('<= 512 MiB') });
    expect(full.find((t) => t.figure === 'fleet1000E2eP99Ms')).toMatchObject({ measured: 1200, met: false, target: expect.stringContaining('largest of 4 shards of 1000 clusters') });
    expect(full.find((t) => t.figure === 'fleet1000ManagementReqPerSec')).toMatchObject({ measured: 40, met: true });
    expect(small.find((t) => t.figure === 'fleet1000PeakMiB')).toMatchObject({ measured: 600, met: undefined });
  });
});

describe('Function: fleetGrowthTable()', () => {
  it('gives one row per shard of every layout of every fleet, an empty shard as a row without figures', async () => {
    // Prepare
    const { fleetGrowthTable } = await import('../../../bench/lib/report.ts');
    const forwarder = {
      nodes: 40,
      machines: 40,
      peakMiB: 120.5,
      initialSyncMs: 900,
      initialMessages: 80,
      changeLatency: { observed: 4, lost: 0, p50Ms: 5, p90Ms: 8, p99Ms: 9.5, maxMs: 10 },
      managementRequests: { initialSync: 30, window: 2, initialSyncPerSec: 33.3, windowPerSec: 0.8 },
    } as unknown as ForwarderRun;
    const stats = { lists: 0, listPages: 0, watches: 0, writes: 0, gets: 0, unknownRequests: 0, expired: 0 };
    const fleet = {
      clusters: 2,
      nodesPerCluster: 20,
      namespaces: 2,
      shippedMemoryMiB: 512,
      serversStartMs: 1,
      setupMs: 1,
      standins: stats,
      layouts: [{ shards: 2, largest: largestOf([]), perShard: [{ shard: 0, clusters: 2, forwarder, headroomMiB: 391.5, standins: stats, changesPerCluster: { min: 2, max: 2 } }, { shard: 1, clusters: 0, standins: stats, changesPerCluster: { min: 0, max: 0 } }] }],
    };

    // Act
    const rows = fleetGrowthTable([fleet]).split('\n').slice(2);

    // Assess
    expect(rows).toEqual([
      '| 2 × 20 | 2 | 0 | 2 | 40 + 40 | **120.5 MiB** | 391.5 MiB of 512 | 5 / **9.5** / 10 ms | 4 (0) | 30 (33.3/s) / 2 (0.8/s) | 900 ms (80 msgs) |',
      '| 2 × 20 | 2 | 1 | 0 | - | - | - | - | - | - | - |',
    ]);
  });
});
