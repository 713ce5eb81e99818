/**
 * The rota's rules on their own (shared/policy/forwarder-rota.ts): who counts, when a newcomer joins, and which
 * entries a write keeps. The whole rota over hours of late schedules and kills is simulated in
 * test/unit/functions/watch-forwarder/rota-coverage.test.ts.
 */
import { describe, expect, it } from 'vitest';
import {
  countedMembers,
  isLive,
  shouldJoin,
  withMember,
  withoutMember,
  type RotaMember,
  type RotaPolicy,
} from '#shared/policy/forwarder-rota.ts';

const policy: RotaPolicy = { targetMembers: 2, overlapMs: 150_000, staleAfterMs: 15_000 };
const T = Date.parse('2026-11-25T02:00:00Z');
const at = (s: number): Date => new Date(T + s * 1000);
const member = (id: string, untilS: number, seenS = 0): RotaMember => ({ id, until: at(untilS), seenAt: at(seenS) });

describe('Module: forwarder-rota', () => {
  it('counts a member only while it is live (window not over, seen within staleAfterMs) and has at least overlapMs left', () => {
    // Prepare
    const members = [
      member('plenty', 600), // 600 s left
      member('exactly-overlap', 150), // 150 s left: still counts
      member('ending', 149), // less than the overlap: watches, but no longer counts
      member('stale', 600, -16), // not seen for 16 s: taken for dead
      member('over', 0), // its window has ended
    ];

    // Act
    const counted = countedMembers(members, at(0), policy).map((m) => m.id);
    const live = members.filter((m) => isLive(m, at(0), policy)).map((m) => m.id);

    // Assess
    expect(counted).toEqual(['plenty', 'exactly-overlap']);
    expect(live).toEqual(['plenty', 'exactly-overlap', 'ending']);
  });

  it('lets a newcomer join while fewer than targetMembers others count, never counting itself', () => {
    const joins = (members: RotaMember[]): boolean =>
      shouldJoin(countedMembers(members, at(0), policy, 'new').length, policy);
    expect(joins([])).toBe(true);
    expect(joins([member('a', 600)])).toBe(true);
    expect(joins([member('a', 600), member('b', 149)])).toBe(true);
    expect(joins([member('a', 600), member('b', 300)])).toBe(false);
    // A warm container runs its next window under the same identity: its old entry is not one of the others.
    expect(joins([member('a', 600), member('new', 300)])).toBe(true);
  });

  it('lets a newcomer with less than overlapMs left join all the same, not counting for the next', () => {
    // Prepare
    const others = [member('a', 600)];
    const joins = (members: RotaMember[], self: string): boolean =>
      shouldJoin(countedMembers(members, at(0), policy, self).length, policy);

    // Act
    const shortJoins = joins(others, 'short');
    const recorded = withMember(others, member('short', 149), at(0), policy);
    const nextJoins = joins(recorded, 'next');

    // Assess: the short window covers what it can, and the next newcomer still sees one member that counts
    expect(shortJoins).toBe(true);
    expect(recorded.map((m) => m.id)).toEqual(['a', 'short']);
    expect(nextJoins).toBe(true);
  });

  it('records an entry in place of its earlier one and drops every entry that is no longer live', () => {
    // Prepare
    const members = [member('b', 600), member('a', 100), member('dead', 600, -20), member('over', -1)];

    // Act
    const joined = withMember(members, member('a', 800), at(0), policy);
    const left = withoutMember(joined, 'b', at(0), policy);

    // Assess
    expect(joined).toEqual([member('a', 800), member('b', 600)]);
    expect(left).toEqual([member('a', 800)]);
  });
});
