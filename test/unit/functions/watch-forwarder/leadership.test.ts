/**
 * The forwarder's leadership on its own: which checkpoint goes into the Lease (with a durable queue, and with one that
 * is not), and what losing the Lease does. The Lease is faked at the port level (a script of answers that keeps what
 * it was given); the real Lease is exercised by the integration tests.
 */
import { describe, expect, it } from 'vitest';
import { Leadership } from '#functions/watch-forwarder/leadership.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { LeaderLease, LeaseAttempt } from '#shared/ports/leader-lease.ts';

function scriptedLease(attempts: LeaseAttempt[], renewals: boolean[] = []): LeaderLease & { renewed: Checkpoint[]; released: Checkpoint[] } {
  const renewed: Checkpoint[] = [];
  const released: Checkpoint[] = [];
  return {
    renewed,
    released,
    tryAcquire: async () => attempts.shift() ?? { acquired: false, holder: 'someone else' },
    renew: async (checkpoint) => (renewed.push(checkpoint), renewals.shift() ?? true),
    release: async (checkpoint) => void released.push(checkpoint),
  };
}

function setup(lease: ReturnType<typeof scriptedLease>, queueDrained?: () => Promise<boolean>) {
  const logged: string[] = [];
  const log = (message: string) => void logged.push(message);
  let sent: Checkpoint = {};
  const leadership = new Leadership(
    { lease, logger: { info: log, warn: log, error: log, debug: log } as never, sentCheckpoint: () => sent, ...(queueDrained ? { queueDrained } : {}) },
    { renewIntervalMs: 1, acquireRetryMs: 1 },
  );
  return { leadership, logged, send: (cp: Checkpoint) => void (sent = cp) };
}

describe('Class: Leadership', () => {
  it('waits while another forwarder holds the Lease (said once), then resumes from the checkpoint the Lease held', async () => {
    // Prepare
    const lease = scriptedLease([
      { acquired: false, holder: 'fwd-a' },
      { acquired: false, holder: 'fwd-a' },
      { acquired: true, checkpoint: { machines: '5' } },
    ]);
    const { leadership, logged } = setup(lease);

    // Act
    const checkpoint = await leadership.acquire(new AbortController().signal);

    // Assess
    expect(checkpoint).toEqual({ machines: '5' });
    expect(leadership.isActive()).toBe(true);
    expect(logged).toEqual(['Waiting for the active forwarder to hand over']);
  });

  it('with a durable queue, hands over with everything sent and is no longer active', async () => {
    // Prepare
    const lease = scriptedLease([{ acquired: true, checkpoint: { machines: '5' } }]);
    const { leadership, send } = setup(lease);
    await leadership.acquire(new AbortController().signal);
    send({ machines: '9' });

    // Act
    const final = await leadership.handOver(0, 0);

    // Assess
    expect(final).toEqual({ machines: '9' });
    expect(lease.released).toEqual([{ machines: '9' }]);
    expect(leadership.isActive()).toBe(false);
  });

  it('with a queue that is not durable, keeps the checkpoint it started from while the queue is never seen empty', async () => {
    // Prepare
    const lease = scriptedLease([{ acquired: true, checkpoint: { machines: '5' } }]);
    const { leadership, send } = setup(lease, async () => false);
    await leadership.acquire(new AbortController().signal);
    send({ machines: '9' });

    // Act
    const final = await leadership.handOver(0, 0);

    // Assess
    expect(final).toEqual({ machines: '5' });
    expect(lease.released).toEqual([{ machines: '5' }]);
  });

  it('with a queue that is not durable, stores what was sent before the look that found the queue empty, not what was sent during it', async () => {
    // Prepare: the second look finds the queue empty, while one more event is sent.
    let looks = 0;
    const lease = scriptedLease([{ acquired: true, checkpoint: { machines: '5' } }]);
    const { leadership, send } = setup(lease, async () => {
      looks++;
      if (looks < 2) return false;
      send({ machines: '10' });
      return true;
    });
    await leadership.acquire(new AbortController().signal);
    send({ machines: '9' });

    // Act
    const final = await leadership.handOver(5_000, 0);

    // Assess
    expect([final, looks]).toEqual([{ machines: '9' }, 2]);
  });

  it('ends the term when a renewal finds the Lease lost, and then releases nothing', async () => {
    // Prepare
    const lease = scriptedLease([{ acquired: true, checkpoint: { machines: '5' } }], [true, false]);
    const { leadership, logged, send } = setup(lease);
    await leadership.acquire(new AbortController().signal);
    send({ machines: '6' });
    const term = new AbortController();

    // Act
    await leadership.renewLoop(term);
    await leadership.handOver(0, 0);

    // Assess
    expect(term.signal.aborted).toBe(true);
    expect(leadership.isActive()).toBe(false);
    expect(lease.renewed).toEqual([{ machines: '6' }, { machines: '6' }]);
    expect(lease.released).toEqual([]);
    expect(logged).toContain('Lost the Lease; stopping without sending more');
  });
});
