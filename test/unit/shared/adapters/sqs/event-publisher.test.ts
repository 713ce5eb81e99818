import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { chunkEntries, createSqsEventPublisher, toSqsId } from '#shared/adapters/sqs/event-publisher.ts';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { logger } from '#shared/observability/logger.ts';
import { recordMockedAwsCalls } from '#test/support/record-aws-calls.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';

const QUEUE = 'https://sqs.eu-west-1.amazonaws.com/123456789012/events.fifo';
const sqsMock = mockClient(SQSClient);
// The forwarder publishes with this adapter to the queue it gets as QUEUE_URL (evaluated by the least-privilege test).
recordMockedAwsCalls('forwarder-event-publisher', [{ functions: ['watch-forwarder'], service: 'sqs', mock: sqsMock, bindings: { [QUEUE]: '{queue:QUEUE_URL}' } }]);

function nodeEvent(i: number, nodeName = `n${i}`): TaintEvent {
  return {
    id: `uid-${i}:${100 + i}:modified`,
    source: '/clusters/fleet/wc1',
    type: 'io.github.capi-taint-propagator.node.modified.v1',
    subject: `nodes/${nodeName}`,
    time: '2026-11-22T10:00:00.000Z',
    data: { kind: 'Node', cluster: { mode: 'capi', namespace: 'fleet', name: 'wc1' }, node: { name: nodeName, uid: `uid-${i}`, resourceVersion: String(100 + i) }, observedAt: '2026-11-22T10:00:00.000Z' },
  };
}

function entriesOf(call: number): NonNullable<SendMessageBatchCommand['input']['Entries']> {
  return (sqsMock.commandCalls(SendMessageBatchCommand)[call]?.args[0].input.Entries ?? []);
}

function okAll(): void {
  sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommand['input']) => ({
    Successful: (input.Entries ?? []).map((e) => ({ Id: e.Id, MessageId: `m-${e.Id}`, MD5OfMessageBody: 'x' })),
    Failed: [],
  }));
}

