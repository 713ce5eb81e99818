/**
 * The per-record boundary of the reconcile function: parse, reconcile, then decide the record's
 * fate in one place.
 * - permanent (not an event we accept): sent to the dead-letter queue with its reason, counted, and
 *   reported as processed, so it neither blocks its FIFO group nor vanishes;
 * - retryable (409 conflict, API outage, refused identity, a call past its deadline): made visible
 *   again after a jittered backoff that grows with the receive count, and reported as a batch item
 *   failure; the rest of its message group in this batch is not processed (FIFO) and gets the same
 *   backoff. One receive before the queue's redrive would dead-letter it, such a record (and a record
 *   skipped behind a failing head, which was charged receives it never got) is re-issued as a fresh
 *   message instead: a change is never lost to an outage, and the dead-letter queue holds only what
 *   needs a human (malformed events, permanent errors, unexpected failures);
 * - every Kubernetes API call of a record is bounded by the invocation's remaining time, and all the calls of one
 *   record together by one call timeout (`recordTimeoutMs`; a healthy record needs two or three round trips of
 *   milliseconds), so a hung, dripping or endless answer is a transient error of its record, not a timed-out
 *   batch; and once a call of a cluster timed out or its answer passed the client's byte cap, that cluster's
 *   other records in the batch are not tried (they fail at once, as transient): one hostile or hanging workload
 *   cluster costs a batch at most one call timeout, and the other clusters' records keep the time;
 * - different message groups (Nodes) of a batch are reconciled at the same time, each group's records in order (one
 *   Powertools FIFO processor per group, which skips the rest of a group after a failure): a batch of ten Nodes costs
 *   about one reconcile's round trips, not ten. The first record of each workload cluster probes it; the cluster's
 *   other records read the management cluster meanwhile, and call the cluster once it has answered one of the
 *   probe's Node calls promptly (within PROMPT_SHARE of a record's time; then within the probe's deadline) or the
 *   probe ended (then within one record's time from its end): a hanging or slow cluster still gets one record's calls
 *   per batch, not one per group, one that answers promptly and then hangs costs its records one record's time
 *   together, and a cold container's first batch waits one round trip of a healthy cluster, not a whole record. A cluster that answered a record in this container within the last minute (`answering`, kept across
 *   batches) is not probed again: its records go together, until one of its calls times out or floods;
 * - outcomes (patched, unchanged, gone, invalid declaration, …): logged and counted;
 * - Kubernetes Events are written off each record's path (see DeferredEvents): a changed Node costs two sequential
 *   round trips (the reads, the write), and the batch answers once its Events are written.
 */
