/**
 * The forwarder's leadership on its own: which checkpoint goes into the Lease at the end of a window. The Lease is
 * faked at the port level (a script of answers that keeps what it was given); the rota's joining, renewing and
 * hand-over between members: rota.test.ts; the real Lease: the integration tests.
 */
import { describe, expect, it } from 'vitest';
import { Leadership } from '#functions/watch-forwarder/leadership.ts';
import type { RotaMember } from '#shared/policy/forwarder-rota.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { ForwarderRota, LeaderLease, LeaseAttempt } from '#shared/ports/leader-lease.ts';

function scriptedLease(attempts: LeaseAttempt[]): LeaderLease & ForwarderRota & { released: Checkpoint[]; members: () => readonly RotaMember[] } {
  const released: Checkpoint[] = [];
  let members: readonly RotaMember[] = [];
  return {
    released,
    members: () => members,
    identity: 'fwd-a',
    tryAcquire: async () => attempts.shift() ?? { acquired: false, holder: 'someone else' },
    renew: async () => true,
    release: async (checkpoint) => void released.push(checkpoint),
    updateMembers: async (change) => {
      members = change({ holder: undefined, checkpoint: {}, members }, new Date('2026-11-25T02:00:00Z')) ?? members;
      return { holder: undefined, checkpoint: {}, members };
    },
  };
}

describe('Class: Leadership', () => {
  it('hands over with everything sent at the end of a window, and is then neither active nor in the member list', async () => {
    // Prepare
    const lease = scriptedLease([{ acquired: true, checkpoint: { machines: '5' } }]);
    let sent: Checkpoint = {};
    const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };
    const leadership = new Leadership({ lease, logger: quiet, sentCheckpoint: () => sent }, { renewIntervalMs: 1, acquireRetryMs: 1 });
    const term = { policy: { targetMembers: 1, overlapMs: 1_000, staleAfterMs: 15_000 }, until: new Date('2026-11-25T02:14:45Z') };
    const joined = await leadership.join(term, new AbortController().signal);
    sent = { machines: '9' };

    // Act
    const final = await leadership.leave(term, 0);

    // Assess
    expect(joined).toEqual({ joined: true, checkpoint: { machines: '5' } });
    expect(final).toEqual({ machines: '9' });
    expect(lease.released).toEqual([{ machines: '9' }]);
    expect(leadership.isActive()).toBe(false);
    expect(lease.members()).toEqual([]);
  });
});