describe('Function: createSqsEventPublisher()', () => {
  beforeEach(() => {
    sqsMock.reset();
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('sends CloudEvent bodies in batches of at most 10, grouped by Node and deduplicated by event id', async () => {
    // Prepare
    okAll();
    const publisher = createSqsEventPublisher({ client: new SQSClient({}), queueUrl: QUEUE });
    const events = Array.from({ length: 23 }, (_, i) => nodeEvent(i));
    // Act
    const result = await publisher.publish(events);
    // Assess
    expect(result.sent).toHaveLength(23);
    expect(result.unsent).toEqual([]);
    // Three calls, as many as batches of ten would make, sent side by side (each Node's events in one of them).
    const sizes = sqsMock.commandCalls(SendMessageBatchCommand).map((c) => c.args[0].input.Entries?.length ?? 0);
    expect(sizes).toHaveLength(3);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(10);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(23);
    const first = entriesOf(0)[0];
    expect(first).toMatchObject({ MessageGroupId: 'fleet/wc1/node/n0', MessageDeduplicationId: 'uid-0:100:modified' });
    expect(fromCloudEventBody(first?.MessageBody ?? '')).toEqual(events[0]);
    expect(sqsMock.commandCalls(SendMessageBatchCommand)[0]?.args[0].input.QueueUrl).toBe(QUEUE);
  });

  it("sends calls side by side, but one message group's events in one lane, in order, one call after the other", async () => {
    // Prepare: 40 events, node n0's at positions 0, 15, 25 and 39; the first call is held until the second lane's call arrives.
    let release: () => void = () => undefined;
    const held = new Promise<void>((r) => (release = r));
    const arrivals: string[][] = [];
    /** n0's calls in flight now, and the most at once. */
    let n0InFlight = 0;
    let n0Overlap = 0;
    sqsMock.on(SendMessageBatchCommand).callsFake(async (input: SendMessageBatchCommand['input']) => {
      const ids = (input.Entries ?? []).map((e) => e.MessageDeduplicationId ?? '');
      const hasN0 = (input.Entries ?? []).some((e) => e.MessageGroupId === 'fleet/wc1/node/n0');
      arrivals.push(ids);
      if (hasN0) n0Overlap = Math.max(n0Overlap, ++n0InFlight);
      if (arrivals.length === 1) await held;
      else release();
      if (hasN0) n0InFlight--;
      return { Successful: (input.Entries ?? []).map((e) => ({ Id: e.Id, MessageId: 'm', MD5OfMessageBody: 'x' })), Failed: [] };
    });
    const publisher = createSqsEventPublisher({ client: new SQSClient({}), queueUrl: QUEUE });
    const events = Array.from({ length: 40 }, (_, i) => ([0, 15, 25, 39].includes(i) ? { ...nodeEvent(i, 'n0') } : nodeEvent(i)));

    // Act
    const result = await publisher.publish(events);

    // Assess: every event sent, over 4 lanes (n0's lane holds its 4 events beside others: one call more); n0's events
    // in order, the first in the first call (which was held until another lane's call arrived: they overlapped).
    expect(result.sent).toHaveLength(40);
    expect(arrivals.length).toBeGreaterThanOrEqual(4);
    expect(arrivals.length).toBeLessThanOrEqual(5);
    const n0 = arrivals.flat().filter((id) => ['uid-0:', 'uid-15:', 'uid-25:', 'uid-39:'].some((p) => id.startsWith(p)));
    expect(n0).toEqual(['uid-0:100:modified', 'uid-15:115:modified', 'uid-25:125:modified', 'uid-39:139:modified']);
    expect(arrivals[0]).toContain('uid-0:100:modified');
    expect(n0Overlap).toBe(1);
  });

  it('keeps every call under 256 KiB', async () => {
    // Prepare
    okAll();
    const publisher = createSqsEventPublisher({ client: new SQSClient({}), queueUrl: QUEUE });
    const events = Array.from({ length: 10 }, (_, i) => nodeEvent(i, `n${i}-${'x'.repeat(60_000)}`));
    // Act
    const result = await publisher.publish(events);
    // Assess
    expect(result.sent).toHaveLength(10);
    const calls = sqsMock.commandCalls(SendMessageBatchCommand);
    expect(calls.length).toBeGreaterThan(1);
    for (const c of calls) {
      const bytes = (c.args[0].input.Entries ?? []).reduce((n, e) => n + Buffer.byteLength(e.MessageBody ?? ''), 0);
      expect(bytes).toBeLessThanOrEqual(256 * 1024);
    }
  });

  it('reports the entries that failed in a partial batch failure, and only those, as unsent and retryable, without resending them', async () => {
    // Prepare
    sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommand['input']) => {
      const entries = input.Entries ?? [];
      return {
        Successful: entries.slice(1).map((e) => ({ Id: e.Id, MessageId: 'm', MD5OfMessageBody: 'x' })),
        Failed: [{ Id: entries[0]?.Id, Code: 'InternalError', SenderFault: false, Message: 'try again' }],
      };
    });
    const publisher = createSqsEventPublisher({ client: new SQSClient({}), queueUrl: QUEUE });
    // Act
    const result = await publisher.publish([nodeEvent(1), nodeEvent(2), nodeEvent(3)]);
    // Assess: one attempt; the caller (the outbox) resends what is unsent.
    expect(result.sent.map((e) => e.id).sort()).toEqual(['uid-2:102:modified', 'uid-3:103:modified']);
    expect(result.unsent).toEqual([{ event: nodeEvent(1), reason: 'InternalError: try again', retryable: true }]);
    expect(sqsMock.commandCalls(SendMessageBatchCommand)).toHaveLength(1);
  });

  it("holds back a group's later entries once one of its entries failed, so a resend never lands behind them", async () => {
    // Prepare: n0's events at positions 0 and 39 (four lanes of 10, n0's with 11: two calls); its first fails.
    sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommand['input']) => {
      const entries = input.Entries ?? [];
      const first = entries.find((e) => e.MessageDeduplicationId === 'uid-0:100:modified');
      return {
        Successful: entries.filter((e) => e !== first).map((e) => ({ Id: e.Id, MessageId: 'm', MD5OfMessageBody: 'x' })),
        Failed: first ? [{ Id: first.Id, Code: 'InternalError', SenderFault: false, Message: 'try again' }] : [],
      };
    });
    const publisher = createSqsEventPublisher({ client: new SQSClient({}), queueUrl: QUEUE });
    const events = Array.from({ length: 40 }, (_, i) => nodeEvent(i, i === 0 || i === 39 ? 'n0' : `n${i}`));
    // Act
    const result = await publisher.publish(events);
    // Assess
    expect(result.unsent.map((u) => [u.event.id, u.retryable])).toEqual([['uid-0:100:modified', true], ['uid-39:139:modified', true]]);
    expect(result.sent).toHaveLength(38);
    expect(sqsMock.commandCalls(SendMessageBatchCommand).flatMap((c) => c.args[0].input.Entries ?? []).map((e) => e.MessageDeduplicationId)).not.toContain('uid-39:139:modified');
  });

  it('reports every entry of a call that throws (throttling, network) as unsent and retryable, with the reason', async () => {
    // Prepare
    sqsMock.on(SendMessageBatchCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    const publisher = createSqsEventPublisher({ client: new SQSClient({}), queueUrl: QUEUE });
    // Act
    const result = await publisher.publish([nodeEvent(1), nodeEvent(2)]);
    // Assess
    expect(result.sent).toEqual([]);
    expect(result.unsent.map((u) => [u.event.id, u.retryable])).toEqual([['uid-1:101:modified', true], ['uid-2:102:modified', true]]);
    expect(result.unsent[0]?.reason).toMatch(/ThrottlingException: Rate exceeded/);
    expect(sqsMock.commandCalls(SendMessageBatchCommand)).toHaveLength(1);
  });

  it('reports a sender fault as not retryable', async () => {
    // Prepare
    sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommand['input']) => ({
      Failed: (input.Entries ?? []).map((e) => ({ Id: e.Id, Code: 'InvalidParameterValue', SenderFault: true, Message: 'bad' })),
    }));
    const publisher = createSqsEventPublisher({ client: new SQSClient({}), queueUrl: QUEUE });
    // Act
    const result = await publisher.publish([nodeEvent(1)]);
    // Assess
    expect(result.unsent).toMatchObject([{ retryable: false, reason: 'InvalidParameterValue: bad' }]);
    expect(sqsMock.commandCalls(SendMessageBatchCommand)).toHaveLength(1);
  });
  it('logs each unsent event with the product logger: a warning when a resend can succeed, else an error', async () => {
    // Prepare: a sender fault for the first entry (never succeeds); the second is not reported (resent by the caller).
    sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommand['input']) => ({
      Failed: [{ Id: input.Entries?.[0]?.Id, Code: 'InvalidParameterValue', SenderFault: true, Message: 'bad' }],
    }));
    const warn = vi.spyOn(logger, 'warn');
    const error = vi.spyOn(logger, 'error');
    const publisher = createSqsEventPublisher({ client: new SQSClient({}), queueUrl: QUEUE });

    // Act
    const result = await publisher.publish([nodeEvent(1), nodeEvent(2)]);

    // Assess
    const never = { cloudEventId: 'uid-1:101:modified', retryable: false };
    const later = { cloudEventId: 'uid-2:102:modified', retryable: true };
    expect(result.unsent.map((u) => ({ cloudEventId: u.event.id, retryable: u.retryable }))).toEqual([never, later]);
    expect(error.mock.calls.map(([, attributes]) => attributes)).toEqual([expect.objectContaining(never)]);
    expect(warn.mock.calls.map(([, attributes]) => attributes)).toEqual([expect.objectContaining(later)]);
  });

  it('makes a client given as a function once, on the first send, and again after making it failed', async () => {
    // Prepare
    okAll();
    let made = 0;
    const factory = async (): Promise<SQSClient> => {
      made++;
      if (made === 1) throw new Error('the SDK could not be loaded');
      return new SQSClient({});
    };
    const publisher = createSqsEventPublisher({ client: factory, queueUrl: QUEUE });

    // Act
    const failed = await publisher.publish([nodeEvent(1)]);
    const sent = await publisher.publish([nodeEvent(2)]);
    const sentAgain = await publisher.publish([nodeEvent(3)]);

    // Assess
    expect(failed.unsent).toEqual([expect.objectContaining({ retryable: true, reason: expect.stringContaining('the SDK could not be loaded') })]);
    expect([sent.sent.length, sentAgain.sent.length]).toEqual([1, 1]);
    expect(made).toBe(2);
    expect(sqsMock.commandCalls(SendMessageBatchCommand)).toHaveLength(2);
  });
});

describe('Function: toSqsId()', () => {
  it('keeps ids SQS accepts and hashes the others deterministically', () => {
    expect(toSqsId('fleet/wc1/node/n1')).toBe('fleet/wc1/node/n1');
    const long = `ns/${'c'.repeat(100)}/node/${'n'.repeat(100)}`;
    expect(toSqsId(long)).toMatch(/^[0-9a-f]{64}$/);
    expect(toSqsId(long)).toBe(toSqsId(long));
    expect(toSqsId(`${long}x`)).not.toBe(toSqsId(long));
    expect(toSqsId('has space')).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('Function: chunkEntries()', () => {
  it('splits by count and by bytes', () => {
    expect(chunkEntries(Array.from({ length: 21 }, () => ({ bytes: 1 }))).map((c) => c.length)).toEqual([10, 10, 1]);
    expect(chunkEntries(Array.from({ length: 3 }, () => ({ bytes: 100 * 1024 }))).map((c) => c.length)).toEqual([2, 1]);
  });
});
