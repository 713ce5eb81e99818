import type { Clock } from '#shared/ports/clock.ts';

/** A clock that only moves when the test says so. */
export function manualClock(start = Date.parse('2026-01-01T00:00:00Z')): Clock & { advance(ms: number): void } {
  let now = start;
  return {
    now: () => new Date(now),
    advance: (ms) => {
      now += ms;
    },
  };
}
