/**
 * The forwarder's outbox on its own: how a stream's checkpoint advances as events are sent, resent or given up, and
 * how it holds watch intake back. Its ports are faked at the port level: a publisher told per event whether the
 * queue takes it, a manual clock, telemetry that counts.
 */
import { describe, expect, it } from 'vitest';
import { Outbox, type OutboxOptions } from '#functions/watch-forwarder/outbox.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';
import { toTaintEvent } from '#shared/contract/events.ts';
import type { NodeFacts } from '#shared/model/views.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import type { EventPublisher } from '#shared/ports/event-publisher.ts';
import { manualClock } from '#test/support/manual-clock.ts';

type Fate = 'sent' | 'retryable' | 'permanent';

/** A publisher that sends an event unless `fates` says otherwise, and keeps the ids of every call. */
function scriptedPublisher(): EventPublisher & { fates: Map<string, Fate>; calls: string[][] } {
  const fates = new Map<string, Fate>();
  const calls: string[][] = [];
  return {
    fates,
    calls,
    publish: async (events) => {
      calls.push(events.map((e) => e.id));
      const fate = (e: TaintEvent): Fate => fates.get(e.id) ?? 'sent';
      return {
        sent: events.filter((e) => fate(e) === 'sent'),
        unsent: events.filter((e) => fate(e) !== 'sent').map((event) => ({ event, reason: 'scripted', retryable: fate(event) === 'retryable' })),
      };
    },
  };
}

const T0 = new Date('2026-11-22T10:00:00Z');
const nodeEvent = (name: string, resourceVersion: string): TaintEvent => {
  const facts: NodeFacts = { kind: 'Node', name, uid: `uid-${name}`, resourceVersion, labels: {}, annotations: {}, taints: [] };
  return toTaintEvent(facts, 'modified', { mode: 'self' }, T0);
};

