/**
 * An SQS client for the embedded queues: it takes the very command objects of `@aws-sdk/client-sqs`, so the product's
 * SQS adapters (`client.send(new SendMessageBatchCommand(...))`) run unchanged on this machine. Results and errors have
 * the SDK's shapes, including `$metadata`.
 */
import { randomUUID } from 'node:crypto';
import {
  BatchEntryIdsNotDistinct,
  BatchRequestTooLong,
  ChangeMessageVisibilityCommand,
  DeleteMessageCommand,
  EmptyBatchRequest,
  GetQueueAttributesCommand,
  InvalidAttributeName,
  InvalidBatchEntryId,
  QueueDoesNotExist,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  SQSServiceException,
  TooManyEntriesInBatchRequest,
  UnsupportedOperation,
} from '@aws-sdk/client-sqs';
import type {
  ChangeMessageVisibilityCommandOutput,
  DeleteMessageCommandOutput,
  GetQueueAttributesCommandOutput,
  Message,
  MessageAttributeValue,
  MessageSystemAttributeName,
  QueueAttributeName,
  ReceiveMessageCommandOutput,
  SendMessageBatchCommandOutput,
  SendMessageBatchRequestEntry,
  SendMessageCommandOutput,
} from '@aws-sdk/client-sqs';
import type {
  EmbeddedFifoQueue,
  QueueMessageAttributes,
  ReceivedMessage,
  SendMessageResult,
} from '#shared/adapters/memory/embedded-fifo-queue.ts';
import {
  md5OfMessageAttributes,
  messageSizeBytes,
  sqsClientError,
  sqsErrorMetadata,
} from '#shared/adapters/memory/embedded-fifo-queue.ts';

/**
 * The one method of `SQSClient` the product calls. Both a real `SQSClient` and {@link EmbeddedSqsClient} are
 * assignable to it (method parameters are compared bivariantly), so code holding one runs on either.
 */
export interface SqsCommandSender {
  send(command: unknown): Promise<unknown>;
}

const MAX_BATCH_ENTRIES = 10;
const MAX_WAIT_TIME_SECONDS = 20;
const BATCH_ENTRY_ID = /^[A-Za-z0-9_-]{1,80}$/;

/**
 * Routes SQS commands to {@link EmbeddedFifoQueue}s registered by URL.
 * Supports `SendMessage`, `SendMessageBatch`, `ReceiveMessage` (with long polling on real timers),
 * `ChangeMessageVisibility`, `DeleteMessage` and `GetQueueAttributes`; anything else throws `UnsupportedOperation`.
 */
export class EmbeddedSqsClient {
  private readonly queues = new Map<string, EmbeddedFifoQueue>();

  /** Creates a client that already knows `queues` (more can be added with {@link register}). */
  constructor(queues: readonly EmbeddedFifoQueue[] = []) {
    for (const queue of queues) this.register(queue);
  }

  /** Makes `queue` addressable by its URL. Returns the client, for chaining. */
  register(queue: EmbeddedFifoQueue): this {
    this.queues.set(queue.url, queue);
    return this;
  }

