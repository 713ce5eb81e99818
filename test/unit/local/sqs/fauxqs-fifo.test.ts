/**
 * The SQS FIFO behaviour the product relies on, checked against the in-process server (fauxqs on loopback) through
 * the real @aws-sdk/client-sqs, so that a regression of the server shows here and not as a puzzling e2e failure:
 * deduplication, sequence numbers, order within a group, group locking, ChangeMessageVisibility, visibility expiry
 * and redrive to the FIFO dead-letter queue after maxReceiveCount.
 */
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { afterEach, describe, expect, it } from 'vitest';
import { startLocalSqs, type LocalSqs } from '#local/sqs/local-sqs.ts';

let sqs: LocalSqs | undefined;
afterEach(async () => {
  await sqs?.stop();
  sqs = undefined;
});

async function start(options: Parameters<typeof startLocalSqs>[0] = {}): Promise<{ s: LocalSqs; client: SQSClient; url: string }> {
  sqs = await startLocalSqs(options);
  return { s: sqs, client: sqs.client, url: sqs.queue.url };
}

async function send(client: SQSClient, url: string, body: string, group: string, dedup = body): Promise<{ id: string; seq: string }> {
  const out = await client.send(new SendMessageCommand({ QueueUrl: url, MessageBody: body, MessageGroupId: group, MessageDeduplicationId: dedup }));
  return { id: out.MessageId ?? '', seq: out.SequenceNumber ?? '' };
}

async function receive(client: SQSClient, url: string, max = 10, wait = 0): Promise<Message[]> {
  const out = await client.send(
    new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: max, WaitTimeSeconds: wait, MessageSystemAttributeNames: ['All'], MessageAttributeNames: ['All'] }),
  );
  return out.Messages ?? [];
}