function setup(options: Partial<OutboxOptions> = {}, checkpoint: Record<string, string> = { 'nodes/self': '10' }) {
  const publisher = scriptedPublisher();
  const clock = manualClock(T0.getTime());
  const counts: Record<string, number> = {};
  const outbox = new Outbox(
    {
      publisher,
      clock,
      telemetry: {
        record: (metric, value) => {
          if (metric !== ForwarderMetric.ForwarderLag) counts[metric] = (counts[metric] ?? 0) + value;
        },
      },
      logger: { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as never,
    },
    { flushIntervalMs: 5, maxEventsPerPublish: 100, maxPendingEvents: 100, drainTimeoutMs: 50, ...options },
  );
  const term = new AbortController();
  outbox.begin(checkpoint, term.signal);
  return { outbox, publisher, clock, counts, term };
}

/** Lets every pending promise continuation run: intake waits on promises only, so one that can go on has gone on by then. */
const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('Class: Outbox (checkpoint advance)', () => {
  it('advances a stream over the handled prefix only: a resent event holds back the later ones until it is sent', async () => {
    // Prepare
    const { outbox, publisher, clock, counts } = setup();
    const progress = outbox.openStream('nodes/self');
    const [e11, e12] = [nodeEvent('a', '11'), nodeEvent('b', '12')];
    publisher.fates.set(e11.id, 'retryable');
    await outbox.enqueue([e11], T0, progress, '11');
    await outbox.enqueue([e12], T0, progress, '12');
    progress.add('13', true); // a change that needed no message

    // Act
    const first = await outbox.publishRound();
    const whileResending = outbox.checkpoint();
    const beforeBackoff = await outbox.publishRound();
    publisher.fates.delete(e11.id);
    clock.advance(1_000); // past the longest wait before the first resend (0.2 s, equal jitter)
    const resent = await outbox.publishRound();

    // Assess
    expect([first, beforeBackoff, resent]).toEqual([2, 0, 1]);
    expect(whileResending).toEqual({ 'nodes/self': '10' });
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '13' });
    expect(outbox.size()).toBe(0);
    expect(counts).toMatchObject({ EventsForwarded: 2, SendFailures: 1 });
  });

  it('passes a change that became several events (a MachinePool\'s) only once every one of them is sent', async () => {
    // Prepare
    const { outbox, publisher, clock } = setup({}, { machinepools: '20' });
    const progress = outbox.openStream('machinepools');
    const events = [nodeEvent('n1', '21'), nodeEvent('n2', '21'), nodeEvent('n3', '21')];
    publisher.fates.set(events[1]!.id, 'retryable');
    await outbox.enqueue(events, T0, progress, '21');

    // Act
    await outbox.publishRound();
    const partly = outbox.checkpoint();
    publisher.fates.clear();
    clock.advance(1_000);
    await outbox.publishRound();

    // Assess
    expect(partly).toEqual({ machinepools: '20' });
    expect(outbox.checkpoint()).toEqual({ machinepools: '21' });
  });

  it('gives up an event the queue can never take: it is counted as a send failure and no longer holds the checkpoint', async () => {
    // Prepare
    const { outbox, publisher, counts } = setup();
    const progress = outbox.openStream('nodes/self');
    const huge = nodeEvent('huge', '11');
    publisher.fates.set(huge.id, 'permanent');
    await outbox.enqueue([huge], T0, progress, '11');

    // Act
    await outbox.publishRound();

    // Assess
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '11' });
    expect(outbox.size()).toBe(0);
    expect(counts).toEqual({ SendFailures: 1 });
  });

  it('resends an event the queue refuses for a while (throttling, an outage) with a growing backoff and no limit, then passes it', async () => {
    // Prepare: the queue refuses the event 12 times (the publisher makes one attempt per round).
    const { outbox, publisher, clock, counts } = setup();
    const progress = outbox.openStream('nodes/self');
    const e11 = nodeEvent('a', '11');
    publisher.fates.set(e11.id, 'retryable');
    await outbox.enqueue([e11], T0, progress, '11');

    // Act: the first attempt, then a round as soon as the event is due again (the queue takes the 12th resend), noting
    // how long each wait was.
    await outbox.publishRound();
    const waits: number[] = [];
    for (let resend = 1; resend <= 12; resend++) {
      if (resend === 12) publisher.fates.delete(e11.id);
      let waited = 0;
      while ((await outbox.publishRound()) === 0) {
        clock.advance(50);
        waited += 50;
      }
      waits.push(waited);
    }

    // Assess: never given up; the waits grow (0.2 s doubling, equal jitter) and stop growing at 30 s.
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '11' });
    expect(outbox.size()).toBe(0);
    expect(counts).toMatchObject({ EventsForwarded: 1, SendFailures: 12 });
    expect(waits[0]).toBeGreaterThanOrEqual(100);
    expect(waits[0]).toBeLessThanOrEqual(250);
    expect(waits[3]).toBeGreaterThanOrEqual(800);
    expect(Math.max(...waits)).toBeLessThanOrEqual(30_050);
    expect(waits[10]).toBeGreaterThanOrEqual(15_000);
  });

  it("does not send a Node's later event while an earlier one waits for its resend, and sends both in order after it", async () => {
    // Prepare: two changes of one Node, the first refused once.
    const { outbox, publisher, clock } = setup();
    const progress = outbox.openStream('nodes/self');
    const [first, second] = [nodeEvent('a', '11'), nodeEvent('a', '12')];
    publisher.fates.set(first.id, 'retryable');
    await outbox.enqueue([first], T0, progress, '11');

    // Act
    await outbox.publishRound();
    await outbox.enqueue([second], T0, progress, '12');
    const whileWaiting = await outbox.publishRound();
    publisher.fates.clear();
    clock.advance(1_000);
    await outbox.publishRound();

    // Assess
    expect(whileWaiting).toBe(0);
    expect(publisher.calls).toEqual([[first.id], [first.id, second.id]]);
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '12' });
  });

  it('sends an event that waits for its resend when the term ends and the outbox drains, instead of leaving it', async () => {
    // Prepare
    const { outbox, publisher } = setup({ drainTimeoutMs: 1_000 });
    const e11 = nodeEvent('a', '11');
    publisher.fates.set(e11.id, 'retryable');
    await outbox.enqueue([e11], T0, outbox.openStream('nodes/self'), '11');
    await outbox.publishRound();
    publisher.fates.clear();

    // Act
    const left = await outbox.drain();

    // Assess
    expect(left).toBe(0);
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '11' });
  });

  it('leaves what the queue still refuses when the drain ends, and the checkpoint stays before it', async () => {
    // Prepare: the queue refuses the event through the whole drain (50 ms).
    const { outbox, publisher } = setup();
    const e11 = nodeEvent('a', '11');
    publisher.fates.set(e11.id, 'retryable');
    await outbox.enqueue([e11], T0, outbox.openStream('nodes/self'), '11');

    // Act
    const left = await outbox.drain();

    // Assess
    expect(left).toBe(1);
    expect(publisher.calls.length).toBeGreaterThan(0);
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '10' });
  });

  it('holds a bounded number of resume points while an event waits through an outage, however many changes pass that need no message', async () => {
    // Prepare
    const { outbox, publisher, clock } = setup();
    const progress = outbox.openStream('nodes/self');
    const waiting = nodeEvent('a', '11');
    publisher.fates.set(waiting.id, 'retryable');
    await outbox.enqueue([waiting], T0, progress, '11');
    await outbox.publishRound(); // refused: it waits for its resend

    // Act: 10 000 filtered changes (or another shard's objects) pass behind it; then the queue takes it.
    for (let rv = 12; rv < 10_012; rv++) progress.add(String(rv), true);
    const heldDuringOutage = progress.held;
    publisher.fates.delete(waiting.id);
    while ((await outbox.publishRound()) === 0) clock.advance(50);

    // Assess: the waiting event's point and one for everything behind it; once it is sent, the checkpoint passes all.
    expect(heldDuringOutage).toBe(2);
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '10011' });
    expect(progress.held).toBe(0);
  });

  it('drops the resume point of a forgotten stream (a deleted cluster) and starts a stream from the checkpoint it was given', () => {
    // Prepare
    const { outbox } = setup({}, { 'nodes/fleet/wc1': '5', machines: '7' });

    // Act
    outbox.forgetStream('nodes/fleet/wc1');

    // Assess
    expect(outbox.checkpoint()).toEqual({ machines: '7' });
    expect([outbox.startOf('machines'), outbox.startOf('nodes/fleet/wc1')]).toEqual([{ resumeFrom: '7' }, {}]);
  });
});