  /**
   * Executes one SDK command against the embedded queues.
   * Resolves with the command's SDK output shape; rejects with the SDK exception SQS would return.
   */
  send(command: SendMessageCommand): Promise<SendMessageCommandOutput>;
  send(command: SendMessageBatchCommand): Promise<SendMessageBatchCommandOutput>;
  send(command: ReceiveMessageCommand): Promise<ReceiveMessageCommandOutput>;
  send(command: ChangeMessageVisibilityCommand): Promise<ChangeMessageVisibilityCommandOutput>;
  send(command: DeleteMessageCommand): Promise<DeleteMessageCommandOutput>;
  send(command: GetQueueAttributesCommand): Promise<GetQueueAttributesCommandOutput>;
  send(command: unknown): Promise<unknown>;
  async send(command: unknown): Promise<unknown> {
    // Like the real client, answer asynchronously even though the work is synchronous.
    await Promise.resolve();
    if (command instanceof SendMessageCommand) return this.sendMessage(command);
    if (command instanceof SendMessageBatchCommand) return this.sendMessageBatch(command);
    if (command instanceof ReceiveMessageCommand) return this.receiveMessage(command);
    if (command instanceof ChangeMessageVisibilityCommand) {
      const { QueueUrl, ReceiptHandle, VisibilityTimeout } = command.input;
      this.queue(QueueUrl).changeMessageVisibility(required(ReceiptHandle, 'ReceiptHandle'), required(VisibilityTimeout, 'VisibilityTimeout'));
      return { $metadata: okMetadata() };
    }
    if (command instanceof DeleteMessageCommand) {
      const { QueueUrl, ReceiptHandle } = command.input;
      this.queue(QueueUrl).deleteMessage(required(ReceiptHandle, 'ReceiptHandle'));
      return { $metadata: okMetadata() };
    }
    if (command instanceof GetQueueAttributesCommand) return this.getQueueAttributes(command);
    const name = (command as { constructor?: { name?: string } } | null)?.constructor?.name ?? typeof command;
    throw new UnsupportedOperation({ message: `${name} is not supported by the embedded SQS client`, $metadata: sqsErrorMetadata() });
  }

  private queue(url: string | undefined): EmbeddedFifoQueue {
    const queue = url === undefined ? undefined : this.queues.get(url);
    if (queue === undefined) {
      throw new QueueDoesNotExist({ message: `The specified queue does not exist: ${url}`, $metadata: sqsErrorMetadata() });
    }
    return queue;
  }

  private sendMessage(command: SendMessageCommand): SendMessageCommandOutput {
    const queue = this.queue(command.input.QueueUrl);
    const result = sendEntry(queue, command.input);
    return { ...sendOutput(result), $metadata: okMetadata() };
  }

  private sendMessageBatch(command: SendMessageBatchCommand): SendMessageBatchCommandOutput {
    const queue = this.queue(command.input.QueueUrl);
    const entries = command.input.Entries ?? [];
    // Request-level checks come first and fail the whole call, as on SQS; entry-level problems go to `Failed`.
    if (entries.length === 0) {
      throw new EmptyBatchRequest({ message: 'There should be at least one SendMessageBatchRequestEntry in the request.', $metadata: sqsErrorMetadata() });
    }
    if (entries.length > MAX_BATCH_ENTRIES) {
      throw new TooManyEntriesInBatchRequest({
        message: `Maximum number of entries per request are ${MAX_BATCH_ENTRIES}. You have sent ${entries.length}.`,
        $metadata: sqsErrorMetadata(),
      });
    }
    const ids = new Set<string>();
    for (const entry of entries) {
      if (entry.Id === undefined || !BATCH_ENTRY_ID.test(entry.Id)) {
        throw new InvalidBatchEntryId({
          message: `A batch entry id can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long: ${entry.Id}`,
          $metadata: sqsErrorMetadata(),
        });
      }
      if (ids.has(entry.Id)) {
        throw new BatchEntryIdsNotDistinct({ message: `Id ${entry.Id} repeated.`, $metadata: sqsErrorMetadata() });
      }
      ids.add(entry.Id);
    }
    const totalBytes = entries.reduce(
      (sum, entry) => sum + messageSizeBytes(entry.MessageBody ?? '', toQueueAttributes(entry.MessageAttributes)),
      0,
    );
    if (totalBytes > queue.maxMessageBytes) {
      throw new BatchRequestTooLong({
        message: `Batch requests cannot be longer than ${queue.maxMessageBytes} bytes. You have sent ${totalBytes} bytes.`,
        $metadata: sqsErrorMetadata(),
      });
    }
    const output: SendMessageBatchCommandOutput = { Successful: [], Failed: [], $metadata: okMetadata() };
    for (const entry of entries) {
      try {
        output.Successful?.push({ Id: entry.Id, ...sendOutput(sendEntry(queue, entry)) });
      } catch (error) {
        if (!(error instanceof SQSServiceException)) throw error;
        output.Failed?.push({ Id: entry.Id, SenderFault: error.$fault === 'client', Code: error.name, Message: error.message });
      }
    }
    return output;
  }

