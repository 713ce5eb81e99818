/**
 * Emulates Lambda's SQS event source mapping with `functionResponseType: ReportBatchItemFailures` over an
 * {@link EmbeddedFifoQueue}: it polls, hands the handler a real-shaped `SQSEvent` and `Context`, and deletes exactly
 * the records Lambda would delete. The reconcile handler that runs in AWS runs here unchanged.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Context, SQSBatchResponse, SQSEvent, SQSMessageAttributes, SQSRecord } from 'aws-lambda';
import type { Clock } from '#shared/ports/clock.ts';
import type { EmbeddedFifoQueue, QueueStats, ReceivedMessage } from '#shared/adapters/memory/embedded-fifo-queue.ts';

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

/** What happened in one invocation; passed to `onInvocation` and returned by {@link LambdaSqsEventSource.pollOnce}. */
export interface InvocationResult {
  readonly awsRequestId: string;
  readonly outcome: InvocationOutcome;
  /** Message ids of the batch, in the order the handler saw them. */
  readonly messageIds: readonly string[];
  /** Message ids deleted after the invocation. */
  readonly deleted: readonly string[];
  /** Message ids left on the queue (reported failures, or the whole batch when the invocation failed). */
  readonly failed: readonly string[];
  /** Why the whole batch failed: the handler threw, or its response was not a valid partial batch response. */
  readonly failureReason?: 'handler-error' | 'invalid-response' | undefined;
  /** The thrown error, or a description of the invalid response. */
  readonly error?: unknown;
  /** Deletes that SQS refused, typically because the handler outlived the visibility timeout. */
  readonly deleteErrors: number;
  readonly durationMs: number;
}

/** Running totals for status displays. */
export interface EventSourceCounters {
  readonly invocations: number;
  readonly records: number;
  readonly deletedRecords: number;
  readonly failedRecords: number;
  /** Invocations in which nothing was deleted because the handler threw or answered invalidly. */
  readonly failedInvocations: number;
  readonly handlerErrors: number;
  readonly invalidResponses: number;
  readonly deleteErrors: number;
  /** Errors of the polling loop itself (not of the handler). */
  readonly pollErrors: number;
}

/** Options of {@link LambdaSqsEventSource}. */
export interface LambdaSqsEventSourceOptions {
  readonly queue: EmbeddedFifoQueue;
  readonly handler: SqsBatchHandler;
  /** Records per invocation; 1 to 10 for a FIFO source, default 10. */
  readonly batchSize?: number | undefined;
  /** Concurrent pollers, each with at most one invocation running; default 1. */
  readonly concurrency?: number | undefined;
  readonly functionName?: string | undefined;
  /** Only feeds `context.getRemainingTimeInMillis()`; the emulator does not kill a handler that overruns. */
  readonly functionTimeoutSeconds?: number | undefined;
  readonly memoryLimitInMB?: number | undefined;
  /** Longest idle wait between polls on real timers, in ms (a queue change wakes the poller earlier); default 20 s. */
  readonly maxIdleWaitMs?: number | undefined;
  /** Called after every invocation, for logs and status displays. Must not throw. */
  readonly onInvocation?: ((result: InvocationResult) => void) | undefined;
  /** Called when the polling loop itself fails (not the handler). Must not throw. */
  readonly onPollError?: ((error: unknown) => void) | undefined;
}

/** Thrown by {@link LambdaSqsEventSource.drain} when the queue still holds messages at the deadline. */
export class DrainTimeoutError extends Error {
  /** The queue's counts when the drain gave up. */
  readonly stats: QueueStats;
  constructor(queueName: string, timeoutMs: number, stats: QueueStats) {
    super(`Queue ${queueName} not drained after ${timeoutMs} ms: ${stats.visible} visible, ${stats.inFlight} in flight`);
    this.name = 'DrainTimeoutError';
    this.stats = stats;
  }
}

const MAX_FIFO_BATCH_SIZE = 10;
/** After an unexpected poll error, wait this long before polling again so a persistent fault cannot spin. */
const POLL_ERROR_BACKOFF_MS = 1000;

