import { describe, expect, it } from 'vitest';
import { V1MicroTime } from '@kubernetes/client-node';
import { decodeMembers, encodeMembers, microTime } from '#shared/adapters/kubernetes/lease.ts';

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

describe('Functions: encodeMembers() / decodeMembers()', () => {
  it('round-trips the rota members as `{ id: { until, seen } }` with sorted ids', () => {
    // Prepare
    const members = [
      { id: 'fwd-b', until: new Date('2026-11-25T02:15:00.000Z'), seenAt: new Date('2026-11-25T02:00:05.000Z') },
      { id: 'fwd-a', until: new Date('2026-11-25T02:10:00.000Z'), seenAt: new Date('2026-11-25T02:00:01.000Z') },
    ];

    // Act
    const text = encodeMembers(members);

    // Assess
    expect(text).toBe('{"fwd-a":{"until":"2026-11-25T02:10:00.000Z","seen":"2026-11-25T02:00:01.000Z"},"fwd-b":{"until":"2026-11-25T02:15:00.000Z","seen":"2026-11-25T02:00:05.000Z"}}');
    expect(decodeMembers(text)).toEqual([members[1], members[0]]);
  });

  it.each([
    { text: undefined, why: 'absent' },
    { text: 'not json', why: 'not JSON' },
    { text: '[]', why: 'an array' },
  ])('reads $why as no member', ({ text }) => {
    expect(decodeMembers(text)).toEqual([]);
  });

  it('leaves out entries it cannot read (they are dropped at the next write) and keeps the others', () => {
    const text = JSON.stringify({ ok: { until: '2026-11-25T02:10:00Z', seen: '2026-11-25T02:00:00Z' }, noSeen: { until: '2026-11-25T02:10:00Z' }, badDate: { until: 'soon', seen: '2026-11-25T02:00:00Z' }, nul: null });
    expect(decodeMembers(text).map((m) => m.id)).toEqual(['ok']);
  });
});