  private async receiveMessage(command: ReceiveMessageCommand): Promise<ReceiveMessageCommandOutput> {
    const queue = this.queue(command.input.QueueUrl);
    const { MaxNumberOfMessages, VisibilityTimeout, WaitTimeSeconds = 0 } = command.input;
    if (!Number.isInteger(WaitTimeSeconds) || WaitTimeSeconds < 0 || WaitTimeSeconds > MAX_WAIT_TIME_SECONDS) {
      throw sqsClientError('InvalidParameterValue', `Value ${WaitTimeSeconds} for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.`);
    }
    const receive = (): ReceivedMessage[] =>
      queue.receiveMessages({ maxNumberOfMessages: MaxNumberOfMessages, visibilityTimeoutSeconds: VisibilityTimeout });
    let received = receive();
    // Long polling: wait on real timers until something may be receivable, up to WaitTimeSeconds.
    const deadline = Date.now() + WaitTimeSeconds * 1000;
    while (received.length === 0 && Date.now() < deadline) {
      await queue.waitForChange(deadline - Date.now());
      received = receive();
    }
    const systemNames = new Set<string>([...(command.input.AttributeNames ?? []), ...(command.input.MessageSystemAttributeNames ?? [])]);
    const messages = received.map((message) => toSdkMessage(message, systemNames, command.input.MessageAttributeNames ?? []));
    // SQS omits `Messages` when the receive is empty; code written against SQS must already cope with that.
    return messages.length === 0 ? { $metadata: okMetadata() } : { Messages: messages, $metadata: okMetadata() };
  }

  private getQueueAttributes(command: GetQueueAttributesCommand): GetQueueAttributesCommandOutput {
    const queue = this.queue(command.input.QueueUrl);
    const stats = queue.stats();
    const all: Partial<Record<QueueAttributeName, string>> = {
      ApproximateNumberOfMessages: String(stats.visible),
      ApproximateNumberOfMessagesNotVisible: String(stats.inFlight),
      ApproximateNumberOfMessagesDelayed: '0',
      ContentBasedDeduplication: String(queue.contentBasedDeduplication),
      CreatedTimestamp: String(Math.floor(queue.createdTimestamp / 1000)),
      DeduplicationScope: 'queue',
      DelaySeconds: '0',
      FifoQueue: 'true',
      FifoThroughputLimit: 'perQueue',
      MaximumMessageSize: String(queue.maxMessageBytes),
      QueueArn: queue.arn,
      ReceiveMessageWaitTimeSeconds: '0',
      VisibilityTimeout: String(queue.visibilityTimeoutSeconds),
    };
    if (queue.redrivePolicy !== undefined) {
      all.RedrivePolicy = JSON.stringify({
        deadLetterTargetArn: queue.redrivePolicy.deadLetterQueue.arn,
        maxReceiveCount: queue.redrivePolicy.maxReceiveCount,
      });
    }
    const requested = command.input.AttributeNames ?? [];
    if (requested.includes('All')) return { Attributes: all, $metadata: okMetadata() };
    const Attributes: Partial<Record<QueueAttributeName, string>> = {};
    for (const name of requested) {
      if (!(name in all) && name !== 'RedrivePolicy') {
        throw new InvalidAttributeName({ message: `Unknown Attribute ${name}.`, $metadata: sqsErrorMetadata() });
      }
      const value = all[name];
      if (value !== undefined) Attributes[name] = value;
    }
    return { Attributes, $metadata: okMetadata() };
  }
}

function okMetadata(): { httpStatusCode: number; requestId: string; attempts: number; totalRetryDelay: number } {
  return { httpStatusCode: 200, requestId: randomUUID(), attempts: 1, totalRetryDelay: 0 };
}

function required<T>(value: T | undefined, name: string): T {
  if (value === undefined) throw sqsClientError('MissingParameter', `The request must contain the parameter ${name}.`);
  return value;
}

