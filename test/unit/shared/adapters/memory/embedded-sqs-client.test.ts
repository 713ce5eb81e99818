import { describe, expect, expectTypeOf, it } from 'vitest';
import {
  BatchEntryIdsNotDistinct,
  BatchRequestTooLong,
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  EmptyBatchRequest,
  GetQueueAttributesCommand,
  ListQueuesCommand,
  QueueDoesNotExist,
  ReceiptHandleIsInvalid,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSClient,
  TooManyEntriesInBatchRequest,
  UnsupportedOperation,
} from '@aws-sdk/client-sqs';
import { EmbeddedFifoQueue } from '#shared/adapters/memory/embedded-fifo-queue.ts';
import { EmbeddedSqsClient, type SqsCommandSender } from '#shared/adapters/memory/embedded-sqs-client.ts';
import { manualClock } from '#test/support/manual-clock.ts';


function setup() {
  const clock = manualClock();
  const dlq = new EmbeddedFifoQueue({ name: 'events-dlq.fifo', clock });
  const queue = new EmbeddedFifoQueue({
    name: 'events.fifo',
    clock,
    visibilityTimeoutSeconds: 30,
    redrivePolicy: { deadLetterQueue: dlq, maxReceiveCount: 5 },
  });
  const client = new EmbeddedSqsClient([queue, dlq]);
  return { clock, queue, dlq, client, QueueUrl: queue.url };
}

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected a rejection');
}

