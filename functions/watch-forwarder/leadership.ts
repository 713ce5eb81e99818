/**
 * The forwarder's leadership: waits for the Lease (at most one forwarder is active), renews it with the checkpoint it
 * is safe to resume from, ends the term when the Lease is lost, and hands over by releasing it with the final
 * checkpoint. With a queue that is not durable, that checkpoint is the last one after which the queue was seen empty.
 *
 * In the deployed form (a rota of overlapping Lambda windows, shared/policy/forwarder-rota.ts) it also decides whether
 * a window joins the rota or exits, keeps its entry in the member list fresh, takes the Lease whenever it is free or
 * expired, and leaves the rota at the end; there a member watches and sends whether or not it holds the Lease, which
 * only decides who stores the checkpoint.
 */
import { countedMembers, shouldJoin, withMember, withoutMember, type RotaPolicy } from '#shared/policy/forwarder-rota.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { ForwarderRota, LeaderLease } from '#shared/ports/leader-lease.ts';
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
  /** The rota's member list (the deployed form); required by {@link Leadership.join}. */
  readonly rota?: ForwarderRota;
}

/** A window of the rota: its policy and when it ends. */
export interface RotaTerm {
  readonly policy: RotaPolicy;
  /** When this window stops watching (its entry's `until`). */
  readonly until: Date;
}

/** What {@link Leadership.join} decided. */
export type JoinOutcome =
  | { readonly joined: true; readonly checkpoint: Checkpoint }
  | { readonly joined: false; readonly members: number };

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
  /** True from joining the rota until leaving it. */
  private member = false;

  constructor(deps: LeadershipDeps, options: LeadershipOptions) {
    this.d = deps;
    this.opt = options;
  }

  /** True while this forwarder holds the Lease. */
  isActive(): boolean {
    return this.leading;
  }

  /** True while this forwarder is a member of the rota (it sends what it sees, holding the Lease or not). */
  isMember(): boolean {
    return this.member;
  }

  /**
   * Joins the rota unless enough members with time left already watch (then returns `joined: false` at once). Joining
   * records this forwarder in the member list (a compare-and-swap on the Lease, so two newcomers never both count on
   * the same shortage) and takes the Lease when it is free or expired. Returns where this window resumes: the
   * checkpoint the Lease holds. Retries every `acquireRetryMs` while the Lease cannot be read; `joined: false` with
   * 0 members when `signal` aborted first.
   */
  async join(term: RotaTerm, signal: AbortSignal): Promise<JoinOutcome> {
    const rota = this.d.rota;
    if (!rota) throw new Error('Leadership.join needs the rota (LeadershipDeps.rota)');
    while (!signal.aborted) {
      try {
        let counted = 0;
        let joins = false;
        const record = await rota.updateMembers((r, now) => {
          joins = shouldJoin(r.members, now, term.policy, rota.identity);
          counted = countedMembers(r.members, now, term.policy, rota.identity).length;
          return joins ? withMember(r.members, { id: rota.identity, until: term.until, seenAt: now }, now, term.policy) : undefined;
        });
        if (!joins) return { joined: false, members: counted };
        this.member = true;
        let checkpoint = record.checkpoint;
        try {
          const attempt = await this.d.lease.tryAcquire();
          if (attempt.acquired) {
            this.leading = true;
            checkpoint = attempt.checkpoint;
          }
        } catch (err) {
          this.d.logger.warn('Acquiring the Lease failed; watching as a member', { error: err as Error });
        }
        this.appliedCheckpoint = { ...checkpoint };
        this.d.logger.info('Joined the forwarder rota', { holder: this.leading ? rota.identity : record.holder, members: record.members.length, until: term.until.toISOString() });
        return { joined: true, checkpoint };
      } catch (err) {
        this.d.logger.warn('Reading the forwarder rota failed; retrying', { error: err as Error });
      }
      await sleep(this.opt.acquireRetryMs, signal);
    }
    return { joined: false, members: 0 };
  }

  /**
   * A member's loop until `signal` aborts: renews the Lease with the checkpoint while holding it (a lost Lease only
   * ends the checkpointing, never the watching), otherwise tries to take it every `acquireRetryMs` (a released Lease
   * is taken within that, an expired one after the lease duration), and records itself in the member list every
   * `renewIntervalMs`.
   */
  async memberLoop(term: RotaTerm, signal: AbortSignal): Promise<void> {
    const rota = this.d.rota;
    if (!rota) throw new Error('Leadership.memberLoop needs the rota (LeadershipDeps.rota)');
    let lastRecorded = Date.now();
    while (!signal.aborted) {
      await sleep(this.leading ? this.opt.renewIntervalMs : this.opt.acquireRetryMs, signal);
      if (signal.aborted) return;
      try {
        if (this.leading) {
          if (!(await this.d.lease.renew(await this.durableCheckpoint(0)))) {
            this.leading = false;
            this.d.logger.warn('Lost the Lease; watching on as a member without storing the checkpoint');
          }
        } else {
          const attempt = await this.d.lease.tryAcquire();
          if (attempt.acquired) {
            this.leading = true;
            this.d.logger.info('Took the Lease: this member stores the checkpoint from now on', { previousCheckpoint: attempt.checkpoint });
          }
        }
      } catch (err) {
        this.d.logger.warn(this.leading ? 'Renewing the Lease failed' : 'Acquiring the Lease failed', { error: err as Error });
      }
      if (Date.now() - lastRecorded >= this.opt.renewIntervalMs) {
        try {
          await rota.updateMembers((r, now) => withMember(r.members, { id: rota.identity, until: term.until, seenAt: now }, now, term.policy));
          lastRecorded = Date.now();
        } catch (err) {
          this.d.logger.warn('Recording this member in the forwarder rota failed', { error: err as Error });
        }
      }
    }
  }

  /** Leaves the rota at the end of a member's window (after {@link handOver}): its entry goes from the member list. */
  async leave(term: RotaTerm): Promise<void> {
    const rota = this.d.rota;
    this.member = false;
    if (!rota) return;
    try {
      await rota.updateMembers((r, now) => withoutMember(r.members, rota.identity, now, term.policy));
    } catch (err) {
      this.d.logger.warn('Leaving the forwarder rota failed; the entry lapses by itself', { error: err as Error });
    }
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
