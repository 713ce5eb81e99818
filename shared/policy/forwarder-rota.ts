/**
 * The rota of the deployed (Lambda) forwarder: overlapping windows that keep at least two healthy watchers at every
 * moment, so that one killed member leaves another watching until the next scheduled invocation replaces it.
 * Pure (functions/watch-forwarder/README.md, "Deployed form").
 */

/** A forwarder in the rota, as recorded (by itself) on the Lease. */
export interface RotaMember {
  /** Its identity (FORWARDER_ID, as in the Lease's holderIdentity). */
  readonly id: string;
  /** When its window ends: it watches until then (it may end earlier when killed). */
  readonly until: Date;
  /** When it last recorded itself (a heartbeat every renew interval). */
  readonly seenAt: Date;
}

/** The rota's settings. */
export interface RotaPolicy {
  /** How many members with time left make a newcomer exit instead of joining (2: one may die, one still watches). */
  readonly targetMembers: number;
  /**
   * A member with less than this left no longer counts, so a successor joins while it still watches. At least the
   * longest wait for the next scheduled invocation (two schedule intervals: a schedule fires anywhere in its minute)
   * plus a newcomer's start (cold start, credentials, list at the checkpoint).
   */
  readonly overlapMs: number;
  /** A member that has not recorded itself for this long is taken for dead (killed, frozen, cut off). */
  readonly staleAfterMs: number;
}

/** True while a member watches, as far as the record tells: its window has not ended and it was seen recently. */
export function isLive(member: RotaMember, now: Date, policy: RotaPolicy): boolean {
  const t = now.getTime();
  return member.until.getTime() > t && t - member.seenAt.getTime() <= policy.staleAfterMs;
}

/** The live members that still have at least `overlapMs` left: the ones a newcomer counts on (`except`: itself). */
export function countedMembers(members: readonly RotaMember[], now: Date, policy: RotaPolicy, except?: string): RotaMember[] {
  return members.filter((m) => m.id !== except && isLive(m, now, policy) && m.until.getTime() - now.getTime() >= policy.overlapMs);
}

/**
 * Whether a newcomer joins, given how many others count ({@link countedMembers} without itself): fewer than
 * `targetMembers`. A newcomer whose own window is not longer than `overlapMs` would not count itself, and joins all the
 * same (it covers what it can).
 */
export function shouldJoin(counted: number, policy: RotaPolicy): boolean {
  return counted < policy.targetMembers;
}

/** The member list with `entry` recorded (replacing its earlier entry) and every member that is no longer live dropped. */
export function withMember(members: readonly RotaMember[], entry: RotaMember, now: Date, policy: RotaPolicy): RotaMember[] {
  return [...withoutMember(members, entry.id, now, policy), entry].sort((a, b) => a.id.localeCompare(b.id));
}

/** The member list without `id` (it leaves at the end of its window) and without members that are no longer live. */
export function withoutMember(members: readonly RotaMember[], id: string, now: Date, policy: RotaPolicy): RotaMember[] {
  return members.filter((m) => m.id !== id && isLive(m, now, policy));
}
