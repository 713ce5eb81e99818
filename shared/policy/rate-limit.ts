/**
 * A token bucket, as client-go's client-side rate limiter (`flowcontrol.NewTokenBucketRateLimiter(qps, burst)`), for
 * each workload cluster's Node stream (why: docs/hostile-clusters.md). Pure: the caller keeps the state and waits.
 */

/** Up to `burst` requests at once after a quiet spell, then `perSecond` requests a second. */
export interface RateLimit {
  readonly burst: number;
  readonly perSecond: number;
}

/** The bucket: tokens left at `at` (ms). */
export interface BucketState {
  readonly tokens: number;
  readonly at: number;
}

/** A full bucket at `now`. */
export function fullBucket(limit: RateLimit, now: number): BucketState {
  return { tokens: limit.burst, at: now };
}

/**
 * Takes one token at `now`: the state after, and how long the request must wait for its token (0 when one is left).
 * Tokens refill at `perSecond`, up to `burst`; a request that must wait reserves its token, so waiting requests go
 * one per `1000 / perSecond` ms, in order.
 */
export function takeToken(state: BucketState, now: number, limit: RateLimit): { readonly state: BucketState; readonly waitMs: number } {
  const elapsed = Math.max(0, now - state.at);
  const tokens = Math.min(limit.burst, state.tokens + (elapsed * limit.perSecond) / 1000) - 1;
  const waitMs = tokens >= 0 ? 0 : Math.ceil((-tokens * 1000) / limit.perSecond);
  return { state: { tokens, at: Math.max(now, state.at) }, waitMs };
}
