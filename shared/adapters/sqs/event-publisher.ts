/**
 * Publishes TaintEvents to an SQS FIFO queue as structured CloudEvents: SendMessageBatch calls of at most 10 entries
 * and 256 KiB, the Node as MessageGroupId, the event id as MessageDeduplicationId. One attempt per event: the
 * forwarder's outbox (functions/watch-forwarder/outbox.ts) is the one retry layer of a send.
 * The calls go out over a few lanes at once, each message group in one lane and in order (SQS FIFO keeps one group's
 * order of arrival; two calls in flight together have none); once an entry of a group fails, the group's later entries
 * are held back and reported unsent, so that a resend never lands behind a later event of its group.
 */
import { createHash } from 'node:crypto';
import type { SendMessageBatchRequestEntry } from '@aws-sdk/client-sqs';
import { messageGroupIdFor, type TaintEvent } from '#shared/contract/cloud-event.ts';
import { toCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import type { EventPublisher, PublishResult, UnsentEvent } from '#shared/ports/event-publisher.ts';
import { logger, LogKey } from '#shared/observability/logger.ts';
import { sqsClientOf, sqsSdk, type SqsClientSource } from './sdk.ts';

/** SendMessageBatch calls of one publish in flight at once; a message group's calls never overlap. */
const LANES = 4;
/** SQS's limits for one SendMessageBatch call. */
const SQS_MAX_BATCH_ENTRIES = 10;
const SQS_MAX_BATCH_BYTES = 256 * 1024;

export interface SqsEventPublisherOptions {
  readonly client: SqsClientSource;
  readonly queueUrl: string;
}

const SQS_ID = /^[\w!"#$%&'()*+,\-./:;<=>?@[\\\]^`{|}~]{1,128}$/;

/**
 * A MessageGroupId / MessageDeduplicationId from a text: the text when SQS accepts it (≤ 128 characters of
 * alphanumerics and punctuation), else its SHA-256 in hex, which keeps equal inputs equal and different ones different.
 */
export function toSqsId(text: string): string {
  return SQS_ID.test(text) ? text : createHash('sha256').update(text).digest('hex');
}

interface Entry {
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

/** Splits entries into at most `lanes` lists, each message group wholly in one, to the shortest lane so far. */
function laneEntries<T extends { readonly group: string }>(entries: readonly T[], lanes: number): T[][] {
  const out: T[][] = Array.from({ length: Math.max(1, lanes) }, () => []);
  const laneOf = new Map<string, T[]>();
  for (const e of entries) {
    const lane = laneOf.get(e.group) ?? out.reduce((a, b) => (b.length < a.length ? b : a));
    laneOf.set(e.group, lane);
    lane.push(e);
  }
  return out.filter((l) => l.length > 0);
}

/** Splits entries into SendMessageBatch calls of at most 10 entries and 256 KiB. */
export function chunkEntries<T extends { readonly bytes: number }>(entries: readonly T[]): T[][] {
  const chunks: Array<{ entries: T[]; bytes: number }> = [];
  for (const e of entries) {
    const last = chunks.at(-1);
    if (last && last.entries.length < SQS_MAX_BATCH_ENTRIES && last.bytes + e.bytes <= SQS_MAX_BATCH_BYTES) {
      last.entries.push(e);
      last.bytes += e.bytes;
    } else {
      chunks.push({ entries: [e], bytes: e.bytes });
    }
  }
  return chunks.map((c) => c.entries);
}

/** Creates an EventPublisher over SQS; its `publish` resolves with every event sent or unsent, with the reason. */
export function createSqsEventPublisher(options: SqsEventPublisherOptions): EventPublisher {
  const clientOf = sqsClientOf(options.client);

  /** One SendMessageBatch call: the entries sent, and why each other one was not. */
  async function sendChunk(chunk: readonly Entry[]): Promise<{ sent: Entry[]; unsent: Array<{ entry: Entry; reason: string; retryable: boolean }> }> {
    try {
      const [{ SendMessageBatchCommand: Command }, sqs] = await Promise.all([sqsSdk(), clientOf()]);
      const out = await sqs.send(new Command({ QueueUrl: options.queueUrl, Entries: chunk.map((e) => e.request) }));
      const okIds = new Set((out.Successful ?? []).map((s) => s.Id));
      const failed = new Map((out.Failed ?? []).map((f) => [f.Id, { reason: `${f.Code ?? 'Failed'}: ${f.Message ?? ''}`.trim(), retryable: f.SenderFault !== true }]));
      const notReported = { reason: 'not reported by SendMessageBatch', retryable: true };
      const unsent = chunk.filter((e) => !okIds.has(e.request.Id));
      return {
        sent: chunk.filter((e) => okIds.has(e.request.Id)),
        unsent: unsent.map((entry) => ({ entry, ...(failed.get(entry.request.Id) ?? notReported) })),
      };
    } catch (err) {
      const reason = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      return { sent: [], unsent: chunk.map((entry) => ({ entry, reason, retryable: true })) };
    }
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
        laneEntries(sendable, Math.min(LANES, Math.ceil(sendable.length / SQS_MAX_BATCH_ENTRIES))).map(async (lane) => {
          /** Groups of this lane with an entry that was not sent: their later entries wait for the resend. */
          const held = new Set<string>();
          for (const chunk of chunkEntries(lane)) {
            for (const e of chunk.filter((x) => held.has(x.group))) unsent.push({ event: e.event, reason: 'an earlier event of its message group was not sent', retryable: true });
            const sendNow = chunk.filter((x) => !held.has(x.group));
            if (sendNow.length === 0) continue;
            const r = await sendChunk(sendNow);
            sent.push(...r.sent.map((e) => e.event));
            for (const u of r.unsent) {
              if (u.retryable) held.add(u.entry.group);
              unsent.push({ event: u.entry.event, reason: u.reason, retryable: u.retryable });
            }
          }
        }),
      );
      for (const u of unsent) {
        // A retryable failure is resent by the caller (a warning each time); one that can never succeed is an error.
        logger[u.retryable ? 'warn' : 'error']('Sending event to the queue failed', { [LogKey.cloudEventId]: u.event.id, subject: u.event.subject, [LogKey.reason]: u.reason, retryable: u.retryable });
      }
      return { sent, unsent };
    },
  };
}
