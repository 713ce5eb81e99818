/**
 * The whole product in one process, as a reusable module (`npm start`, `npm run demo`, the e2e tests):
 *
 *   watch-forwarder ──SendMessageBatch──> SQS FIFO queue ──SQSEvent──> processBatch (reconcile)
 *                                              │ redrive after maxReceiveCount        │ malformed → SendMessage
 *                                              └──────────> dead-letter queue <──────┘
 *
 * The forwarder and the reconcile function are composed exactly as in AWS (`composeWatchForwarder`,
 * `composeReconcile`) with a real `SQSClient`, and the forwarder runs the Lambda's lifecycle (windows of the rota, here a
 * rota of one whose windows follow one another: local/forwarder-rota.ts); SQS is an in-process server spoken to over HTTP on loopback
 * (fauxqs, see local/sqs/local-sqs.ts; not durable: the messages live in this process), and Lambda's event
 * source mapping is the small `SqsEventSource`. Counters for live displays and tests come from the forwarder's
 * telemetry, the reconcile function's Metrics calls and GetQueueAttributes on both queues.
 */
import { Metrics } from '@aws-lambda-powertools/metrics';
import type { Logger } from '@aws-lambda-powertools/logger';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { CoordinationV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { processBatch, type BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import type { RolloutTimings } from '#functions/reconcile-node-taints/noexecute-rollout.ts';
import { composeWatchForwarder } from '#functions/watch-forwarder/compose.ts';
import type { FailingCluster } from '#functions/watch-forwarder/cluster-streams.ts';
import { forwardWatchEvents, WatchForwarder } from '#functions/watch-forwarder/forward-watch-events.ts';
import type { ForwarderRunSummary, WatchForwarderOptions } from '#functions/watch-forwarder/forward-watch-events.ts';
import { LOCAL_WATCH_MEMBERS, localRota, localShards, runWindows } from './forwarder-rota.ts';
import { shardLeaseName } from '#shared/policy/shards.ts';
import { statusOf } from '#shared/adapters/kubernetes/api-errors.ts';
import { asComponent } from '#shared/adapters/kubernetes/user-agent.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import type { ForwarderConfig } from '#shared/config/forwarder-config.ts';
import type { ReconcileConfig } from '#shared/config/reconcile-config.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { STARTUP_GATE_TAINT_KEY, type TaintId } from '#shared/domain/taint.ts';
import { createForwarderTelemetry, type CountingForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';
import { METRIC_NAMESPACE, MetricDimension, ReconcileMetric } from '#shared/observability/metric-names.ts';
import { logger as defaultLogger } from '#shared/observability/logger.ts';
import type { EventRecorder } from '#shared/ports/event-recorder.ts';
import { emptyCounters, type PipelineCounters } from './pipeline-report.ts';
import { startLocalSqs, type LocalQueue, type LocalSqs, type QueueDepth } from './sqs/local-sqs.ts';
import { SqsEventSource, type InvocationResult } from './sqs/sqs-event-source.ts';

export type { PipelineCounters } from './pipeline-report.ts';

/** Options of {@link startPipeline}; every default suits an interactive local run. */
export interface PipelineOptions {
  /** The management cluster (and the Nodes' cluster in `self` mode): a KubeConfig or a kubeconfig file path. */
  readonly kubeconfig: KubeConfig | string;
  readonly mode: 'self' | 'capi';
  /** Namespace of the forwarder's Lease and the first-enablement ConfigMap; created when missing. Default `capi-taint-propagator`. */
  readonly stateNamespace?: string;
  /** Lease name; tests give each pipeline its own. Default `capi-taint-propagator-forwarder`. */
  readonly leaseName?: string;
  /**
   * Shards of the fleet (FORWARDER_SHARDS; default 1): the forwarder runs every shard's rota side by side, each on its
   * own Lease (shared/policy/shards.ts), or only `shard`'s when given (FORWARDER_SHARD).
   */
  readonly shards?: number;
  readonly shard?: number;
  /** Only Machines of this namespace (default all). */
  readonly machineNamespace?: string;
  /** Only Nodes matching this label selector (default all). */
  readonly nodeLabelSelector?: string;
  /** Queue visibility timeout in seconds (default 30; the Lambda function timeout is derived from it). */
  readonly visibilityTimeoutSeconds?: number;
  /** Receives before a message is redriven to the dead-letter queue (default 5). */
  readonly maxReceiveCount?: number;
  /**
   * An SQS server that outlives this pipeline (e.g. to restart the pipeline over the same messages); its queues'
   * settings win over `visibilityTimeoutSeconds` and `maxReceiveCount`. Default: a new in-process one, stopped
   * with the pipeline.
   */
  readonly sqs?: LocalSqs;
  /** Longest wait for one Kubernetes API call of the reconcile function, in seconds (default 10). */
  readonly apiTimeoutSeconds?: number;
  /** Backoff after a conflict: base × 2^(receives−1), capped (defaults 1 s and 30 s). */
  readonly retryBaseSeconds?: number;
  readonly retryMaxSeconds?: number;
  /** Who propagates `spec.taints` (default upstream CAPI; `product` where no CAPI controller does, e.g. a bare API server). */
  readonly specTaintsOwner?: SpecTaintsOwner;
  /** The startup gate taint; `null` disables it. Default `taints.capi-taint-propagator.dev/uninitialized:NoSchedule`. */
  readonly startupTaint?: { readonly key: string; readonly effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute' } | null;
  /** Overrides the recorded first enablement (FIRST_ENABLED_AT); default: the ConfigMap in the state namespace. */
  readonly firstEnabledAt?: Date;
  readonly dryRun?: boolean;
  /** Pace of a staged NoExecute rollout (docs/noexecute-rollout.md); default the product's (tests shorten it). */
  readonly rollout?: RolloutTimings;
  /** Deadline of each list page and watch connect of the forwarder, in ms (default 30 000). */
  readonly watchRequestTimeoutMs?: number;
  /** Periodic full resync of the forwarder (default 0 = off). */
  readonly resyncIntervalSeconds?: number;
  /** Lease duration of the forwarder (default 15 s). */
  readonly leaseDurationSeconds?: number;
  /** Event source pollers, i.e. concurrent reconcile invocations (default 2). */
  readonly concurrency?: number;
  /** Records per invocation (default 10). */
  readonly batchSize?: number;
  /** Timing of the forwarder core (tests shorten the renew interval); `acquireRetryMs` also paces a window that did not join. */
  readonly forwarderOptions?: WatchForwarderOptions;
  /** Logger of both functions (default the product's singleton). */
  readonly logger?: Logger;
  /** Called for each Kubernetes Event the reconcile function records (for activity feeds). Must not throw. */
  readonly onActivity?: (activity: Activity) => void;
  /** Called after every reconcile invocation. Must not throw. */
  readonly onInvocation?: (result: InvocationResult) => void;
  /**
   * Given, each function and the reconcile function's event source get an SQS client of their own, passed here before
   * first use (e.g. to record the AWS calls each makes; test/support/aws-calls.ts). Default: one client for all.
   */
  readonly onSqsClient?: (client: SQSClient, caller: SqsCaller, queues: { readonly queueUrl: string; readonly deadLetterQueueUrl: string }) => void;
}

/** Who makes an SQS call in a pipeline: one of the two functions, or Lambda's event source of the reconcile function. */
export type SqsCaller = 'reconcile-node-taints' | 'watch-forwarder' | 'reconcile-event-source';

/** One notable thing the reconcile function did, as told to an object's Kubernetes Events. */
export interface Activity {
  readonly at: Date;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  /** The Event's involved object's kind: Machine, MachinePool, MachineDeployment, MachineSet, Node. */
  readonly kind: string;
  /** `namespace/name` of that object. */
  readonly object: string;
  readonly message: string;
}

/** The running pipeline. */
export interface Pipeline {
  readonly mode: 'self' | 'capi';
  readonly kubeConfig: KubeConfig;
  readonly queue: LocalQueue;
  readonly deadLetterQueue: LocalQueue;
  /** The SQS client both functions use (a real SQSClient, pointed at the local server). */
  readonly sqs: SQSClient;
  /** The local SQS server (its endpoint, queues and GetQueueAttributes). */
  readonly localSqs: LocalSqs;
  readonly eventSource: SqsEventSource;
  /** Startup gate the reconcile function removes (for status views). */
  readonly startupTaint: TaintId | undefined;
  /** Who propagates `spec.taints` (for status views). */
  readonly specTaintsOwner: SpecTaintsOwner;
  /** Totals since start; the queue depths are GetQueueAttributes results at most ~250 ms old. */
  counters(): PipelineCounters;
  /** Totals with queue depths read now. */
  freshCounters(): Promise<PipelineCounters>;
  /** Stops the forwarder (it hands over: sends what is pending, stores its checkpoint on the Lease). */
  stopForwarder(): Promise<void>;
  /**
   * Starts a new forwarder process-equivalent (fresh adapters, new identity): windows of a rota of one, one after
   * another (local/forwarder-rota.ts), each resuming from the Lease checkpoint.
   */
  startForwarder(): void;
  /** Resolves when the forwarder holds the Lease (it has started its watches), or rejects after `timeoutMs`. */
  waitForForwarder(timeoutMs?: number): Promise<void>;
  /**
   * Runs one forwarder window as the scheduled Lambda does (`forwardWatchEvents`): a forwarder of fresh adapters joins
   * the rota, resumes from the Lease checkpoint, watches for `durationMs`, then drains, hands over and leaves. Only
   * while the windows `startForwarder` runs one after another are stopped (`stopForwarder`).
   */
  runForwarderWindow(durationMs: number): Promise<ForwarderRunSummary>;
  /** The workload clusters whose Node watch the running forwarder sees failing (empty when none runs). */
  failingClusters(): FailingCluster[];
  /** Stops everything: forwarder first (hand-over), then the event source after its running invocations, then SQS (unless given). */
  stop(): Promise<void>;
}

/** Starts the forwarder, the queues and the reconcile event source against a cluster. Returns once everything is running. */
export async function startPipeline(options: PipelineOptions): Promise<Pipeline> {
  const kc = toKubeConfig(options.kubeconfig);
  const log = options.logger ?? defaultLogger;
  const stateNamespace = options.stateNamespace ?? 'capi-taint-propagator';
  await ensureNamespace(kc, stateNamespace);

  const visibilityTimeoutSeconds = options.visibilityTimeoutSeconds ?? 30;
  const localSqs = options.sqs ?? (await startLocalSqs({ visibilityTimeoutSeconds, maxReceiveCount: options.maxReceiveCount ?? 5 }));
  const { queue, deadLetterQueue } = localSqs;
  const sqs = localSqs.newClient();
  const ownClients: SQSClient[] = [];
  const clientOf = (caller: SqsCaller): SQSClient => {
    if (!options.onSqsClient) return sqs;
    const own = localSqs.newClient();
    ownClients.push(own);
    options.onSqsClient(own, caller, { queueUrl: queue.url, deadLetterQueueUrl: deadLetterQueue.url });
    return own;
  };

  const counters = new CounterBox();
  const startupTaint =
    options.startupTaint === null ? undefined : (options.startupTaint ?? { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' as const });
  const reconcileConfig: ReconcileConfig = {
    queueUrl: queue.url,
    deadLetterQueueUrl: deadLetterQueue.url,
    dryRun: options.dryRun ?? false,
    specTaintsOwner: options.specTaintsOwner ?? SpecTaintsOwner.upstream,
    startupTaint,
    retryBaseSeconds: options.retryBaseSeconds ?? 1,
    retryMaxSeconds: options.retryMaxSeconds ?? 30,
    stateNamespace,
    firstEnabledAt: options.firstEnabledAt,
    // The reconcile function re-issues a record one receive before this redrive (only needs-a-human records reach the DLQ).
    maxReceiveCount: options.maxReceiveCount ?? 5,
    ...(options.apiTimeoutSeconds !== undefined ? { apiTimeoutSeconds: options.apiTimeoutSeconds } : {}),
  };
  const workload = workloadKubeConfigs(kc);
  const composed = composeReconcile({
    config: reconcileConfig,
    clusterMode: options.mode,
    managementKubeConfig: kc,
    workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }),
    sqs: clientOf('reconcile-node-taints'),
    logger: log,
    metrics: new CountingMetrics(counters),
  });
  const deps: BatchDeps = {
    ...composed,
    recorder: observedRecorder(composed.recorder, options.onActivity),
    ...(options.rollout ? { settings: { ...composed.settings, rollout: options.rollout } } : {}),
  };
  const eventSource = new SqsEventSource({
    client: clientOf('reconcile-event-source'),
    queue,
    region: localSqs.region,
    handler: (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => asComponent('reconcile-node-taints', () => processBatch(event, context, deps)),
    batchSize: options.batchSize ?? 10,
    concurrency: options.concurrency ?? 2,
    functionName: 'reconcile-node-taints',
    // Lambda's rule: the queue's visibility timeout must not be below the function timeout.
    functionTimeoutSeconds: Math.max(1, Math.min(visibilityTimeoutSeconds, 60)),
    ...(options.onInvocation ? { onInvocation: options.onInvocation } : {}),
    onPollError: (error) => log.error('Polling the local SQS queue failed', { error: error as Error }),
  });
  eventSource.start();
  const depths = new DepthSampler(localSqs);

  const telemetry: CountingForwarderTelemetry = createForwarderTelemetry();
  let generation = 0;
  let current: { forwarders: WatchForwarder[]; stop: AbortController; done: Promise<void> } | undefined;
  const leaseName = options.leaseName ?? 'capi-taint-propagator-forwarder';
  const shardCount = options.shards ?? 1;
  const shards = localShards({ shards: shardCount, shard: options.shard ?? 0, shardPinned: options.shard !== undefined });
  const forwarderConfig = (shard = shards[0] ?? 0): ForwarderConfig => ({
    queueUrl: queue.url,
    clusterMode: options.mode,
    watchWindowSeconds: 780,
    watchMembers: LOCAL_WATCH_MEMBERS,
    watchOverlapSeconds: 150,
    resyncIntervalSeconds: options.resyncIntervalSeconds ?? 0,
    watchIdleSeconds: 90,
    stateNamespace,
    leaseName,
    forwarderId: `local-forwarder-${process.pid}-${++generation}`,
    leaseDurationSeconds: options.leaseDurationSeconds ?? 15,
    machineNamespace: options.machineNamespace,
    nodeLabelSelector: options.nodeLabelSelector,
    startupTaint,
    specTaintsOwner: reconcileConfig.specTaintsOwner,
    shards: shardCount,
    shard,
    shardPinned: options.shard !== undefined,
  });
  const rota = localRota(forwarderConfig());
  // The rota's checkpoint covers what was sent, which is safe while the queue outlives the forwarder: within this
  // process, and with a server given in `options.sqs`. A queue of our own is new and empty, so a checkpoint left by an
  // earlier run points past events that may have died with that run's queue (a crash, kill -9): the Lease goes, and the
  // first window lists and announces every object once.
  if (!options.sqs) for (const shard of shards) await deleteLease(kc, stateNamespace, shardLeaseName(leaseName, shard, shardCount), log);
  const forwarderSqs = clientOf('watch-forwarder');
  const composeForwarder = (shard: number) =>
    composeWatchForwarder({
      config: forwarderConfig(shard),
      managementKubeConfig: kc,
      sqs: forwarderSqs,
      telemetry,
      workloadKubeConfigs: workload,
      logger: log,
      ...(options.watchRequestTimeoutMs !== undefined ? { requestTimeoutMs: options.watchRequestTimeoutMs } : {}),
    });
  const startForwarder = (): void => {
    if (current) return;
    const forwarders = shards.map((shard) => new WatchForwarder(composeForwarder(shard), options.forwarderOptions));
    const stop = new AbortController();
    // As `npm run forwarder`: per shard, windows of the rota, one after another, until stopped.
    const retryMs = options.forwarderOptions?.acquireRetryMs ?? 2_000;
    const done = Promise.all(forwarders.map((forwarder) => asComponent('watch-forwarder', () => runWindows(forwarder, { signal: stop.signal, rota, retryMs, logger: log })))).then(() => undefined);
    current = { forwarders, stop, done };
  };
  const stopForwarder = async (): Promise<void> => {
    const running = current;
    if (!running) return;
    running.stop.abort();
    await running.done;
    current = undefined;
  };
  startForwarder();

  let stopped = false;
  const snapshot = (): PipelineCounters => counters.snapshot(telemetry, eventSource, depths.queue, depths.deadLetterQueue, current?.forwarders.every((f) => f.isActive()) ?? false);
  return {
    mode: options.mode,
    kubeConfig: kc,
    queue,
    deadLetterQueue,
    sqs,
    localSqs,
    eventSource,
    startupTaint,
    specTaintsOwner: reconcileConfig.specTaintsOwner,
    counters: snapshot,
    async freshCounters(): Promise<PipelineCounters> {
      await depths.sample();
      return snapshot();
    },
    stopForwarder,
    startForwarder,
    async runForwarderWindow(durationMs: number): Promise<ForwarderRunSummary> {
      if (current) throw new Error('runForwarderWindow: stop the long-running forwarder first');
      const windows = await Promise.all(shards.map((shard) => asComponent('watch-forwarder', () => forwardWatchEvents(composeForwarder(shard), { durationMs, rota: rota.policy }, options.forwarderOptions))));
      return mergedSummary(windows);
    },
    failingClusters: () => current?.forwarders.flatMap((f) => f.failingClusters()).sort((a, b) => a.cluster.localeCompare(b.cluster)) ?? [],
    async waitForForwarder(timeoutMs = 30_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!current?.forwarders.every((f) => f.isActive())) {
        if (Date.now() > deadline) throw new Error(`The forwarder did not become active within ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 50));
      }
    },
    async stop(): Promise<void> {
      if (stopped) return;
      stopped = true;
      await stopForwarder();
      await eventSource.stop();
      await depths.stop();
      sqs.destroy();
      for (const c of ownClients) c.destroy();
      if (!options.sqs) await localSqs.stop();
    },
  };
}

/** One summary of the shards' windows run side by side (one shard: its own). */
function mergedSummary(windows: readonly ForwarderRunSummary[]): ForwarderRunSummary {
  if (windows.length === 1 && windows[0]) return windows[0];
  const joined = windows.every((w) => w.rota.joined);
  return {
    active: windows.every((w) => w.active),
    rota: { joined },
    unsent: windows.reduce((sum, w) => sum + w.unsent, 0),
    // Stream keys differ between shards (their Node streams are their own clusters'); the management streams' resume
    // points are each shard's, and only the first shard's is shown here.
    checkpoint: Object.assign({}, ...[...windows].reverse().map((w) => w.checkpoint)) as ForwarderRunSummary['checkpoint'],
    failingClusters: windows.flatMap((w) => w.failingClusters),
  };
}

function toKubeConfig(kubeconfig: KubeConfig | string): KubeConfig {
  if (typeof kubeconfig !== 'string') return kubeconfig;
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return kc;
}

/** Deletes the forwarder's Lease (its checkpoint and member list) if there is one; a refusal only costs the fresh start. */
async function deleteLease(kc: KubeConfig, namespace: string, name: string, log: Logger): Promise<void> {
  try {
    await kc.makeApiClient(CoordinationV1Api).deleteNamespacedLease({ name, namespace });
  } catch (error) {
    if (statusOf(error) !== 404) log.warn('Deleting the Lease of an earlier run failed; the forwarder resumes from its checkpoint', { error: error as Error });
  }
}

/** Creates the state namespace when it is missing, as an installation would. */
async function ensureNamespace(kc: KubeConfig, name: string): Promise<void> {
  const api = kc.makeApiClient(CoreV1Api);
  try {
    await api.readNamespace({ name });
  } catch (error) {
    if (statusOf(error) !== 404) throw error;
    try {
      await api.createNamespace({ body: { metadata: { name } } });
    } catch (createError) {
      if (statusOf(createError) !== 409) throw createError;
    }
  }
}

/** The reconcile function's Event recorder, also reporting each Event to `onActivity`. */
function observedRecorder(inner: EventRecorder, onActivity: PipelineOptions['onActivity']): EventRecorder {
  if (!onActivity) return inner;
  return {
    async record(object, type, reason, message) {
      try {
        onActivity({ at: new Date(), type, reason, kind: object.kind, object: `${object.namespace}/${object.name}`, message });
      } catch {
        // A display must never change the outcome of a reconcile.
      }
      return inner.record(object, type, reason, message);
    },
  };
}

/** Mutable totals behind {@link Pipeline.counters}. */
class CounterBox {
  readonly outcomes: Record<string, number> = {};
  readonly metrics: Record<string, number> = {};

  add(metric: string, value: number, outcome: string | undefined): void {
    if (metric === ReconcileMetric.Reconciles && outcome !== undefined) this.outcomes[outcome] = (this.outcomes[outcome] ?? 0) + value;
    else this.metrics[metric] = (this.metrics[metric] ?? 0) + value;
  }

  snapshot(telemetry: CountingForwarderTelemetry, eventSource: SqsEventSource, q: QueueDepth, dlq: QueueDepth, forwarderActive: boolean): PipelineCounters {
    const f = telemetry.counts();
    const source = eventSource.counters;
    const empty = emptyCounters();
    return {
      ...empty,
      forwarderActive,
      eventsSeen: f.EventsSeen,
      eventsForwarded: f.EventsForwarded,
      eventsFiltered: f.EventsFiltered,
      foreignTaintChangesFiltered: f.ForeignTaintChangesFiltered ?? 0,
      foreignDeclarationChangesFiltered: f.ForeignDeclarationChangesFiltered ?? 0,
      sendFailures: f.SendFailures,
      relists: f.Relists,
      watchRestarts: f.WatchRestarts,
      reconciles: { ...empty.reconciles, ...this.outcomes },
      writes: this.metrics[ReconcileMetric.NodeWrites] ?? 0,
      conflicts: this.metrics[ReconcileMetric.Conflicts] ?? 0,
      transientErrors: this.metrics[ReconcileMetric.TransientErrors] ?? 0,
      reissued: this.metrics[ReconcileMetric.Reissued] ?? 0,
      deadLettered: (this.metrics[ReconcileMetric.DeadLettered] ?? 0),
      deadLetterQueueDepth: dlq.visible + dlq.inFlight + dlq.delayed,
      queueVisible: q.visible + q.delayed,
      queueInFlight: q.inFlight,
      invocations: source.invocations,
    };
  }
}

/** The last GetQueueAttributes of both queues, refreshed in the background so that `counters()` stays synchronous. */
class DepthSampler {
  queue: QueueDepth = { visible: 0, inFlight: 0, delayed: 0 };
  deadLetterQueue: QueueDepth = { visible: 0, inFlight: 0, delayed: 0 };
  readonly #sqs: LocalSqs;
  readonly #timer: NodeJS.Timeout;
  #pending: Promise<void> | undefined;

  constructor(sqs: LocalSqs) {
    this.#sqs = sqs;
    this.#timer = setInterval(() => void this.sample().catch(() => undefined), 250);
    this.#timer.unref();
  }

  /** Reads both depths now (joins a read already under way). */
  sample(): Promise<void> {
    this.#pending ??= (async () => {
      try {
        const [q, dlq] = await Promise.all([this.#sqs.depth(this.#sqs.queue), this.#sqs.depth(this.#sqs.deadLetterQueue)]);
        this.queue = q;
        this.deadLetterQueue = dlq;
      } finally {
        this.#pending = undefined;
      }
    })();
    return this.#pending;
  }

  async stop(): Promise<void> {
    clearInterval(this.#timer);
    await this.#pending?.catch(() => undefined);
  }
}

/**
 * Powertools Metrics that only count in memory: the reconcile function calls it exactly as in AWS,
 * and nothing is printed as EMF (a local run has no CloudWatch).
 */
class CountingMetrics extends Metrics {
  private readonly box: CounterBox;
  private readonly dimensions: Record<string, string> = {};

  constructor(box: CounterBox, single = false) {
    super({ namespace: METRIC_NAMESPACE, serviceName: 'capi-taint-propagator', singleMetric: single });
    this.box = box;
  }

  override addDimension(name: string, value: string): this {
    this.dimensions[name] = value;
    return this;
  }

  override addMetric(name: string, _unit: Parameters<Metrics['addMetric']>[1], value: number): this {
    this.box.add(name, value, this.dimensions[MetricDimension.Outcome]);
    return this;
  }

  override singleMetric(): Metrics {
    return new CountingMetrics(this.box, true);
  }

  override publishStoredMetrics(): this {
    // Nothing is stored: every call was counted in addMetric.
    return this;
  }
}

/** Outcome names in display order (also used by tests). */
export const OUTCOMES: readonly string[] = Object.values(ReconcileOutcome);
