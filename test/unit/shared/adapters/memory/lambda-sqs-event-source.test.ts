import { describe, expect, it } from 'vitest';
import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { EmbeddedFifoQueue } from '#shared/adapters/memory/embedded-fifo-queue.ts';
import { EmbeddedSqsClient } from '#shared/adapters/memory/embedded-sqs-client.ts';
import {
  DrainTimeoutError,
  InvocationOutcome,
  LambdaSqsEventSource,
  type SqsBatchHandler,
} from '#shared/adapters/memory/lambda-sqs-event-source.ts';
import { manualClock } from '#test/support/manual-clock.ts';


function setup(maxReceiveCount = 5) {
  const clock = manualClock();
  const dlq = new EmbeddedFifoQueue({ name: 'events-dlq.fifo', clock, region: 'eu-west-1', accountId: '123456789012' });
  const queue = new EmbeddedFifoQueue({
    name: 'events.fifo',
    clock,
    region: 'eu-west-1',
    accountId: '123456789012',
    visibilityTimeoutSeconds: 30,
    redrivePolicy: { deadLetterQueue: dlq, maxReceiveCount },
  });
  return { clock, queue, dlq };
}

let dedup = 0;
function send(queue: EmbeddedFifoQueue, group: string, body: string): string {
  dedup += 1;
  return queue.sendMessage({ body, messageGroupId: group, messageDeduplicationId: `d${dedup}` }).messageId;
}

/** A handler that records what it saw and answers with `respond`. */
function recordingHandler(respond: (event: SQSEvent) => SQSBatchResponse | void | Promise<SQSBatchResponse | void>) {
  const seen: Array<{ event: SQSEvent; context: Context }> = [];
  const handler: SqsBatchHandler = async (event, context) => {
    seen.push({ event, context });
    return respond(event);
  };
  return { handler, seen };
}

const idOfBody = (event: SQSEvent, body: string) => event.Records.find((record) => record.body === body)?.messageId ?? '';

