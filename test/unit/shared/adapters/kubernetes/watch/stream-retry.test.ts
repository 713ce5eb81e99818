import { describe, expect, it } from 'vitest';
import { ResourceVersionGoneError } from '#shared/adapters/kubernetes/api-errors.ts';
import { StreamRetry, type AttemptEnd } from '#shared/adapters/kubernetes/watch/stream-retry.ts';
import { TransientError } from '#shared/errors.ts';
import { manualClock } from '#test/support/manual-clock.ts';

const error: AttemptEnd = { kind: 'failed', error: new TransientError('listing /api/v1/nodes', 'HTTP 503'), reason: 'listing /api/v1/nodes failed: HTTP 503' };
const gone: AttemptEnd = { kind: 'failed', error: new ResourceVersionGoneError('watching /api/v1/nodes', '5'), reason: 'gone' };
const shortWatch: AttemptEnd = { kind: 'watch-ended', why: 'closed', openMs: 3, events: 0 };
const normalEnd: AttemptEnd = { kind: 'watch-ended', why: 'closed', openMs: 300_000, events: 12 };

function policy(random = () => 0): { retry: StreamRetry; clock: ReturnType<typeof manualClock> } {
  const clock = manualClock();
  return { retry: new StreamRetry({}, random, clock.now), clock };
}

