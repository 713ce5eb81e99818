/**
 * What remains of Lambda's SQS event source mapping (`functionResponseType: ReportBatchItemFailures`) once SQS itself
 * is a real server: long-poll ReceiveMessage, invoke the handler with an `SQSEvent` and a `Context` shaped as Lambda's,
 * then DeleteMessageBatch every record except those in `batchItemFailures` (nothing when the handler throws or answers
 * something Lambda rejects). Visibility, redrive after maxReceiveCount and "one batch in flight per message group"
 * are the FIFO queue's own rules, enforced by the server: a group stays locked while one of its messages is in flight.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { DeleteMessageBatchCommand, GetQueueAttributesCommand, ReceiveMessageCommand, type Message, type QueueAttributeName, type SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent, SQSMessageAttributes, SQSRecord } from 'aws-lambda';
import { sleep } from '#shared/sleep.ts';

/** A Lambda handler for SQS batches, as the product's reconcile function exports it. */
export type SqsBatchHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse | void>;

/** How one invocation ended, in Lambda's terms. */
export const InvocationOutcome = {
  /** Every record succeeded (`void`, `{}`, or no `batchItemFailures`): all were deleted. */
  succeeded: 'succeeded',
  /** Some records were reported in `batchItemFailures`: they stay on the queue, the others were deleted. */
  partial: 'partial',
  /** The handler threw or answered something Lambda rejects: nothing was deleted. */
  failed: 'failed',
} as const;
/** See {@link InvocationOutcome}. */
export type InvocationOutcome = (typeof InvocationOutcome)[keyof typeof InvocationOutcome];

/** What happened in one invocation (passed to `onInvocation`). */
export interface InvocationResult {
  readonly awsRequestId: string;
  readonly outcome: InvocationOutcome;
  /** Message ids of the batch, in the order the handler saw them. */
  readonly messageIds: readonly string[];
  /** Message ids deleted after the invocation. */
  readonly deleted: readonly string[];
  /** Message ids left on the queue (reported failures, refused deletes, or the whole batch when the invocation failed). */
  readonly failed: readonly string[];
  /** Why the whole batch failed: the handler threw, or its response was not a valid partial batch response. */
  readonly failureReason?: 'handler-error' | 'invalid-response' | undefined;
  /** The thrown error, or a description of the invalid response. */
  readonly error?: unknown;
  readonly durationMs: number;
}

/** Running totals for status displays and tests. */
export interface EventSourceCounters {
  readonly invocations: number;
  readonly records: number;
  readonly deletedRecords: number;
  readonly failedRecords: number;
  /** Invocations in which nothing was deleted because the handler threw or answered invalidly. */
  readonly failedInvocations: number;
  /** Errors of the polling loop itself (ReceiveMessage / DeleteMessageBatch), not of the handler. */
  readonly pollErrors: number;
}

export interface SqsEventSourceOptions {
  readonly client: Pick<SQSClient, 'send'>;
  readonly queue: { readonly url: string; readonly arn: string };
  readonly region: string;
  readonly handler: SqsBatchHandler;
  /** Records per invocation; 1 to 10 for a FIFO source, default 10. */
  readonly batchSize?: number;
  /** Concurrent pollers, each with at most one invocation running; default 1. */
  readonly concurrency?: number;
  readonly functionName?: string;
  /** Feeds `context.getRemainingTimeInMillis()`; a handler that overruns is not killed. Default 30. */
  readonly functionTimeoutSeconds?: number;
  /**
   * WaitTimeSeconds of each ReceiveMessage (default 1). Lambda long-polls for 20 s; a shorter wait lets `stop()`
   * return promptly without abandoning a receive whose messages would then stay invisible.
   */
  readonly waitTimeSeconds?: number;
  /** Called after every invocation. Must not throw. */
  readonly onInvocation?: (result: InvocationResult) => void;
  /** Called when the polling loop itself fails (not the handler). Must not throw. */
  readonly onPollError?: (error: unknown) => void;
}