type ResponseVerdict =
  | { readonly kind: 'all-succeeded' }
  | { readonly kind: 'some-failed'; readonly failed: ReadonlySet<string> }
  | { readonly kind: 'invalid'; readonly reason: string };

/**
 * Drives a handler from an embedded FIFO queue the way Lambda's SQS event source mapping does.
 *
 * Two ways to run it: `start()`/`stop()` with real timers (the local pipeline), or `pollOnce()` by hand with an
 * injected clock (deterministic tests). The FIFO rule "one batch in flight per group" is the queue's; the pollers
 * only add concurrency across groups.
 */
export class LambdaSqsEventSource {
  private readonly queue: EmbeddedFifoQueue;
  private readonly handler: SqsBatchHandler;
  private readonly clock: Clock;
  private readonly batchSize: number;
  private readonly concurrency: number;
  private readonly functionName: string;
  private readonly functionTimeoutMs: number;
  private readonly memoryLimitInMB: number;
  private readonly maxIdleWaitMs: number;
  private readonly onInvocation: ((result: InvocationResult) => void) | undefined;
  private readonly onPollError: ((error: unknown) => void) | undefined;
  private readonly invocationListeners = new Set<() => void>();
  private totals: EventSourceCounters = {
    invocations: 0,
    records: 0,
    deletedRecords: 0,
    failedRecords: 0,
    failedInvocations: 0,
    handlerErrors: 0,
    invalidResponses: 0,
    deleteErrors: 0,
    pollErrors: 0,
  };
  private running = 0;
  private pollers: Promise<void>[] = [];
  private abort: AbortController | undefined;