describe('Class: EmbeddedSqsClient', () => {
  it('is usable wherever the product holds an SQSClient, and vice versa', () => {
    // Prepare, Act, Assess: a type-level check, so adapters typed against SqsCommandSender take either client.
    expectTypeOf<EmbeddedSqsClient>().toExtend<SqsCommandSender>();
    expectTypeOf<SQSClient>().toExtend<SqsCommandSender>();
  });

  it('sends with SendMessageCommand and receives with ReceiveMessageCommand, with SDK-shaped results', async () => {
    // Prepare
    const { client, QueueUrl } = setup();

    // Act
    const sent = await client.send(
      new SendMessageCommand({
        QueueUrl,
        MessageBody: 'derp',
        MessageGroupId: 'cluster-a/node-1',
        MessageDeduplicationId: 'uid-1:42',
        MessageAttributes: { timestamp: { DataType: 'Number', StringValue: '1493147359900' } },
      }),
    );
    const received = await client.send(
      new ReceiveMessageCommand({
        QueueUrl,
        MaxNumberOfMessages: 10,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );

    // Assess
    expect(sent).toMatchObject({
      MD5OfMessageBody: '58fd9edd83341c29f1aebba81c31e257',
      MD5OfMessageAttributes: '235c5c510d26fb653d073faed50ae77c',
      $metadata: { httpStatusCode: 200 },
    });
    expect(sent.SequenceNumber).toMatch(/^\d{20}$/);
    expect(received.Messages).toHaveLength(1);
    expect(received.Messages?.[0]).toMatchObject({
      MessageId: sent.MessageId,
      Body: 'derp',
      MD5OfBody: '58fd9edd83341c29f1aebba81c31e257',
      MD5OfMessageAttributes: '235c5c510d26fb653d073faed50ae77c',
      MessageAttributes: { timestamp: { DataType: 'Number', StringValue: '1493147359900' } },
      Attributes: {
        MessageGroupId: 'cluster-a/node-1',
        MessageDeduplicationId: 'uid-1:42',
        ApproximateReceiveCount: '1',
        SequenceNumber: sent.SequenceNumber,
      },
    });
  });

  it('returns only the system and message attributes a receive asks for, and no Messages when empty', async () => {
    // Prepare
    const { client, QueueUrl } = setup();
    await client.send(
      new SendMessageCommand({
        QueueUrl,
        MessageBody: 'x',
        MessageGroupId: 'g',
        MessageDeduplicationId: '1',
        MessageAttributes: { 'trace.id': { DataType: 'String', StringValue: 't' }, other: { DataType: 'String', StringValue: 'o' } },
      }),
    );

    // Act
    const received = await client.send(
      new ReceiveMessageCommand({ QueueUrl, MessageSystemAttributeNames: ['ApproximateReceiveCount'], MessageAttributeNames: ['trace.*'] }),
    );
    const empty = await client.send(new ReceiveMessageCommand({ QueueUrl }));

    // Assess
    expect(received.Messages?.[0]?.Attributes).toEqual({ ApproximateReceiveCount: '1' });
    expect(Object.keys(received.Messages?.[0]?.MessageAttributes ?? {})).toEqual(['trace.id']);
    expect(empty.Messages).toBeUndefined();
  });

  it('reports per-entry failures of SendMessageBatchCommand in Failed and enqueues the rest', async () => {
    // Prepare
    const { client, queue, QueueUrl } = setup();

    // Act
    const result = await client.send(
      new SendMessageBatchCommand({
        QueueUrl,
        Entries: [
          { Id: 'ok-1', MessageBody: 'one', MessageGroupId: 'g', MessageDeduplicationId: 'd1' },
          { Id: 'no-group', MessageBody: 'two', MessageDeduplicationId: 'd2' },
          { Id: 'delayed', MessageBody: 'three', MessageGroupId: 'g', MessageDeduplicationId: 'd3', DelaySeconds: 5 },
          { Id: 'ok-2', MessageBody: 'four', MessageGroupId: 'g', MessageDeduplicationId: 'd4' },
        ],
      }),
    );

    // Assess
    expect(result.Successful?.map((entry) => entry.Id)).toEqual(['ok-1', 'ok-2']);
    expect(result.Failed).toEqual([
      expect.objectContaining({ Id: 'no-group', SenderFault: true, Code: 'MissingParameter' }),
      expect.objectContaining({ Id: 'delayed', SenderFault: true, Code: 'InvalidParameterValue' }),
    ]);
    expect(queue.receiveMessages({ maxNumberOfMessages: 10 }).map((m) => m.body)).toEqual(['one', 'four']);
  });

  it('answers a duplicate entry of a batch as successful with the first message id, without enqueueing it', async () => {
    // Prepare
    const { client, queue, QueueUrl } = setup();
    const first = await client.send(new SendMessageCommand({ QueueUrl, MessageBody: 'a', MessageGroupId: 'g', MessageDeduplicationId: 'same' }));

    // Act
    const result = await client.send(
      new SendMessageBatchCommand({ QueueUrl, Entries: [{ Id: 'again', MessageBody: 'a', MessageGroupId: 'g', MessageDeduplicationId: 'same' }] }),
    );

    // Assess
    expect(result.Successful).toEqual([expect.objectContaining({ Id: 'again', MessageId: first.MessageId })]);
    expect(queue.stats().total).toBe(1);
  });

  const batchErrors: ReadonlyArray<{ name: string; entries: Array<{ Id: string; MessageBody: string }>; error: unknown }> = [
    { name: 'no entries', entries: [], error: EmptyBatchRequest },
    {
      name: 'more than 10 entries',
      entries: Array.from({ length: 11 }, (_, i) => ({ Id: `e${i}`, MessageBody: 'x' })),
      error: TooManyEntriesInBatchRequest,
    },
    {
      name: 'two entries with the same Id',
      entries: [
        { Id: 'same', MessageBody: 'x' },
        { Id: 'same', MessageBody: 'y' },
      ],
      error: BatchEntryIdsNotDistinct,
    },
    {
      name: 'more than 256 KiB in total',
      entries: [
        { Id: 'a', MessageBody: 'x'.repeat(200_000) },
        { Id: 'b', MessageBody: 'y'.repeat(62_145) },
      ],
      error: BatchRequestTooLong,
    },
  ];
  it.each(batchErrors)('refuses a whole SendMessageBatchCommand with $name', async ({ entries, error }) => {
    // Prepare
    const { client, queue, QueueUrl } = setup();
    const withGroups = entries.map((entry, index) => ({ ...entry, MessageGroupId: 'g', MessageDeduplicationId: `d${index}` }));

    // Act
    const rejection = await rejectionOf(client.send(new SendMessageBatchCommand({ QueueUrl, Entries: withGroups })));

    // Assess
    expect(rejection).toBeInstanceOf(error as new (...args: never[]) => Error);
    expect(rejection).toMatchObject({ $fault: 'client', $metadata: { httpStatusCode: 400 } });
    expect(queue.stats().total).toBe(0);
  });

  it('changes visibility and deletes through the commands, and rejects a stale handle like SQS', async () => {
    // Prepare
    const { client, queue, QueueUrl } = setup();
    await client.send(new SendMessageCommand({ QueueUrl, MessageBody: 'a', MessageGroupId: 'g', MessageDeduplicationId: '1' }));
    const first = await client.send(new ReceiveMessageCommand({ QueueUrl }));
    const staleHandle = first.Messages?.[0]?.ReceiptHandle;

    // Act
    await client.send(new ChangeMessageVisibilityCommand({ QueueUrl, ReceiptHandle: staleHandle, VisibilityTimeout: 0 }));
    const second = await client.send(new ReceiveMessageCommand({ QueueUrl, MessageSystemAttributeNames: ['ApproximateReceiveCount'] }));
    const staleDelete = await rejectionOf(client.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: staleHandle })));
    await client.send(new DeleteMessageCommand({ QueueUrl, ReceiptHandle: second.Messages?.[0]?.ReceiptHandle }));

    // Assess
    expect(second.Messages?.[0]?.Attributes?.ApproximateReceiveCount).toBe('2');
    expect(staleDelete).toBeInstanceOf(ReceiptHandleIsInvalid);
    expect(queue.stats().total).toBe(0);
  });

  it('reports message counts and the queue configuration through GetQueueAttributesCommand', async () => {
    // Prepare
    const { client, dlq, QueueUrl } = setup();
    for (const id of ['1', '2', '3']) {
      await client.send(new SendMessageCommand({ QueueUrl, MessageBody: id, MessageGroupId: `g${id}`, MessageDeduplicationId: id }));
    }
    await client.send(new ReceiveMessageCommand({ QueueUrl }));

    // Act
    const some = await client.send(
      new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
    );
    const all = await client.send(new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['All'] }));

    // Assess
    expect(some.Attributes).toEqual({ ApproximateNumberOfMessages: '2', ApproximateNumberOfMessagesNotVisible: '1' });
    expect(all.Attributes).toMatchObject({
      FifoQueue: 'true',
      VisibilityTimeout: '30',
      ContentBasedDeduplication: 'false',
      RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: 5 }),
    });
  });

  it('rejects an unknown queue URL with QueueDoesNotExist and an unsupported command with UnsupportedOperation', async () => {
    // Prepare
    const { client } = setup();

    // Act
    const unknownQueue = await rejectionOf(client.send(new ReceiveMessageCommand({ QueueUrl: 'https://sqs.example/none.fifo' })));
    const unsupported = await rejectionOf(client.send(new ListQueuesCommand({})));

    // Assess
    expect(unknownQueue).toBeInstanceOf(QueueDoesNotExist);
    expect(unsupported).toBeInstanceOf(UnsupportedOperation);
  });

  it('long-polls: a receive with WaitTimeSeconds resolves as soon as a message arrives', async () => {
    // Prepare
    const queue = new EmbeddedFifoQueue({ name: 'live.fifo' });
    const client = new EmbeddedSqsClient([queue]);
    const receiving = client.send(new ReceiveMessageCommand({ QueueUrl: queue.url, WaitTimeSeconds: 5 }));

    // Act
    setTimeout(() => queue.sendMessage({ body: 'late', messageGroupId: 'g', messageDeduplicationId: '1' }), 20);
    const startedAt = Date.now();
    const received = await receiving;

    // Assess
    expect(received.Messages?.map((message) => message.Body)).toEqual(['late']);
    expect(Date.now() - startedAt).toBeLessThan(2_000);
  });
});