import { SqsFifoPartialProcessorAsync, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { clusterKey, type TaintEvent } from '#shared/domain/cloud-event.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { CallTimeoutError, MalformedEventError, NodeNotFoundError, OversizedAnswerError, PatchConflictError, TaintPropagatorError, TransientError } from '#shared/errors.ts';
import { MetricDimension, ReconcileMetric } from '#shared/observability/metric-names.ts';
import type { RecordQueue } from '#shared/ports/record-queue.ts';
import { reconcileNodeTaints, type MachineSetReader, type ReconcileDeps, type ReconcileResult } from './reconcile-node-taints.ts';
import { reconcileAutoscalerTaints } from './reconcile-autoscaler-taints.ts';
import { backoffDelay } from '#shared/domain/backoff.ts';
import { DeferredEvents } from './deferred-events.ts';

export interface BatchDeps extends ReconcileDeps {
  readonly queue: RecordQueue;
  readonly parse: (body: string) => TaintEvent;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly retry: { readonly baseSeconds: number; readonly maxSeconds: number };
  /** Uniform random in [0, 1); injected so that backoff is testable. */
  readonly random: () => number;
  /**
   * A failing record is re-issued once its receive count reaches this (one below the queue's
   * maxReceiveCount); undefined: never (the queue's redrive decides).
   */
  readonly reissueAtReceive?: number;
  /** Runs `fn` with every Kubernetes API call bounded by `deadline` (epoch ms); default: no bound. */
  readonly withDeadline?: <T>(deadline: number, fn: () => Promise<T>) => Promise<T>;
  /** All the API calls of one record together end within this (the call timeout); default: no bound but the batch's. */
  readonly recordTimeoutMs?: number;
  /**
   * The workload clusters that answered in this container lately, kept across batches (one per container, from the
   * composition); undefined: every batch probes every cluster with its first record.
   */
  readonly answering?: AnsweringClusters;
}

/**
 * The workload clusters whose records were reconciled in this container within the last `windowMs` (a record that
 * ended with an outcome: its calls answered). Their records skip the batch's probe (ClusterProbes). A call timeout or
 * an answer past the byte cap forgets the cluster at once, so its next batch is probed again; a cluster that only
 * fails, or that has not been heard from for `windowMs`, is probed as an unknown one. One entry per workload cluster.
 */
export class AnsweringClusters {
  readonly #lastAnswered = new Map<string, number>();
  readonly #windowMs: number;

  constructor(windowMs = 60_000) {
    this.#windowMs = windowMs;
  }

  answered(cluster: string, at: number): void {
    this.#lastAnswered.set(cluster, at);
  }

  forget(cluster: string): void {
    this.#lastAnswered.delete(cluster);
  }

  recently(cluster: string, now: number): boolean {
    const at = this.#lastAnswered.get(cluster);
    return at !== undefined && now - at <= this.#windowMs;
  }
}

/** Time kept back from the invocation's remaining time for the queue calls that settle a record. */
export const SETTLE_RESERVE_MS = 3_000;

/**
 * Backoff before a retried record becomes visible again: base × 2^(receives − 1), capped at max,
 * with "equal jitter" (half fixed, half random) so that conflicting writers spread out.
 */
export function backoffSeconds(receiveCount: number, retry: { baseSeconds: number; maxSeconds: number }, random: () => number): number {
  return Math.round(backoffDelay(Math.max(1, receiveCount), { base: retry.baseSeconds, max: retry.maxSeconds, jitter: 'equal' }, random));
}

/**
 * The batch's MachineSet reader: each MachineSet is read once per batch (the records of one template change arrive
 * together, ten to a batch), a failed read again by the next record that needs it. A live read for every record of the
 * batch: the batch lasts as long as its records' reads.
 */
function batchMachineSets(deps: BatchDeps): MachineSetReader | undefined {
  const read = deps.machineSets ?? (deps.scalables ? (namespace: string, name: string) => (deps.scalables as NonNullable<BatchDeps['scalables']>).get('MachineSet', namespace, name) : undefined);
  if (!read) return undefined;
  const reads = new Map<string, ReturnType<MachineSetReader>>();
  return (namespace, name) => {
    const key = `${namespace}/${name}`;
    let result = reads.get(key);
    if (!result) {
      result = read(namespace, name);
      reads.set(key, result);
      result.catch(() => reads.delete(key));
    }
    return result;
  };
}

/** Processes one SQS batch and returns the batch item failures (never throws for a record's failure). */
export async function processBatch(event: SQSEvent, context: Context, deps: BatchDeps): Promise<SQSBatchResponse> {
  const batchStartedAt = deps.clock.now().getTime();
  const delayedGroups = new Map<string, number>();
  const handled = new Set<string>();
  const retryable = new Set<string>();
  /** Backoff (seconds) of each record that failed, applied once its fate is decided. */
  const retryDelays = new Map<string, number>();
  /** Clusters with a call timeout or an oversized answer in this batch: their further records are not tried. */
  const timedOutClusters = new Set<string>();
  // Lambda always provides the remaining time; a caller without it (a test harness) gets no batch deadline.
  const remainingMs = typeof context.getRemainingTimeInMillis === 'function' ? context.getRemainingTimeInMillis() : Infinity;
  const deadline = Date.now() + Math.max(0, remainingMs - SETTLE_RESERVE_MS);
  const bounded = deps.withDeadline ?? (<T>(_deadline: number, fn: () => Promise<T>) => fn());
  const events = new DeferredEvents(deps.recorder, deps.logger);
  const machineSets = batchMachineSets(deps);
  const recordDeps: BatchDeps = { ...deps, recorder: events, ...(machineSets ? { machineSets } : {}) };
  const recordDeadline = (): number => (deps.recordTimeoutMs === undefined ? deadline : Math.min(deadline, Date.now() + deps.recordTimeoutMs));
  const probes = new ClusterProbes((cluster) => deps.answering?.recently(cluster, deps.clock.now().getTime()) === true, recordDeadline);
  const promptMs = (deps.recordTimeoutMs ?? Number.POSITIVE_INFINITY) * PROMPT_SHARE;
  const handle = async (record: SQSRecord): Promise<void> => {
    const parsed = parseRecord(record, deps);
    const cluster = parsed instanceof MalformedEventError ? undefined : clusterKey(parsed.data.cluster);
    await probes.run(cluster, async (gate) => {
      handled.add(record.messageId);
      // The record's own calls are timed inside the probe's gate: a wait for the gate is not a call's time.
      const calls = new CallTimes(() => deps.clock.now().getTime());
      const timed = timedCalls(recordDeps, calls);
      const clusters = gate.answered
        ? answeredBy(timed.clusters, gate.answered, promptMs)
        : gate.opened
          ? gatedBy(timed.clusters, gate.opened, () => cluster !== undefined && timedOutClusters.has(cluster), bounded)
          : undefined;
      const own = clusters ? { ...timed, clusters } : timed;
      // A record waiting for its cluster's probe gets at most two records' time (the probe's, then its own from the
      // probe's end), as when it waited for the whole probe; its Node calls keep the deadline the gate gives (gatedBy).
      await bounded(gate.opened ? Math.min(deadline, recordDeadline() + (deps.recordTimeoutMs ?? 0)) : recordDeadline(), () => processRecord(record, parsed, own, { delayedGroups, retryDelays, retryable, timedOutClusters, batchStartedAt, calls }));
    });
  };
  const responses = await Promise.all(
    byMessageGroup(event.Records).map((records) =>
      processPartialResponse({ Records: records }, handle, new SqsFifoPartialProcessorAsync(), { context, skipGroupOnError: true, throwOnFullBatchFailure: false }),
    ),
  );
  const response: SQSBatchResponse = { batchItemFailures: responses.flatMap((r) => r.batchItemFailures) };
  await events.settle();
  const failures: typeof response.batchItemFailures = [];
  for (const failure of response.batchItemFailures) {
    const record = event.Records.find((r) => r.messageId === failure.itemIdentifier);
    const skipped = !handled.has(failure.itemIdentifier);
    // The re-issue is decided before the record's visibility is touched: a record made visible again could be
    // received by another poller before it is deleted here, and would then count one more receive towards the redrive.
    if (record && (skipped || retryable.has(record.messageId)) && (await reissueIfDue(record, deps, skipped))) continue;
    failures.push(failure);
    if (!record) continue;
    // The failed record gets its backoff; records of its group that were skipped would keep the queue's long
    // visibility timeout and block their group, so they get the same short backoff.
    const group = record.attributes.MessageGroupId;
    const delay = skipped ? (group === undefined ? undefined : delayedGroups.get(group)) : retryDelays.get(record.messageId);
    if (delay !== undefined) {
      await deps.queue.retryAfter(record.receiptHandle, delay).catch((error: unknown) => {
        deps.logger.warn('Changing visibility failed; the record returns after the queue visibility timeout', { messageId: record.messageId, skipped, error });
      });
    }
  }
  response.batchItemFailures = failures;
  // Outcomes go out as single metrics; publish the rest only when there is any (Powertools warns otherwise).
  if (deps.metrics.hasStoredMetrics()) deps.metrics.publishStoredMetrics();
  return response;
}

/** The batch's records by message group (a record without one is a group of its own), each group in batch order. */
function byMessageGroup(records: readonly SQSRecord[]): SQSRecord[][] {
  const groups = new Map<string, SQSRecord[]>();
  for (const record of records) {
    const group = record.attributes.MessageGroupId ?? `record:${record.messageId}`;
    const members = groups.get(group);
    if (members) members.push(record);
    else groups.set(group, [record]);
  }
  return [...groups.values()];
}

/**
 * How soon, as a share of a record's time (`recordTimeoutMs`), a Node call of a cluster's first record must be answered
 * for the cluster's other records to start before that record ends.
 */
export const PROMPT_SHARE = 0.25;

/**
 * The first record of a workload cluster in a batch is its probe: its calls go at once. The cluster's other records
 * start with it, but their calls to the cluster (its Nodes) wait until the cluster has answered one of the probe's
 * Node calls promptly (`answered`: see answeredBy) or the probe ended (whatever its end). After a prompt answer they keep
 * the probe's deadline, so a cluster that answers promptly and then hangs costs its records of a batch one record's
 * time together; after the probe's end they get one record's time from then, as each record had before. Their reads
 * of the management cluster (the Machine, the cluster's kubeconfig Secret) are not held back. A record that names no cluster
 * (malformed), or one of a cluster that answered lately (`answering`), never waits.
 */
class ClusterProbes {
  readonly #first = new Map<string, Promise<number>>();
  readonly #answering: (cluster: string) => boolean;
  readonly #deadline: () => number;

  constructor(answering: (cluster: string) => boolean, deadline: () => number) {
    this.#answering = answering;
    this.#deadline = deadline;
  }

  /**
   * Runs `fn`: the probe gets `answered` (it opens the gate early), the others `opened`, which gives the deadline their
   * Node calls keep: the probe's, when it opened at a prompt answer; one record's time from then, when the probe ended.
   */
  async run(cluster: string | undefined, fn: (gate: { readonly answered?: () => void; readonly opened?: Promise<number> }) => Promise<void>): Promise<void> {
    if (cluster === undefined || this.#answering(cluster)) return fn({});
    const probe = this.#first.get(cluster);
    if (probe !== undefined) return fn({ opened: probe });
    let open: (deadline: number) => void = () => undefined;
    const deadline = this.#deadline();
    this.#first.set(cluster, new Promise<number>((resolve) => (open = resolve)));
    try {
      return await fn({ answered: () => open(deadline) });
    } finally {
      open(this.#deadline());
    }
  }
}

/**
 * `clusters` whose Node calls wait for `opened` (the probe's gate) and keep the deadline it gives (`within`); they
 * fail at once, as transient, when a call of the cluster timed out or flooded meanwhile (`notTried`).
 */
function gatedBy(
  clusters: ReconcileDeps['clusters'],
  opened: Promise<number>,
  notTried: () => boolean,
  within: <T>(deadline: number, fn: () => Promise<T>) => Promise<T>,
): ReconcileDeps['clusters'] {
  return aroundNodeCalls(clusters, async (name, call) => {
    const deadline = await opened;
    if (notTried()) throw new TransientError(`Reconciling Node ${name}`, 'not tried: an API call for this cluster timed out or was answered past the byte cap earlier in this batch');
    return within(deadline, call);
  });
}

/**
 * `clusters` whose Node stores call `answered` once a call of theirs was answered by its API server within `promptMs`
 * of its start: a Node (or the claim's refusal, or a 404 read), a 404 or a 409. A call answered later, or that failed
 * otherwise (a timeout, an answer past the byte cap, a refusal, a transport error, an answer the client could not use),
 * does not count: the probe's gate then opens only when its record ends, and a cluster that timed out or flooded fails
 * the rest of its records at once.
 */
function answeredBy(clusters: ReconcileDeps['clusters'], answered: () => void, promptMs: number): ReconcileDeps['clusters'] {
  return aroundNodeCalls(clusters, (_name, call) => {
    const started = Date.now();
    const prompt = (): void => {
      if (Date.now() - started <= promptMs) answered();
    };
    return call().then(
      (value) => {
        prompt();
        return value;
      },
      (error: unknown) => {
        if (error instanceof PatchConflictError || error instanceof NodeNotFoundError) prompt();
        throw error;
      },
    );
  });
}

/**
 * The calls of one record, by kind: for each kind, the wall time (ms) during which at least one call of that kind was
 * in flight (calls of a kind that overlap, as the prefetched Node read and the connection warm-up, count once).
 * `readMachine`: the management cluster's reads of the Machine, its MachinePool or its MachineSet; `connect`: loading
 * the workload cluster's connection (its kubeconfig Secret, once per container and connection lifetime); `readNode` and
 * `writeNode`: the workload cluster's Node reads and writes. They overlap each other (the Machine and the Node are read
 * at once), so they do not add up to the `reconcile` stage; they say which calls it waited for.
 */
export class CallTimes {
  readonly #now: () => number;
  readonly #open = new Map<CallKind, { count: number; since: number }>();
  readonly #totals: Partial<Record<CallKind, number>> = {};

  constructor(now: () => number) {
    this.#now = now;
  }

  async time<T>(kind: CallKind, call: () => Promise<T>): Promise<T> {
    const open = this.#open.get(kind) ?? { count: 0, since: 0 };
    if (open.count === 0) open.since = this.#now();
    open.count++;
    this.#open.set(kind, open);
    try {
      return await call();
    } finally {
      open.count--;
      if (open.count === 0) this.#totals[kind] = (this.#totals[kind] ?? 0) + (this.#now() - open.since);
    }
  }

  /** The time of each kind that had a call (calls still in flight count up to now). */
  totals(): Partial<Record<CallKind, number>> {
    const now = this.#now();
    const totals = { ...this.#totals };
    for (const [kind, open] of this.#open) if (open.count > 0) totals[kind] = (totals[kind] ?? 0) + (now - open.since);
    return totals;
  }
}

/** The kinds of call CallTimes times, in the order a record makes them. */
export const CALL_KINDS = ['readMachine', 'connect', 'readNode', 'writeNode'] as const;
export type CallKind = (typeof CALL_KINDS)[number];

/** The record's dependencies with each management read and each workload call timed in `calls`. */
function timedCalls(deps: BatchDeps, calls: CallTimes): BatchDeps {
  const machines = deps.machines;
  const read = <T>(call: () => Promise<T>): Promise<T> => calls.time('readMachine', call);
  const machineSets = deps.machineSets;
  return {
    ...deps,
    machines: {
      getMachine: (namespace, name) => read(() => machines.getMachine(namespace, name)),
      findMachineByNodeName: (namespace, cluster, node) => read(() => machines.findMachineByNodeName(namespace, cluster, node)),
      getMachinePool: (namespace, name) => read(() => machines.getMachinePool(namespace, name)),
      findMachinePoolByNodeName: (namespace, cluster, node) => read(() => machines.findMachinePoolByNodeName(namespace, cluster, node)),
      getCluster: (namespace, name) => read(() => machines.getCluster(namespace, name)),
    },
    ...(machineSets ? { machineSets: (namespace: string, name: string) => read(() => machineSets(namespace, name)) } : {}),
    clusters: aroundNodeCalls({ nodesOf: (cluster, options) => calls.time('connect', () => deps.clusters.nodesOf(cluster, options)) }, (_name, call, kind) => calls.time(kind, call)),
  };
}

/** `clusters` whose stores run each Node call (named by its Node, and whether it reads or writes) through `around`. */
function aroundNodeCalls(
  clusters: ReconcileDeps['clusters'],
  around: <T>(node: string, call: () => Promise<T>, kind: 'readNode' | 'writeNode') => Promise<T>,
): ReconcileDeps['clusters'] {
  return {
    async nodesOf(cluster, options) {
      const nodes = await clusters.nodesOf(cluster, options);
      return {
        getNode: (name) => around(name, () => nodes.getNode(name), 'readNode'),
        patchNodeTaints: (name, patch) => around(name, () => nodes.patchNodeTaints(name, patch), 'writeNode'),
        patchClaimedNode: (name, claim, patch) => around(name, () => nodes.patchClaimedNode(name, claim, patch), 'writeNode'),
      };
    },
  };
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

/**
 * Re-issues a failing record whose receive count is one short of the redrive, then lets it be
 * acknowledged. Returns false (the record stays a batch item failure) when not due or when the send fails.
 */
async function reissueIfDue(record: SQSRecord, deps: BatchDeps, skipped: boolean): Promise<boolean> {
  const receiveCount = Number(record.attributes.ApproximateReceiveCount) || 1;
  if (deps.reissueAtReceive === undefined || receiveCount < deps.reissueAtReceive || record.body === '') return false;
  try {
    await deps.queue.reissue({ messageId: record.messageId, body: record.body, messageGroupId: record.attributes.MessageGroupId ?? 'reissued' });
  } catch (error) {
    deps.logger.warn('Re-issuing a record failed; it stays in the queue', { messageId: record.messageId, receiveCount, error });
    return false;
  }
  deps.metrics.addMetric(ReconcileMetric.Reissued, MetricUnit.Count, 1);
  deps.logger.info('Re-issued a record as a fresh message before the redrive', { messageId: record.messageId, receiveCount, skipped });
  return true;
}

/** What processRecord leaves for the batch to settle once every record ran. */
interface Settlement {
  readonly delayedGroups: Map<string, number>;
  readonly retryDelays: Map<string, number>;
  readonly retryable: Set<string>;
  readonly timedOutClusters: Set<string>;
  /** When the batch started (epoch ms), for the latency stages of a written change. */
  readonly batchStartedAt: number;
  /** The record's calls, timed by kind (see CallTimes), for the latency stages of a written change. */
  readonly calls: CallTimes;
}

async function processRecord(record: SQSRecord, event: TaintEvent | MalformedEventError, deps: BatchDeps, { delayedGroups, retryDelays, retryable, timedOutClusters, batchStartedAt, calls }: Settlement): Promise<void> {
  const receiveCount = Number(record.attributes.ApproximateReceiveCount) || 1;
  if (event instanceof MalformedEventError) {
    await deadLetter(record, deps, event.reason, event);
    return;
  }
  const context = { cloudEventId: event.id, messageId: record.messageId, receiveCount };
  const recordStartedAt = deps.clock.now().getTime();
  const cluster = clusterKey(event.data.cluster);
  try {
    if (timedOutClusters.has(cluster)) {
      throw new TransientError(`Reconciling a Node of cluster ${cluster}`, 'not tried: an API call for this cluster timed out or was answered past the byte cap earlier in this batch');
    }
    // A retried record (a conflict, most often) reads the Node after the Machine: the freshest Node for its write.
    // A scalable resource's event (docs/autoscaler.md) names no Node: its cluster-autoscaler annotation is reconciled.
    const result = event.data.kind === 'ScalableResource'
      ? await reconcileAutoscalerTaints(deps, event as TaintEvent & { readonly data: typeof event.data })
      : await reconcileNodeTaints(deps, event, { parallelReads: receiveCount === 1 });
    report(result, event, deps, { ...context, ...(result.outcome === ReconcileOutcome.patched ? { latencyMs: { ...latencyStages(event, record, batchStartedAt, recordStartedAt, deps.clock.now().getTime()), ...calls.totals() } } : {}) });
    // A call of the cluster that timed out or flooded in this batch outweighs the records that were answered.
    if (!timedOutClusters.has(cluster)) deps.answering?.answered(cluster, deps.clock.now().getTime());
  } catch (error) {
    if (error instanceof CallTimeoutError || error instanceof OversizedAnswerError) {
      timedOutClusters.add(cluster);
      deps.answering?.forget(cluster);
    }
    if (error instanceof TaintPropagatorError && !error.retryable) {
      await deadLetter(record, deps, error.message, error);
      return;
    }
    const conflict = error instanceof PatchConflictError;
    // Expected, retryable failures (conflict, outage, refused identity) are re-issued before the redrive;
    // anything else is a bug or an unknown condition: the redrive brings it to a human.
    if (error instanceof TaintPropagatorError) retryable.add(record.messageId);
    const delay = backoffSeconds(receiveCount, deps.retry, deps.random);
    delayedGroups.set(record.attributes.MessageGroupId ?? '', delay);
    retryDelays.set(record.messageId, delay);
    deps.metrics.addMetric(conflict ? ReconcileMetric.Conflicts : ReconcileMetric.TransientErrors, MetricUnit.Count, 1);
    countOutcome(deps, conflict ? ReconcileOutcome.conflict : ReconcileOutcome.transientError);
    deps.logger.warn(conflict ? 'Retrying after a conflict' : 'Retrying after a transient failure', {
      ...context,
      outcome: conflict ? ReconcileOutcome.conflict : ReconcileOutcome.transientError,
      reason: error instanceof Error ? error.message : String(error),
      retryInSeconds: delay,
      error,
    });
    throw error;
  }
}

/**
 * Where a written change's time went, from the forwarder's observation to the write (ms; a stage whose timestamps the
 * record lacks is left out): `forwarder` (observed → sent to the queue: the outbox's round and the publish), `queue`
 * (sent → first received by the event source), `invoke` (received → this batch started: the hand-over, and a cold
 * start), `batch` (the batch started → this record started: the records before it in its group, or its cluster's
 * first record), `reconcile` (its reads and its write). A retried record's `queue` includes its backoff. The log line
 * adds the calls the `reconcile` stage waited for, by kind (CallTimes).
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

async function deadLetter(record: SQSRecord, deps: BatchDeps, reason: string, error: unknown): Promise<void> {
  // If this send fails, the error propagates: the record is retried, never lost.
  await deps.queue.deadLetter({ messageId: record.messageId, body: record.body, messageGroupId: record.attributes.MessageGroupId ?? 'dead-letter' }, reason);
  deps.metrics.addMetric(ReconcileMetric.DeadLettered, MetricUnit.Count, 1);
  countOutcome(deps, ReconcileOutcome.deadLettered);
  deps.logger.error('Dead-lettering a record that can never succeed', { messageId: record.messageId, outcome: ReconcileOutcome.deadLettered, reason, error });
}

function report(result: ReconcileResult, event: TaintEvent, deps: BatchDeps, context: Record<string, unknown>): void {
  countOutcome(deps, result.outcome);
  if (result.machinePool !== undefined) countOutcome(deps, result.outcome, ReconcileMetric.MachinePoolReconciles);
  const fields = {
    ...context,
    outcome: result.outcome,
    cluster: result.cluster,
    Machine: result.machine,
    ...(result.machinePool !== undefined ? { MachinePool: result.machinePool } : {}),
    ...(result.scalableResource !== undefined ? { ScalableResource: result.scalableResource } : {}),
    Node: result.node,
    resourceVersion: result.resourceVersion,
    ...(result.writtenResourceVersion ? { writtenResourceVersion: result.writtenResourceVersion } : {}),
    ...(result.diff ? { diff: result.diff } : {}),
    ...(result.planned ? { planned: result.planned } : {}),
    ...(result.reason ? { reason: result.reason } : {}),
    ...(result.adopted ? { adopted: true } : {}),
    ...(result.claimRefused ? { nodeClaim: 'refused' } : {}),
  };
  if (result.claimRefused) deps.metrics.addMetric(ReconcileMetric.NodeClaimsRefused, MetricUnit.Count, 1);
  switch (result.outcome) {
    case ReconcileOutcome.patched: {
      deps.metrics.addMetric(ReconcileMetric.NodeWrites, MetricUnit.Count, 1);
      const observed = Date.parse(event.data.observedAt);
      if (!Number.isNaN(observed)) deps.metrics.addMetric(ReconcileMetric.EventToWriteLatency, MetricUnit.Milliseconds, Math.max(0, deps.clock.now().getTime() - observed));
      deps.logger.info('Patched Node taints', fields);
      return;
    }
    case ReconcileOutcome.autoscalerPatched:
      deps.logger.info('Patched the cluster-autoscaler taints annotation', fields);
      return;
    case ReconcileOutcome.dryRun:
      deps.logger.info('Dry run: planned Node write not sent', fields);
      return;
    case ReconcileOutcome.invalidDeclaration:
      deps.metrics.addMetric(ReconcileMetric.InvalidDeclarations, MetricUnit.Count, 1);
      deps.logger.error('Refusing an invalid taint declaration', { ...fields, issues: result.issues });
      return;
    case ReconcileOutcome.malformedAnnotation:
      deps.metrics.addMetric(ReconcileMetric.MalformedTrackingAnnotations, MetricUnit.Count, 1);
      deps.logger.error('Refusing to write a Node with a malformed tracking annotation', fields);
      return;
    default:
      deps.logger.info('Reconciled', fields);
  }
}

function countOutcome(deps: BatchDeps, outcome: ReconcileOutcome, metric: ReconcileMetric = ReconcileMetric.Reconciles): void {
  const single = deps.metrics.singleMetric();
  single.addDimension(MetricDimension.Outcome, outcome);
  single.addMetric(metric, MetricUnit.Count, 1);
}
