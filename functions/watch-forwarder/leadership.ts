/**
 * The forwarder's place in the rota (shared/policy/forwarder-rota.ts; README, Deployed form): whether a window joins
 * or exits, its entry in the member list, and the Lease, which only decides who stores the checkpoint of what was sent.
 */
import {
  countedMembers,
  shouldJoin,
  withMember,
  withoutMember,
  type RotaPolicy,
} from '#shared/policy/forwarder-rota.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { ForwarderRota, LeaderLease } from '#shared/ports/leader-lease.ts';
import type { logger as defaultLogger } from '#shared/observability/logger.ts';
import { sleep } from '#shared/sleep.ts';

type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

export interface LeadershipDeps {
  readonly lease: LeaderLease & ForwarderRota;
  readonly logger: Logger;
  /** The checkpoint of what was sent so far (the outbox's). */
  readonly sentCheckpoint: () => Checkpoint;
}

/** A window of the rota: its policy, and when it stops watching (its entry's `until`). */
export interface RotaTerm {
  readonly policy: RotaPolicy;
  readonly until: Date;
}

export type JoinOutcome =
  | { readonly joined: true; readonly checkpoint: Checkpoint }
  | { readonly joined: false; readonly members: number };

export interface LeadershipOptions {
  /** How often the Lease is renewed and the checkpoint stored, and the member's entry recorded (default 5 s). */
  readonly renewIntervalMs?: number;
  /** How often a member that does not hold the Lease tries to take it (default 2 s). */
  readonly acquireRetryMs?: number;
}

/** See the module comment. One instance serves every window of a forwarder. */
export class Leadership {
  private readonly d: LeadershipDeps;
  private readonly opt: Required<LeadershipOptions>;
  private leading = false;

  constructor(deps: LeadershipDeps, options: LeadershipOptions = {}) {
    this.d = deps;
    const { renewIntervalMs = 5_000, acquireRetryMs = 2_000 } = options;
    this.opt = { renewIntervalMs, acquireRetryMs };
  }

  /** True while this forwarder holds the Lease. */
  isActive(): boolean {
    return this.leading;
  }

  /**
   * Joins the rota unless enough members with time left already watch (compare-and-swap on the member list), and takes
   * the Lease when it is free or expired. Returns the checkpoint the Lease holds, or `joined: false` (0 members when
   * `signal` aborted while the Lease could not be read).
   */
  async join(term: RotaTerm, signal: AbortSignal): Promise<JoinOutcome> {
    const rota = this.d.lease;
    while (!signal.aborted) {
      try {
        let counted = 0;
        let joins = false;
        const record = await rota.updateMembers((r, now) => {
          counted = countedMembers(r.members, now, term.policy, rota.identity).length;
          joins = shouldJoin(counted, term.policy);
          return joins ? withMember(r.members, { id: rota.identity, until: term.until, seenAt: now }, now, term.policy) : undefined;
        });
        if (!joins) return { joined: false, members: counted };
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
   * ends the checkpointing, never the watching), otherwise tries to take it, and keeps its entry in the list fresh.
   */
  async memberLoop(term: RotaTerm, signal: AbortSignal): Promise<void> {
    const rota = this.d.lease;
    let lastRecorded = Date.now();
    while (!signal.aborted) {
      await sleep(this.leading ? this.opt.renewIntervalMs : this.opt.acquireRetryMs, signal);
      if (signal.aborted) return;
      try {
        if (this.leading) {
          if (!(await this.d.lease.renew(this.d.sentCheckpoint()))) {
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

  /**
   * Ends a member's window: releases the Lease (when still held) with the checkpoint of what was sent, so that the
   * next member resumes there at once, and removes this member's entry from the list. Returns that checkpoint.
   */
  async leave(term: RotaTerm, unsent: number): Promise<Checkpoint> {
    const { lease, logger } = this.d;
    const final = this.d.sentCheckpoint();
    if (this.leading) {
      try {
        await lease.release(final);
        logger.info('Handed over', { checkpoint: final, unsent });
      } catch (err) {
        logger.error('Releasing the Lease failed; the next forwarder waits for it to expire', { error: err as Error });
      }
    }
    this.leading = false;
    try {
      await lease.updateMembers((r, now) => withoutMember(r.members, lease.identity, now, term.policy));
    } catch (err) {
      logger.warn('Leaving the forwarder rota failed; the entry lapses by itself', { error: err as Error });
    }
    return final;
  }
}
