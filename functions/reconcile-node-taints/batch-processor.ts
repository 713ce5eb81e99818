/**
 * The reconcile's batch processor, in Powertools' shape (a `BasePartialBatchProcessor`): message groups (Nodes) run
 * in parallel, each group's records in order, and the rest of a group is skipped after a failure (FIFO). Its state is
 * the batch's: which records ran, the backoff of each failed one, the Events still being written, the clusters'
 * guard. Its settle step, after every record ran and before the response, writes the pending Events, re-issues the
 * records due for it and gives the others their backoff.
 */
import { BasePartialBatchProcessor, EventType, SqsFifoMessageGroupShortCircuitError } from '@aws-lambda-powertools/batch';
import type { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';
import type { Context, SQSRecord } from 'aws-lambda';
import { ReconcileMetric } from '#shared/observability/metric-names.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { EventRecorder } from '#shared/ports/event-recorder.ts';
import type { RecordQueue } from '#shared/ports/record-queue.ts';
import { ClusterGuard, FailingClusters } from './cluster-guard.ts';
import { DeferredEvents } from './deferred-events.ts';

/** Time kept back from the invocation's remaining time for the queue calls that settle a record. */
export const SETTLE_RESERVE_MS = 3_000;

export interface BatchProcessorDeps {
  readonly queue: RecordQueue;
  readonly recorder: EventRecorder;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly clock: Clock;
  /** A failing record is re-issued once its receive count reaches this (one below the queue's maxReceiveCount); undefined: never. */
  readonly reissueAtReceive?: number;
  /** All the API calls of one record together end within this (the call timeout); default: no bound but the batch's. */
  readonly recordTimeoutMs?: number;
  /** The container's failing clusters (kept across batches); default: a new set per batch. */
  readonly failingClusters?: FailingClusters;
}

type Outcome = ['success', unknown, SQSRecord] | ['fail', string, SQSRecord];

export class ReconcileBatchProcessor extends BasePartialBatchProcessor {
  /** Kubernetes Events, written off each record's path (see DeferredEvents). */
  readonly events: DeferredEvents;
  readonly guard: ClusterGuard;
  /** When the batch started (epoch ms, from the clock). */
  readonly startedAt: number;
  readonly #deps: BatchProcessorDeps;
  readonly #deadline: number;
  readonly #handled = new Set<string>();
  readonly #reissuable = new Set<string>();
  readonly #delays = new Map<string, number>();
  readonly #groupDelays = new Map<string, number>();

  constructor(deps: BatchProcessorDeps, context: Context) {
    super(EventType.SQS);
    this.#deps = deps;
    this.events = new DeferredEvents(deps.recorder, deps.logger);
    this.guard = new ClusterGuard(deps.failingClusters ?? new FailingClusters(deps.clock));
    this.startedAt = deps.clock.now().getTime();
    // Lambda always provides the remaining time; a caller without it (a test harness) gets no batch deadline.
    const remainingMs = typeof context.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis() : Infinity;
    this.#deadline = this.startedAt + Math.max(0, remainingMs - SETTLE_RESERVE_MS);
  }

  /** The deadline (epoch ms) of a record starting now: one call timeout, within the batch's. */
  recordDeadline(): number {
    const timeout = this.#deps.recordTimeoutMs;
    return timeout === undefined ? this.#deadline : Math.min(this.#deadline, this.#deps.clock.now().getTime() + timeout);
  }

  /** A record that failed comes back after `seconds`; `reissuable`: an expected failure, re-issued before the redrive. */
  retryLater(record: SQSRecord, seconds: number, reissuable: boolean): void {
    this.#delays.set(record.messageId, seconds);
    this.#groupDelays.set(groupOf(record), seconds);
    if (reissuable) this.#reissuable.add(record.messageId);
  }

  override async process(): Promise<Outcome[]> {
    this.prepare();
    const results = await Promise.all(byMessageGroup(this.records as SQSRecord[]).map((group) => this.#processGroup(group)));
    await this.#settle();
    this.clean();
    return results.flat();
  }

  async processRecord(record: SQSRecord): Promise<Outcome> {
    this.#handled.add(record.messageId);
    try {
      return this.successHandler(record, await this.handler(record)) as Outcome;
    } catch (error) {
      return this.failureHandler(record, error instanceof Error ? error : new Error(String(error))) as Outcome;
    }
  }

  processRecordSync(): never {
    throw new Error('ReconcileBatchProcessor processes records asynchronously only');
  }

  async #processGroup(records: readonly SQSRecord[]): Promise<Outcome[]> {
    const results: Outcome[] = [];
    let failed = false;
    for (const record of records) {
      const result: Outcome = failed ? (this.failureHandler(record, new SqsFifoMessageGroupShortCircuitError()) as Outcome) : await this.processRecord(record);
      failed ||= result[0] === 'fail';
      results.push(result);
    }
    return results;
  }

  /**
   * The clean step's asynchronous part: the batch's Events are written, then each failed or skipped record is either
   * re-issued (one receive short of the redrive) or given its backoff. The re-issue is decided before the record's
   * visibility is touched: a record made visible again could be received by another poller before it is deleted here,
   * and would then count one more receive towards the redrive.
   */
  async #settle(): Promise<void> {
    await this.events.settle();
    const kept: SQSRecord[] = [];
    // In batch order (groups fail at their own pace): the response lists the failures as the batch lists the records.
    const failed = new Set(this.failureMessages as SQSRecord[]);
    for (const record of (this.records as SQSRecord[]).filter((r) => failed.has(r))) {
      const skipped = !this.#handled.has(record.messageId);
      if ((skipped || this.#reissuable.has(record.messageId)) && (await this.#reissueIfDue(record, skipped))) continue;
      kept.push(record);
      // A skipped record would keep the queue's long visibility timeout and block its group: it gets its group's backoff.
      const delay = skipped ? this.#groupDelays.get(groupOf(record)) : this.#delays.get(record.messageId);
      if (delay === undefined) continue;
      await this.#deps.queue.retryAfter(record.receiptHandle, delay).catch((error: unknown) => {
        this.#deps.logger.warn('Changing visibility failed; the record returns after the queue visibility timeout', { messageId: record.messageId, skipped, error });
      });
    }
    this.failureMessages = kept;
  }

  /** Re-issues a record whose receive count is one short of the redrive; false when not due or when the send fails. */
  async #reissueIfDue(record: SQSRecord, skipped: boolean): Promise<boolean> {
    const receiveCount = receiveCountOf(record);
    const due = this.#deps.reissueAtReceive;
    if (due === undefined || receiveCount < due || record.body === '') return false;
    try {
      await this.#deps.queue.reissue({ messageId: record.messageId, body: record.body, messageGroupId: record.attributes.MessageGroupId ?? 'reissued' });
    } catch (error) {
      this.#deps.logger.warn('Re-issuing a record failed; it stays in the queue', { messageId: record.messageId, receiveCount, error });
      return false;
    }
    this.#deps.metrics.addMetric(ReconcileMetric.Reissued, MetricUnit.Count, 1);
    this.#deps.logger.info('Re-issued a record as a fresh message before the redrive', { messageId: record.messageId, receiveCount, skipped });
    return true;
  }
}

export function receiveCountOf(record: SQSRecord): number {
  return Number(record.attributes.ApproximateReceiveCount) || 1;
}

/** A record's message group (a record without one is a group of its own). */
function groupOf(record: SQSRecord): string {
  return record.attributes.MessageGroupId ?? `record:${record.messageId}`;
}

function byMessageGroup(records: readonly SQSRecord[]): SQSRecord[][] {
  const groups = new Map<string, SQSRecord[]>();
  for (const record of records) groups.set(groupOf(record), [...(groups.get(groupOf(record)) ?? []), record]);
  return [...groups.values()];
}