describe('Class: Outbox (intake back-pressure)', () => {
  it('holds intake while maxPendingEvents wait, and lets it go on once a round has sent some', async () => {
    // Prepare
    const { outbox } = setup({ maxPendingEvents: 2 });
    const progress = outbox.openStream('nodes/self');
    await outbox.enqueue([nodeEvent('a', '11')], T0, progress, '11');
    let resumed = false;
    const intake = outbox.enqueue([nodeEvent('b', '12')], T0, progress, '12').then(() => (resumed = true));

    // Act
    await settled();
    const heldWhileFull = !resumed;
    await outbox.publishRound();
    await intake;

    // Assess
    expect(heldWhileFull).toBe(true);
    expect(resumed).toBe(true);
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '12' });
  });

  it('starts a round at once when intake finds the outbox full, instead of after the pause of the flush loop', async () => {
    // Prepare: the flush loop has found nothing to send and pauses for a minute.
    const { outbox, publisher, term } = setup({ maxPendingEvents: 2, flushIntervalMs: 60_000 });
    const progress = outbox.openStream('nodes/self');
    const flushing = outbox.flushLoop(term.signal);
    await settled();

    // Act
    await outbox.enqueue([nodeEvent('a', '11'), nodeEvent('b', '12')], T0, progress, '12');

    // Assess: the intake went on (the test's timeout is far below the pause), because the round sent both.
    expect(publisher.calls).toEqual([[nodeEvent('a', '11').id, nodeEvent('b', '12').id]]);
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '12' });
    term.abort();
    await flushing;
  });

  it('sends an event that comes to an empty outbox at once, instead of after the pause of the flush loop', async () => {
    // Prepare: the flush loop has found nothing to send and pauses for a minute; the outbox has plenty of room.
    const { outbox, publisher, term } = setup({ flushIntervalMs: 60_000 });
    const progress = outbox.openStream('nodes/self');
    const flushing = outbox.flushLoop(term.signal);
    await settled();
    const sent = new Promise<void>((resolve) => {
      const publish = publisher.publish.bind(publisher);
      publisher.publish = async (events) => {
        const result = await publish(events);
        resolve();
        return result;
      };
    });

    // Act
    await outbox.enqueue([nodeEvent('a', '11')], T0, progress, '11');
    await sent; // the test's timeout is far below the pause
    await settled(); // the round's bookkeeping after the publish

    // Assess
    expect(publisher.calls).toEqual([[nodeEvent('a', '11').id]]);
    expect(outbox.checkpoint()).toEqual({ 'nodes/self': '11' });
    term.abort();
    await flushing;
  });

  it('lets held intake go on when the term ends, with the events still pending', async () => {
    // Prepare
    const { outbox, term } = setup({ maxPendingEvents: 1 });
    let resumed = false;
    const intake = outbox.enqueue([nodeEvent('a', '11')], T0, outbox.openStream('nodes/self'), '11').then(() => (resumed = true));
    await settled();
    const heldWhileFull = !resumed;

    // Act
    term.abort();
    await intake;

    // Assess
    expect(heldWhileFull).toBe(true);
    expect(outbox.size()).toBe(1);
  });
});

