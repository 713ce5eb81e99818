import { describe, expect, it } from 'vitest';
import { fullBucket, takeToken, type BucketState } from '#shared/policy/rate-limit.ts';

const LIMIT = { burst: 3, perSecond: 1 };

/** Takes `n` tokens at the given times; returns each wait. */
function waits(times: readonly number[], start: BucketState = fullBucket(LIMIT, 0)): number[] {
  let state = start;
  return times.map((now) => {
    const r = takeToken(state, now, LIMIT);
    state = r.state;
    return r.waitMs;
  });
}

describe('Function: takeToken', () => {
  it('lets a burst go at once, then one request per second, each waiting request in order', () => {
    expect(waits([0, 0, 0, 0, 0, 0])).toEqual([0, 0, 0, 1000, 2000, 3000]);
  });

  it('refills at the rate, up to the burst', () => {
    // Three at once, then 1.5 s later one token and a half have come back; after a long pause, the burst again.
    expect(waits([0, 0, 0, 1500, 1500, 100_000, 100_000, 100_000, 100_000])).toEqual([0, 0, 0, 0, 500, 0, 0, 0, 1000]);
  });

  it('never lets more than burst + rate × time through a bucket driven as fast as it allows', () => {
    // A client that sends each request when its wait ends: 60 s of it.
    let state = fullBucket(LIMIT, 0);
    let now = 0;
    let sent = 0;
    while (now <= 60_000) {
      const r = takeToken(state, now, LIMIT);
      state = r.state;
      now += r.waitMs;
      if (now <= 60_000) sent++;
    }
    expect(sent).toBeLessThanOrEqual(LIMIT.burst + 60 * LIMIT.perSecond + 1);
    expect(sent).toBeGreaterThanOrEqual(LIMIT.burst + 60 * LIMIT.perSecond - 1);
  });
});
