/**
 * An in-process stand-in for an SQS FIFO queue: the local pipeline and the tests run the product against it, so it
 * reproduces the FIFO behaviour the product relies on (ordered message groups with one batch in flight per group,
 * visibility timeout, receive count, redrive to a dead-letter queue, deduplication window) and nothing more.
 * Errors are the SDK's own exception classes, so code written against SQS handles them unchanged.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import {
  InvalidMessageContents,
  MessageNotInflight,
  ReceiptHandleIsInvalid,
  SQSServiceException,
} from '@aws-sdk/client-sqs';
import type { Clock } from '#shared/ports/clock.ts';

/** One message attribute, as SQS stores it (`String`, `Number` or `Binary`, optionally with a custom suffix). */
export interface QueueMessageAttribute {
  readonly dataType: string;
  readonly stringValue?: string | undefined;
  readonly binaryValue?: Uint8Array | undefined;
}

/** Message attributes by name. */
export type QueueMessageAttributes = Readonly<Record<string, QueueMessageAttribute>>;

/** Input of {@link EmbeddedFifoQueue.sendMessage}. */
export interface SendMessageInput {
  readonly body: string;
  readonly messageGroupId: string;
  /** Required unless the queue has content-based deduplication, exactly as on SQS. */
  readonly messageDeduplicationId?: string | undefined;
  readonly messageAttributes?: QueueMessageAttributes | undefined;
}

/** Result of {@link EmbeddedFifoQueue.sendMessage}. */
export interface SendMessageResult {
  /** For a duplicate, the id of the message accepted first (SQS answers the same). */
  readonly messageId: string;
  readonly sequenceNumber: string;
  readonly md5OfMessageBody: string;
  readonly md5OfMessageAttributes?: string | undefined;
  /** True when the deduplication id was seen within the window: accepted, but nothing was enqueued. */
  readonly duplicate: boolean;
}

/** Input of {@link EmbeddedFifoQueue.receiveMessages}. */
export interface ReceiveMessagesInput {
  /** 1 to 10; default 1, as on SQS. */
  readonly maxNumberOfMessages?: number | undefined;
  /** Overrides the queue's visibility timeout for this receive (0 to 43200). */
  readonly visibilityTimeoutSeconds?: number | undefined;
}

/** System attributes of a received message; timestamps in epoch milliseconds. */
export interface ReceivedMessageAttributes {
  readonly messageGroupId: string;
  readonly messageDeduplicationId: string;
  readonly sequenceNumber: string;
  readonly sentTimestamp: number;
  readonly senderId: string;
  readonly approximateReceiveCount: number;
  readonly approximateFirstReceiveTimestamp: number;
  /** Set on messages that the queue's redrive moved into this (dead-letter) queue. */
  readonly deadLetterQueueSourceArn?: string | undefined;
}

/** A message handed out by {@link EmbeddedFifoQueue.receiveMessages}, with the receipt handle of this receive. */
export interface ReceivedMessage {
  readonly messageId: string;
  readonly receiptHandle: string;
  readonly body: string;
  readonly md5OfBody: string;
  readonly md5OfMessageAttributes?: string | undefined;
  readonly messageAttributes: QueueMessageAttributes;
  readonly attributes: ReceivedMessageAttributes;
}

/** Where messages go after too many receives; the dead-letter queue must be FIFO too, as on SQS. */
export interface RedrivePolicy {
  readonly deadLetterQueue: EmbeddedFifoQueue;
  /** A message received this many times is moved to the dead-letter queue instead of its next receive. */
  readonly maxReceiveCount: number;
}

