/**
 * A per-cluster backoff for the status display (`npm start`'s report, `npm run status`, the demo): a workload cluster
 * whose Node list failed is not called again until its backoff has passed — at least 1 s, doubling on each further
 * failure up to a cap, reset by a success — so that a failing cluster gets at most one request a second from the
 * display, as from the rest of the product (product.md, "Clusters that misbehave"). Meanwhile the display shows the
 * last failure and when the next call is due.
 */
import { backoffDelay, type BackoffPolicy } from '#shared/policy/backoff.ts';
import type { Clock } from '#shared/ports/clock.ts';

/** 1 s after the first failure, then 2, 4, 8 … up to 30 s; `up` jitter never waits less than that. */
export const STATUS_BACKOFF_POLICY: BackoffPolicy = Object.freeze({ base: 1_000, max: 30_000, jitter: 'up' });

/** A cluster the display must not call yet: its last failure and when it may be called again. */
export interface ClusterHeldBack {
  readonly lastFailure: string;
  /** Consecutive failures so far. */
  readonly failures: number;
  readonly retryInMs: number;
}

interface Failed {
  readonly failures: number;
  readonly lastFailure: string;
  readonly retryAt: number;
}

/** The backoff state of each cluster the display calls, by a key naming the cluster. */
export class ClusterBackoff {
  readonly #clock: Clock;
  readonly #policy: BackoffPolicy;
  readonly #random: () => number;
  readonly #failed = new Map<string, Failed>();

  constructor(clock: Clock, policy: BackoffPolicy = STATUS_BACKOFF_POLICY, random: () => number = Math.random) {
    this.#clock = clock;
    this.#policy = policy;
    this.#random = random;
  }

  /** Returns undefined when the cluster may be called now, else why not (its last failure) and for how long. */
  heldBack(cluster: string): ClusterHeldBack | undefined {
    const failed = this.#failed.get(cluster);
    if (!failed) return undefined;
    const retryInMs = failed.retryAt - this.#clock.now().getTime();
    return retryInMs > 0 ? { lastFailure: failed.lastFailure, failures: failed.failures, retryInMs } : undefined;
  }

  /** Records a call that failed: the cluster is held back for the next, longer, delay. */
  failed(cluster: string, reason: string): void {
    const failures = (this.#failed.get(cluster)?.failures ?? 0) + 1;
    const delay = Math.max(this.#policy.base, backoffDelay(failures, this.#policy, this.#random));
    this.#failed.set(cluster, { failures, lastFailure: reason, retryAt: this.#clock.now().getTime() + delay });
  }

  /** Records a call that succeeded: the backoff starts over. */
  succeeded(cluster: string): void {
    this.#failed.delete(cluster);
  }
}

/**
 * What the display shows for a held-back cluster: its last failure and when it is called again.
 * @example describeHeldBack({ lastFailure: 'HTTP 503', failures: 2, retryInMs: 1_500 }) // 'HTTP 503 (unreachable, retry in 2 s)'
 */
export function describeHeldBack(h: ClusterHeldBack): string {
  return `${h.lastFailure} (unreachable, retry in ${Math.ceil(h.retryInMs / 1000)} s)`;
}
