/**
 * The local stand-in for Lambda's SQS event source mapping, against the in-process SQS server (fauxqs on loopback,
 * real @aws-sdk/client-sqs): the event and context it hands the handler, what it deletes after success, partial
 * failure, a throw or an invalid response, one batch in flight per message group, and redrive to the DLQ.
 */
import { ChangeMessageVisibilityCommand, ReceiveMessageCommand, SendMessageBatchCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { connect } from 'node:net';
import { networkInterfaces } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { startLocalSqs, type LocalSqs } from '#local/sqs/local-sqs.ts';
import { InvocationOutcome, SqsEventSource, judgeResponse, type InvocationResult, type SqsBatchHandler } from '#local/sqs/sqs-event-source.ts';

let sqs: LocalSqs | undefined;
let source: SqsEventSource | undefined;
afterEach(async () => {
  await source?.stop();
  await sqs?.stop();
  source = undefined;
  sqs = undefined;
});

async function setUp(handler: SqsBatchHandler, o: { visibility?: number; maxReceiveCount?: number; concurrency?: number; batchSize?: number } = {}) {
  sqs = await startLocalSqs({ visibilityTimeoutSeconds: o.visibility ?? 1, maxReceiveCount: o.maxReceiveCount ?? 5 });
  const results: InvocationResult[] = [];
  source = new SqsEventSource({
    client: sqs.client,
    queue: sqs.queue,
    region: sqs.region,
    handler,
    concurrency: o.concurrency ?? 1,
    batchSize: o.batchSize ?? 10,
    functionName: 'fn',
    functionTimeoutSeconds: 30,
    onInvocation: (r) => results.push(r),
  });
  return { s: sqs, src: source, results };
}

async function sendAll(s: LocalSqs, messages: readonly { body: string; group: string }[]): Promise<void> {
  for (let i = 0; i < messages.length; i += 10) {
    const entries = messages.slice(i, i + 10).map((m, j) => ({ Id: `m${j}`, MessageBody: m.body, MessageGroupId: m.group, MessageDeduplicationId: `${m.group}-${m.body}` }));
    await s.client.send(new SendMessageBatchCommand({ QueueUrl: s.queue.url, Entries: entries }));
  }
}

describe('SqsEventSource (Lambda event source mapping over local SQS)', () => {
  it('hands the handler an SQSEvent and a Context shaped as Lambda\'s, and deletes every record after success', async () => {
    // Prepare
    const seen: { event: SQSEvent; context: Context }[] = [];
    const { s, src } = await setUp(async (event, context) => {
      seen.push({ event, context });
    });
    await s.client.send(
      new SendMessageCommand({
        QueueUrl: s.queue.url,
        MessageBody: '{"id":"1"}',
        MessageGroupId: 'self/node/n1',
        MessageDeduplicationId: 'd1',
        MessageAttributes: { reason: { DataType: 'String', StringValue: 'why' } },
      }),
    );

    // Act
    src.start();
    await src.drain({ timeoutMs: 10_000 });

    // Assess
    expect(seen).toHaveLength(1);
    const { event, context } = seen[0] as { event: SQSEvent; context: Context };
    const [record] = event.Records;
    expect(record).toMatchObject({
      body: '{"id":"1"}',
      eventSource: 'aws:sqs',
      eventSourceARN: s.queue.arn,
      awsRegion: 'eu-west-1',
      attributes: { ApproximateReceiveCount: '1', MessageGroupId: 'self/node/n1', MessageDeduplicationId: 'd1', SequenceNumber: expect.stringMatching(/^\d+$/) },
      messageAttributes: { reason: { stringValue: 'why', dataType: 'String', stringListValues: [], binaryListValues: [] } },
    });
    expect(record?.messageId).toMatch(/\S/);
    expect(context.functionName).toBe('fn');
    expect(context.getRemainingTimeInMillis()).toBeGreaterThan(25_000);
    expect(src.counters).toMatchObject({ invocations: 1, records: 1, deletedRecords: 1, failedRecords: 0 });
    expect(await s.depth(s.queue)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });

  it('deletes all but the batchItemFailures; a failed record comes back after its visibility timeout', async () => {
    // Prepare
    const receives: string[] = [];
    const { s, src, results } = await setUp(async (event): Promise<SQSBatchResponse> => {
      receives.push(...event.Records.map((r) => `${r.body}#${r.attributes.ApproximateReceiveCount}`));
      const failing = event.Records.filter((r) => r.body === 'bad' && r.attributes.ApproximateReceiveCount === '1');
      return { batchItemFailures: failing.map((r) => ({ itemIdentifier: r.messageId })) };
    });
    await sendAll(s, [
      { body: 'ok', group: 'g1' },
      { body: 'bad', group: 'g2' },
    ]);

    // Act
    src.start();
    await src.drain({ timeoutMs: 10_000 });

    // Assess
    expect(receives.sort()).toEqual(['bad#1', 'bad#2', 'ok#1']);
    expect(results.map((r) => r.outcome)).toContain(InvocationOutcome.partial);
    expect(src.counters).toMatchObject({ records: 3, deletedRecords: 2, failedRecords: 1 });
  });

  it.each([
    ['throws', async (): Promise<SQSBatchResponse> => Promise.reject(new Error('boom')), 'handler-error'],
    ['names a record not in the batch', async (): Promise<SQSBatchResponse> => ({ batchItemFailures: [{ itemIdentifier: 'nope' }] }), 'invalid-response'],
  ] as const)('deletes nothing when the handler %s', async (_name, failing, reason) => {
    // Prepare: the first invocation fails, the next one succeeds.
    let calls = 0;
    const receives: string[] = [];
    const { s, src, results } = await setUp(async (event): Promise<SQSBatchResponse> => {
      receives.push(...event.Records.map((r) => `${r.body}#${r.attributes.ApproximateReceiveCount}`));
      return ++calls === 1 ? failing() : { batchItemFailures: [] };
    });
    await sendAll(s, [{ body: 'a', group: 'g' }]);

    // Act
    src.start();
    await src.drain({ timeoutMs: 10_000 });

    // Assess
    expect(receives).toEqual(['a#1', 'a#2']);
    expect(results[0]).toMatchObject({ outcome: InvocationOutcome.failed, failureReason: reason, deleted: [] });
    expect(results[1]?.outcome).toBe(InvocationOutcome.succeeded);
  });

  it('runs at most one batch per message group at a time, in order, while groups run in parallel', async () => {
    // Prepare
    const active = new Map<string, number>();
    const order = new Map<string, string[]>();
    let maxPerGroup = 0;
    let running = 0;
    let maxRunning = 0;
    const { s, src } = await setUp(
      async (event) => {
        const groups = [...new Set(event.Records.map((r) => r.attributes.MessageGroupId ?? ''))];
        running++;
        maxRunning = Math.max(maxRunning, running);
        for (const g of groups) {
          active.set(g, (active.get(g) ?? 0) + 1);
          maxPerGroup = Math.max(maxPerGroup, active.get(g) ?? 0);
        }
        for (const r of event.Records) order.set(r.attributes.MessageGroupId ?? '', [...(order.get(r.attributes.MessageGroupId ?? '') ?? []), r.body]);
        await new Promise((r) => setTimeout(r, 30));
        for (const g of groups) active.set(g, (active.get(g) ?? 1) - 1);
        running--;
      },
      { concurrency: 4, batchSize: 2, visibility: 30 },
    );
    const groups = ['a', 'b', 'c', 'd'];
    await sendAll(
      s,
      [1, 2, 3, 4, 5].flatMap((i) => groups.map((g) => ({ body: `${g}${i}`, group: g }))),
    );

    // Act
    src.start();
    await src.drain({ timeoutMs: 20_000 });

    // Assess
    expect(maxPerGroup).toBe(1);
    expect(maxRunning).toBeGreaterThan(1);
    for (const g of groups) expect(order.get(g)).toEqual([1, 2, 3, 4, 5].map((i) => `${g}${i}`));
  });

  it('lets SQS redrive a record that keeps failing to the dead-letter queue after maxReceiveCount; its group flows on', async () => {
    // Prepare: the handler backs off for 0 s, as the reconcile function does with RETRY_BASE_SECONDS=0.
    const bodies: string[] = [];
    const { s, src } = await setUp(
      async (event) => {
        const failures = [];
        for (const r of event.Records) {
          bodies.push(r.body);
          if (r.body !== 'poison') continue;
          await s.client.send(new ChangeMessageVisibilityCommand({ QueueUrl: s.queue.url, ReceiptHandle: r.receiptHandle, VisibilityTimeout: 0 }));
          failures.push({ itemIdentifier: r.messageId });
        }
        return { batchItemFailures: failures };
      },
      { maxReceiveCount: 3, visibility: 30 },
    );
    await sendAll(s, [
      { body: 'poison', group: 'g' },
      { body: 'after', group: 'g' },
    ]);

    // Act
    src.start();
    await src.drain({ timeoutMs: 10_000 });

    // Assess
    expect(bodies).toEqual(['poison', 'poison', 'poison', 'after']);
    const dead = await s.client.send(new ReceiveMessageCommand({ QueueUrl: s.deadLetterQueue.url, MaxNumberOfMessages: 10 }));
    expect(dead.Messages?.map((m) => m.Body)).toEqual(['poison']);
  });

  it('stop() waits for the running invocation and applies its response', async () => {
    // Prepare
    let release: () => void = () => undefined;
    let started: () => void = () => undefined;
    const running = new Promise<void>((r) => (started = r));
    const { s, src } = await setUp(async () => {
      started();
      await new Promise<void>((r) => (release = r));
    });
    await sendAll(s, [{ body: 'a', group: 'g' }]);
    src.start();
    await running;

    // Act
    const stopping = src.stop();
    release();
    await stopping;

    // Assess
    expect(src.counters.deletedRecords).toBe(1);
    expect(await s.depth(s.queue)).toEqual({ visible: 0, inFlight: 0, delayed: 0 });
  });

  it('refuses a FIFO batch size above 10, quoting it', () => {
    expect(() => new SqsEventSource({ client: { send: async () => ({}) } as never, queue: { url: 'u', arn: 'a' }, region: 'r', handler: async () => undefined, batchSize: 11 })).toThrow(
      'must be 1 to 10, got 11',
    );
  });

  it.each([
    [undefined, 'all-succeeded'],
    [{}, 'all-succeeded'],
    [{ batchItemFailures: [] }, 'all-succeeded'],
    [{ batchItemFailures: [{ itemIdentifier: 'm1' }] }, 'some-failed'],
    [{ batchItemFailures: [{ itemIdentifier: '' }] }, 'invalid'],
    [{ batchItemFailures: 'm1' }, 'invalid'],
    ['ok', 'invalid'],
  ])('judges the response %j as Lambda does: %s', (response, kind) => {
    expect(judgeResponse(response, new Set(['m1', 'm2'])).kind).toBe(kind);
  });

  it('serves loopback only: the port is closed on every other address of this machine', async (ctx) => {
    // Prepare
    sqs = await startLocalSqs();
    const port = Number(new URL(sqs.endpoint).port);
    const others = Object.values(networkInterfaces())
      .flat()
      .filter((a) => a !== undefined && !a.internal && a.family === 'IPv4')
      .map((a) => a?.address ?? '');
    if (others.length === 0) ctx.skip('this machine has no non-loopback IPv4 address to try');

    // Act
    const outcomes = await Promise.all(
      others.map(
        (host) =>
          new Promise<string>((resolve) => {
            const socket = connect({ host, port, timeout: 2000 });
            socket.once('connect', () => (socket.destroy(), resolve(`${host}: connected`)));
            socket.once('timeout', () => (socket.destroy(), resolve(`${host}: timeout`)));
            socket.once('error', (e: NodeJS.ErrnoException) => resolve(`${host}: ${e.code ?? e.message}`));
          }),
      ),
    );

    // Assess
    for (const outcome of outcomes) expect(outcome).not.toMatch(/connected$/);
  });
});
