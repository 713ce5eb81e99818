import type { Checkpoint } from '#shared/domain/watch-event.ts';

/** Result of one attempt to become the active forwarder. */
export type LeaseAttempt =
  | { readonly acquired: true; readonly checkpoint: Checkpoint }
  | { readonly acquired: false; readonly holder: string | undefined };

/** Elects at most one active forwarder and stores its checkpoint with the election record. */
export interface LeaderLease {
  /** Tries once to take (or keep) the lease; returns the stored checkpoint when it did. */
  tryAcquire(): Promise<LeaseAttempt>;
  /** Renews the lease and stores the checkpoint; returns false when leadership is lost. */
  renew(checkpoint: Checkpoint): Promise<boolean>;
  /** Stores the final checkpoint and gives the lease up so the next forwarder can start at once. */
  release(checkpoint: Checkpoint): Promise<void>;
}
