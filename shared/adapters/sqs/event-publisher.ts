/**
 * Publishes TaintEvents to an SQS FIFO queue as structured CloudEvents: SendMessageBatch with at
 * most 10 entries and 256 KiB per call, the Node as MessageGroupId, the event id as
 * MessageDeduplicationId, per-entry failures retried with jittered backoff, and whatever still
 * cannot be sent reported back (never dropped silently). The calls of one publish go out over a few lanes at once, every
 * message group in one lane and its events in order there (SQS FIFO keeps the order in which one group's messages
 * arrive; two calls in flight together have none between them).
 */
import { createHash } from 'node:crypto';
import type { SendMessageBatchCommand, SendMessageBatchCommandOutput, SendMessageBatchRequestEntry } from '@aws-sdk/client-sqs';
import { messageGroupIdFor, type TaintEvent } from '#shared/contract/cloud-event.ts';
import { toCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import type { EventPublisher, PublishResult, UnsentEvent } from '#shared/ports/event-publisher.ts';
import { logger as defaultLogger, LogKey } from '#shared/observability/logger.ts';
import { backoffDelay } from '#shared/policy/backoff.ts';
import { sqsSdk } from './sdk.ts';

/** SQS's limits for one SendMessageBatch call. */
export const SQS_MAX_BATCH_ENTRIES = 10;
export const SQS_MAX_BATCH_BYTES = 256 * 1024;

/**
 * The one capability the publisher needs from an SQS client: the real `SQSClient`, an
 * aws-sdk-client-mock, or an in-process queue that understands SendMessageBatchCommand.
 */
export interface SqsSendClient {
  send(command: SendMessageBatchCommand): Promise<Partial<SendMessageBatchCommandOutput>>;
}

export interface SqsEventPublisherOptions {
  /**
   * The client, or a function that makes it on first use: the Lambda forwarder loads the SQS SDK (about 90 ms) while
   * its first Kubernetes calls wait on the network instead of at module load (functions/watch-forwarder/handler.ts).
   */
  readonly client: SqsSendClient | (() => Promise<SqsSendClient>);
  readonly queueUrl: string;
  /** Attempts per entry within one publish call (default 5). */
  readonly maxAttempts?: number;
  /** First backoff delay; doubles per attempt with full jitter, capped at 5 s (default 100 ms). */
  readonly baseDelayMs?: number;
  /** SendMessageBatch calls of one publish in flight at once (default 4); a message group's calls never overlap. */
  readonly lanes?: number;
  readonly sleep?: (ms: number) => Promise<void>;
  readonly random?: () => number;
  readonly logger?: Pick<typeof defaultLogger, 'warn' | 'error'>;
}

const SQS_ID = /^[\w!"#$%&'()*+,\-./:;<=>?@[\\\]^`{|}~]{1,128}$/;

/**
 * A MessageGroupId / MessageDeduplicationId from a text: the text itself when SQS accepts it
 * (≤ 128 characters of alphanumerics and punctuation), otherwise its SHA-256 in hex, which keeps
 * equal inputs equal and different inputs different.
 */
export function toSqsId(text: string): string {
  return SQS_ID.test(text) ? text : createHash('sha256').update(text).digest('hex');
}

interface Entry {
  readonly id: string;
  /** Its MessageGroupId. */
  readonly group: string;
  readonly event: TaintEvent;
  readonly request: SendMessageBatchRequestEntry;
  readonly bytes: number;
}

function toEntry(event: TaintEvent, index: number): Entry {
  const body = toCloudEventBody(event);
  const group = toSqsId(messageGroupIdFor(event.data));
  return {
    id: `e${index}`,
    group,
    event,
    bytes: Buffer.byteLength(body, 'utf8'),
    request: {
      Id: `e${index}`,
      MessageBody: body,
      MessageGroupId: group,
      MessageDeduplicationId: toSqsId(event.id),
    },
  };
}

/**
 * Splits entries into at most `lanes` lists, every message group wholly in one of them and in its order, each group to
 * the lane with the fewest entries so far: the lanes are sent at the same time, each lane's calls one after another.
 */
export function laneEntries<T extends { readonly group: string }>(entries: readonly T[], lanes: number): T[][] {
  const out: T[][] = Array.from({ length: Math.max(1, lanes) }, () => []);
  const laneOf = new Map<string, T[]>();
  for (const e of entries) {
    let lane = laneOf.get(e.group);
    if (!lane) {
      lane = out.reduce((a, b) => (b.length < a.length ? b : a));
      laneOf.set(e.group, lane);
    }
    lane.push(e);
  }
  return out.filter((l) => l.length > 0);
}

/** Splits entries into SendMessageBatch calls of at most 10 entries and 256 KiB. */
export function chunkEntries<T extends { readonly bytes: number }>(entries: readonly T[]): T[][] {
  const chunks: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const e of entries) {
    if (current.length === SQS_MAX_BATCH_ENTRIES || (current.length > 0 && bytes + e.bytes > SQS_MAX_BATCH_BYTES)) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(e);
    bytes += e.bytes;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

function describe(err: unknown): string {
  return err instanceof Error ? `${err.name}: ${err.message}` : String(err);
}

/**
 * Creates an EventPublisher over SQS. `publish` resolves with every event either sent or unsent
 * (with the reason); it throws only on programming errors.
 */
export function createSqsEventPublisher(options: SqsEventPublisherOptions): EventPublisher {
  const maxAttempts = options.maxAttempts ?? 5;
  const baseDelayMs = options.baseDelayMs ?? 100;
  const lanes = options.lanes ?? 4;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const random = options.random ?? Math.random;
  const log = options.logger ?? defaultLogger;
  let made: Promise<SqsSendClient> | undefined;
  const clientOf = (): Promise<SqsSendClient> => {
    const { client } = options;
    if (typeof client !== 'function') return Promise.resolve(client);
    made ??= client().catch((err: unknown) => {
      made = undefined; // the next send tries again
      throw err;
    });
    return made;
  };

  async function sendChunk(chunk: readonly Entry[]): Promise<{ sent: Entry[]; unsent: Array<{ entry: Entry; reason: string; retryable: boolean }> }> {
    const sent: Entry[] = [];
    const unsent: Array<{ entry: Entry; reason: string; retryable: boolean }> = [];
    let pending = [...chunk];
    for (let attempt = 1; pending.length > 0; attempt++) {
      const reasons = new Map<string, { reason: string; retryable: boolean }>();
      try {
        const [{ SendMessageBatchCommand: Command }, client] = await Promise.all([sqsSdk(), clientOf()]);
        const out = await client.send(new Command({ QueueUrl: options.queueUrl, Entries: pending.map((e) => e.request) }));
        const okIds = new Set((out.Successful ?? []).map((s) => s.Id));
        for (const f of out.Failed ?? []) {
          if (f.Id) reasons.set(f.Id, { reason: `${f.Code ?? 'Failed'}: ${f.Message ?? ''}`.trim(), retryable: f.SenderFault !== true });
        }
        for (const e of pending) {
          if (okIds.has(e.id)) sent.push(e);
          else if (!reasons.has(e.id)) reasons.set(e.id, { reason: 'not reported by SendMessageBatch', retryable: true });
        }
      } catch (err) {
        for (const e of pending) reasons.set(e.id, { reason: describe(err), retryable: true });
      }
      const failed = pending.filter((e) => reasons.has(e.id));
      pending = [];
      for (const e of failed) {
        const r = reasons.get(e.id) ?? { reason: 'unknown', retryable: true };
        if (!r.retryable || attempt >= maxAttempts) unsent.push({ entry: e, ...r });
        else pending.push(e);
      }
      if (pending.length > 0) {
        const delay = Math.floor(backoffDelay(attempt, { base: baseDelayMs, max: 5_000, jitter: 'full' }, random));
        log.warn('Retrying failed queue sends', { count: pending.length, attempt, delayMs: delay, reason: reasons.get(pending[0]?.id ?? '')?.reason });
        await sleep(delay);
      }
    }
    return { sent, unsent };
  }

  return {
    async publish(events: readonly TaintEvent[]): Promise<PublishResult> {
      const entries = events.map(toEntry);
      const sent: TaintEvent[] = [];
      const unsent: UnsentEvent[] = [];
      for (const e of entries.filter((x) => x.bytes > SQS_MAX_BATCH_BYTES)) {
        unsent.push({ event: e.event, reason: `message of ${e.bytes} bytes exceeds the 256 KiB limit`, retryable: false });
      }
      const sendable = entries.filter((x) => x.bytes <= SQS_MAX_BATCH_BYTES);
      await Promise.all(
        // No more lanes than calls of 10: as many calls as one lane would make (SQS bills per call).
        laneEntries(sendable, Math.min(lanes, Math.ceil(sendable.length / SQS_MAX_BATCH_ENTRIES))).map(async (lane) => {
          for (const chunk of chunkEntries(lane)) {
            const r = await sendChunk(chunk);
            sent.push(...r.sent.map((e) => e.event));
            unsent.push(...r.unsent.map((u) => ({ event: u.entry.event, reason: u.reason, retryable: u.retryable })));
          }
        }),
      );
      for (const u of unsent) {
        log.error('Sending event to the queue failed', { [LogKey.cloudEventId]: u.event.id, subject: u.event.subject, [LogKey.reason]: u.reason, retryable: u.retryable });
      }
      return { sent, unsent };
    },
  };
}
