/** The status display's per-cluster backoff (local/cluster-backoff.ts), on a manual clock. */
import { describe, expect, it } from 'vitest';
import { ClusterBackoff, describeHeldBack, STATUS_BACKOFF_POLICY } from '#local/cluster-backoff.ts';
import { manualClock } from '#test/support/manual-clock.ts';

/** No jitter on top of the ceiling (`up` jitter with random 0): the delays are exactly 1, 2, 4 … s. */
const noJitter = (): number => 0;

describe('Class: ClusterBackoff', () => {
  it('lets a cluster that never failed be called', () => {
    // Prepare
    const backoff = new ClusterBackoff(manualClock(), STATUS_BACKOFF_POLICY, noJitter);

    // Act + Assess
    expect(backoff.heldBack('ns/c1')).toBeUndefined();
  });

  it('holds a failed cluster back for 1 s, with its last failure, and lets it be called once the second has passed', () => {
    // Prepare
    const clock = manualClock();
    const backoff = new ClusterBackoff(clock, STATUS_BACKOFF_POLICY, noJitter);

    // Act
    backoff.failed('ns/c1', 'HTTP 503');
    const atOnce = backoff.heldBack('ns/c1');
    clock.advance(999);
    const justBefore = backoff.heldBack('ns/c1');
    clock.advance(1);
    const after = backoff.heldBack('ns/c1');

    // Assess
    expect(atOnce).toEqual({ lastFailure: 'HTTP 503', failures: 1, retryInMs: 1_000 });
    expect(justBefore).toEqual({ lastFailure: 'HTTP 503', failures: 1, retryInMs: 1 });
    expect(after).toBeUndefined();
  });

  it('grows the delay on each further failure, up to the cap', () => {
    // Prepare
    const clock = manualClock();
    const backoff = new ClusterBackoff(clock, STATUS_BACKOFF_POLICY, noJitter);
    const delays: number[] = [];

    // Act: fail each time the cluster may be called again
    for (let i = 0; i < 7; i++) {
      backoff.failed('ns/c1', `failure ${i + 1}`);
      const held = backoff.heldBack('ns/c1');
      delays.push(held?.retryInMs ?? 0);
      clock.advance(held?.retryInMs ?? 0);
    }

    // Assess
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000]);
  });

  it('never waits less than 1 s, whatever the jitter', () => {
    // Prepare
    const backoff = new ClusterBackoff(manualClock(), STATUS_BACKOFF_POLICY, () => 0.999);

    // Act
    backoff.failed('ns/c1', 'timeout');

    // Assess: `up` jitter lies between the ceiling and twice it
    const held = backoff.heldBack('ns/c1');
    expect(held?.retryInMs).toBeGreaterThanOrEqual(1_000);
    expect(held?.retryInMs).toBeLessThan(2_000);
  });

  it('starts over after a success', () => {
    // Prepare: two failures (the next delay would be 4 s)
    const clock = manualClock();
    const backoff = new ClusterBackoff(clock, STATUS_BACKOFF_POLICY, noJitter);
    backoff.failed('ns/c1', 'HTTP 503');
    clock.advance(1_000);
    backoff.failed('ns/c1', 'HTTP 503');
    clock.advance(2_000);

    // Act
    backoff.succeeded('ns/c1');
    const afterSuccess = backoff.heldBack('ns/c1');
    backoff.failed('ns/c1', 'HTTP 500');

    // Assess
    expect(afterSuccess).toBeUndefined();
    expect(backoff.heldBack('ns/c1')).toEqual({ lastFailure: 'HTTP 500', failures: 1, retryInMs: 1_000 });
  });

  it('holds back only the cluster that failed', () => {
    // Prepare
    const backoff = new ClusterBackoff(manualClock(), STATUS_BACKOFF_POLICY, noJitter);

    // Act
    backoff.failed('ns/flapping', 'HTTP 503');

    // Assess
    expect(backoff.heldBack('ns/flapping')).toBeDefined();
    expect(backoff.heldBack('ns/healthy')).toBeUndefined();
  });
});

describe('Function: describeHeldBack()', () => {
  it.each([
    { retryInMs: 1_000, want: 'HTTP 503 (unreachable, retry in 1 s)' },
    { retryInMs: 1_500, want: 'HTTP 503 (unreachable, retry in 2 s)' },
    { retryInMs: 1, want: 'HTTP 503 (unreachable, retry in 1 s)' },
  ])('shows the last failure and the wait rounded up: $retryInMs ms', ({ retryInMs, want }) => {
    expect(describeHeldBack({ lastFailure: 'HTTP 503', failures: 1, retryInMs })).toBe(want);
  });
});
