/**
 * The one retry policy of a stream (client-go's reflector backoff plus `watchHandler`'s "very short watch" rule); the
 * rules and their reasons: docs/watch-layer.md, "Retry policy". Pure (injected clock and random source, no timers), so
 * every loop is a unit test with a manual clock.
 */
import { backoffDelay } from '#shared/policy/backoff.ts';
import { ResourceVersionGoneError } from '../api-errors.ts';

export interface RetryNumbers {
  /** First backoff step (its lower bound): 800 ms. */
  readonly initialMs: number;
  /** Longest wait between attempts: 30 s. */
  readonly maxMs: number;
  /** Healthy time after which the failure count starts over: 2 min. */
  readonly resetAfterMs: number;
  /** A watch that ends sooner than this with no event is a failure ("very short watch"): 1 s. */
  readonly shortWatchMs: number;
  /** Least time between two watch opens, when a watch ended normally: 1 s. */
  readonly minWatchIntervalMs: number;
  /** Least time per request of a failed attempt, over the attempt and the wait after it: 1 s. */
  readonly minRequestIntervalMs: number;
}

export const DEFAULT_RETRY: RetryNumbers = { initialMs: 800, maxMs: 30_000, resetAfterMs: 120_000, shortWatchMs: 1_000, minWatchIntervalMs: 1_000, minRequestIntervalMs: 1_000 };

/** How one attempt of a stream ended, as its session reports it to {@link StreamRetry.ended}. */
export type AttemptEnd =
  /** It threw; `reason` is safe to log; `requests` it made (list pages, watch connects; unknown: no floor). */
  | { readonly kind: 'failed'; readonly error: unknown; readonly reason: string; readonly requests?: number }
  /** A watch ended without an error: the server closed it, the idle watchdog or the resync timer cut it. */
  | { readonly kind: 'watch-ended'; readonly why: 'closed' | 'idle' | 'resync'; readonly openMs: number; readonly events: number };

export interface RetryDecision {
  readonly delayMs: number;
  /** Whether the attempt counts as failed, and why (safe to log). */
  readonly failure?: { readonly reason: string; readonly count: number };
  /** The stream just became failing: tell it (once per run of failures). */
  readonly failing?: { readonly reason: string; readonly since: Date };
}

export class StreamRetry {
  private readonly n: RetryNumbers;
  private readonly random: () => number;
  private readonly now: () => Date;
  private failures = 0;
  /** Failures since the stream last delivered. */
  private inARow = 0;
  private lastFailureAt: number | undefined;
  private deliveredSinceFailure = false;
  private failingSince: Date | undefined;

  constructor(numbers: Partial<RetryNumbers> = {}, random: () => number = Math.random, now: () => Date = () => new Date()) {
    this.n = { ...DEFAULT_RETRY, ...numbers };
    this.random = random;
    this.now = now;
  }

  /** An attempt ended: the wait before the next one, and the health change to tell, if any. */
  ended(end: AttemptEnd): RetryDecision {
    if (end.kind === 'watch-ended') {
      if (end.why === 'closed' && end.events === 0 && end.openMs < this.n.shortWatchMs) {
        return this.failed(`very short watch: the server ended it after ${Math.round(end.openMs)} ms with no event`, true);
      }
      return { delayMs: Math.max(0, this.n.minWatchIntervalMs - end.openMs) };
    }
    const decision = this.failed(end.reason, end.error instanceof ResourceVersionGoneError);
    const owed = (end.requests ?? 0) * this.n.minRequestIntervalMs;
    return owed > decision.delayMs ? { ...decision, delayMs: Math.ceil(owed) } : decision;
  }

  /** The stream delivered (a watch open for `shortWatchMs`, or an event): the `recovered` times when it was failing. */
  delivered(): { readonly since: Date; readonly at: Date } | undefined {
    this.deliveredSinceFailure = true;
    this.inARow = 0;
    const since = this.failingSince;
    if (since === undefined) return undefined;
    this.failingSince = undefined;
    return { since, at: this.now() };
  }

  /** `soft`: a 410 or a very short watch, which happen to healthy clusters too, report failing only when repeated. */
  private failed(reason: string, soft: boolean): RetryDecision {
    const now = this.now();
    if (this.deliveredSinceFailure && this.lastFailureAt !== undefined && now.getTime() - this.lastFailureAt >= this.n.resetAfterMs) this.failures = 0;
    this.failures++;
    this.inARow++;
    this.lastFailureAt = now.getTime();
    this.deliveredSinceFailure = false;
    const delayMs = Math.floor(backoffDelay(this.failures, { base: this.n.initialMs, max: this.n.maxMs, jitter: 'up' }, this.random));
    const decision = { delayMs, failure: { reason, count: this.failures } };
    if (this.failingSince !== undefined || (soft && this.inARow < 2)) return decision;
    this.failingSince = now;
    return { ...decision, failing: { reason, since: now } };
  }
}
