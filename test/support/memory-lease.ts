/**
 * One in-memory Lease shared by the forwarders of a unit test, faked at the port level (LeaderLease + ForwarderRota):
 * what the API server would hold (election, checkpoint and member list, client-go's expiry on the given clock), and
 * every checkpoint written with who held the Lease. The real Lease: test/integration/adapters/lease.test.ts.
 */
import type { RotaMember } from '#shared/policy/forwarder-rota.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { ForwarderRota, LeaderLease, LeaseAttempt, LeaseRecord } from '#shared/ports/leader-lease.ts';

/** The Lease duration: a holder that has not renewed for this long can be replaced. */
const LEASE_MS = 15_000;

/** The one Lease of a test: what the API server would hold, and every checkpoint written with who held the Lease. */
export interface LeaseState {
  holder: string | undefined;
  renewedAt: number;
  checkpoint: Checkpoint;
  members: readonly RotaMember[];
  readonly checkpointWrites: Array<{ readonly by: string; readonly checkpoint: Checkpoint }>;
  /** How many times anyone tried to take the Lease. */
  acquireAttempts: number;
  /** How many times anyone read the member list to change it (a window deciding whether to join, a heartbeat, leaving). */
  memberUpdates: number;
}

/** One forwarder's view of the shared Lease (LeaderLease + ForwarderRota). */
export function memoryLease(state: LeaseState, identity: string, clock: { now(): Date }): LeaderLease & ForwarderRota {
  const now = () => clock.now().getTime();
  return {
    identity,
    tryAcquire: async (): Promise<LeaseAttempt> => {
      state.acquireAttempts++;
      if (state.holder !== undefined && state.holder !== identity && now() - state.renewedAt <= LEASE_MS) return { acquired: false, holder: state.holder };
      state.holder = identity;
      state.renewedAt = now();
      return { acquired: true, checkpoint: { ...state.checkpoint } };
    },
    renew: async (checkpoint) => {
      if (state.holder !== identity) return false;
      state.renewedAt = now();
      state.checkpoint = { ...checkpoint };
      state.checkpointWrites.push({ by: identity, checkpoint: { ...checkpoint } });
      return true;
    },
    release: async (checkpoint) => {
      if (state.holder !== identity) return;
      state.checkpoint = { ...checkpoint };
      state.checkpointWrites.push({ by: identity, checkpoint: { ...checkpoint } });
      state.holder = undefined;
    },
    updateMembers: async (change): Promise<LeaseRecord> => {
      state.memberUpdates++;
      const record: LeaseRecord = { holder: state.holder, checkpoint: { ...state.checkpoint }, members: state.members };
      const members = change(record, clock.now());
      if (members === undefined) return record;
      state.members = members;
      return { ...record, members };
    },
  };
}

export const newLeaseState = (): LeaseState => ({ holder: undefined, renewedAt: 0, checkpoint: {}, members: [], checkpointWrites: [], acquireAttempts: 0, memberUpdates: 0 });