  constructor(options: LambdaSqsEventSourceOptions) {
    const batchSize = options.batchSize ?? MAX_FIFO_BATCH_SIZE;
    if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > MAX_FIFO_BATCH_SIZE) {
      throw new RangeError(`batchSize of a FIFO event source must be 1 to ${MAX_FIFO_BATCH_SIZE}, got ${batchSize}`);
    }
    const concurrency = options.concurrency ?? 1;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new RangeError(`concurrency must be a positive integer, got ${concurrency}`);
    }
    this.queue = options.queue;
    this.handler = options.handler;
    this.clock = options.queue.clock;
    this.batchSize = batchSize;
    this.concurrency = concurrency;
    this.functionName = options.functionName ?? 'embedded-function';
    this.functionTimeoutMs = (options.functionTimeoutSeconds ?? 30) * 1000;
    this.memoryLimitInMB = options.memoryLimitInMB ?? 1024;
    this.maxIdleWaitMs = options.maxIdleWaitMs ?? 20_000;
    this.onInvocation = options.onInvocation;
    this.onPollError = options.onPollError;
  }

  /** Running totals since construction (a snapshot). */
  get counters(): EventSourceCounters {
    return { ...this.totals };
  }

  /** Returns true between `start()` and the end of `stop()`. */
  get isRunning(): boolean {
    return this.abort !== undefined;
  }

  /**
   * Receives one batch and, if it is not empty, invokes the handler and applies its response.
   * Returns the invocation's result, or undefined when nothing was receivable (the handler was not called).
   * Never rejects because of the handler: a thrown error is a failed invocation, as on Lambda.
   */
  async pollOnce(): Promise<InvocationResult | undefined> {
    const messages = this.queue.receiveMessages({ maxNumberOfMessages: this.batchSize });
    if (messages.length === 0) return undefined;
    this.running += 1;
    try {
      return await this.invoke(messages);
    } finally {
      this.running -= 1;
      for (const listener of [...this.invocationListeners]) listener();
    }
  }

  /** Starts `concurrency` pollers on real timers. Calling it while running does nothing. */
  start(): void {
    if (this.abort !== undefined) return;
    const abort = new AbortController();
    this.abort = abort;
    this.pollers = Array.from({ length: this.concurrency }, () => this.pollUntilAborted(abort.signal));
  }

  /** Stops polling and resolves once every running invocation has finished (their responses are still applied). */
  async stop(): Promise<void> {
    const abort = this.abort;
    if (abort === undefined) return;
    abort.abort();
    await Promise.all(this.pollers);
    this.pollers = [];
    this.abort = undefined;
  }

  /**
   * Resolves when the queue holds no message at all (none visible, none in flight) and no invocation is running.
   * Rejects with {@link DrainTimeoutError} after `timeoutMs` (default 30 s, real timers). Needs running pollers
   * (`start()`) and a clock that advances, since failed records only come back after their visibility timeout.
   */
  drain(options: { readonly timeoutMs?: number } = {}): Promise<void> {
    const timeoutMs = options.timeoutMs ?? 30_000;
    return new Promise<void>((resolve, reject) => {
      const cleanup = (): void => {
        clearTimeout(timer);
        unsubscribeQueue();
        this.invocationListeners.delete(check);
      };
      const check = (): void => {
        if (this.running === 0 && this.queue.stats().total === 0) {
          cleanup();
          resolve();
        }
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new DrainTimeoutError(this.queue.name, timeoutMs, this.queue.stats()));
      }, timeoutMs);
      const unsubscribeQueue = this.queue.onChange(check);
      this.invocationListeners.add(check);
      check();
    });
  }

  private async pollUntilAborted(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        const result = await this.pollOnce();
        if (result === undefined) await this.queue.waitForChange(this.maxIdleWaitMs, signal);
      } catch (error) {
        // Only the queue itself can get here (handler errors are results); count it and back off instead of spinning.
        this.totals = { ...this.totals, pollErrors: this.totals.pollErrors + 1 };
        this.onPollError?.(error);
        await sleep(POLL_ERROR_BACKOFF_MS, signal);
      }
    }
  }

  private async invoke(messages: readonly ReceivedMessage[]): Promise<InvocationResult> {
    const startedAt = this.clock.now().getTime();
    const context = this.contextFor(startedAt);
    const event: SQSEvent = { Records: messages.map((message) => this.toRecord(message)) };
    const messageIds = messages.map((message) => message.messageId);
    let verdict: ResponseVerdict;
    let failureReason: InvocationResult['failureReason'];
    let error: unknown;
    try {
      verdict = judgeResponse(await this.handler(event, context), new Set(messageIds));
      if (verdict.kind === 'invalid') {
        failureReason = 'invalid-response';
        error = verdict.reason;
      }
    } catch (thrown) {
      verdict = { kind: 'invalid', reason: 'handler threw' };
      failureReason = 'handler-error';
      error = thrown;
    }
    const toDelete =
      verdict.kind === 'all-succeeded' ? messages : verdict.kind === 'some-failed' ? messages.filter((m) => !verdict.failed.has(m.messageId)) : [];
    const deleted: string[] = [];
    let deleteErrors = 0;
    for (const message of toDelete) {
      try {
        this.queue.deleteMessage(message.receiptHandle);
        deleted.push(message.messageId);
      } catch {
        // Lambda ignores a refused delete: the message simply comes back after its visibility timeout.
        deleteErrors += 1;
      }
    }
    const deletedIds = new Set(deleted);
    const failed = messageIds.filter((id) => !deletedIds.has(id));
    const outcome: InvocationOutcome =
      verdict.kind === 'invalid' ? InvocationOutcome.failed : failed.length > 0 ? InvocationOutcome.partial : InvocationOutcome.succeeded;
    const result: InvocationResult = {
      awsRequestId: context.awsRequestId,
      outcome,
      messageIds,
      deleted,
      failed,
      failureReason,
      error,
      deleteErrors,
      durationMs: this.clock.now().getTime() - startedAt,
    };
    this.totals = {
      invocations: this.totals.invocations + 1,
      records: this.totals.records + messages.length,
      deletedRecords: this.totals.deletedRecords + deleted.length,
      failedRecords: this.totals.failedRecords + failed.length,
      failedInvocations: this.totals.failedInvocations + (verdict.kind === 'invalid' ? 1 : 0),
      handlerErrors: this.totals.handlerErrors + (failureReason === 'handler-error' ? 1 : 0),
      invalidResponses: this.totals.invalidResponses + (failureReason === 'invalid-response' ? 1 : 0),
      deleteErrors: this.totals.deleteErrors + deleteErrors,
      pollErrors: this.totals.pollErrors,
    };
    this.onInvocation?.(result);
    return result;
  }

  private toRecord(message: ReceivedMessage): SQSRecord {
    const { attributes } = message;
    const messageAttributes: SQSMessageAttributes = {};
    for (const [name, value] of Object.entries(message.messageAttributes)) {
      // Lambda delivers binary values base64-encoded and always includes the (unused) list fields.
      messageAttributes[name] = {
        ...(value.stringValue === undefined ? {} : { stringValue: value.stringValue }),
        ...(value.binaryValue === undefined ? {} : { binaryValue: Buffer.from(value.binaryValue).toString('base64') }),
        stringListValues: [],
        binaryListValues: [],
        dataType: value.dataType,
      };
    }
    const record: SQSRecord = {
      messageId: message.messageId,
      receiptHandle: message.receiptHandle,
      body: message.body,
      attributes: {
        ApproximateReceiveCount: String(attributes.approximateReceiveCount),
        SentTimestamp: String(attributes.sentTimestamp),
        SequenceNumber: attributes.sequenceNumber,
        MessageGroupId: attributes.messageGroupId,
        SenderId: attributes.senderId,
        MessageDeduplicationId: attributes.messageDeduplicationId,
        ApproximateFirstReceiveTimestamp: String(attributes.approximateFirstReceiveTimestamp),
        ...(attributes.deadLetterQueueSourceArn === undefined ? {} : { DeadLetterQueueSourceArn: attributes.deadLetterQueueSourceArn }),
      },
      messageAttributes,
      md5OfBody: message.md5OfBody,
      eventSource: 'aws:sqs',
      eventSourceARN: this.queue.arn,
      awsRegion: this.queue.region,
    };
    if (message.md5OfMessageAttributes !== undefined) record.md5OfMessageAttributes = message.md5OfMessageAttributes;
    return record;
  }

  private contextFor(startedAt: number): Context {
    const deadline = startedAt + this.functionTimeoutMs;
    const accountId = this.queue.arn.split(':')[4] ?? '000000000000';
    const day = new Date(startedAt).toISOString().slice(0, 10).replaceAll('-', '/');
    const unsupported = (name: string) => (): never => {
      throw new TypeError(`context.${name}() belongs to callback-style handlers; return or throw from the async handler instead`);
    };
    return {
      callbackWaitsForEmptyEventLoop: true,
      functionName: this.functionName,
      functionVersion: '$LATEST',
      invokedFunctionArn: `arn:aws:lambda:${this.queue.region}:${accountId}:function:${this.functionName}`,
      memoryLimitInMB: String(this.memoryLimitInMB),
      awsRequestId: randomUUID(),
      logGroupName: `/aws/lambda/${this.functionName}`,
      logStreamName: `${day}/[$LATEST]${randomBytes(16).toString('hex')}`,
      getRemainingTimeInMillis: () => Math.max(0, deadline - this.clock.now().getTime()),
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
function judgeResponse(response: unknown, batchIds: ReadonlySet<string>): ResponseVerdict {
  if (response === undefined || response === null) return { kind: 'all-succeeded' };
  if (typeof response !== 'object' || Array.isArray(response)) {
    return { kind: 'invalid', reason: `response is not an object: ${JSON.stringify(response)}` };
  }
  const failures: unknown = (response as { batchItemFailures?: unknown }).batchItemFailures;
  if (failures === undefined || failures === null) return { kind: 'all-succeeded' };
  if (!Array.isArray(failures)) return { kind: 'invalid', reason: 'batchItemFailures is not an array' };
  const failed = new Set<string>();
  for (const failure of failures as unknown[]) {
    const identifier: unknown =
      typeof failure === 'object' && failure !== null ? (failure as { itemIdentifier?: unknown }).itemIdentifier : undefined;
    if (typeof identifier !== 'string' || identifier === '' || !batchIds.has(identifier)) {
      return { kind: 'invalid', reason: `itemIdentifier ${JSON.stringify(identifier)} is not a message id of the batch` };
    }
    failed.add(identifier);
  }
  return failed.size === 0 ? { kind: 'all-succeeded' } : { kind: 'some-failed', failed };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
