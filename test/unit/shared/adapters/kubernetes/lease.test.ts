import { describe, expect, it } from 'vitest';
import { V1MicroTime } from '@kubernetes/client-node';
import { microTime } from '#shared/adapters/kubernetes/lease.ts';

describe('Function: microTime()', () => {
  it.each([
    { at: '2026-11-23T18:00:00.123Z', want: '2026-11-23T18:00:00.123000Z' },
    { at: '2026-11-23T18:00:00Z', want: '2026-11-23T18:00:00.000000Z' },
    { at: '1999-12-31T23:59:59.999Z', want: '1999-12-31T23:59:59.999000Z' },
  ])('writes $at with six fractional digits, as client-node’s V1MicroTime does', ({ at, want }) => {
    // Act
    const written = microTime(Date.parse(at));

    // Assess
    expect(written).toBe(want);
    expect(written).toBe(new V1MicroTime(Date.parse(at)).toISOString());
  });
});
