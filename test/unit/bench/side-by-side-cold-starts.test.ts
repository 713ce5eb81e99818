import { describe, expect, it } from 'vitest';
import { coldStartsOfJoin } from '../../../bench/scenarios/side-by-side.ts';

describe('Function: coldStartsOfJoin()', () => {
  it("splits a join's cold starts at its first Node's appearance, and leaves out those of earlier steps and after its last Node", () => {
    // Prepare: the step starts at 1 000; Nodes appear from 11 000, the last done at 12 500.
    const nodes = [
      { appearedAt: 11_000, readyAt: 11_800 },
      { appearedAt: 11_400, readyAt: 12_500 },
    ];
    const starts = [500, 1_000, 4_000, 10_999, 11_000, 12_500, 12_501];

    // Act
    const out = coldStartsOfJoin(starts, 1_000, nodes);

    // Assess
    expect(out).toEqual({ productColdStarts: { beforeFirstNode: 3, whileJoining: 2 } });
    expect(coldStartsOfJoin(undefined, 1_000, nodes)).toEqual({});
  });
});
