/**
 * The coverage argument of the deployed form (functions/watch-forwarder/README.md, "Deployed form"), checked by
 * simulation on a manual clock: twelve hours of scheduled invocations at the template's settings (rate(1 minute),
 * timeout 900 s, window 885 s, 2 members, overlap 150 s, stale after the 15 s lease duration), each one deciding with
 * the rota's own rules (shared/policy/forwarder-rota.ts) on the member list as recorded, while schedules fire anywhere
 * in their minute (adversarially late, early, and alternating) and members are killed in the middle of their windows.
 * Asserted every simulated second: someone watches always; two watch except within one replacement after a kill;
 * never more invocations at once than the reserved concurrency.
 */
import { describe, expect, it } from 'vitest';
import {
  countedMembers,
  shouldJoin,
  withMember,
  withoutMember,
  type RotaMember,
  type RotaPolicy,
} from '#shared/policy/forwarder-rota.ts';

const INTERVAL = 60_000;
const TIMEOUT = 900_000;
const WINDOW = 885_000;
const RESERVE = 15_000;
const defaultPolicy: RotaPolicy = { targetMembers: 2, overlapMs: 150_000, staleAfterMs: 15_000 };
const RESERVED_CONCURRENCY = 5;
/** Cold start and credentials before a run decides; then the list at the checkpoint before it watches. */
const INIT = 3_000;
const LIST = 20_000;
const HEARTBEAT = 5_000;

interface Run {
  readonly firedAt: number;
  readonly endsAt: number;
  readonly member?: { readonly id: string; readonly watchesFrom: number; readonly until: number; killedAt?: number; lastBeat: number };
}

/** A small deterministic PRNG (mulberry32), so every run of the test sees the same schedule. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** When in its minute invocation k fires: stretches of always-late, always-early, alternating and random. */
function lateness(k: number, random: () => number): number {
  switch (Math.floor(k / 37) % 4) {
    case 0:
      return 59_900;
    case 1:
      return 0;
    case 2:
      return k % 2 === 0 ? 59_900 : 0;
    default:
      return Math.floor(random() * 60_000);
  }
}

function simulate(hours: number, killEveryMs: number, seed: number, policy: RotaPolicy = defaultPolicy) {
  const random = prng(seed);
  const runs: Run[] = [];
  let recorded: RotaMember[] = [];
  const kills: number[] = [];
  let nextKill = killEveryMs;
  let fired = 0;
  const fireTimes: number[] = [];
  /** When invocation k fires (drawn once). */
  const firedAt = (k: number): number => (fireTimes[k] ??= k * INTERVAL + lateness(k, random));
  const stats = { minWatching: Infinity, minWatchingOutsideKills: Infinity, maxConcurrent: 0, memberMs: 0, runs: 0, joins: 0 };
  const end = hours * 3_600_000;
  for (let t = 0; t < end; t += 1_000) {
    // Scheduled invocations decide INIT after they fire (the rota's rule on the list as recorded then).
    while (firedAt(fired) + INIT <= t) {
      const fireTime = firedAt(fired);
      const decidesAt = fireTime + INIT;
      const id = `run-${fired++}`;
      stats.runs++;
      const counted = countedMembers(recorded, new Date(decidesAt), policy, id).length;
      if (shouldJoin(counted, policy)) {
        const until = decidesAt + Math.min(WINDOW, fireTime + TIMEOUT - decidesAt - RESERVE);
        recorded = withMember(recorded, { id, until: new Date(until), seenAt: new Date(decidesAt) }, new Date(decidesAt), policy);
        runs.push({ firedAt: fireTime, endsAt: until + 1_000, member: { id, watchesFrom: decidesAt + LIST, until, lastBeat: decidesAt } });
        stats.joins++;
      } else {
        runs.push({ firedAt: fireTime, endsAt: decidesAt + 200 });
      }
    }
    const live = runs.filter((r) => r.firedAt <= t && t < r.endsAt && r.member?.killedAt === undefined);
    // Members record themselves every HEARTBEAT and leave at the end of their window.
    for (const r of live) {
      const m = r.member;
      if (!m) continue;
      if (t >= m.until) recorded = withoutMember(recorded, m.id, new Date(t), policy);
      else if (t - m.lastBeat >= HEARTBEAT) {
        m.lastBeat = t;
        recorded = withMember(recorded, { id: m.id, until: new Date(m.until), seenAt: new Date(t) }, new Date(t), policy);
      }
    }
    // A container killed in the middle of its window: the member with the most time left (the worst one to lose).
    if (t >= nextKill) {
      const victim = live.filter((r) => r.member && r.member.watchesFrom <= t && t < r.member.until).sort((a, b) => (b.member?.until ?? 0) - (a.member?.until ?? 0))[0];
      if (victim?.member) {
        victim.member.killedAt = t;
        kills.push(t);
      }
      nextKill += killEveryMs;
    }
    const watching = runs.filter((r) => r.member && r.member.killedAt === undefined && r.member.watchesFrom <= t && t < r.member.until).length;
    const starting = firedAt(fired) <= t ? 1 : 0; // fired, still starting, not decided yet
    const concurrent = starting + runs.filter((r) => r.firedAt <= t && t < Math.min(r.endsAt, r.member?.killedAt ?? Infinity)).length;
    stats.memberMs += runs.filter((r) => r.member && r.firedAt <= t && t < Math.min(r.endsAt, r.member.killedAt ?? Infinity)).length * 1_000;
    stats.maxConcurrent = Math.max(stats.maxConcurrent, concurrent);
    if (t < 3 * INTERVAL + INIT + LIST) continue; // the very first start: the first two members are still coming up
    stats.minWatching = Math.min(stats.minWatching, watching);
    // After a kill: the entry goes stale, the next run may come two intervals later, then starts and lists.
    const recovering = kills.some((k) => t >= k && t < k + policy.staleAfterMs + HEARTBEAT + 2 * INTERVAL + INIT + LIST);
    if (!recovering) stats.minWatchingOutsideKills = Math.min(stats.minWatchingOutsideKills, watching);
  }
  return { ...stats, kills: kills.length, averageConcurrentMembers: stats.memberMs / end };
}

describe('The deployed rota (simulated on a manual clock)', () => {
  it('keeps two members watching through 12 hours of late, early and alternating schedules, one always, at most 5 runs at once', () => {
    // Act
    const result = simulate(12, 17 * 60_000, 26);

    // Assess
    expect(result.kills).toBeGreaterThan(40);
    expect(result.minWatching).toBeGreaterThanOrEqual(1);
    expect(result.minWatchingOutsideKills).toBeGreaterThanOrEqual(2);
    expect(result.maxConcurrent).toBeLessThanOrEqual(RESERVED_CONCURRENCY);
    // The cost: about 2.4 members at a time (README, "Deployed form"), not one per minute's run.
    expect(result.averageConcurrentMembers).toBeGreaterThan(2);
    expect(result.averageConcurrentMembers).toBeLessThan(2.6);
    expect(result.joins).toBeLessThan(result.runs / 4);
  });

  it('without kills, two members watch at every moment after the first start', () => {
    const result = simulate(6, Infinity, 7);
    expect(result.minWatching).toBeGreaterThanOrEqual(2);
    expect(result.maxConcurrent).toBeLessThanOrEqual(RESERVED_CONCURRENCY);
  });

  it('with an overlap shorter than two schedule intervals, late schedules leave moments with a single watcher (the rule is needed)', () => {
    const result = simulate(6, Infinity, 7, { ...defaultPolicy, overlapMs: 90_000 });
    expect(result.minWatching).toBeLessThan(2);
  });
});
