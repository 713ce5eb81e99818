/**
 * The forwarder's leadership: waits for the Lease (at most one forwarder is active), renews it with the checkpoint it
 * is safe to resume from, ends the term when the Lease is lost, and hands over by releasing it with the final
 * checkpoint. With a queue that is not durable, that checkpoint is the last one after which the queue was seen empty.
 */
import type { Checkpoint } from '#shared/domain/watch-event.ts';
import type { LeaderLease } from '#shared/ports/leader-lease.ts';
import type { logger as defaultLogger } from '#shared/observability/logger.ts';
import { sleep } from '#shared/sleep.ts';

type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

export interface LeadershipDeps {
  readonly lease: LeaderLease;
  readonly logger: Logger;
  /** The checkpoint of what was sent so far (the outbox's). */
  readonly sentCheckpoint: () => Checkpoint;
  /** Given only when the queue is not durable: true when it holds no message (see WatchForwarderDeps.queueDrained). */
  readonly queueDrained?: () => Promise<boolean>;
}

export interface LeadershipOptions {
  /** How often the Lease is renewed and the checkpoint stored. */
  readonly renewIntervalMs: number;
  /** How often a waiting forwarder retries the Lease. */
  readonly acquireRetryMs: number;
}

/** See the module comment. One instance serves every term of a forwarder. */
export class Leadership {
  private readonly d: LeadershipDeps;
  private readonly opt: LeadershipOptions;
  /** With a non-durable queue: the last checkpoint known to be applied, the one stored in the Lease. */
  private appliedCheckpoint: Checkpoint = {};
  private leading = false;

  constructor(deps: LeadershipDeps, options: LeadershipOptions) {
    this.d = deps;
    this.opt = options;
  }

  /** True while this forwarder holds the Lease. */
  isActive(): boolean {
    return this.leading;
  }

  /**
   * Waits until this forwarder holds the Lease, retrying every `acquireRetryMs`. Returns the checkpoint the Lease
   * held (where this term resumes), or undefined when `signal` aborted first.
   */
  async acquire(signal: AbortSignal): Promise<Checkpoint | undefined> {
    let announced = false;
    while (!signal.aborted) {
      try {
        const attempt = await this.d.lease.tryAcquire();
        if (attempt.acquired) {
          this.leading = true;
          this.appliedCheckpoint = { ...attempt.checkpoint };
          return attempt.checkpoint;
        }
        if (!announced) this.d.logger.info('Waiting for the active forwarder to hand over', { holder: attempt.holder });
        announced = true;
      } catch (err) {
        this.d.logger.warn('Acquiring the Lease failed', { error: err as Error });
      }
      await sleep(this.opt.acquireRetryMs, signal);
    }
    return undefined;
  }

  /** Renews the Lease every `renewIntervalMs` until `term` aborts; aborts `term` when the Lease is lost. */
  async renewLoop(term: AbortController): Promise<void> {
    while (!term.signal.aborted) {
      await sleep(this.opt.renewIntervalMs, term.signal);
      if (term.signal.aborted) return;
      const still = await this.d.lease.renew(await this.durableCheckpoint(0));
      if (!still) {
        this.leading = false;
        this.d.logger.error('Lost the Lease; stopping without sending more');
        term.abort();
      }
    }
  }

  /**
   * Ends the term: releases the Lease (when still held) with the checkpoint to resume from, waiting up to `waitMs`
   * for a non-durable queue to be seen empty. Returns that checkpoint.
   */
  async handOver(waitMs: number, unsent: number): Promise<Checkpoint> {
    const final = await this.durableCheckpoint(waitMs);
    if (this.leading) {
      try {
        await this.d.lease.release(final);
        this.d.logger.info('Handed over', { checkpoint: final, unsent });
      } catch (err) {
        this.d.logger.error('Releasing the Lease failed; the next forwarder waits for it to expire', { error: err as Error });
      }
    }
    this.leading = false;
    return final;
  }

  /**
   * The checkpoint it is safe to resume from after a crash: the sent checkpoint when the queue is
   * durable; otherwise the last sent checkpoint that the queue was seen empty after (waiting up to
   * `waitMs` for that). The snapshot is taken before the queue is looked at, so it covers only
   * events that were already in the queue, and so were applied, when it was seen empty.
   */
  private async durableCheckpoint(waitMs: number): Promise<Checkpoint> {
    const drained = this.d.queueDrained;
    if (!drained) return this.d.sentCheckpoint();
    const until = Date.now() + waitMs;
    for (;;) {
      const candidate = this.d.sentCheckpoint();
      try {
        if (await drained()) {
          this.appliedCheckpoint = candidate;
          break;
        }
      } catch (err) {
        this.d.logger.warn('Looking at the queue depth failed; the stored checkpoint stays where it was', { error: err as Error });
      }
      if (Date.now() >= until) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return { ...this.appliedCheckpoint };
  }
}