describe('Class: StreamRetry', () => {
  it('backs off from 0.8 s, doubling, to at most 30 s (lowest jitter, then highest)', () => {
    for (const [random, want] of [
      [() => 0, [800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000, 30_000]],
      [() => 0.999_999, [1_599, 3_199, 6_399, 12_799, 25_599, 30_000, 30_000, 30_000]],
    ] as const) {
      // Prepare
      const { retry, clock } = policy(random);

      // Act
      const delays = Array.from({ length: 8 }, () => {
        const d = retry.ended(error).delayMs;
        clock.advance(d);
        return d;
      });

      // Assess
      expect(delays).toEqual(want);
    }
  });

  it('counts a watch the server ends within a second with no event as a failure ("very short watch")', () => {
    // Prepare
    const { retry } = policy();

    // Act
    const decision = retry.ended(shortWatch);

    // Assess
    expect(decision).toEqual({ delayMs: 800, failure: { reason: 'very short watch: the server ended it after 3 ms with no event', count: 1 } });
  });

  it('reopens a watch that ended normally at once, but never sooner than a second after it was opened', () => {
    // Prepare
    const { retry } = policy();

    // Act
    const afterLong = retry.ended(normalEnd);
    const afterQuickWithEvents = retry.ended({ kind: 'watch-ended', why: 'closed', openMs: 200, events: 1 });
    const afterIdle = retry.ended({ kind: 'watch-ended', why: 'idle', openMs: 90_000, events: 0 });

    // Assess
    expect([afterLong, afterQuickWithEvents, afterIdle]).toEqual([{ delayMs: 0 }, { delayMs: 800 }, { delayMs: 0 }]);
  });

  it('reports failing at the first error, once, and recovered when the stream delivers', () => {
    // Prepare
    const { retry, clock } = policy();

    // Act
    const first = retry.ended(error);
    clock.advance(first.delayMs);
    const second = retry.ended(error);
    clock.advance(5_000);
    const recovered = retry.delivered();
    const again = retry.delivered();

    // Assess
    expect(first.failing).toEqual({ reason: 'listing /api/v1/nodes failed: HTTP 503', since: new Date('2026-01-01T00:00:00Z') });
    expect(second.failing).toBeUndefined();
    expect(recovered).toEqual({ since: new Date('2026-01-01T00:00:00Z'), at: new Date('2026-01-01T00:00:05.800Z') });
    expect(again).toBeUndefined();
  });

  it('reports a 410 or a very short watch as failing only when it repeats with no delivery in between', () => {
    // Prepare
    const { retry } = policy();

    // Act
    const once = retry.ended(gone);
    retry.delivered();
    const afterDelivery = retry.ended(shortWatch);
    const repeated = retry.ended(gone);

    // Assess
    expect(once.failing).toBeUndefined();
    expect(afterDelivery.failing).toBeUndefined();
    expect(repeated.failing?.reason).toBe('gone');
  });

  it('makes a failed attempt wait at least a second per request it made, from its end, beyond the 30 s cap if need be', () => {
    // Prepare
    const { retry } = policy();

    // Act: a list cut after 200 pages; then a list and a watch.
    const endless = retry.ended({ ...error, requests: 200 });
    const pair = new StreamRetry({}, () => 0).ended({ ...gone, requests: 2 });

    // Assess
    expect(endless.delayMs).toBe(200_000);
    expect(pair.delayMs).toBe(2_000);
  });

  it('leaves room under a request a second for the other callers of a server whose list pages never end', () => {
    // Prepare: each attempt as the Node stream makes it against such a server: its request bucket's 30 pages at once,
    // then one a second to the 60-page cap (30 s), and the wait the policy gives.
    const { retry, clock } = policy();
    const start = clock.now().getTime();
    let requests = 0;

    // Act: ten simulated minutes.
    while (clock.now().getTime() - start < 600_000) {
      requests += 60;
      clock.advance(30_000);
      clock.advance(retry.ended({ ...error, requests: 60 }).delayMs);
    }

    // Assess: 60 requests per 90 s, two thirds of a request a second over the run.
    expect(requests / ((clock.now().getTime() - start) / 1000)).toBeLessThanOrEqual(2 / 3);
  });

  it('starts the count over only when the stream delivered and its last failure is 2 minutes past', () => {
    // Prepare
    const { retry, clock } = policy();
    for (let i = 0; i < 6; i++) retry.ended(error);

    // Act: 3 minutes without delivery, then a failure: still backing off.
    clock.advance(180_000);
    const undelivered = retry.ended(error).delayMs;
    // Delivered, but the next failure within 2 minutes: still backing off.
    retry.delivered();
    clock.advance(60_000);
    const soon = retry.ended(error).delayMs;
    // Delivered, and 2 minutes healthy: from the start.
    retry.delivered();
    clock.advance(120_000);
    const healthy = retry.ended(error).delayMs;

    // Assess
    expect(undelivered).toBe(30_000);
    expect(soon).toBe(30_000);
    expect(healthy).toBe(800);
  });

  // The three loops the review measured (thousands of requests a second), driven through the policy as the session
  // drives it: each attempt's requests, then its wait. After the first 5 s, at most one request a second.
  const loops: ReadonlyArray<{ name: string; requests: number; end: AttemptEnd }> = [
    { name: 'every watch answered 410 (a list and a watch per attempt)', requests: 2, end: gone },
    { name: 'every list answered 410', requests: 1, end: gone },
    { name: 'every watch answered 200 and ended at once', requests: 1, end: shortWatch },
  ];
  it.each(loops)('$name: at most one request a second after the first 5 s', ({ requests, end }) => {
    for (const random of [() => 0, () => 0.5, Math.random]) {
      // Prepare
      const { retry, clock } = policy(random);
      const start = clock.now().getTime();
      const at: number[] = [];

      // Act: ten simulated minutes.
      while (clock.now().getTime() - start < 600_000) {
        for (let i = 0; i < requests; i++) at.push(clock.now().getTime() - start);
        clock.advance(retry.ended(end.kind === 'failed' ? { ...end, requests } : end).delayMs);
      }

      // Assess: in every second after the first five, and in every 10 s.
      for (let s = 5_000; s < 600_000; s += 1_000) expect(at.filter((t) => t >= s && t < s + 1_000).length).toBeLessThanOrEqual(requests);
      for (let s = 5_000; s < 600_000; s += 10_000) expect(at.filter((t) => t >= s && t < s + 10_000).length).toBeLessThanOrEqual(10);
      expect(at.filter((t) => t >= 60_000).length).toBeLessThanOrEqual((540 / 30) * requests + requests);
    }
  });
});
