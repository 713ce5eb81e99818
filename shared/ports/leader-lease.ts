import type { RotaMember } from '#shared/policy/forwarder-rota.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';

/** Result of one attempt to hold the Lease (its holder, one rota member, stores the checkpoint). */
export type LeaseAttempt =
  | { readonly acquired: true; readonly checkpoint: Checkpoint }
  | { readonly acquired: false; readonly holder: string | undefined };

/** The Lease's holder: at most one rota member at a time, which stores the checkpoint with it. */
export interface LeaderLease {
  /** Tries once to take (or keep) the lease; returns the stored checkpoint when it did. */
  tryAcquire(): Promise<LeaseAttempt>;
  /** Renews the lease and stores the checkpoint; returns false when leadership is lost. */
  renew(checkpoint: Checkpoint): Promise<boolean>;
  /** Stores the final checkpoint and gives the lease up so the next forwarder can start at once. */
  release(checkpoint: Checkpoint): Promise<void>;
}

/** What the Lease records for the rota: holder (none once released), checkpoint ({} when none) and members. */
export interface LeaseRecord {
  readonly holder: string | undefined;
  readonly checkpoint: Checkpoint;
  readonly members: readonly RotaMember[];
}

/** The member list of the rota, kept on the same Lease as the election and the checkpoint. */
export interface ForwarderRota {
  /** This forwarder's identity (its entry in the member list, the Lease's holderIdentity when it holds it). */
  readonly identity: string;
  /**
   * Writes the member list `change` returns for the Lease as read (nothing for undefined; after a conflict it is asked
   * again; `now`: the adapter's clock). Returns the record afterwards. Never touches the holder or the checkpoint.
   */
  updateMembers(change: (record: LeaseRecord, now: Date) => readonly RotaMember[] | undefined): Promise<LeaseRecord>;
}
