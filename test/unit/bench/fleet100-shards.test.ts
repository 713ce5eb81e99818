import { describe, expect, it } from 'vitest';
import { judge } from '../../../bench/lib/bench.ts';
import { shardRanges } from '../../../bench/scenarios/fleet100.ts';

describe('Function: shardRanges()', () => {
  it('splits the clusters into contiguous shares covering each once, their sizes one apart at most', () => {
    // Act
    const ranges = shardRanges(100, 3);

    // Assess
    expect(ranges).toEqual([
      [0, 33],
      [33, 66],
      [66, 100],
    ]);
    expect(shardRanges(100, 4).map(([a, b]) => b - a)).toEqual([25, 25, 25, 25]);
    expect(shardRanges(3, 2)).toEqual([
      [0, 1],
      [1, 3],
    ]);
    expect(shardRanges(7, 1)).toEqual([[0, 7]]);
  });

  it('refuses more shards than clusters, and no shard at all', () => {
    expect(() => shardRanges(3, 4)).toThrow('cannot shard 3 clusters over 4 forwarders');
    expect(() => shardRanges(3, 0)).toThrow('cannot shard 3 clusters over 0 forwarders');
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
    expect(peak?.target).toContain('per forwarder, the largest of 4 shards');
    expect(targets.find((t) => t.figure === 'fleet100E2eP99Ms')).toMatchObject({ measured: 250, met: true });
  });

  it('names no shard count when scenario 9 did not run, and leaves its figures unjudged', () => {
    // Act
    const targets = judge({}, at);

    // Assess
    const peak = targets.find((t) => t.figure === 'forwarderPeakMiB100Clusters');
    expect(peak).toMatchObject({ measured: undefined, met: undefined, target: expect.stringContaining('per forwarder; scenario 9 not run here') });
    expect(targets.filter((t) => t.target.includes('whole fleet') || t.target.includes('shards'))).toEqual([]);
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
