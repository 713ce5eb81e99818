/**
 * The reconcile function's batch processor, a Powertools `BatchProcessor` that runs message groups (Nodes) in parallel,
 * each group's records in order, and decides each record's fate in one place (the function's README, "Outcomes").
 */
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import { SqsFifoMessageGroupShortCircuitError } from '@aws-lambda-powertools/batch';
import type { FailureResponse, SuccessResponse } from '@aws-lambda-powertools/batch/types';
import type { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { backoffDelay } from '#shared/policy/backoff.ts';
import { clusterKey, isNodeTaintEvent } from '#shared/contract/cloud-event.ts';
import type { ScalableResourceEventData, TaintEvent } from '#shared/contract/cloud-event.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { MalformedEventError, PatchConflictError, TaintPropagatorError } from '#shared/errors.ts';
import { ReconcileMetric } from '#shared/observability/metric-names.ts';
import type { RecordQueue } from '#shared/ports/record-queue.ts';
import { ClusterGuard, FailingClusters } from './cluster-guard.ts';
import { DeferredEvents } from './deferred-events.ts';
import { reportOutcome, resultFields } from './outcomes.ts';
import { reconcileAutoscalerTaints } from './reconcile-autoscaler-taints.ts';
import { reconcileNodeTaints, type ReconcileDeps, type ReconcileResult } from './reconcile-node-taints.ts';

/** Time kept back from the invocation's remaining time for the queue calls that settle a record. */
export const SETTLE_RESERVE_MS = 3_000;

export interface BatchDeps extends ReconcileDeps {
  readonly queue: RecordQueue;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly parse: (body: string) => TaintEvent;
  readonly retry: { readonly baseSeconds: number; readonly maxSeconds: number };
  /** Uniform random in [0, 1); injected so that backoff is testable. */
  readonly random: () => number;
  /** A failing record is re-issued once its receive count reaches this (one below the queue's maxReceiveCount). */
  readonly reissueAtReceive?: number;
  /** Runs a record's `fn`: its API calls, each and all together, end within the call timeout and by `deadline` (ms). */
  readonly withDeadline?: <T>(deadline: number, fn: () => Promise<T>) => Promise<T>;
  /** The container's failing clusters (kept across batches); default: a new set per batch. */
  readonly failingClusters?: FailingClusters;
}

/** Processes one SQS batch and returns the batch item failures (never throws for a record's failure). */
export async function processBatch(event: SQSEvent, context: Context, deps: BatchDeps): Promise<SQSBatchResponse> {
  const batch = new ReconcileBatchProcessor(deps, context);
  const options = { context, throwOnFullBatchFailure: false };
  const response = await processPartialResponse(event, (record: SQSRecord) => batch.reconcile(record), batch, options);
  // Outcomes go out as single metrics; publish the rest only when there is any (Powertools warns otherwise).
  if (deps.metrics.hasStoredMetrics()) deps.metrics.publishStoredMetrics();
  return response;
}

type Outcome = SuccessResponse | FailureResponse;

class ReconcileBatchProcessor extends BatchProcessor {
  /** The records' dependencies: Events written off each record's path (DeferredEvents), clusters through the guard. */
  readonly #deps: BatchDeps;
  readonly #events: DeferredEvents;
  readonly #guard: ClusterGuard;
  readonly #startedAt: number;
  readonly #deadline: number;
  /** Records not run because an earlier record of their group failed. */
  readonly #skipped = new Set<string>();
  readonly #reissuable = new Set<string>();
  /** The backoff of each message group whose record failed; the records skipped behind it get the same. */
  readonly #delays = new Map<string, number>();

  constructor(deps: BatchDeps, context: Context) {
    super(EventType.SQS);
    this.#events = new DeferredEvents(deps.recorder, deps.logger);
    this.#guard = new ClusterGuard(deps.failingClusters ?? new FailingClusters(deps.clock));
    this.#deps = { ...deps, recorder: this.#events, clusters: this.#guard.guarding(deps.clusters) };
    this.#startedAt = deps.clock.now().getTime();
    // Lambda always provides the remaining time; a caller without it (a test harness) gets no batch deadline.
    const remainingMs = typeof context.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis() : Infinity;
    this.#deadline = this.#startedAt + Math.max(0, remainingMs - SETTLE_RESERVE_MS);
  }

  /** The per-record function: reconciles and reports the record; throws to make it a batch item failure. */
  async reconcile(record: SQSRecord): Promise<void> {
    const deps = this.#deps;
    const receiveCount = receiveCountOf(record);
    const bounded = deps.withDeadline ?? (<T>(_deadline: number, fn: () => Promise<T>) => fn());
    let context: Record<string, unknown> = { messageId: record.messageId, receiveCount };
    let result: ReconcileResult;
    try {
      const event = deps.parse(record.body);
      const cluster = clusterKey(event.data.cluster);
      context = { cloudEventId: event.id, ...context, cluster };
      result = await this.#guard.run(cluster, async () => {
        const startedAt = deps.clock.now().getTime();
        // A Node's record of a cluster that is not to be called now fails at once; a scalable resource lives in the
        // management cluster (docs/autoscaler.md) and is reconciled whatever its workload cluster does.
        if (isNodeTaintEvent(event)) this.#guard.check(cluster);
        const scalable = event as TaintEvent & { readonly data: ScalableResourceEventData };
        const result = await bounded(this.#deadline, () =>
          isNodeTaintEvent(event) ? reconcileNodeTaints(deps, event) : reconcileAutoscalerTaints(deps, scalable),
        );
        const latencyMs = latencyStages(event, record, this.#startedAt, startedAt, deps.clock.now().getTime());
        report(result, event, deps, result.outcome === ReconcileOutcome.patched ? { ...context, latencyMs } : context);
        return result;
      });
    } catch (error) {
      if (error instanceof TaintPropagatorError && !error.retryable) {
        return deadLetter(record, deps, error instanceof MalformedEventError ? error.reason : error.message, error);
      }
      // Expected, retryable failures (conflict, outage, refused identity) are re-issued before the redrive; anything
      // else is a bug or an unknown condition: the redrive brings it to a human.
      // "Equal jitter" (half fixed, half random), so that conflicting writers spread out.
      const backoff = { base: deps.retry.baseSeconds, max: deps.retry.maxSeconds, jitter: 'equal' } as const;
      const delay = Math.round(backoffDelay(receiveCount, backoff, deps.random));
      this.#retryLater(record, delay, error instanceof TaintPropagatorError);
      const outcome = error instanceof PatchConflictError ? ReconcileOutcome.conflict : ReconcileOutcome.transientError;
      const reason = error instanceof Error ? error.message : String(error);
      reportOutcome(deps, outcome, { ...context, reason, retryInSeconds: delay, error });
      throw error;
    }
    // A staged NoExecute rollout waits through the queue: the record comes back after its delay (re-issued before the
    // redrive, as an expected failure is), and its outcome was reported above, not as a failure.
    if (result.retryInSeconds !== undefined) {
      this.#retryLater(record, result.retryInSeconds, true);
      throw new Error(`the record comes back in ${result.retryInSeconds}s`);
    }
  }

  override async process(): Promise<Outcome[]> {
    this.prepare();
    const groups = Map.groupBy(this.records as SQSRecord[], groupOf).values();
    const results = await Promise.all([...groups].map((group) => this.#processGroup(group)));
    await this.#settle();
    this.clean();
    return results.flat();
  }

  /** A record that failed comes back after `seconds`; `reissuable`: an expected failure, re-issued before the redrive. */
  #retryLater(record: SQSRecord, seconds: number, reissuable: boolean): void {
    this.#delays.set(groupOf(record), seconds);
    if (reissuable) this.#reissuable.add(record.messageId);
  }

  async #processGroup(records: readonly SQSRecord[]): Promise<Outcome[]> {
    const results: Outcome[] = [];
    let failed = false;
    for (const record of records) {
      if (failed) this.#skipped.add(record.messageId);
      const result: Outcome = failed
        ? this.failureHandler(record, new SqsFifoMessageGroupShortCircuitError())
        : await this.processRecord(record);
      failed ||= result[0] === 'fail';
      results.push(result);
    }
    return results;
  }

  /**
   * After every record ran: the batch's Events are written, then each failed or skipped record is either re-issued
   * (one receive short of the redrive) or given its group's backoff. The re-issue is decided before the record's
   * visibility is touched: a record made visible again could be received by another poller before it is deleted here,
   * and would then count one more receive towards the redrive.
   */
  async #settle(): Promise<void> {
    await this.#events.settle();
    const kept: SQSRecord[] = [];
    // In batch order (groups fail at their own pace): the response lists the failures as the batch lists the records.
    const failed = new Set(this.failureMessages as SQSRecord[]);
    for (const record of (this.records as SQSRecord[]).filter((r) => failed.has(r))) {
      const skipped = this.#skipped.has(record.messageId);
      if ((skipped || this.#reissuable.has(record.messageId)) && (await this.#reissueIfDue(record, skipped))) continue;
      kept.push(record);
      // A skipped record would keep the queue's long visibility timeout and block its group: it gets its group's backoff.
      const delay = this.#delays.get(groupOf(record));
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

function report(result: ReconcileResult, event: TaintEvent, deps: BatchDeps, context: Record<string, unknown>): void {
  // Every Node write counts: the taint write's, and a staged NoExecute rollout's (its mark, its evicting taint).
  if (result.node !== undefined && result.writtenResourceVersion !== undefined) deps.metrics.addMetric(ReconcileMetric.NodeWrites, MetricUnit.Count, 1);
  if (result.outcome === ReconcileOutcome.patched) {
    const observed = Date.parse(event.data.observedAt);
    if (!Number.isNaN(observed)) deps.metrics.addMetric(ReconcileMetric.EventToWriteLatency, MetricUnit.Milliseconds, Math.max(0, deps.clock.now().getTime() - observed));
  }
  if (result.evictions) {
    if (result.evictions.evicted > 0) deps.metrics.addMetric(ReconcileMetric.PodEvictions, MetricUnit.Count, result.evictions.evicted);
    if (result.evictions.refused > 0) deps.metrics.addMetric(ReconcileMetric.PodEvictionsRefused, MetricUnit.Count, result.evictions.refused);
  }
  reportOutcome(deps, result.outcome, { ...context, ...resultFields(result) }, result.machinePool !== undefined);
}

async function deadLetter(record: SQSRecord, deps: BatchDeps, reason: string, error: unknown): Promise<void> {
  // If this send fails, the error propagates: the record is retried, never lost.
  await deps.queue.deadLetter({ messageId: record.messageId, body: record.body, messageGroupId: record.attributes.MessageGroupId ?? 'dead-letter' }, reason);
  reportOutcome(deps, ReconcileOutcome.deadLettered, { messageId: record.messageId, reason, error });
}

/** A written change's time per stage in ms (docs/runbook.md); a stage the record lacks a timestamp for is left out. */
export function latencyStages(event: TaintEvent, record: SQSRecord, batchStartedAt: number, recordStartedAt: number, writtenAt: number): Record<string, number> {
  const at = (v: string | undefined): number => (v?.trim() ? Number(v) : Number.NaN);
  const sent = at(record.attributes.SentTimestamp);
  const received = at(record.attributes.ApproximateFirstReceiveTimestamp);
  // Each stage runs from one time to the next; a time that is not a number leaves out both stages it bounds.
  const times = [Date.parse(event.data.observedAt), sent, received, batchStartedAt, recordStartedAt, writtenAt];
  const names = ['forwarder', 'queue', 'invoke', 'batch', 'reconcile'];
  const stages = names.map((name, i) => [name, times[i + 1]! - times[i]!] as const);
  return Object.fromEntries(stages.filter(([, ms]) => Number.isFinite(ms)).map(([n, ms]) => [n, Math.max(0, ms)]));
}

function receiveCountOf(record: SQSRecord): number {
  return Number(record.attributes.ApproximateReceiveCount) || 1;
}

/** A record's message group (a record without one is a group of its own). */
function groupOf(record: SQSRecord): string {
  return record.attributes.MessageGroupId ?? `record:${record.messageId}`;
}