describe('Class: Outbox (bulkheads between streams)', () => {
  const clusterEvent = (cluster: string, name: string, resourceVersion: string): TaintEvent => {
    const facts: NodeFacts = { kind: 'Node', name, uid: `uid-${cluster}-${name}`, resourceVersion, labels: {}, annotations: {}, taints: [] };
    return toTaintEvent(facts, 'modified', { mode: 'capi', namespace: 'fleet', name: cluster }, T0);
  };

  it('holds back only the stream that floods: a quiet stream gets its change in and on while the outbox stays full', async () => {
    // Prepare: one cluster's stream has filled the outbox with events the queue does not take yet (resent later).
    const { outbox, publisher, term } = setup({ maxPendingEvents: 3, flushIntervalMs: 60_000 }, {});
    const flood = outbox.openStream('nodes/fleet/bad');
    const quiet = outbox.openStream('nodes/fleet/good');
    const flooding = [clusterEvent('bad', 'a', '1'), clusterEvent('bad', 'b', '2'), clusterEvent('bad', 'c', '3')];
    for (const e of flooding) publisher.fates.set(e.id, 'retryable');
    await outbox.enqueue(flooding.slice(0, 2), T0, flood, '2');
    let floodResumed = false;
    const floodIntake = outbox.enqueue(flooding.slice(2), T0, flood, '3').then(() => (floodResumed = true));
    await settled();

    // Act: the quiet stream's change, while the outbox is full; one round.
    let quietResumed = false;
    const quietIntake = outbox.enqueue([clusterEvent('good', 'x', '7')], T0, quiet, '7').then(() => (quietResumed = true));
    await settled();
    const quietHeldBeforeRound = !quietResumed;
    await outbox.publishRound();
    await settled();

    // Assess: the quiet change was taken in (one over the bound: at most one change per stream is), sent by the next
    // round, and its stream went on; the flooding stream still waits (its events wait to be resent).
    expect(quietHeldBeforeRound).toBe(true);
    expect(quietResumed).toBe(true);
    expect(floodResumed).toBe(false);
    expect(outbox.size()).toBe(3);
    expect(outbox.checkpoint()).toEqual({ 'nodes/fleet/good': '7' });
    term.abort();
    await Promise.all([quietIntake, floodIntake]);
  });

  it('takes the due events of every stream in turn, each stream in its order, so a quiet stream does not wait behind a backlog', async () => {
    // Prepare: a backlog of five events of one cluster, then one of another.
    const { outbox, publisher } = setup({ maxEventsPerPublish: 3 }, {});
    const flood = outbox.openStream('nodes/fleet/bad');
    const quiet = outbox.openStream('nodes/fleet/good');
    const rvs = ['1', '2', '3', '4', '5'];
    const backlog = rvs.map((rv) => clusterEvent('bad', `n${rv}`, rv));
    for (const [i, e] of backlog.entries()) await outbox.enqueue([e], T0, flood, rvs[i]);
    const good = clusterEvent('good', 'x', '7');
    await outbox.enqueue([good], T0, quiet, '7');

    // Act
    await outbox.publishRound();
    await outbox.publishRound();

    // Assess: the first round carries the quiet stream's event; the backlog keeps its order across rounds.
    expect(publisher.calls).toEqual([
      [backlog[0]?.id, good.id, backlog[1]?.id],
      [backlog[2]?.id, backlog[3]?.id, backlog[4]?.id],
    ]);
    expect(outbox.checkpoint()).toEqual({ 'nodes/fleet/bad': '5', 'nodes/fleet/good': '7' });
  });
});
