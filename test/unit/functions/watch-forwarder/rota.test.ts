/**
 * The rota in the forwarder (Leadership.join/memberLoop/leave, WatchForwarder.runMember), with its
 * ports faked at the port level: one in-memory Lease (election, checkpoint and member list, client-go's expiry on a
 * manual clock) shared by every forwarder of a test, scripted watch streams, and a queue that keeps one copy per
 * deduplication id as SQS FIFO does. The real Lease and API server: test/integration/forwarder/rota.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Leadership } from '#functions/watch-forwarder/leadership.ts';
import { WatchForwarder, type ForwarderRunSummary } from '#functions/watch-forwarder/forward-watch-events.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';
import type { RotaPolicy } from '#shared/policy/forwarder-rota.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { NodeFacts } from '#shared/model/views.ts';
import { manualClock } from '#test/support/manual-clock.ts';
import { memoryLease, newLeaseState, type LeaseState } from '#test/support/memory-lease.ts';
import { ScriptedSources, until } from '#test/support/scripted-watch-sources.ts';

const policy: RotaPolicy = { targetMembers: 2, overlapMs: 150_000, staleAfterMs: 15_000 };
const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };

describe('Class: Leadership (rota)', () => {
  it('does not join while two other members have more than the overlap left, and writes nothing', async () => {
    // Prepare
    const clock = manualClock();
    const state = newLeaseState();
    const t = clock.now().getTime();
    state.members = [
      { id: 'a', until: new Date(t + 600_000), seenAt: new Date(t) },
      { id: 'b', until: new Date(t + 151_000), seenAt: new Date(t - 10_000) },
    ];
    const lease = memoryLease(state, 'c', clock);
    const leadership = new Leadership({ lease, logger: quiet, sentCheckpoint: () => ({}) }, { renewIntervalMs: 5, acquireRetryMs: 5 });

    // Act
    const outcome = await leadership.join({ policy, until: new Date(t + 885_000) }, new AbortController().signal);

    // Assess
    expect(outcome).toEqual({ joined: false, members: 2 });
    expect(state.members.map((m) => m.id)).toEqual(['a', 'b']);
    expect(state.holder).toBeUndefined();
  });

  it('joins when one of two has less than the overlap left: records itself, and resumes from the checkpoint the holder stored', async () => {
    // Prepare
    const clock = manualClock();
    const state = newLeaseState();
    const t = clock.now().getTime();
    state.holder = 'a';
    state.renewedAt = t;
    state.checkpoint = { machines: '41' };
    state.members = [
      { id: 'a', until: new Date(t + 149_000), seenAt: new Date(t) },
      { id: 'b', until: new Date(t + 600_000), seenAt: new Date(t) },
      { id: 'dead', until: new Date(t + 600_000), seenAt: new Date(t - 16_000) },
    ];
    const lease = memoryLease(state, 'c', clock);
    const leadership = new Leadership({ lease, logger: quiet, sentCheckpoint: () => ({}) }, { renewIntervalMs: 5, acquireRetryMs: 5 });

    // Act
    const outcome = await leadership.join({ policy, until: new Date(t + 885_000) }, new AbortController().signal);

    // Assess: a member, not the holder (a holds an unexpired Lease); the dead entry is gone.
    expect(outcome).toEqual({ joined: true, checkpoint: { machines: '41' } });
    expect(leadership.isActive()).toBe(false);
    expect(state.members.map((m) => [m.id, m.until.getTime() - t])).toEqual([
      ['a', 149_000],
      ['b', 600_000],
      ['c', 885_000],
    ]);
  });

  it('takes the Lease when its holder stops renewing (killed), stores its own checkpoint from then on, and keeps its entry fresh', async () => {
    // Prepare: b holds the Lease; c joins as a member.
    const clock = manualClock();
    const state = newLeaseState();
    const t = clock.now().getTime();
    state.holder = 'b';
    state.renewedAt = t;
    state.members = [{ id: 'b', until: new Date(t + 600_000), seenAt: new Date(t) }];
    const lease = memoryLease(state, 'c', clock);
    let sent: Checkpoint = { machines: '50' };
    const leadership = new Leadership({ lease, logger: quiet, sentCheckpoint: () => sent }, { renewIntervalMs: 5, acquireRetryMs: 5 });
    const term = { policy, until: new Date(t + 885_000) };
    await leadership.join(term, new AbortController().signal);
    const stop = new AbortController();
    const loop = leadership.memberLoop(term, stop.signal);

    // Act: the holder is killed (no renewal): on c's clock the Lease is valid for 15 s, then c takes it.
    clock.advance(10_000);
    const attempts = state.acquireAttempts;
    await until(() => state.acquireAttempts >= attempts + 3); // c asked three times within the lease duration
    const holderBefore = state.holder;
    clock.advance(6_000);
    await until(() => leadership.isActive());
    sent = { machines: '57' };
    await until(() => state.checkpointWrites.some((w) => w.checkpoint['machines'] === '57'));
    stop.abort();
    await loop;

    // Assess
    expect(holderBefore).toBe('b');
    expect(state.holder).toBe('c');
    expect(new Set(state.checkpointWrites.map((w) => w.by))).toEqual(new Set(['c']));
    expect(state.members.find((m) => m.id === 'c')?.seenAt.getTime()).toBe(t + 16_000);
  });

  it('loses the Lease to another writer without ending the window, and leaves the member list at the end', async () => {
    // Prepare
    const clock = manualClock();
    const state = newLeaseState();
    const lease = memoryLease(state, 'a', clock);
    const leadership = new Leadership({ lease, logger: quiet, sentCheckpoint: () => ({}) }, { renewIntervalMs: 5, acquireRetryMs: 5 });
    const term = { policy, until: new Date(clock.now().getTime() + 885_000) };
    await leadership.join(term, new AbortController().signal);
    expect(leadership.isActive()).toBe(true);
    const stop = new AbortController();
    const loop = leadership.memberLoop(term, stop.signal);

    // Act
    state.holder = 'someone-else';
    state.renewedAt = clock.now().getTime();
    await until(() => !leadership.isActive());
    const listedAfterLoss = state.members.map((m) => m.id);
    stop.abort();
    await loop;
    await leadership.leave(term, 0);

    // Assess: still a member after the loss (its entry stays), gone from the list only once it left.
    expect(listedAfterLoss).toEqual(['a']);
    expect(state.holder).toBe('someone-else');
    expect(state.members).toEqual([]);
  });
});

describe('Class: WatchForwarder (runMember)', () => {
  const T0 = new Date('2026-11-25T02:00:00Z');
  const node = (name: string, rv: string, taints: NodeFacts['taints'] = []): NodeFacts => ({ kind: 'Node', name, uid: `uid-${name}`, resourceVersion: rv, labels: {}, annotations: {}, taints });
  const running: Array<() => Promise<ForwarderRunSummary>> = [];
  afterEach(async () => {
    await Promise.all(running.splice(0).map((stop) => stop()));
  });

  /** A queue that keeps the first copy of each deduplication id (the event id), and who sent each copy. */
  function fifoQueue() {
    const kept: TaintEvent[] = [];
    const copies: Array<{ by: string; id: string }> = [];
    return {
      kept,
      copies,
      publisherFor: (by: string) => ({
        publish: async (events: readonly TaintEvent[]) => {
          for (const e of events) {
            copies.push({ by, id: e.id });
            if (!kept.some((k) => k.id === e.id)) kept.push(e);
          }
          return { sent: [...events], unsent: [] };
        },
      }),
    };
  }

  function member(id: string, state: LeaseState, queue: ReturnType<typeof fifoQueue>, clock: ReturnType<typeof manualClock>) {
    const sources = new ScriptedSources();
    const lease = memoryLease(state, id, clock);
    const forwarder = new WatchForwarder(
      { mode: 'self', sources, lease, publisher: queue.publisherFor(id), telemetry: { record: () => undefined }, clock, logger: quiet },
      { renewIntervalMs: 5, acquireRetryMs: 5, flushIntervalMs: 2, drainTimeoutMs: 200 },
    );
    const controller = new AbortController();
    const done = forwarder.runMember(controller.signal, { policy, until: new Date(clock.now().getTime() + 885_000) });
    const stop = async () => (controller.abort(), done);
    running.push(stop);
    return { sources, forwarder, stop, done, nodes: () => sources.nodesOf({ mode: 'self' }) };
  }

  it('two members both send each change (the queue keeps one copy); only the Lease holder stores the checkpoint; the holder hands over at its end', async () => {
    // Prepare
    const clock = manualClock(T0.getTime());
    const state = newLeaseState();
    const queue = fifoQueue();
    const a = member('a', state, queue, clock);
    const aNodes = await a.nodes();
    await until(() => state.holder === 'a');
    const b = member('b', state, queue, clock);
    const bNodes = await b.nodes();

    // Act: one change seen by both; then a's window ends (it hands over) and a later change is seen by b alone.
    for (const s of [aNodes, bNodes]) await s.emit({ type: 'change', change: 'modified', facts: node('n1', '11', [{ key: 'k', effect: 'NoSchedule' }]), previous: node('n1', '10'), observedAt: T0, checkpoint: '11' });
    await until(() => queue.copies.filter((c) => c.id === 'uid-n1:11:modified').length === 2);
    await until(() => state.checkpointWrites.some((w) => w.checkpoint['nodes/self'] === '11'));
    const summaryA = await a.stop();
    await until(() => state.holder === 'b');
    await bNodes.emit({ type: 'change', change: 'modified', facts: node('n1', '12'), previous: node('n1', '11', [{ key: 'k', effect: 'NoSchedule' }]), observedAt: T0, checkpoint: '12' });
    await until(() => state.checkpointWrites.some((w) => w.by === 'b' && w.checkpoint['nodes/self'] === '12'));

    // Assess
    expect(queue.kept.map((e) => e.id)).toEqual(['uid-n1:11:modified', 'uid-n1:12:modified']);
    expect(summaryA.rota).toEqual({ joined: true });
    // The checkpoint's writers take turns: a while it held the Lease, then b; never b before a let go.
    const writers = state.checkpointWrites.map((w) => w.by);
    expect(writers.indexOf('b')).toBeGreaterThan(writers.lastIndexOf('a'));
    expect(state.members.map((m) => m.id)).toEqual(['b']);
  });

  it("a member that does not hold the Lease announces its first list's changes but not a later relist's (the holder's own streams make those)", async () => {
    // Prepare: a holds the Lease; b is a member.
    const clock = manualClock(T0.getTime());
    const state = newLeaseState();
    const queue = fifoQueue();
    const a = member('a', state, queue, clock);
    await a.nodes();
    await until(() => state.holder === 'a');
    const b = member('b', state, queue, clock);
    const bNodes = await b.nodes();

    // Act: b's first list (from an expired checkpoint) finds n1 changed; later a periodic resync announces n2; then a marker change.
    await bNodes.emit({ type: 'change', change: 'resynced', facts: node('n1', '20'), observedAt: T0 });
    await bNodes.emit({ type: 'progress', resourceVersion: '20' });
    await bNodes.emit({ type: 'change', change: 'resynced', facts: node('n2', '5'), observedAt: T0 });
    await bNodes.emit({ type: 'progress', resourceVersion: '21' });
    await bNodes.emit({ type: 'change', change: 'added', facts: node('marker', '22'), observedAt: T0, checkpoint: '22' });
    await until(() => queue.copies.some((c) => c.id === 'uid-marker:22:added'));

    // Assess
    expect(queue.copies.filter((c) => c.by === 'b').map((c) => c.id)).toEqual(['uid-n1:20:resynced', 'uid-marker:22:added']);
    expect(b.forwarder.checkpoint()['nodes/self']).toBe('22');
    expect(state.checkpointWrites.every((w) => w.by === 'a')).toBe(true);
  });

  it('a window that finds two members with time left exits at once without watching', async () => {
    // Prepare
    const clock = manualClock(T0.getTime());
    const state = newLeaseState();
    const queue = fifoQueue();
    member('a', state, queue, clock);
    member('b', state, queue, clock);
    await until(() => state.members.length === 2);

    // Act
    const c = member('c', state, queue, clock);
    const summary = await c.done;

    // Assess
    expect(summary).toMatchObject({ active: false, rota: { joined: false, membersCounted: 2 } });
    expect(c.sources.nodeStreams.size).toBe(0);
  });
});