const bodies = (messages: readonly Message[]): string[] => messages.map((m) => m.Body ?? '');
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('local SQS (fauxqs) through @aws-sdk/client-sqs', () => {
  it('listens on loopback only, and creates a FIFO queue with a FIFO dead-letter queue and a redrive policy', async () => {
    // Act
    const { s, client } = await start({ visibilityTimeoutSeconds: 7, maxReceiveCount: 3 });
    const attrs = (await client.send(new GetQueueAttributesCommand({ QueueUrl: s.queue.url, AttributeNames: ['All'] }))).Attributes ?? {};
    const dlqAttrs = (await client.send(new GetQueueAttributesCommand({ QueueUrl: s.deadLetterQueue.url, AttributeNames: ['All'] }))).Attributes ?? {};

    // Assess
    expect(s.endpoint).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(attrs['FifoQueue']).toBe('true');
    expect(attrs['VisibilityTimeout']).toBe('7');
    expect(JSON.parse(attrs['RedrivePolicy'] ?? '{}')).toEqual({ deadLetterTargetArn: s.deadLetterQueue.arn, maxReceiveCount: 3 });
    expect(dlqAttrs['FifoQueue']).toBe('true');
    expect(s.queue.arn).toBe('arn:aws:sqs:eu-west-1:000000000000:capi-taint-propagator-events.fifo');
  });

  it('refuses a queue name without .fifo, quoting it', async () => {
    await expect(startLocalSqs({ queueName: 'events' })).rejects.toThrow('"events" must end in ".fifo"');
  });

  it('deduplicates by MessageDeduplicationId (answering with the first message id) and numbers messages in order', async () => {
    // Prepare
    const { client, url } = await start();

    // Act
    const first = await send(client, url, 'a', 'g1', 'dedup-1');
    const again = await send(client, url, 'a-again', 'g1', 'dedup-1');
    const batch = await client.send(
      new SendMessageBatchCommand({
        QueueUrl: url,
        Entries: [
          { Id: 'x', MessageBody: 'b', MessageGroupId: 'g1', MessageDeduplicationId: 'dedup-2' },
          { Id: 'y', MessageBody: 'dup', MessageGroupId: 'g1', MessageDeduplicationId: 'dedup-1' },
        ],
      }),
    );

    // Assess
    expect(again.id).toBe(first.id);
    const [x, y] = batch.Successful ?? [];
    expect(y?.MessageId).toBe(first.id);
    expect(BigInt(x?.SequenceNumber ?? '0')).toBeGreaterThan(BigInt(first.seq));
    const got = [...(await receive(client, url)), ...(await receive(client, url))];
    expect(bodies(got)).toEqual(['a']);
  });

  it('delivers a group in order, keeps it locked while one of its messages is in flight, and serves other groups meanwhile', async () => {
    // Prepare
    const { client, url } = await start();
    for (const body of ['g1-1', 'g1-2', 'g1-3']) await send(client, url, body, 'g1');
    await send(client, url, 'g2-1', 'g2');

    // Act + Assess: the head of each group; g1's next message waits until its head is deleted.
    const first = await receive(client, url);
    expect(bodies(first).sort()).toEqual(['g1-1', 'g2-1']);
    expect(first.find((m) => m.Body === 'g1-1')?.Attributes?.['MessageGroupId']).toBe('g1');
    expect(await receive(client, url)).toEqual([]);
    const head = first.find((m) => m.Body === 'g1-1');
    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: head?.ReceiptHandle }));
    const second = await receive(client, url);
    expect(bodies(second)).toEqual(['g1-2']);
    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: second[0]?.ReceiptHandle }));
    expect(bodies(await receive(client, url))).toEqual(['g1-3']);
  });

  it('ChangeMessageVisibility(0) puts the message back at the head of its group at once, with its receive count', async () => {
    // Prepare
    const { client, url } = await start({ visibilityTimeoutSeconds: 60 });
    await send(client, url, 'm1', 'g');
    await send(client, url, 'm2', 'g');
    const [m1] = await receive(client, url);

    // Act
    await client.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: m1?.ReceiptHandle, VisibilityTimeout: 0 }));

    // Assess
    const again = await receive(client, url);
    expect(bodies(again)).toEqual(['m1']);
    expect(again[0]?.Attributes?.['ApproximateReceiveCount']).toBe('2');
  });

  it('a ChangeMessageVisibility on a message no longer in flight fails (the reconcile function then counts a transient error)', async () => {
    // Prepare
    const { client, url } = await start();
    await send(client, url, 'm', 'g');
    const [m] = await receive(client, url);
    await client.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m?.ReceiptHandle }));

    // Act + Assess
    await expect(client.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: m?.ReceiptHandle, VisibilityTimeout: 5 }))).rejects.toThrow(/not available|not.*in ?flight/i);
  });

  it('makes an undeleted message visible again after its visibility timeout (a long poll wakes up for it)', async () => {
    // Prepare
    const { client, url } = await start({ visibilityTimeoutSeconds: 1 });
    await send(client, url, 'm', 'g');
    const [first] = await receive(client, url);
    expect(await receive(client, url)).toEqual([]);

    // Act: a long poll started while the message is invisible.
    const again = await receive(client, url, 10, 5);

    // Assess
    expect(bodies(again)).toEqual(['m']);
    expect(again[0]?.ReceiptHandle).not.toBe(first?.ReceiptHandle);
    expect(again[0]?.Attributes?.['ApproximateReceiveCount']).toBe('2');
  });

  it('moves a message to the FIFO dead-letter queue, group and body intact, on the receive after maxReceiveCount', async () => {
    // Prepare
    const { s, client, url } = await start({ maxReceiveCount: 2 });
    await send(client, url, 'poison', 'g');
    await send(client, url, 'next', 'g');

    // Act: two failed receives (handed back at once), then the third receive.
    for (let i = 0; i < 2; i++) {
      const [m] = await receive(client, url, 1);
      expect(m?.Body).toBe('poison');
      await client.send(new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: m?.ReceiptHandle, VisibilityTimeout: 0 }));
    }
    const third = await receive(client, url, 1);

    // Assess: the group flows on, the poison message waits in the DLQ.
    expect(bodies(third)).toEqual(['next']);
    const dead = await receive(client, s.deadLetterQueue.url);
    expect(bodies(dead)).toEqual(['poison']);
    expect(dead[0]?.Attributes?.['MessageGroupId']).toBe('g');
    expect(await s.depth(s.deadLetterQueue)).toEqual({ visible: 0, inFlight: 1, delayed: 0 });
  });

  it('reports the depths of a queue through GetQueueAttributes', async () => {
    // Prepare
    const { s, client, url } = await start();
    for (const [body, group] of [['a', 'g1'], ['b', 'g1'], ['c', 'g2']] as const) await send(client, url, body, group);

    // Act
    await receive(client, url, 1);
    await settle(10);

    // Assess
    expect(await s.depth(s.queue)).toEqual({ visible: 2, inFlight: 1, delayed: 0 });
  });
});