describe('Class: LambdaSqsEventSource', () => {
  describe('the event and context handed to the handler', () => {
    it('builds a real-shaped SQSEvent and a plausible Context', async () => {
      // Prepare
      const { queue } = setup();
      const messageId = queue.sendMessage({
        body: '{"specversion":"1.0"}',
        messageGroupId: 'cluster-a/node-1',
        messageDeduplicationId: 'uid-1:42',
        messageAttributes: {
          kind: { dataType: 'String', stringValue: 'Node' },
          blob: { dataType: 'Binary', binaryValue: Uint8Array.of(1, 2, 3) },
        },
      }).messageId;
      const { handler, seen } = recordingHandler(() => undefined);
      const source = new LambdaSqsEventSource({ queue, handler, functionName: 'reconcile-node-taints', functionTimeoutSeconds: 60 });

      // Act
      await source.pollOnce();

      // Assess
      const [call] = seen;
      expect(call?.event.Records).toHaveLength(1);
      expect(call?.event.Records[0]).toMatchObject({
        messageId,
        body: '{"specversion":"1.0"}',
        attributes: {
          ApproximateReceiveCount: '1',
          SentTimestamp: String(Date.parse('2026-01-01T00:00:00Z')),
          ApproximateFirstReceiveTimestamp: String(Date.parse('2026-01-01T00:00:00Z')),
          SequenceNumber: expect.stringMatching(/^\d{20}$/),
          MessageGroupId: 'cluster-a/node-1',
          MessageDeduplicationId: 'uid-1:42',
          SenderId: expect.any(String),
        },
        messageAttributes: {
          kind: { stringValue: 'Node', stringListValues: [], binaryListValues: [], dataType: 'String' },
          blob: { binaryValue: 'AQID', stringListValues: [], binaryListValues: [], dataType: 'Binary' },
        },
        md5OfBody: expect.stringMatching(/^[0-9a-f]{32}$/),
        md5OfMessageAttributes: expect.stringMatching(/^[0-9a-f]{32}$/),
        eventSource: 'aws:sqs',
        eventSourceARN: 'arn:aws:sqs:eu-west-1:123456789012:events.fifo',
        awsRegion: 'eu-west-1',
      });
      expect(call?.context).toMatchObject({
        functionName: 'reconcile-node-taints',
        functionVersion: '$LATEST',
        invokedFunctionArn: 'arn:aws:lambda:eu-west-1:123456789012:function:reconcile-node-taints',
        logGroupName: '/aws/lambda/reconcile-node-taints',
        awsRequestId: expect.stringMatching(/^[0-9a-f-]{36}$/),
      });
      expect(call?.context.getRemainingTimeInMillis()).toBe(60_000);
    });

    it('hands the handler at most batchSize records per invocation', async () => {
      // Prepare
      const { queue } = setup();
      for (let i = 0; i < 5; i += 1) send(queue, 'g', `m${i}`);
      const { handler, seen } = recordingHandler(() => undefined);
      const source = new LambdaSqsEventSource({ queue, handler, batchSize: 2 });

      // Act
      await source.pollOnce();
      await source.pollOnce();
      await source.pollOnce();

      // Assess
      expect(seen.map(({ event }) => event.Records.map((record) => record.body))).toEqual([['m0', 'm1'], ['m2', 'm3'], ['m4']]);
      expect(queue.stats().total).toBe(0);
    });

    it('refuses a batch size over 10, which Lambda does not allow for FIFO queues', () => {
      // Prepare
      const { queue } = setup();

      // Act
      const create = () => new LambdaSqsEventSource({ queue, handler: async () => undefined, batchSize: 11 });

      // Assess
      expect(create).toThrow(RangeError);
    });
  });

  describe('partial batch responses', () => {
    const successes: ReadonlyArray<{ name: string; response: SQSBatchResponse | void | Record<string, unknown> }> = [
      { name: 'void', response: undefined },
      { name: 'an empty object', response: {} },
      { name: 'an empty batchItemFailures list', response: { batchItemFailures: [] } },
      { name: 'a null batchItemFailures list', response: { batchItemFailures: null } },
    ];
    it.each(successes)('deletes the whole batch when the handler returns $name', async ({ response }) => {
      // Prepare
      const { queue } = setup();
      send(queue, 'a', 'a1');
      send(queue, 'b', 'b1');
      const source = new LambdaSqsEventSource({ queue, handler: async () => response as SQSBatchResponse | void });

      // Act
      const result = await source.pollOnce();

      // Assess
      expect(result?.outcome).toBe(InvocationOutcome.succeeded);
      expect(result?.deleted).toHaveLength(2);
      expect(queue.stats().total).toBe(0);
    });

    it('leaves only the records listed in batchItemFailures on the queue and deletes the others', async () => {
      // Prepare
      const { clock, queue } = setup();
      send(queue, 'a', 'a1');
      const failingId = send(queue, 'b', 'b1');
      send(queue, 'c', 'c1');
      const source = new LambdaSqsEventSource({
        queue,
        handler: async (event) => ({ batchItemFailures: [{ itemIdentifier: idOfBody(event, 'b1') }] }),
      });

      // Act
      const result = await source.pollOnce();

      // Assess
      expect(result).toMatchObject({ outcome: InvocationOutcome.partial, failed: [failingId] });
      expect(queue.stats()).toMatchObject({ visible: 0, inFlight: 1, perGroup: { b: { visible: 0, inFlight: 1 } } });
      clock.advance(30_000);
      const [redelivered] = queue.receiveMessages();
      expect(redelivered).toMatchObject({ messageId: failingId, attributes: { approximateReceiveCount: 2 } });
    });

    it('keeps a failed group blocked until its visibility timeout while other groups keep flowing', async () => {
      // Prepare
      const { clock, queue } = setup();
      send(queue, 'a', 'a1');
      send(queue, 'a', 'a2');
      send(queue, 'b', 'b1');
      const { handler, seen } = recordingHandler((event) => ({
        batchItemFailures: event.Records.filter((record) => record.attributes.MessageGroupId === 'a').map((record) => ({
          itemIdentifier: record.messageId,
        })),
      }));
      const source = new LambdaSqsEventSource({ queue, handler, batchSize: 1 });

      // Act
      await source.pollOnce();
      await source.pollOnce();
      const whileBlocked = await source.pollOnce();
      clock.advance(30_000);
      await source.pollOnce();

      // Assess
      expect(seen.map(({ event }) => event.Records[0]?.body)).toEqual(['a1', 'b1', 'a1']);
      expect(whileBlocked).toBeUndefined();
      expect(seen[2]?.event.Records[0]?.attributes.ApproximateReceiveCount).toBe('2');
    });

    it('brings a failed record back after the visibility the handler set with ChangeMessageVisibility', async () => {
      // Prepare
      const { clock, queue } = setup();
      const client = new EmbeddedSqsClient([queue]);
      send(queue, 'a', 'a1');
      const source = new LambdaSqsEventSource({
        queue,
        handler: async (event) => {
          // What the reconcile handler does on a conflict: back off with ChangeMessageVisibility, report the failure.
          const [record] = event.Records;
          if (record === undefined) return;
          await client.send(new ChangeMessageVisibilityCommand({ QueueUrl: queue.url, ReceiptHandle: record.receiptHandle, VisibilityTimeout: 2 }));
          return { batchItemFailures: [{ itemIdentifier: record.messageId }] };
        },
      });

      // Act
      await source.pollOnce();
      clock.advance(1_999);
      const tooEarly = queue.receiveMessages();
      clock.advance(1);
      const retried = queue.receiveMessages();

      // Assess
      expect(tooEarly).toEqual([]);
      expect(retried.map((message) => message.body)).toEqual(['a1']);
    });
  });

  describe('whole-batch failures', () => {
    it('deletes nothing when the handler throws', async () => {
      // Prepare
      const { queue } = setup();
      send(queue, 'a', 'a1');
      send(queue, 'b', 'b1');
      const boom = new Error('boom');
      const source = new LambdaSqsEventSource({
        queue,
        handler: async () => {
          throw boom;
        },
      });

      // Act
      const result = await source.pollOnce();

      // Assess
      expect(result).toMatchObject({ outcome: InvocationOutcome.failed, failureReason: 'handler-error', error: boom, deleted: [] });
      expect(queue.stats()).toMatchObject({ visible: 0, inFlight: 2 });
      expect(source.counters).toMatchObject({ invocations: 1, records: 2, failedRecords: 2, failedInvocations: 1, handlerErrors: 1 });
    });

    const invalidResponses: ReadonlyArray<{ name: string; response: (event: SQSEvent) => unknown }> = [
      { name: 'an itemIdentifier that is not in the batch', response: () => ({ batchItemFailures: [{ itemIdentifier: 'someone-else' }] }) },
      { name: 'an empty itemIdentifier', response: () => ({ batchItemFailures: [{ itemIdentifier: '' }] }) },
      { name: 'a null itemIdentifier', response: () => ({ batchItemFailures: [{ itemIdentifier: null }] }) },
      { name: 'a misspelt key', response: (event) => ({ batchItemFailures: [{ itemIdentifer: event.Records[0]?.messageId }] }) },
      {
        name: 'one bad entry among good ones',
        response: (event) => ({ batchItemFailures: [{ itemIdentifier: event.Records[0]?.messageId }, { itemIdentifier: 'nope' }] }),
      },
      { name: 'a response that is not an object', response: () => 'ok' },
    ];
    it.each(invalidResponses)('deletes nothing when the response has $name', async ({ response }) => {
      // Prepare
      const { queue } = setup();
      send(queue, 'a', 'a1');
      send(queue, 'b', 'b1');
      const source = new LambdaSqsEventSource({ queue, handler: async (event) => response(event) as SQSBatchResponse });

      // Act
      const result = await source.pollOnce();

      // Assess
      expect(result).toMatchObject({ outcome: InvocationOutcome.failed, failureReason: 'invalid-response', deleted: [] });
      expect(queue.stats()).toMatchObject({ visible: 0, inFlight: 2 });
      expect(source.counters.invalidResponses).toBe(1);
    });

    it('dead-letters a record that keeps failing after maxReceiveCount receives, then delivers the rest of its group', async () => {
      // Prepare
      const { clock, queue, dlq } = setup(3);
      send(queue, 'a', 'poison');
      send(queue, 'a', 'a2');
      const { handler, seen } = recordingHandler((event) => ({
        batchItemFailures: event.Records.filter((record) => record.body === 'poison').map((record) => ({ itemIdentifier: record.messageId })),
      }));
      const source = new LambdaSqsEventSource({ queue, handler, batchSize: 1 });

      // Act
      for (let attempt = 0; attempt < 4; attempt += 1) {
        await source.pollOnce();
        clock.advance(30_000);
      }

      // Assess
      expect(seen.map(({ event }) => event.Records[0]?.body)).toEqual(['poison', 'poison', 'poison', 'a2']);
      expect(queue.stats().total).toBe(0);
      expect(dlq.receiveMessages().map((message) => message.body)).toEqual(['poison']);
    });

    it('counts a delete that SQS refuses because the handler outlived the visibility timeout, and redelivers', async () => {
      // Prepare
      const { clock, queue } = setup();
      send(queue, 'a', 'slow');
      const source = new LambdaSqsEventSource({
        queue,
        handler: async () => {
          clock.advance(31_000);
        },
      });

      // Act
      const result = await source.pollOnce();

      // Assess
      expect(result).toMatchObject({ outcome: InvocationOutcome.partial, deleteErrors: 1, deleted: [] });
      expect(queue.receiveMessages()[0]?.attributes.approximateReceiveCount).toBe(2);
    });
  });

  describe('running on real timers', () => {
    it('drains the queue with concurrent pollers, never running one group twice at once', async () => {
      // Prepare
      const queue = new EmbeddedFifoQueue({ name: 'live.fifo', visibilityTimeoutSeconds: 30 });
      const running = new Set<string>();
      const overlaps: string[] = [];
      const processed: string[] = [];
      let maxConcurrent = 0;
      let active = 0;
      const source = new LambdaSqsEventSource({
        queue,
        batchSize: 2,
        concurrency: 3,
        handler: async (event) => {
          active += 1;
          maxConcurrent = Math.max(maxConcurrent, active);
          const groups = new Set(event.Records.map((record) => record.attributes.MessageGroupId ?? ''));
          for (const group of groups) {
            if (running.has(group)) overlaps.push(group);
            running.add(group);
          }
          await new Promise((resolve) => setTimeout(resolve, 5));
          processed.push(...event.Records.map((record) => record.body));
          for (const group of groups) running.delete(group);
          active -= 1;
        },
      });
      for (let i = 0; i < 12; i += 1) send(queue, `g${i % 4}`, `g${i % 4}#${i}`);

      // Act
      source.start();
      await source.drain({ timeoutMs: 5_000 });
      await source.stop();

      // Assess
      expect(overlaps).toEqual([]);
      expect(maxConcurrent).toBeGreaterThan(1);
      expect([...processed].sort()).toEqual(Array.from({ length: 12 }, (_, i) => `g${i % 4}#${i}`).sort());
      for (const group of ['g0', 'g1', 'g2', 'g3']) {
        const order = processed.filter((body) => body.startsWith(`${group}#`));
        expect(order).toEqual([...order].sort((a, b) => Number(a.split('#')[1]) - Number(b.split('#')[1])));
      }
      expect(source.counters).toMatchObject({ records: 12, deletedRecords: 12, failedRecords: 0 });
    });

    it('picks up messages sent after start without waiting for the idle timeout', async () => {
      // Prepare
      const queue = new EmbeddedFifoQueue({ name: 'live.fifo' });
      const { handler, seen } = recordingHandler(() => undefined);
      const source = new LambdaSqsEventSource({ queue, handler, maxIdleWaitMs: 60_000 });
      source.start();

      // Act
      send(queue, 'g', 'late');
      await source.drain({ timeoutMs: 2_000 });
      await source.stop();

      // Assess
      expect(seen.map(({ event }) => event.Records[0]?.body)).toEqual(['late']);
      expect(source.isRunning).toBe(false);
    });

    it('waits in stop() for the running invocation and applies its response', async () => {
      // Prepare
      const queue = new EmbeddedFifoQueue({ name: 'live.fifo' });
      let release: () => void = () => undefined;
      let started: () => void = () => undefined;
      const invoked = new Promise<void>((resolve) => {
        started = resolve;
      });
      const source = new LambdaSqsEventSource({
        queue,
        handler: () =>
          new Promise<void>((resolve) => {
            started();
            release = resolve;
          }),
      });
      send(queue, 'g', 'm');
      source.start();
      await invoked;

      // Act
      const stopping = source.stop();
      release();
      await stopping;

      // Assess
      expect(queue.stats().total).toBe(0);
      expect(source.counters.invocations).toBe(1);
    });

    it('rejects drain() with DrainTimeoutError while a failed record waits out its visibility timeout', async () => {
      // Prepare
      const queue = new EmbeddedFifoQueue({ name: 'live.fifo', visibilityTimeoutSeconds: 60 });
      send(queue, 'g', 'failing');
      const source = new LambdaSqsEventSource({
        queue,
        handler: async (event) => ({ batchItemFailures: event.Records.map((record) => ({ itemIdentifier: record.messageId })) }),
      });
      source.start();

      // Act
      const rejection = await source.drain({ timeoutMs: 100 }).catch((error: unknown) => error);
      await source.stop();

      // Assess
      expect(rejection).toBeInstanceOf(DrainTimeoutError);
      expect(rejection).toMatchObject({ stats: { inFlight: 1, visible: 0 } });
    });
  });
});
