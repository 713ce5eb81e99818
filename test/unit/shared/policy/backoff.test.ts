import { describe, expect, it } from 'vitest';
import { backoffDelay } from '#shared/policy/backoff.ts';

describe('Function: backoffDelay()', () => {
  const full = { base: 100, max: 5_000, jitter: 'full' } as const;
  const equal = { base: 2, max: 30, jitter: 'equal' } as const;

  it('doubles per attempt from the base, up to the cap (full jitter: the ceiling is the bound)', () => {
    const top = () => 0.999_999;
    expect([1, 2, 3, 4, 7, 8].map((a) => Math.round(backoffDelay(a, full, top)))).toEqual([100, 200, 400, 800, 5_000, 5_000]);
    expect(backoffDelay(3, full, () => 0)).toBe(0);
  });

  it('equal jitter never goes below half the ceiling', () => {
    expect([1, 2, 3, 4, 5, 6].map((a) => backoffDelay(a, equal, () => 0))).toEqual([1, 2, 4, 8, 15, 15]);
    expect(backoffDelay(4, equal, () => 0.5)).toBe(12);
  });

  it("up jitter (client-go's reflector: 0.8 s doubling to 30 s) lies between the ceiling and twice it, and never above the cap", () => {
    const up = { base: 800, max: 30_000, jitter: 'up' } as const;
    expect([1, 2, 3, 4, 5, 6, 7].map((a) => backoffDelay(a, up, () => 0))).toEqual([800, 1_600, 3_200, 6_400, 12_800, 25_600, 30_000]);
    expect([1, 2, 6].map((a) => backoffDelay(a, up, () => 0.5))).toEqual([1_200, 2_400, 30_000]);
  });

  it('treats attempts below 1 as the first, and does not overflow on huge attempts', () => {
    expect(backoffDelay(0, equal, () => 0)).toBe(1);
    expect(backoffDelay(10_000, full, () => 0.5)).toBe(2_500);
  });
});