/** Options of {@link EmbeddedFifoQueue}; the defaults are those of SQS. */
export interface EmbeddedFifoQueueOptions {
  /** Queue name; must end in `.fifo`. */
  readonly name: string;
  /** Time source; default the system clock. Tests inject one to move time by hand. */
  readonly clock?: Clock | undefined;
  readonly region?: string | undefined;
  readonly accountId?: string | undefined;
  /** Default 30 s. */
  readonly visibilityTimeoutSeconds?: number | undefined;
  /** Default 300 s (the SQS window, which SQS does not let you change). */
  readonly deduplicationWindowSeconds?: number | undefined;
  /** When true, a message without a deduplication id is deduplicated on the SHA-256 of its body. */
  readonly contentBasedDeduplication?: boolean | undefined;
  readonly redrivePolicy?: RedrivePolicy | undefined;
  /** Largest message (body plus attributes) in bytes; default 256 KiB. */
  readonly maxMessageBytes?: number | undefined;
  /** Reported as `SenderId` on received messages. */
  readonly senderId?: string | undefined;
}

/** Message counts of one group. */
export interface GroupStats {
  readonly visible: number;
  readonly inFlight: number;
}

/** Message counts, for status displays and `GetQueueAttributes`. */
export interface QueueStats {
  /** Messages not in flight (including those waiting behind an in-flight batch of their group). */
  readonly visible: number;
  /** Messages received and neither deleted nor visible again yet. */
  readonly inFlight: number;
  readonly total: number;
  readonly perGroup: Readonly<Record<string, GroupStats>>;
}

/** A message as a redrive hands it to the dead-letter queue. */
export interface DeadLetteredMessage {
  readonly messageId: string;
  readonly body: string;
  readonly messageGroupId: string;
  readonly messageDeduplicationId: string;
  readonly messageAttributes: QueueMessageAttributes;
  readonly sentTimestamp: number;
  readonly senderId: string;
  readonly sourceQueueArn: string;
}

interface StoredMessage {
  readonly messageId: string;
  readonly body: string;
  readonly groupId: string;
  readonly deduplicationId: string;
  readonly attributes: QueueMessageAttributes;
  readonly sequence: bigint;
  readonly sentTimestamp: number;
  readonly senderId: string;
  readonly md5OfBody: string;
  readonly md5OfMessageAttributes: string | undefined;
  readonly deadLetterQueueSourceArn: string | undefined;
  receiveCount: number;
  firstReceiveTimestamp: number | undefined;
  /** Epoch ms from which the message is visible again; 0 when it was never received. */
  visibleAt: number;
  receiptHandle: string | undefined;
}

interface DeduplicationEntry {
  readonly expiresAt: number;
  readonly messageId: string;
  readonly sequenceNumber: string;
}