function sendEntry(queue: EmbeddedFifoQueue, entry: Omit<SendMessageBatchRequestEntry, 'Id'>): SendMessageResult {
  // FIFO queues refuse per-message delays; only the queue-wide delay exists (see field notes, "Backoff for 409 retries").
  if (entry.DelaySeconds !== undefined && entry.DelaySeconds !== 0) {
    throw sqsClientError(
      'InvalidParameterValue',
      `Value ${entry.DelaySeconds} for parameter DelaySeconds is invalid. Reason: The request include parameter that is not valid for this queue type.`,
    );
  }
  return queue.sendMessage({
    body: entry.MessageBody ?? '',
    messageGroupId: entry.MessageGroupId ?? '',
    messageDeduplicationId: entry.MessageDeduplicationId,
    messageAttributes: toQueueAttributes(entry.MessageAttributes),
  });
}

function sendOutput(result: SendMessageResult): {
  MessageId: string;
  SequenceNumber: string;
  MD5OfMessageBody: string;
  MD5OfMessageAttributes?: string;
} {
  const output = { MessageId: result.messageId, SequenceNumber: result.sequenceNumber, MD5OfMessageBody: result.md5OfMessageBody };
  return result.md5OfMessageAttributes === undefined ? output : { ...output, MD5OfMessageAttributes: result.md5OfMessageAttributes };
}

function toQueueAttributes(attributes: Record<string, MessageAttributeValue> | undefined): QueueMessageAttributes {
  const converted: Record<string, QueueMessageAttributes[string]> = {};
  for (const [name, value] of Object.entries(attributes ?? {})) {
    converted[name] = { dataType: value.DataType ?? 'String', stringValue: value.StringValue, binaryValue: value.BinaryValue };
  }
  return converted;
}

/** Whether a message attribute name is selected by `MessageAttributeNames` (`All`, `.*`, exact names, `prefix.*`). */
function isAttributeSelected(name: string, selectors: readonly string[]): boolean {
  return selectors.some(
    (selector) =>
      selector === 'All' ||
      selector === '.*' ||
      selector === name ||
      (selector.endsWith('.*') && name.startsWith(selector.slice(0, -1))),
  );
}

function toSdkMessage(message: ReceivedMessage, systemNames: ReadonlySet<string>, attributeSelectors: readonly string[]): Message {
  const system: Record<MessageSystemAttributeName, string | undefined> = {
    All: undefined,
    AWSTraceHeader: undefined,
    ApproximateFirstReceiveTimestamp: String(message.attributes.approximateFirstReceiveTimestamp),
    ApproximateReceiveCount: String(message.attributes.approximateReceiveCount),
    DeadLetterQueueSourceArn: message.attributes.deadLetterQueueSourceArn,
    MessageDeduplicationId: message.attributes.messageDeduplicationId,
    MessageGroupId: message.attributes.messageGroupId,
    SenderId: message.attributes.senderId,
    SentTimestamp: String(message.attributes.sentTimestamp),
    SequenceNumber: message.attributes.sequenceNumber,
  };
  const Attributes: Partial<Record<MessageSystemAttributeName, string>> = {};
  for (const [name, value] of Object.entries(system) as Array<[MessageSystemAttributeName, string | undefined]>) {
    if (value !== undefined && (systemNames.has('All') || systemNames.has(name))) Attributes[name] = value;
  }
  const selected: Record<string, QueueMessageAttributes[string]> = {};
  for (const [name, value] of Object.entries(message.messageAttributes)) {
    if (isAttributeSelected(name, attributeSelectors)) selected[name] = value;
  }
  const sdkMessage: Message = {
    MessageId: message.messageId,
    ReceiptHandle: message.receiptHandle,
    MD5OfBody: message.md5OfBody,
    Body: message.body,
  };
  if (Object.keys(Attributes).length > 0) sdkMessage.Attributes = Attributes;
  if (Object.keys(selected).length > 0) {
    // The checksum covers only the attributes returned, as the SDK's MD5 check expects.
    sdkMessage.MD5OfMessageAttributes = md5OfMessageAttributes(selected);
    sdkMessage.MessageAttributes = Object.fromEntries(
      Object.entries(selected).map(([name, value]) => [
        name,
        { DataType: value.dataType, StringValue: value.stringValue, BinaryValue: value.binaryValue },
      ]),
    );
  }
  return sdkMessage;
}
