import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { MessageNotInflight, ReceiptHandleIsInvalid, SQSServiceException } from '@aws-sdk/client-sqs';
import {
  EmbeddedFifoQueue,
  md5OfMessageAttributes,
  type EmbeddedFifoQueueOptions,
  type ReceivedMessage,
} from '#shared/adapters/memory/embedded-fifo-queue.ts';
import { manualClock } from '#test/support/manual-clock.ts';


function queueWith(options: Partial<EmbeddedFifoQueueOptions> = {}) {
  const clock = manualClock();
  const queue = new EmbeddedFifoQueue({ name: 'events.fifo', clock, visibilityTimeoutSeconds: 30, ...options });
  return { clock, queue };
}

let nextId = 0;
function send(queue: EmbeddedFifoQueue, group: string, body: string) {
  nextId += 1;
  return queue.sendMessage({ body, messageGroupId: group, messageDeduplicationId: `dedup-${nextId}` });
}

const bodies = (messages: readonly ReceivedMessage[]) => messages.map((message) => message.body);

describe('Class: EmbeddedFifoQueue', () => {
  describe('message groups', () => {
    it('delivers the messages of one group in send order across receives', () => {
      // Prepare
      const { queue } = queueWith();
      for (const body of ['a1', 'a2', 'a3']) send(queue, 'a', body);

      // Act
      const delivered: string[] = [];
      for (let i = 0; i < 3; i += 1) {
        const [message] = queue.receiveMessages();
        if (message === undefined) break;
        delivered.push(message.body);
        queue.deleteMessage(message.receiptHandle);
      }

      // Assess
      expect(delivered).toEqual(['a1', 'a2', 'a3']);
      expect(queue.stats().total).toBe(0);
    });

    it('holds back a group while one of its batches is in flight and lets other groups flow', () => {
      // Prepare
      const { queue } = queueWith();
      send(queue, 'a', 'a1');
      send(queue, 'a', 'a2');
      send(queue, 'b', 'b1');
      const [first] = queue.receiveMessages({ maxNumberOfMessages: 1 });

      // Act
      const second = queue.receiveMessages({ maxNumberOfMessages: 10 });
      const third = queue.receiveMessages({ maxNumberOfMessages: 10 });

      // Assess
      expect(first?.body).toBe('a1');
      expect(bodies(second)).toEqual(['b1']);
      expect(third).toEqual([]);
      expect(queue.stats()).toEqual({
        visible: 1,
        inFlight: 2,
        total: 3,
        perGroup: { a: { visible: 1, inFlight: 1 }, b: { visible: 0, inFlight: 1 } },
      });
    });

    it('releases the next message of a group once the in-flight one is deleted', () => {
      // Prepare
      const { queue } = queueWith();
      send(queue, 'a', 'a1');
      send(queue, 'a', 'a2');
      const [first] = queue.receiveMessages();

      // Act
      queue.deleteMessage(first?.receiptHandle ?? '');
      const next = queue.receiveMessages();

      // Assess
      expect(bodies(next)).toEqual(['a2']);
    });

    it('fills a batch with consecutive messages of the oldest group first, then of the next groups', () => {
      // Prepare
      const { queue } = queueWith();
      send(queue, 'b', 'b1');
      send(queue, 'a', 'a1');
      send(queue, 'b', 'b2');
      send(queue, 'a', 'a2');
      send(queue, 'c', 'c1');

      // Act
      const batch = queue.receiveMessages({ maxNumberOfMessages: 4 });

      // Assess
      expect(bodies(batch)).toEqual(['b1', 'b2', 'a1', 'a2']);
      expect(queue.receiveMessages({ maxNumberOfMessages: 10 }).map((m) => m.body)).toEqual(['c1']);
    });

    it('refuses more than 10 messages per receive, as SQS does', () => {
      // Prepare
      const { queue } = queueWith();

      // Act
      const receive = () => queue.receiveMessages({ maxNumberOfMessages: 11 });

      // Assess
      expect(receive).toThrow(expect.objectContaining({ name: 'InvalidParameterValue' }));
    });
  });

  describe('visibility timeout', () => {
    it('redelivers a message whose visibility timeout lapsed, with receive count 2 and a new receipt handle', () => {
      // Prepare
      const { clock, queue } = queueWith({ visibilityTimeoutSeconds: 30 });
      send(queue, 'a', 'a1');
      const [first] = queue.receiveMessages();
      clock.advance(29_999);
      const tooEarly = queue.receiveMessages();

      // Act
      clock.advance(1);
      const [second] = queue.receiveMessages();

      // Assess
      expect(tooEarly).toEqual([]);
      expect(second?.messageId).toBe(first?.messageId);
      expect(second?.attributes.approximateReceiveCount).toBe(2);
      expect(second?.attributes.approximateFirstReceiveTimestamp).toBe(first?.attributes.approximateFirstReceiveTimestamp);
      expect(second?.receiptHandle).not.toBe(first?.receiptHandle);
    });

    it('uses the visibility timeout of the receive instead of the queue default when one is given', () => {
      // Prepare
      const { clock, queue } = queueWith({ visibilityTimeoutSeconds: 30 });
      send(queue, 'a', 'a1');
      queue.receiveMessages({ visibilityTimeoutSeconds: 5 });

      // Act
      clock.advance(5_000);
      const redelivered = queue.receiveMessages();

      // Assess
      expect(bodies(redelivered)).toEqual(['a1']);
    });

    it('makes a message visible at once with changeMessageVisibility(0)', () => {
      // Prepare
      const { queue } = queueWith();
      send(queue, 'a', 'a1');
      const [first] = queue.receiveMessages();

      // Act
      queue.changeMessageVisibility(first?.receiptHandle ?? '', 0);
      const redelivered = queue.receiveMessages();

      // Assess
      expect(redelivered[0]?.attributes.approximateReceiveCount).toBe(2);
    });

    it('counts a changed visibility timeout from the moment of the change, shortening or extending it', () => {
      // Prepare
      const { clock, queue } = queueWith({ visibilityTimeoutSeconds: 30 });
      send(queue, 'short', 's1');
      send(queue, 'long', 'l1');
      const received = queue.receiveMessages({ maxNumberOfMessages: 10 });
      clock.advance(10_000);

      // Act
      for (const message of received) {
        queue.changeMessageVisibility(message.receiptHandle, message.body === 's1' ? 5 : 60);
      }

      // Assess
      expect(queue.nextVisibleAt()?.getTime()).toBe(clock.now().getTime() + 5_000);
      clock.advance(5_000);
      const shortened = queue.receiveMessages({ maxNumberOfMessages: 10 });
      expect(bodies(shortened)).toEqual(['s1']);
      queue.deleteMessage(shortened[0]?.receiptHandle ?? '');
      clock.advance(54_999);
      expect(queue.receiveMessages({ maxNumberOfMessages: 10 })).toEqual([]);
      clock.advance(1);
      expect(bodies(queue.receiveMessages({ maxNumberOfMessages: 10 }))).toEqual(['l1']);
    });

    it('reports no next visibility time when nothing is in flight', () => {
      // Prepare
      const { queue } = queueWith();
      send(queue, 'a', 'a1');

      // Act
      const next = queue.nextVisibleAt();

      // Assess
      expect(next).toBeUndefined();
      expect(queue.hasReceivableMessages()).toBe(true);
    });
  });

  describe('receipt handles', () => {
    it('rejects the receipt handle of an earlier receive once the message was received again', () => {
      // Prepare
      const { clock, queue } = queueWith();
      send(queue, 'a', 'a1');
      const [first] = queue.receiveMessages();
      clock.advance(30_000);
      const [second] = queue.receiveMessages();

      // Act
      const deleteWithStale = () => queue.deleteMessage(first?.receiptHandle ?? '');
      const changeWithStale = () => queue.changeMessageVisibility(first?.receiptHandle ?? '', 10);

      // Assess
      expect(deleteWithStale).toThrow(ReceiptHandleIsInvalid);
      expect(changeWithStale).toThrow(ReceiptHandleIsInvalid);
      queue.deleteMessage(second?.receiptHandle ?? '');
      expect(queue.stats().total).toBe(0);
    });

    it('rejects an unknown receipt handle with an SDK-shaped ReceiptHandleIsInvalid error', () => {
      // Prepare
      const { queue } = queueWith();

      // Act
      let caught: unknown;
      try {
        queue.deleteMessage('not-a-handle');
      } catch (error) {
        caught = error;
      }

      // Assess
      expect(caught).toBeInstanceOf(ReceiptHandleIsInvalid);
      expect(caught).toMatchObject({ name: 'ReceiptHandleIsInvalid', $fault: 'client', $metadata: { httpStatusCode: 400 } });
    });

    it('refuses to delete with a handle whose visibility timeout lapsed, leaving the message on the queue', () => {
      // Prepare
      const { clock, queue } = queueWith();
      send(queue, 'a', 'a1');
      const [first] = queue.receiveMessages();
      clock.advance(30_000);

      // Act
      const deleteExpired = () => queue.deleteMessage(first?.receiptHandle ?? '');

      // Assess
      expect(deleteExpired).toThrow(ReceiptHandleIsInvalid);
      expect(queue.stats()).toMatchObject({ visible: 1, inFlight: 0 });
    });

    it('answers MessageNotInflight to a visibility change on a message that is visible again', () => {
      // Prepare
      const { clock, queue } = queueWith();
      send(queue, 'a', 'a1');
      const [first] = queue.receiveMessages();
      clock.advance(30_000);

      // Act
      const change = () => queue.changeMessageVisibility(first?.receiptHandle ?? '', 10);

      // Assess
      expect(change).toThrow(MessageNotInflight);
      expect(queue.stats()).toMatchObject({ visible: 1, inFlight: 0 });
    });

    it('rejects the handle of a deleted message', () => {
      // Prepare
      const { queue } = queueWith();
      send(queue, 'a', 'a1');
      const [first] = queue.receiveMessages();
      queue.deleteMessage(first?.receiptHandle ?? '');

      // Act
      const deleteTwice = () => queue.deleteMessage(first?.receiptHandle ?? '');

      // Assess
      expect(deleteTwice).toThrow(ReceiptHandleIsInvalid);
    });
  });

  describe('redrive to the dead-letter queue', () => {
    it('moves a message received maxReceiveCount times to the DLQ at its next receive and unblocks its group', () => {
      // Prepare
      const clock = manualClock();
      const dlq = new EmbeddedFifoQueue({ name: 'events-dlq.fifo', clock });
      const queue = new EmbeddedFifoQueue({
        name: 'events.fifo',
        clock,
        visibilityTimeoutSeconds: 30,
        redrivePolicy: { deadLetterQueue: dlq, maxReceiveCount: 2 },
      });
      queue.sendMessage({
        body: 'poison',
        messageGroupId: 'a',
        messageDeduplicationId: 'p',
        messageAttributes: { reason: { dataType: 'String', stringValue: 'bad' } },
      });
      send(queue, 'a', 'a2');
      const receiveCounts: number[] = [];
      for (let i = 0; i < 2; i += 1) {
        const [message] = queue.receiveMessages();
        receiveCounts.push(message?.attributes.approximateReceiveCount ?? 0);
        clock.advance(30_000);
      }

      // Act
      const afterRedrive = queue.receiveMessages();

      // Assess
      expect(receiveCounts).toEqual([1, 2]);
      expect(bodies(afterRedrive)).toEqual(['a2']);
      const [deadLetter] = dlq.receiveMessages();
      expect(deadLetter).toMatchObject({
        body: 'poison',
        messageAttributes: { reason: { dataType: 'String', stringValue: 'bad' } },
        attributes: {
          messageGroupId: 'a',
          messageDeduplicationId: 'p',
          approximateReceiveCount: 1,
          deadLetterQueueSourceArn: queue.arn,
        },
      });
      expect(queue.stats().total).toBe(1);
    });

    it('does not redrive a message that has been received fewer than maxReceiveCount times', () => {
      // Prepare
      const clock = manualClock();
      const dlq = new EmbeddedFifoQueue({ name: 'events-dlq.fifo', clock });
      const queue = new EmbeddedFifoQueue({ name: 'events.fifo', clock, redrivePolicy: { deadLetterQueue: dlq, maxReceiveCount: 3 } });
      send(queue, 'a', 'a1');
      queue.receiveMessages();
      clock.advance(30_000);
      queue.receiveMessages();
      clock.advance(30_000);

      // Act
      const [third] = queue.receiveMessages();

      // Assess
      expect(third?.attributes.approximateReceiveCount).toBe(3);
      expect(dlq.stats().total).toBe(0);
    });

    it('accepts messages sent directly to the dead-letter queue', () => {
      // Prepare
      const { queue: dlq } = queueWith({ name: 'events-dlq.fifo' });

      // Act
      const result = dlq.sendMessage({ body: 'not json', messageGroupId: 'a', messageDeduplicationId: 'malformed-1' });

      // Assess
      expect(result.duplicate).toBe(false);
      expect(bodies(dlq.receiveMessages())).toEqual(['not json']);
    });
  });

  describe('deduplication', () => {
    it('accepts but drops a duplicate deduplication id within the window, answering the first message id', () => {
      // Prepare
      const { clock, queue } = queueWith();
      const first = queue.sendMessage({ body: 'one', messageGroupId: 'a', messageDeduplicationId: 'x' });
      clock.advance(299_999);

      // Act
      const duplicate = queue.sendMessage({ body: 'two', messageGroupId: 'a', messageDeduplicationId: 'x' });

      // Assess
      expect(duplicate).toMatchObject({ duplicate: true, messageId: first.messageId, sequenceNumber: first.sequenceNumber });
      expect(bodies(queue.receiveMessages({ maxNumberOfMessages: 10 }))).toEqual(['one']);
    });

    it('drops a duplicate even after the first message was deleted', () => {
      // Prepare
      const { queue } = queueWith();
      queue.sendMessage({ body: 'one', messageGroupId: 'a', messageDeduplicationId: 'x' });
      const [first] = queue.receiveMessages();
      queue.deleteMessage(first?.receiptHandle ?? '');

      // Act
      const retry = queue.sendMessage({ body: 'one again', messageGroupId: 'a', messageDeduplicationId: 'x' });

      // Assess
      expect(retry.duplicate).toBe(true);
      expect(queue.stats().total).toBe(0);
    });

    it('accepts the same deduplication id again once the window has passed', () => {
      // Prepare
      const { clock, queue } = queueWith();
      queue.sendMessage({ body: 'one', messageGroupId: 'a', messageDeduplicationId: 'x' });
      clock.advance(300_000);

      // Act
      const later = queue.sendMessage({ body: 'two', messageGroupId: 'a', messageDeduplicationId: 'x' });

      // Assess
      expect(later.duplicate).toBe(false);
      expect(bodies(queue.receiveMessages({ maxNumberOfMessages: 10 }))).toEqual(['one', 'two']);
    });

    it('accepts a different deduplication id with the same body', () => {
      // Prepare
      const { queue } = queueWith();
      queue.sendMessage({ body: 'same', messageGroupId: 'a', messageDeduplicationId: 'x' });

      // Act
      const other = queue.sendMessage({ body: 'same', messageGroupId: 'a', messageDeduplicationId: 'y' });

      // Assess
      expect(other.duplicate).toBe(false);
      expect(queue.stats().total).toBe(2);
    });

    it('deduplicates on the body when content-based deduplication is on and no id is given', () => {
      // Prepare
      const { queue } = queueWith({ contentBasedDeduplication: true });
      queue.sendMessage({ body: 'same', messageGroupId: 'a' });

      // Act
      const again = queue.sendMessage({ body: 'same', messageGroupId: 'b' });
      const other = queue.sendMessage({ body: 'other', messageGroupId: 'a' });

      // Assess
      expect([again.duplicate, other.duplicate]).toEqual([true, false]);
      expect(queue.stats().total).toBe(2);
    });

    it('refuses a message without deduplication id when content-based deduplication is off', () => {
      // Prepare
      const { queue } = queueWith();

      // Act
      const sendWithoutId = () => queue.sendMessage({ body: 'x', messageGroupId: 'a' });

      // Assess
      expect(sendWithoutId).toThrow(SQSServiceException);
      expect(sendWithoutId).toThrow(expect.objectContaining({ name: 'InvalidParameterValue' }));
      expect(queue.stats().total).toBe(0);
    });
  });

  describe('send validation', () => {
    const cases: ReadonlyArray<{ name: string; body: string; group: string; error: string }> = [
      { name: 'a missing group id', body: 'x', group: '', error: 'MissingParameter' },
      { name: 'an empty body', body: '', group: 'a', error: 'MissingParameter' },
      { name: 'a body with a character SQS refuses', body: 'bell\u0007', group: 'a', error: 'InvalidMessageContents' },
      { name: 'a body over 256 KiB', body: 'x'.repeat(262_145), group: 'a', error: 'InvalidParameterValue' },
    ];
    it.each(cases)('refuses $name with $error', ({ body, group, error }) => {
      // Prepare
      const { queue } = queueWith();

      // Act
      const sendInvalid = () => queue.sendMessage({ body, messageGroupId: group, messageDeduplicationId: 'd' });

      // Assess
      expect(sendInvalid).toThrow(expect.objectContaining({ name: error }));
      expect(queue.stats().total).toBe(0);
    });

    it('refuses a queue name without the .fifo suffix', () => {
      // Prepare, Act
      const create = () => new EmbeddedFifoQueue({ name: 'events' });

      // Assess
      expect(create).toThrow(expect.objectContaining({ name: 'InvalidParameterValue' }));
    });
  });

  describe('checksums and identifiers', () => {
    it('computes MD5OfMessageAttributes as SQS does (vectors pinned by moto from AWS)', () => {
      // Prepare
      const vectors = [
        { value: '1493147359900', md5: '235c5c510d26fb653d073faed50ae77c' },
        { value: '1493147359901', md5: '994258b45346a2cc3f9cbb611aa7af30' },
      ];

      // Act
      const computed = vectors.map(({ value }) => md5OfMessageAttributes({ timestamp: { dataType: 'Number', stringValue: value } }));

      // Assess
      expect(computed).toEqual(vectors.map(({ md5 }) => md5));
      expect(md5OfMessageAttributes({})).toBeUndefined();
    });

    it('gives increasing 20-digit sequence numbers and the body MD5 SQS reports', () => {
      // Prepare
      const { queue } = queueWith();

      // Act
      const first = queue.sendMessage({ body: 'derp', messageGroupId: 'a', messageDeduplicationId: '1' });
      const second = queue.sendMessage({ body: 'derp', messageGroupId: 'b', messageDeduplicationId: '2' });

      // Assess
      expect(first.sequenceNumber).toMatch(/^\d{20}$/);
      expect(BigInt(second.sequenceNumber)).toBeGreaterThan(BigInt(first.sequenceNumber));
      expect(first.md5OfMessageBody).toBe('58fd9edd83341c29f1aebba81c31e257');
    });
  });

  describe('property: ordering and no loss', () => {
    it('delivers each group in send order, one batch at a time, and ends every message deleted or dead-lettered', () => {
      // A random script of consumer actions after random sends; the queue must never reorder a group, never hand out
      // a message while an earlier one of its group is in flight, and never lose a message.
      const action = fc.oneof(
        fc.record({ kind: fc.constant('receive' as const), max: fc.integer({ min: 1, max: 10 }) }),
        fc.record({ kind: fc.constant('ack' as const), pick: fc.nat() }),
        fc.record({ kind: fc.constant('fail' as const), pick: fc.nat(), seconds: fc.integer({ min: 0, max: 40 }) }),
        fc.record({ kind: fc.constant('tick' as const), seconds: fc.integer({ min: 1, max: 40 }) }),
      );
      fc.assert(
        fc.property(
          fc.array(fc.constantFrom('g1', 'g2', 'g3'), { minLength: 1, maxLength: 30 }),
          fc.array(action, { maxLength: 60 }),
          (groups, actions) => {
            // Prepare
            const clock = manualClock();
            const dlq = new EmbeddedFifoQueue({ name: 'dlq.fifo', clock });
            const queue = new EmbeddedFifoQueue({
              name: 'q.fifo',
              clock,
              visibilityTimeoutSeconds: 30,
              redrivePolicy: { deadLetterQueue: dlq, maxReceiveCount: 3 },
            });
            const sent = groups.map((group, index) => {
              const body = `${group}#${index}`;
              queue.sendMessage({ body, messageGroupId: group, messageDeduplicationId: `${index}` });
              return body;
            });
            const groupOf = (body: string) => body.split('#')[0] ?? '';
            // Our model of each message's invisibility, to check the one-batch-per-group rule independently.
            const visibleUntil = new Map<string, number>();
            const completed = new Set<string>();
            const firstDeliveries: string[] = [];
            const inFlight: ReceivedMessage[] = [];
            const receive = (max: number): ReceivedMessage[] => {
              const now = clock.now().getTime();
              const batch = queue.receiveMessages({ maxNumberOfMessages: max });
              const inBatch = new Set(bodies(batch));
              for (const message of batch) {
                const blockers = [...visibleUntil].filter(
                  ([body, until]) =>
                    groupOf(body) === message.attributes.messageGroupId && until > now && !completed.has(body) && !inBatch.has(body),
                );
                expect(blockers).toEqual([]);
                visibleUntil.set(message.body, now + 30_000);
                if (!firstDeliveries.includes(message.body)) firstDeliveries.push(message.body);
              }
              return batch;
            };

            // Act
            for (const step of actions) {
              if (step.kind === 'receive') inFlight.push(...receive(step.max));
              if (step.kind === 'tick') clock.advance(step.seconds * 1000);
              if ((step.kind === 'ack' || step.kind === 'fail') && inFlight.length > 0) {
                const [message] = inFlight.splice(step.pick % inFlight.length, 1);
                if (message === undefined) continue;
                try {
                  if (step.kind === 'ack') {
                    queue.deleteMessage(message.receiptHandle);
                    completed.add(message.body);
                  } else {
                    queue.changeMessageVisibility(message.receiptHandle, step.seconds);
                    visibleUntil.set(message.body, clock.now().getTime() + step.seconds * 1000);
                  }
                } catch (error) {
                  // Only stale or lapsed handles may be refused.
                  expect(error instanceof ReceiptHandleIsInvalid || error instanceof MessageNotInflight).toBe(true);
                }
              }
            }
            for (let round = 0; round < 100 && queue.stats().total > 0; round += 1) {
              clock.advance(40_000);
              for (const message of receive(10)) {
                queue.deleteMessage(message.receiptHandle);
                completed.add(message.body);
              }
            }

            // Assess
            const dead = drainBodies(dlq);
            expect(queue.stats().total).toBe(0);
            expect([...completed, ...dead].sort()).toEqual([...sent].sort());
            expect(dead.filter((body) => completed.has(body))).toEqual([]);
            for (const group of new Set(groups)) {
              const delivered = firstDeliveries.filter((body) => groupOf(body) === group);
              expect(delivered).toEqual(sent.filter((body) => groupOf(body) === group));
            }
          },
        ),
        { numRuns: 200 },
      );
    });
  });
});

/** Receives and deletes everything in `queue`, returning the bodies. */
function drainBodies(queue: EmbeddedFifoQueue): string[] {
  const seen: string[] = [];
  for (let batch = queue.receiveMessages({ maxNumberOfMessages: 10 }); batch.length > 0; batch = queue.receiveMessages({ maxNumberOfMessages: 10 })) {
    for (const message of batch) {
      seen.push(message.body);
      queue.deleteMessage(message.receiptHandle);
    }
  }
  return seen;
}