const MAX_FIFO_BATCH_SIZE = 10;
/** After a poll error, wait this long before polling again so that a persistent fault cannot spin. */
const POLL_ERROR_BACKOFF_MS = 500;

type ResponseVerdict =
  | { readonly kind: 'all-succeeded' }
  | { readonly kind: 'some-failed'; readonly failed: ReadonlySet<string> }
  | { readonly kind: 'invalid'; readonly reason: string };

/** Drives a handler from an SQS queue the way Lambda's event source mapping does. */
export class SqsEventSource {
  readonly #o: SqsEventSourceOptions;
  readonly #batchSize: number;
  readonly #concurrency: number;
  readonly #functionName: string;
  #totals: EventSourceCounters = { invocations: 0, records: 0, deletedRecords: 0, failedRecords: 0, failedInvocations: 0, pollErrors: 0 };
  #running = 0;
  #pollers: Promise<void>[] = [];
  #abort: AbortController | undefined;

  constructor(options: SqsEventSourceOptions) {
    const batchSize = options.batchSize ?? MAX_FIFO_BATCH_SIZE;
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_FIFO_BATCH_SIZE) {
      throw new RangeError(`batchSize of a FIFO event source must be 1 to ${MAX_FIFO_BATCH_SIZE}, got ${batchSize}`);
    }
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
    this.#o = options;
    this.#batchSize = batchSize;
    this.#concurrency = concurrency;
    this.#functionName = options.functionName ?? 'local-function';
  }

  /** Running totals since construction (a snapshot). */
  get counters(): EventSourceCounters {
    return { ...this.#totals };
  }

  /** Invocations running right now. */
  get running(): number {
    return this.#running;
  }

  /** Starts `concurrency` pollers. Calling it while running does nothing. */
  start(): void {
    if (this.#abort !== undefined) return;
    const abort = new AbortController();
    this.#abort = abort;
    this.#pollers = Array.from({ length: this.#concurrency }, () => this.#pollUntilAborted(abort.signal));
  }

  /** Stops polling; resolves once every receive and invocation under way has finished (their responses applied). */
  async stop(): Promise<void> {
    const abort = this.#abort;
    if (abort === undefined) return;
    abort.abort();
    await Promise.all(this.#pollers);
    this.#pollers = [];
    this.#abort = undefined;
  }

  /**
   * Resolves when the queue holds no message (none visible, in flight or delayed, per GetQueueAttributes) and no
   * invocation runs; rejects after `timeoutMs` with the last counts. Needs running pollers (`start()`).
   */
  async drain(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    const timeoutMs = options.timeoutMs ?? 30_000;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      let last = 'an invocation running';
      if (this.#running === 0) {
        const out = await this.#o.client.send(
          new GetQueueAttributesCommand({
            QueueUrl: this.#o.queue.url,
            AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
          }),
        );
        const n = (name: QueueAttributeName): number => Number(out.Attributes?.[name] ?? 0);
        const [visible, inFlight, delayed] = [n('ApproximateNumberOfMessages'), n('ApproximateNumberOfMessagesNotVisible'), n('ApproximateNumberOfMessagesDelayed')];
        if (visible + inFlight + delayed === 0 && this.#running === 0) return;
        last = `${visible} visible, ${inFlight} in flight, ${delayed} delayed`;
      }
      if (Date.now() > deadline) throw new Error(`Queue ${this.#o.queue.url} not drained after ${timeoutMs} ms: ${last}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Receives one batch and, if it is not empty, invokes the handler and applies its response. */
  async pollOnce(): Promise<InvocationResult | undefined> {
    const out = await this.#o.client.send(
      new ReceiveMessageCommand({
        QueueUrl: this.#o.queue.url,
        MaxNumberOfMessages: this.#batchSize,
        WaitTimeSeconds: this.#o.waitTimeSeconds ?? 1,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
    );
    const messages = out.Messages ?? [];
    if (messages.length === 0) return undefined;
    this.#running += 1;
    try {
      return await this.#invoke(messages);
    } finally {
      this.#running -= 1;
    }
  }

  async #pollUntilAborted(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        await this.pollOnce();
      } catch (error) {
        this.#totals = { ...this.#totals, pollErrors: this.#totals.pollErrors + 1 };
        this.#o.onPollError?.(error);
        await sleep(POLL_ERROR_BACKOFF_MS, signal);
      }
    }
  }

  async #invoke(messages: readonly Message[]): Promise<InvocationResult> {
    const startedAt = Date.now();
    const context = this.#contextFor(startedAt);
    const records = messages.map((m) => this.#toRecord(m));
    const messageIds = records.map((r) => r.messageId);
    let verdict: ResponseVerdict;
    let failureReason: InvocationResult['failureReason'];
    let error: unknown;
    try {
      verdict = judgeResponse(await this.#o.handler({ Records: records }, context), new Set(messageIds));
      if (verdict.kind === 'invalid') {
        failureReason = 'invalid-response';
        error = verdict.reason;
      }
    } catch (thrown) {
      verdict = { kind: 'invalid', reason: 'handler threw' };
      failureReason = 'handler-error';
      error = thrown;
    }
    const toDelete = verdict.kind === 'all-succeeded' ? records : verdict.kind === 'some-failed' ? records.filter((r) => !verdict.failed.has(r.messageId)) : [];
    const deleted: string[] = [];
    if (toDelete.length > 0) {
      const out = await this.#o.client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: this.#o.queue.url,
          Entries: toDelete.map((r, i) => ({ Id: `r${i}`, ReceiptHandle: r.receiptHandle })),
        }),
      );
      // A refused delete (e.g. the handler outlived the visibility timeout) leaves the message to come back, as on Lambda.
      for (const ok of out.Successful ?? []) {
        const record = toDelete[Number(ok.Id?.slice(1))];
        if (record) deleted.push(record.messageId);
      }
    }
    const deletedIds = new Set(deleted);
    const failed = messageIds.filter((id) => !deletedIds.has(id));
    const outcome: InvocationOutcome = verdict.kind === 'invalid' ? InvocationOutcome.failed : failed.length > 0 ? InvocationOutcome.partial : InvocationOutcome.succeeded;
    const result: InvocationResult = { awsRequestId: context.awsRequestId, outcome, messageIds, deleted, failed, failureReason, error, durationMs: Date.now() - startedAt };
    const t = this.#totals;
    this.#totals = {
      invocations: t.invocations + 1,
      records: t.records + records.length,
      deletedRecords: t.deletedRecords + deleted.length,
      failedRecords: t.failedRecords + failed.length,
      failedInvocations: t.failedInvocations + (verdict.kind === 'invalid' ? 1 : 0),
      pollErrors: t.pollErrors,
    };
    this.#o.onInvocation?.(result);
    return result;
  }

  /** An SQS message as Lambda delivers it: string attributes, lower-case message attribute fields, binary in base64. */
  #toRecord(message: Message): SQSRecord {
    const a = message.Attributes ?? {};
    const messageAttributes: SQSMessageAttributes = {};
    for (const [name, value] of Object.entries(message.MessageAttributes ?? {})) {
      messageAttributes[name] = {
        ...(value.StringValue === undefined ? {} : { stringValue: value.StringValue }),
        ...(value.BinaryValue === undefined ? {} : { binaryValue: Buffer.from(value.BinaryValue).toString('base64') }),
        stringListValues: [],
        binaryListValues: [],
        dataType: value.DataType ?? 'String',
      };
    }
    const record: SQSRecord = {
      messageId: message.MessageId ?? '',
      receiptHandle: message.ReceiptHandle ?? '',
      body: message.Body ?? '',
      attributes: {
        ApproximateReceiveCount: a['ApproximateReceiveCount'] ?? '1',
        SentTimestamp: a['SentTimestamp'] ?? '',
        SenderId: a['SenderId'] ?? '',
        ApproximateFirstReceiveTimestamp: a['ApproximateFirstReceiveTimestamp'] ?? '',
        ...(a['SequenceNumber'] === undefined ? {} : { SequenceNumber: a['SequenceNumber'] }),
        ...(a['MessageGroupId'] === undefined ? {} : { MessageGroupId: a['MessageGroupId'] }),
        ...(a['MessageDeduplicationId'] === undefined ? {} : { MessageDeduplicationId: a['MessageDeduplicationId'] }),
        ...(a['DeadLetterQueueSourceArn'] === undefined ? {} : { DeadLetterQueueSourceArn: a['DeadLetterQueueSourceArn'] }),
      },
      messageAttributes,
      md5OfBody: message.MD5OfBody ?? '',
      eventSource: 'aws:sqs',
      eventSourceARN: this.#o.queue.arn,
      awsRegion: this.#o.region,
    };
    if (message.MD5OfMessageAttributes !== undefined) record.md5OfMessageAttributes = message.MD5OfMessageAttributes;
    return record;
  }

  #contextFor(startedAt: number): Context {
    const deadline = startedAt + (this.#o.functionTimeoutSeconds ?? 30) * 1000;
    const accountId = this.#o.queue.arn.split(':')[4] ?? '000000000000';
    const day = new Date(startedAt).toISOString().slice(0, 10).replaceAll('-', '/');
    const unsupported = (name: string) => (): never => {
      throw new TypeError(`context.${name}() belongs to callback-style handlers; return or throw from the async handler instead`);
    };
    return {
      callbackWaitsForEmptyEventLoop: true,
      functionName: this.#functionName,
      functionVersion: '$LATEST',
      invokedFunctionArn: `arn:aws:lambda:${this.#o.region}:${accountId}:function:${this.#functionName}`,
      memoryLimitInMB: '512',
      awsRequestId: randomUUID(),
      logGroupName: `/aws/lambda/${this.#functionName}`,
      logStreamName: `${day}/[$LATEST]${randomBytes(16).toString('hex')}`,
      getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
      done: unsupported('done'),
      fail: unsupported('fail'),
      succeed: unsupported('succeed'),
    };
  }
}

/**
 * Reads a handler's response as Lambda does: `void`, null, `{}` or an empty/null `batchItemFailures` mean success;
 * a failure entry whose `itemIdentifier` is missing, empty or not a message id of the batch, or a response that is
 * not an object, fails the whole batch.
 */
export function judgeResponse(response: unknown, batchIds: ReadonlySet<string>): ResponseVerdict {
  if (response === undefined || response === null) return { kind: 'all-succeeded' };
  if (typeof response !== 'object' || Array.isArray(response)) return { kind: 'invalid', reason: `response is not an object: ${JSON.stringify(response)}` };
  const failures: unknown = (response as { batchItemFailures?: unknown }).batchItemFailures;
  if (failures === undefined || failures === null) return { kind: 'all-succeeded' };
  if (!Array.isArray(failures)) return { kind: 'invalid', reason: 'batchItemFailures is not an array' };
  const failed = new Set<string>();
  for (const failure of failures as unknown[]) {
    const identifier: unknown = typeof failure === 'object' && failure !== null ? (failure as { itemIdentifier?: unknown }).itemIdentifier : undefined;
    if (typeof identifier !== 'string' || identifier === '' || !batchIds.has(identifier)) {
      return { kind: 'invalid', reason: `itemIdentifier ${JSON.stringify(identifier)} is not a message id of the batch` };
    }
    failed.add(identifier);
  }
  return failed.size === 0 ? { kind: 'all-succeeded' } : { kind: 'some-failed', failed };
}
