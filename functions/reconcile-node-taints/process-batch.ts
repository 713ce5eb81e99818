/**
 * The per-record boundary of the reconcile function: parse, reconcile, then decide the record's fate in one place.
 * - permanent (not an event we accept, or a non-retryable error): sent to the dead-letter queue with its reason,
 *   counted, and reported as processed, so it neither blocks its FIFO group nor vanishes;
 * - retryable (409 after the in-record retry, API outage, refused identity, a call past its deadline, a cluster in
 *   backoff): made visible again after a jittered backoff that grows with the receive count, and reported as a batch
 *   item failure; the processor skips the rest of its group and re-issues a record about to be dead-lettered by the
 *   redrive (ReconcileBatchProcessor);
 * - every outcome is logged and counted from one table (outcomes.ts).
 * Every Kubernetes API call of a record is bounded by one call timeout (`recordTimeoutMs`) within the invocation's
 * time, and goes through the clusters' guard (cluster-guard.ts).
 */
import { processPartialResponse } from '@aws-lambda-powertools/batch';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { backoffDelay } from '#shared/policy/backoff.ts';
import { clusterKey, isNodeTaintEvent, type TaintEvent } from '#shared/contract/cloud-event.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { MalformedEventError, PatchConflictError, TaintPropagatorError } from '#shared/errors.ts';
import { ReconcileMetric } from '#shared/observability/metric-names.ts';
import { receiveCountOf, ReconcileBatchProcessor, type BatchProcessorDeps } from './batch-processor.ts';
import { reportOutcome, resultFields } from './outcomes.ts';
import { reconcileAutoscalerTaints } from './reconcile-autoscaler-taints.ts';
import { reconcileNodeTaints, type ReconcileDeps, type ReconcileResult } from './reconcile-node-taints.ts';

export interface BatchDeps extends ReconcileDeps, BatchProcessorDeps {
  readonly parse: (body: string) => TaintEvent;
  readonly retry: { readonly baseSeconds: number; readonly maxSeconds: number };
  /** Uniform random in [0, 1); injected so that backoff is testable. */
  readonly random: () => number;
  /** Runs `fn` with every Kubernetes API call bounded by `deadline` (epoch ms); default: no bound. */
  readonly withDeadline?: <T>(deadline: number, fn: () => Promise<T>) => Promise<T>;
}

/**
 * Backoff before a retried record becomes visible again: base × 2^(receives − 1), capped at max,
 * with "equal jitter" (half fixed, half random) so that conflicting writers spread out.
 */
export function backoffSeconds(receiveCount: number, retry: { baseSeconds: number; maxSeconds: number }, random: () => number): number {
  return Math.round(backoffDelay(Math.max(1, receiveCount), { base: retry.baseSeconds, max: retry.maxSeconds, jitter: 'equal' }, random));
}

/** Processes one SQS batch and returns the batch item failures (never throws for a record's failure). */
export async function processBatch(event: SQSEvent, context: Context, deps: BatchDeps): Promise<SQSBatchResponse> {
  const batch = new ReconcileBatchProcessor(deps, context);
  const recordDeps: BatchDeps = { ...deps, recorder: batch.events, clusters: batch.guard.guarding(deps.clusters) };
  const response = await processPartialResponse(event, (record: SQSRecord) => processRecord(record, recordDeps, batch), batch, { context, throwOnFullBatchFailure: false });
  // Outcomes go out as single metrics; publish the rest only when there is any (Powertools warns otherwise).
  if (deps.metrics.hasStoredMetrics()) deps.metrics.publishStoredMetrics();
  return response;
}