const MAX_VISIBILITY_TIMEOUT_SECONDS = 43_200;
const MAX_RECEIVE_BATCH = 10;
/** Characters SQS accepts in a body: #x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF. */
const INVALID_BODY_CHARACTER = /[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
const systemClock: Clock = { now: () => new Date() };
/** SQS FIFO sequence numbers are 20-digit, strictly increasing decimal strings. */
const FIRST_SEQUENCE = 10_000_000_000_000_000_000n;

/** Metadata that makes our errors look like SDK responses (`$metadata` is what SDK users log). */
export function sqsErrorMetadata(): { httpStatusCode: number; requestId: string; attempts: number; totalRetryDelay: number } {
  return { httpStatusCode: 400, requestId: randomUUID(), attempts: 1, totalRetryDelay: 0 };
}

/**
 * Builds an SQS client error for codes the SDK has no class for (`InvalidParameterValue`, `MissingParameter`).
 * Returns an `SQSServiceException` whose `name` is the code, as the SDK produces for unmodelled errors.
 */
export function sqsClientError(name: string, message: string): SQSServiceException {
  return new SQSServiceException({ name, $fault: 'client', $metadata: sqsErrorMetadata(), message });
}

/** Hex MD5 of a string's UTF-8 bytes, as SQS reports `MD5OfMessageBody`. */
export function md5Hex(text: string): string {
  return createHash('md5').update(text, 'utf8').digest('hex');
}

/**
 * MD5 of message attributes with the SQS algorithm (names sorted; each name, type and value length-prefixed;
 * transport byte 1 for strings, 2 for binary), so checksums match what real SQS reports.
 * Returns undefined when there are no attributes, as SQS omits the field then.
 */
export function md5OfMessageAttributes(attributes: QueueMessageAttributes): string | undefined {
  const names = Object.keys(attributes).sort();
  if (names.length === 0) return undefined;
  const hash = createHash('md5');
  const lengthPrefixed = (bytes: Uint8Array): void => {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    hash.update(length);
    hash.update(bytes);
  };
  for (const name of names) {
    const attribute = attributes[name];
    if (attribute === undefined) continue;
    lengthPrefixed(Buffer.from(name, 'utf8'));
    lengthPrefixed(Buffer.from(attribute.dataType, 'utf8'));
    if (attribute.binaryValue !== undefined) {
      hash.update(Uint8Array.of(2));
      lengthPrefixed(attribute.binaryValue);
    } else {
      hash.update(Uint8Array.of(1));
      lengthPrefixed(Buffer.from(attribute.stringValue ?? '', 'utf8'));
    }
  }
  return hash.digest('hex');
}

/** Bytes a message counts against the size limit: body plus each attribute's name, type and value. */
export function messageSizeBytes(body: string, attributes: QueueMessageAttributes = {}): number {
  let size = Buffer.byteLength(body, 'utf8');
  for (const [name, attribute] of Object.entries(attributes)) {
    size += Buffer.byteLength(name, 'utf8') + Buffer.byteLength(attribute.dataType, 'utf8');
    size += attribute.binaryValue?.length ?? Buffer.byteLength(attribute.stringValue ?? '', 'utf8');
  }
  return size;
}

/**
 * An in-process SQS FIFO queue.
 *
 * Within a message group, messages are delivered strictly in send order and only one batch is in flight at a time:
 * while any message of a group is invisible, no later message of that group is handed out, which is what lets the
 * product serialise work per Node. Time comes from the injected clock, so tests move it by hand.
 */
export class EmbeddedFifoQueue {
  /** The queue's name (ends in `.fifo`). */
  readonly name: string;
  /** The queue's URL, `https://sqs.<region>.amazonaws.com/<account>/<name>`, the key clients address it by. */
  readonly url: string;
  /** The queue's ARN, as a redrive policy and Lambda's `eventSourceARN` name it. */
  readonly arn: string;
  readonly region: string;
  /** Default visibility timeout of a receive, in seconds. */
  readonly visibilityTimeoutSeconds: number;
  readonly contentBasedDeduplication: boolean;
  readonly redrivePolicy: RedrivePolicy | undefined;
  readonly maxMessageBytes: number;
  /** When the queue was created (epoch ms), for `CreatedTimestamp`. */
  readonly createdTimestamp: number;
  /** The queue's time source; an event source driving this queue reads the same one. */
  readonly clock: Clock;

  private readonly deduplicationWindowMs: number;
  private readonly senderId: string;
  /** Messages per group, in send order; a group with no message is removed. */
  private readonly groups = new Map<string, StoredMessage[]>();
  private readonly byReceiptHandle = new Map<string, StoredMessage>();
  private readonly deduplication = new Map<string, DeduplicationEntry>();
  private readonly listeners = new Set<() => void>();
  private nextSequence = FIRST_SEQUENCE;

  constructor(options: EmbeddedFifoQueueOptions) {
    if (!options.name.endsWith('.fifo')) {
      throw sqsClientError('InvalidParameterValue', `The name of a FIFO queue must end with .fifo: ${options.name}`);
    }
    const maxReceiveCount = options.redrivePolicy?.maxReceiveCount;
    if (maxReceiveCount !== undefined && (!Number.isInteger(maxReceiveCount) || maxReceiveCount < 1)) {
      throw sqsClientError('InvalidParameterValue', `maxReceiveCount must be a positive integer: ${maxReceiveCount}`);
    }
    const accountId = options.accountId ?? '000000000000';
    this.name = options.name;
    this.region = options.region ?? 'us-east-1';
    this.url = `https://sqs.${this.region}.amazonaws.com/${accountId}/${options.name}`;
    this.arn = `arn:aws:sqs:${this.region}:${accountId}:${options.name}`;
    this.clock = options.clock ?? systemClock;
    this.visibilityTimeoutSeconds = checkVisibilityTimeout(options.visibilityTimeoutSeconds ?? 30);
    this.deduplicationWindowMs = (options.deduplicationWindowSeconds ?? 300) * 1000;
    this.contentBasedDeduplication = options.contentBasedDeduplication ?? false;
    this.redrivePolicy = options.redrivePolicy;
    this.maxMessageBytes = options.maxMessageBytes ?? 262_144;
    this.senderId = options.senderId ?? 'AIDAEMBEDDEDQUEUE0000';
    this.createdTimestamp = this.nowMs();
  }

  /**
   * Enqueues a message at the end of its group.
   * Returns `duplicate: true` (and the first message's id) when the deduplication id was already accepted within the
   * window: like SQS, the send succeeds but nothing is enqueued. Throws SDK-shaped errors for what SQS refuses.
   */
  sendMessage(input: SendMessageInput): SendMessageResult {
    const attributes = input.messageAttributes ?? {};
    this.validateSend(input, attributes);
    const deduplicationId = this.deduplicationIdOf(input);
    const now = this.nowMs();
    this.forgetExpiredDeduplicationIds(now);
    const md5OfBody = md5Hex(input.body);
    const md5OfAttributes = md5OfMessageAttributes(attributes);
    const seen = this.deduplication.get(deduplicationId);
    if (seen !== undefined) {
      return {
        messageId: seen.messageId,
        sequenceNumber: seen.sequenceNumber,
        md5OfMessageBody: md5OfBody,
        md5OfMessageAttributes: md5OfAttributes,
        duplicate: true,
      };
    }
    const stored = this.store({
      messageId: randomUUID(),
      body: input.body,
      groupId: input.messageGroupId,
      deduplicationId,
      attributes,
      sentTimestamp: now,
      senderId: this.senderId,
      deadLetterQueueSourceArn: undefined,
    });
    const sequenceNumber = formatSequence(stored.sequence);
    this.deduplication.set(deduplicationId, {
      expiresAt: now + this.deduplicationWindowMs,
      messageId: stored.messageId,
      sequenceNumber,
    });
    this.notify();
    return {
      messageId: stored.messageId,
      sequenceNumber,
      md5OfMessageBody: stored.md5OfBody,
      md5OfMessageAttributes: stored.md5OfMessageAttributes,
      duplicate: false,
    };
  }

  /**
   * Hands out up to `maxNumberOfMessages` visible messages and makes them invisible for the visibility timeout.
   * Groups are served oldest head first, several consecutive messages per group, and a group with any message in
   * flight is skipped entirely. A message already received `maxReceiveCount` times is moved to the dead-letter queue
   * instead of being handed out, which unblocks its group. Returns an empty array when nothing is receivable now.
   */
  receiveMessages(input: ReceiveMessagesInput = {}): ReceivedMessage[] {
    const max = input.maxNumberOfMessages ?? 1;
    if (!Number.isInteger(max) || max < 1 || max > MAX_RECEIVE_BATCH) {
      throw sqsClientError(
        'InvalidParameterValue',
        `Value ${max} for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.`,
      );
    }
    const visibilityMs = checkVisibilityTimeout(input.visibilityTimeoutSeconds ?? this.visibilityTimeoutSeconds) * 1000;
    const now = this.nowMs();
    const receivable = [...this.groups.entries()]
      .filter(([, messages]) => !messages.some((message) => message.visibleAt > now))
      .sort(([, a], [, b]) => compareSequence(a[0], b[0]));
    const received: ReceivedMessage[] = [];
    let redrove = false;
    for (const [groupId, messages] of receivable) {
      // The group is not blocked, so all its messages are visible: take them from the head, in order.
      let index = 0;
      while (received.length < max && index < messages.length) {
        const message = messages[index];
        if (message === undefined) break;
        if (this.shouldRedrive(message)) {
          messages.splice(index, 1);
          this.moveToDeadLetterQueue(message);
          redrove = true;
          continue;
        }
        received.push(this.handOut(message, now, visibilityMs));
        index += 1;
      }
      if (messages.length === 0) this.groups.delete(groupId);
      if (received.length >= max) break;
    }
    if (received.length > 0 || redrove) this.notify();
    return received;
  }

  /**
   * Sets the message's visibility timeout to `seconds` from now; 0 makes it visible at once.
   * Throws `ReceiptHandleIsInvalid` for an unknown or superseded handle (the message was deleted or received again)
   * and `MessageNotInflight` when the handle is current but its visibility timeout has already lapsed, as SQS does.
   */
  changeMessageVisibility(receiptHandle: string, seconds: number): void {
    checkVisibilityTimeout(seconds);
    const message = this.messageFor(receiptHandle);
    const now = this.nowMs();
    if (message.visibleAt <= now) {
      throw new MessageNotInflight({ message: 'The message is not in flight.', $metadata: sqsErrorMetadata() });
    }
    message.visibleAt = now + seconds * 1000;
    this.notify();
  }

  /**
   * Deletes the received message.
   * Throws `ReceiptHandleIsInvalid` for an unknown or superseded handle, and for a handle whose visibility timeout has
   * lapsed (a FIFO queue refuses expired handles because the message may already belong to another consumer).
   */
  deleteMessage(receiptHandle: string): void {
    const message = this.messageFor(receiptHandle);
    if (message.visibleAt <= this.nowMs()) {
      throw new ReceiptHandleIsInvalid({
        message: `Value ${receiptHandle} for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.`,
        $metadata: sqsErrorMetadata(),
      });
    }
    this.remove(message);
    this.notify();
  }

  /**
   * Accepts a message moved here by another queue's redrive: it keeps its id, body, attributes, group, deduplication id
   * and sent timestamp, gets a new sequence number and a receive count of 0, and bypasses deduplication.
   * Called by the source queue; producers use {@link sendMessage}.
   */
  acceptDeadLetter(message: DeadLetteredMessage): void {
    this.store({
      messageId: message.messageId,
      body: message.body,
      groupId: message.messageGroupId,
      deduplicationId: message.messageDeduplicationId,
      attributes: message.messageAttributes,
      sentTimestamp: message.sentTimestamp,
      senderId: message.senderId,
      deadLetterQueueSourceArn: message.sourceQueueArn,
    });
    this.notify();
  }

  /**
   * When the earliest in-flight message becomes visible again, so a poller can sleep exactly that long.
   * Returns undefined when nothing is in flight.
   */
  nextVisibleAt(): Date | undefined {
    const now = this.nowMs();
    let earliest: number | undefined;
    for (const messages of this.groups.values()) {
      for (const message of messages) {
        if (message.visibleAt > now && (earliest === undefined || message.visibleAt < earliest)) {
          earliest = message.visibleAt;
        }
      }
    }
    return earliest === undefined ? undefined : new Date(earliest);
  }

  /** Returns true when a receive now would hand out (or redrive) at least one message. */
  hasReceivableMessages(): boolean {
    const now = this.nowMs();
    for (const messages of this.groups.values()) {
      if (!messages.some((message) => message.visibleAt > now)) return true;
    }
    return false;
  }

  /** Counts messages now, overall and per group. */
  stats(): QueueStats {
    const now = this.nowMs();
    let visible = 0;
    let inFlight = 0;
    const perGroup: Record<string, GroupStats> = {};
    for (const [groupId, messages] of this.groups) {
      const groupInFlight = messages.filter((message) => message.visibleAt > now).length;
      perGroup[groupId] = { visible: messages.length - groupInFlight, inFlight: groupInFlight };
      visible += messages.length - groupInFlight;
      inFlight += groupInFlight;
    }
    return { visible, inFlight, total: visible + inFlight, perGroup };
  }

  /**
   * Registers a listener called after every change (send, receive, delete, visibility change, redrive).
   * Returns the function that unregisters it. Pollers use it to wake up instead of polling on a short interval.
   */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  /**
   * Waits (on real timers) until something may have become receivable: a change to the queue, the next in-flight
   * message's visibility lapsing, `timeoutMs` elapsing, or `signal` aborting, whichever comes first.
   * Resolves at once when a message is receivable already. Always resolves, never rejects; callers simply try to
   * receive again. This is the long poll of the local pipeline.
   */
  waitForChange(timeoutMs: number, signal?: AbortSignal): Promise<void> {
    // Checking here, synchronously with subscribing below, closes the gap between a caller's empty receive and its
    // wait: a send in between would otherwise be a lost wake-up.
    if (signal?.aborted === true || this.hasReceivableMessages()) return Promise.resolve();
    const nextVisible = this.nextVisibleAt();
    const untilVisible = nextVisible === undefined ? timeoutMs : nextVisible.getTime() - this.nowMs();
    const delay = Math.max(0, Math.min(timeoutMs, untilVisible));
    return new Promise<void>((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        unsubscribe();
        signal?.removeEventListener('abort', finish);
        resolve();
      };
      const timer = setTimeout(finish, delay);
      const unsubscribe = this.onChange(finish);
      signal?.addEventListener('abort', finish, { once: true });
    });
  }

  private nowMs(): number {
    return this.clock.now().getTime();
  }

  private notify(): void {
    for (const listener of [...this.listeners]) listener();
  }

  private validateSend(input: SendMessageInput, attributes: QueueMessageAttributes): void {
    if (input.messageGroupId === undefined || input.messageGroupId === '') {
      throw sqsClientError('MissingParameter', 'The request must contain the parameter MessageGroupId.');
    }
    if (input.body.length === 0) {
      throw sqsClientError('MissingParameter', 'The request must contain the parameter MessageBody.');
    }
    if (INVALID_BODY_CHARACTER.test(input.body)) {
      throw new InvalidMessageContents({
        message: 'Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF',
        $metadata: sqsErrorMetadata(),
      });
    }
    const size = messageSizeBytes(input.body, attributes);
    if (size > this.maxMessageBytes) {
      throw sqsClientError(
        'InvalidParameterValue',
        `One or more parameters are invalid. Reason: Message must be shorter than ${this.maxMessageBytes} bytes.`,
      );
    }
  }

  private deduplicationIdOf(input: SendMessageInput): string {
    if (input.messageDeduplicationId !== undefined && input.messageDeduplicationId !== '') {
      return input.messageDeduplicationId;
    }
    if (this.contentBasedDeduplication) return createHash('sha256').update(input.body, 'utf8').digest('hex');
    throw sqsClientError(
      'InvalidParameterValue',
      'The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId provided explicitly',
    );
  }

  private forgetExpiredDeduplicationIds(now: number): void {
    for (const [id, entry] of this.deduplication) {
      if (entry.expiresAt <= now) this.deduplication.delete(id);
    }
  }

  private store(
    fields: Omit<StoredMessage, 'sequence' | 'md5OfBody' | 'md5OfMessageAttributes' | 'receiveCount' | 'firstReceiveTimestamp' | 'visibleAt' | 'receiptHandle'>,
  ): StoredMessage {
    const stored: StoredMessage = {
      ...fields,
      sequence: this.nextSequence,
      md5OfBody: md5Hex(fields.body),
      md5OfMessageAttributes: md5OfMessageAttributes(fields.attributes),
      receiveCount: 0,
      firstReceiveTimestamp: undefined,
      visibleAt: 0,
      receiptHandle: undefined,
    };
    this.nextSequence += 1n;
    const group = this.groups.get(fields.groupId);
    if (group === undefined) this.groups.set(fields.groupId, [stored]);
    else group.push(stored);
    return stored;
  }

  private shouldRedrive(message: StoredMessage): boolean {
    return this.redrivePolicy !== undefined && message.receiveCount >= this.redrivePolicy.maxReceiveCount;
  }

  private moveToDeadLetterQueue(message: StoredMessage): void {
    if (message.receiptHandle !== undefined) this.byReceiptHandle.delete(message.receiptHandle);
    this.redrivePolicy?.deadLetterQueue.acceptDeadLetter({
      messageId: message.messageId,
      body: message.body,
      messageGroupId: message.groupId,
      messageDeduplicationId: message.deduplicationId,
      messageAttributes: message.attributes,
      sentTimestamp: message.sentTimestamp,
      senderId: message.senderId,
      sourceQueueArn: this.arn,
    });
  }

  private handOut(message: StoredMessage, now: number, visibilityMs: number): ReceivedMessage {
    // A fresh handle per receive: the previous one stops working, as on SQS.
    if (message.receiptHandle !== undefined) this.byReceiptHandle.delete(message.receiptHandle);
    const receiptHandle = `AQEB${randomBytes(48).toString('base64url')}`;
    this.byReceiptHandle.set(receiptHandle, message);
    message.receiptHandle = receiptHandle;
    message.receiveCount += 1;
    message.firstReceiveTimestamp ??= now;
    message.visibleAt = now + visibilityMs;
    return {
      messageId: message.messageId,
      receiptHandle,
      body: message.body,
      md5OfBody: message.md5OfBody,
      md5OfMessageAttributes: message.md5OfMessageAttributes,
      messageAttributes: message.attributes,
      attributes: {
        messageGroupId: message.groupId,
        messageDeduplicationId: message.deduplicationId,
        sequenceNumber: formatSequence(message.sequence),
        sentTimestamp: message.sentTimestamp,
        senderId: message.senderId,
        approximateReceiveCount: message.receiveCount,
        approximateFirstReceiveTimestamp: message.firstReceiveTimestamp,
        deadLetterQueueSourceArn: message.deadLetterQueueSourceArn,
      },
    };
  }

  private messageFor(receiptHandle: string): StoredMessage {
    const message = this.byReceiptHandle.get(receiptHandle);
    if (message === undefined || message.receiptHandle !== receiptHandle) {
      throw new ReceiptHandleIsInvalid({
        message: `The input receipt handle "${receiptHandle}" is not a valid receipt handle.`,
        $metadata: sqsErrorMetadata(),
      });
    }
    return message;
  }

  private remove(message: StoredMessage): void {
    if (message.receiptHandle !== undefined) this.byReceiptHandle.delete(message.receiptHandle);
    const group = this.groups.get(message.groupId);
    if (group === undefined) return;
    const index = group.indexOf(message);
    if (index >= 0) group.splice(index, 1);
    if (group.length === 0) this.groups.delete(message.groupId);
  }
}

function checkVisibilityTimeout(seconds: number): number {
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > MAX_VISIBILITY_TIMEOUT_SECONDS) {
    throw sqsClientError(
      'InvalidParameterValue',
      `Value ${seconds} for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200.`,
    );
  }
  return seconds;
}

function compareSequence(a: StoredMessage | undefined, b: StoredMessage | undefined): number {
  if (a === undefined || b === undefined) return 0;
  return a.sequence < b.sequence ? -1 : a.sequence > b.sequence ? 1 : 0;
}

function formatSequence(sequence: bigint): string {
  return sequence.toString().padStart(20, '0');
}
