/**
 * The one backoff rule of the product: exponential, capped, jittered. Used by the watch streams, the queue sends of
 * the forwarder, its per-event resends, and the reconcile function's retries through the queue. Pure.
 */

/** How a delay grows: `base × 2^(attempt − 1)`, capped at `max`, then jittered. */
export interface BackoffPolicy {
  readonly base: number;
  readonly max: number;
  /**
   * `full`: uniform in [0, ceiling) — spreads retries most (AWS's "full jitter"); `equal`: ceiling/2 plus uniform in
   * [0, ceiling/2) — never retries almost at once, for retries that should wait (e.g. conflicting writers); `up`:
   * ceiling plus uniform in [0, ceiling), at most `max` — client-go's `wait.Backoff` with Jitter 1.0 (its reflector's
   * backoff), never shorter than the ceiling.
   */
  readonly jitter: 'full' | 'equal' | 'up';
}

/** The delay before retry number `attempt` (1 = the first retry), in the policy's unit. */
export function backoffDelay(attempt: number, policy: BackoffPolicy, random: () => number): number {
  const exponent = Math.min(Math.max(0, attempt - 1), 30);
  const ceiling = Math.min(policy.max, policy.base * 2 ** exponent);
  if (policy.jitter === 'up') return Math.min(policy.max, ceiling * (1 + random()));
  return policy.jitter === 'full' ? random() * ceiling : ceiling / 2 + random() * (ceiling / 2);
}