async function processRecord(record: SQSRecord, deps: BatchDeps, batch: ReconcileBatchProcessor): Promise<void> {
  const receiveCount = receiveCountOf(record);
  const event = parseRecord(record, deps);
  if (event instanceof MalformedEventError) return deadLetter(record, deps, event.reason, event);
  const context = { cloudEventId: event.id, messageId: record.messageId, receiveCount };
  const cluster = clusterKey(event.data.cluster);
  const bounded = deps.withDeadline ?? (<T>(_deadline: number, fn: () => Promise<T>) => fn());
  let comeBackIn: number | undefined;
  try {
    await batch.guard.run(cluster, async () => {
      const startedAt = deps.clock.now().getTime();
      // A Node's record of a cluster that is not to be called now fails at once; a scalable resource lives in the
      // management cluster (docs/autoscaler.md) and is reconciled whatever its workload cluster does.
      if (isNodeTaintEvent(event)) batch.guard.check(cluster);
      const result = await bounded(batch.recordDeadline(), () =>
        event.data.kind === 'ScalableResource' ? reconcileAutoscalerTaints(deps, event as TaintEvent & { readonly data: typeof event.data }) : reconcileNodeTaints(deps, event),
      );
      report(result, event, deps, { ...context, ...(result.outcome === ReconcileOutcome.patched ? { latencyMs: latencyStages(event, record, batch.startedAt, startedAt, deps.clock.now().getTime()) } : {}) });
      comeBackIn = result.retryInSeconds;
    });
  } catch (error) {
    if (error instanceof TaintPropagatorError && !error.retryable) return deadLetter(record, deps, error.message, error);
    // Expected, retryable failures (conflict, outage, refused identity) are re-issued before the redrive; anything
    // else is a bug or an unknown condition: the redrive brings it to a human.
    const delay = backoffSeconds(receiveCount, deps.retry, deps.random);
    batch.retryLater(record, delay, error instanceof TaintPropagatorError);
    const outcome = error instanceof PatchConflictError ? ReconcileOutcome.conflict : ReconcileOutcome.transientError;
    reportOutcome(deps, outcome, { ...context, cluster, reason: error instanceof Error ? error.message : String(error), retryInSeconds: delay, error });
    throw error;
  }
  // A staged NoExecute rollout waits through the queue: the record comes back after its delay (re-issued before the
  // redrive, as an expected failure is), and its outcome was reported above, not as a failure.
  if (comeBackIn !== undefined) {
    batch.retryLater(record, comeBackIn, true);
    throw new ComeBackLater(comeBackIn);
  }
}

/** Makes a record that is to come back (a rollout's wait) a batch item failure; never logged as an error. */
class ComeBackLater extends Error {
  constructor(seconds: number) {
    super(`the record comes back in ${seconds}s`);
    this.name = 'ComeBackLater';
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

/** The record's event, or why it is not one we accept. */
function parseRecord(record: SQSRecord, deps: BatchDeps): TaintEvent | MalformedEventError {
  try {
    return deps.parse(record.body);
  } catch (error) {
    if (error instanceof MalformedEventError) return error;
    throw error;
  }
}

async function deadLetter(record: SQSRecord, deps: BatchDeps, reason: string, error: unknown): Promise<void> {
  // If this send fails, the error propagates: the record is retried, never lost.
  await deps.queue.deadLetter({ messageId: record.messageId, body: record.body, messageGroupId: record.attributes.MessageGroupId ?? 'dead-letter' }, reason);
  reportOutcome(deps, ReconcileOutcome.deadLettered, { messageId: record.messageId, reason, error });
}

/**
 * Where a written change's time went, from the forwarder's observation to the write (ms; a stage whose timestamps the
 * record lacks is left out): `forwarder` (observed → sent to the queue), `queue` (sent → first received; a retried
 * record's includes its backoff), `invoke` (received → the batch started: the hand-over, and a cold start), `batch`
 * (the batch started → this record started: the records before it in its group, or a wait for its cluster's limit),
 * `reconcile` (its reads and its write). Pure: it reads only the record's attributes and the times it is given.
 */
export function latencyStages(event: TaintEvent, record: SQSRecord, batchStartedAt: number, recordStartedAt: number, writtenAt: number): Record<string, number> {
  const at = (v: string | undefined): number | undefined => {
    const n = v === undefined || v.trim() === '' ? Number.NaN : Number(v);
    return Number.isFinite(n) ? n : undefined;
  };
  const observed = Date.parse(event.data.observedAt);
  const sent = at(record.attributes.SentTimestamp);
  const received = at(record.attributes.ApproximateFirstReceiveTimestamp);
  const stage = (from: number | undefined, to: number | undefined): number | undefined => (from !== undefined && to !== undefined && !Number.isNaN(from) ? Math.max(0, to - from) : undefined);
  const stages: Record<string, number | undefined> = {
    forwarder: stage(observed, sent),
    queue: stage(sent, received),
    invoke: stage(received, batchStartedAt),
    batch: stage(batchStartedAt, recordStartedAt),
    reconcile: stage(recordStartedAt, writtenAt),
  };
  return Object.fromEntries(Object.entries(stages).filter((e): e is [string, number] => e[1] !== undefined));
}
