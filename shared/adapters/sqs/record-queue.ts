/**
 * RecordQueue over SQS: ChangeMessageVisibility for backoff (FIFO queues have no per-message delay), SendMessage to
 * the dead-letter queue, and to the event queue itself to re-issue a record. None is on the happy path: the SDK loads
 * on first use.
 */
import { TransientError } from '#shared/errors.ts';
import { sqsClientOf, sqsSdk, type SqsClientSource, type SqsCommand, type SqsSender } from './sdk.ts';
import type { DeadLetterRecord, RecordQueue } from '#shared/ports/record-queue.ts';

/** Cap of the reason we send as a message attribute, to keep it readable and small. */
const MAX_REASON = 1000;

export class SqsRecordQueue implements RecordQueue {
  readonly #client: () => Promise<SqsSender>;
  readonly #queueUrl: string;
  readonly #deadLetterQueueUrl: string;

  constructor(client: SqsClientSource, queueUrl: string, deadLetterQueueUrl: string) {
    this.#client = sqsClientOf(client);
    this.#queueUrl = queueUrl;
    this.#deadLetterQueueUrl = deadLetterQueueUrl;
  }

  async retryAfter(receiptHandle: string, seconds: number): Promise<void> {
    const VisibilityTimeout = Math.max(0, Math.round(seconds));
    const input = { QueueUrl: this.#queueUrl, ReceiptHandle: receiptHandle, VisibilityTimeout };
    await this.#send('Changing message visibility', (sdk) => new sdk.ChangeMessageVisibilityCommand(input));
  }

  async reissue(record: DeadLetterRecord): Promise<void> {
    await this.#send('Re-issuing a record', (sdk) =>
      new sdk.SendMessageCommand({
        QueueUrl: this.#queueUrl,
        MessageBody: record.body,
        MessageGroupId: record.messageGroupId,
        // New for every copy (each copy has its own message id), the same for a retried send of one copy.
        MessageDeduplicationId: `reissue:${record.messageId}`.slice(0, 128),
        MessageAttributes: { reissuedFrom: { DataType: 'String', StringValue: record.messageId } },
      }),
    );
  }

  async deadLetter(record: DeadLetterRecord, reason: string): Promise<void> {
    await this.#send('Sending to the dead-letter queue', (sdk) =>
      new sdk.SendMessageCommand({
        QueueUrl: this.#deadLetterQueueUrl,
        MessageBody: record.body === '' ? '(empty body)' : record.body,
        MessageGroupId: record.messageGroupId,
        // One dead letter per source message; a retried send of the same record is deduplicated.
        MessageDeduplicationId: record.messageId.slice(0, 128),
        MessageAttributes: {
          failureReason: { DataType: 'String', StringValue: reason.slice(0, MAX_REASON) },
          sourceMessageId: { DataType: 'String', StringValue: record.messageId },
        },
      }),
    );
  }

  /** Sends the command; any failure (the SDK's load, the client's making, the call) is a TransientError. */
  async #send(operation: string, command: (sdk: Awaited<ReturnType<typeof sqsSdk>>) => SqsCommand): Promise<void> {
    try {
      await (await this.#client()).send(command(await sqsSdk()));
    } catch (error) {
      throw new TransientError(operation, error instanceof Error ? error.message : String(error), error);
    }
  }
}
