/**
 * The reconcile half of the pipeline, composed exactly as in production: the Lambda SQS handler body (`processBatch`)
 * with the production composition (`composeReconcile`) and a real SQSClient, driven with SQSEvents by the local event
 * source mapping from an SQS FIFO queue served in-process over HTTP (fauxqs: FIFO groups per Node, visibility-based
 * backoff, redrive). API calls are real and counted at the client.
 */
import type { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Context, SQSEvent } from 'aws-lambda';
import type { ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { composeWatchForwarder } from '#functions/watch-forwarder/compose.ts';
import { WatchForwarder } from '#functions/watch-forwarder/forward-watch-events.ts';
import { LOCAL_WATCH_MEMBERS, localRota, runWindows } from '#local/forwarder-rota.ts';
import { logger } from '#shared/observability/logger.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import { createForwarderTelemetry, type CountingForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';
import { processBatch, type BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import { createSqsEventPublisher } from '#shared/adapters/sqs/event-publisher.ts';
import { loadReconcileConfig, type ReconcileConfig } from '#shared/config/reconcile-config.ts';
import { eventIdFor, eventTypeFor, sourceFor, subjectFor, type MachineEventData, type TaintEvent } from '#shared/contract/cloud-event.ts';
import { OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION, type Taint } from '#shared/domain/taint.ts';
import type { EventPublisher } from '#shared/ports/event-publisher.ts';
import { startLocalSqs, type LocalQueue, type LocalSqs } from '#local/sqs/local-sqs.ts';
import { SqsEventSource } from '#local/sqs/sqs-event-source.ts';
import { countingWorkloadLoader, type CallCounter } from './kube.ts';

/** Production's settings (serverless.yml): reserved concurrency 10, FIFO batch size 10. */
export const RECONCILE_CONCURRENCY = 10;
export const RECONCILE_BATCH_SIZE = 10;

export interface ReconcilePipelineOptions {
  /** The management (= workload, `self` mode) cluster, normally a counting KubeConfig. */
  readonly kubeConfig: KubeConfig;
  /**
   * `self` (default): Nodes in the management cluster. `capi`: each Machine's Cluster has its Nodes in a workload
   * cluster reached through its `<cluster>-kubeconfig` Secret, as the Lambda handler composes it.
   */
  readonly mode?: 'self' | 'capi';
  /** `capi` mode: counts the requests sent to workload clusters (the management ones count in `kubeConfig`). */
  readonly workloadCounter?: CallCounter;
  readonly concurrency?: number;
  readonly batchSize?: number;
  /** Environment overrides for the reconcile configuration (defaults: production's). */
  readonly env?: Readonly<Record<string, string>>;
  /** Lets a scenario wrap the dependencies (e.g. to count conflicts). */
  readonly wrapDeps?: (deps: BatchDeps) => BatchDeps;
}

/** Counters kept by the pipeline, from the records' fates. */
export interface ReconcileTally {
  invocations: number;
  records: number;
  failedRecords: number;
}

export class ReconcilePipeline {
  readonly localSqs: LocalSqs;
  readonly queue: LocalQueue;
  readonly deadLetters: LocalQueue;
  readonly sqs: SQSClient;
  readonly publisher: EventPublisher;
  readonly config: ReconcileConfig;
  readonly deps: BatchDeps;
  readonly source: SqsEventSource;

  /** Starts the local SQS server with the queue pair; the pollers start with `start()`. */
  static async create(o: ReconcilePipelineOptions): Promise<ReconcilePipeline> {
    return new ReconcilePipeline(o, await startLocalSqs({ queueName: 'bench-taints.fifo', deadLetterQueueName: 'bench-taints-dlq.fifo', visibilityTimeoutSeconds: 180, maxReceiveCount: 20 }));
  }

  private constructor(o: ReconcilePipelineOptions, localSqs: LocalSqs) {
    this.localSqs = localSqs;
    this.queue = localSqs.queue;
    this.deadLetters = localSqs.deadLetterQueue;
    this.sqs = localSqs.client;
    this.publisher = createSqsEventPublisher({ client: this.sqs, queueUrl: this.queue.url });
    this.config = loadReconcileConfig({
      QUEUE_URL: this.queue.url,
      DEAD_LETTER_QUEUE_URL: this.deadLetters.url,
      // Nodes created by the benchmark are newer than this: none is adopted, every declared taint is written.
      FIRST_ENABLED_AT: '2000-01-01T00:00:00Z',
      // A bare API server: no CAPI controller propagates spec.taints, the product does.
      SPEC_TAINTS_OWNER: 'product',
      ...o.env,
    });
    const mode = o.mode ?? 'self';
    // As functions/reconcile-node-taints/handler.ts: workload credentials from the management cluster's Secrets.
    const workload = workloadKubeConfigs(o.kubeConfig);
    const load = (c: { namespace: string; name: string }): Promise<ClusterEndpoint> => workload.get({ mode: 'capi', ...c });
    const deps = composeReconcile({
      config: this.config,
      clusterMode: mode,
      managementKubeConfig: o.kubeConfig,
      workloadKubeConfig:
        mode === 'self'
          ? async () => {
              throw new Error('self mode: no workload cluster');
            }
          : o.workloadCounter
            ? countingWorkloadLoader(load, o.workloadCounter)
            : load,
      sqs: this.sqs,
    });
    this.deps = o.wrapDeps ? o.wrapDeps(deps) : deps;
    const handler = (event: SQSEvent, context: Context) => processBatch(event, context, this.deps);
    this.source = new SqsEventSource({
      client: this.sqs,
      queue: this.queue,
      region: localSqs.region,
      handler,
      batchSize: o.batchSize ?? RECONCILE_BATCH_SIZE,
      concurrency: o.concurrency ?? RECONCILE_CONCURRENCY,
      functionName: 'reconcile-node-taints',
      functionTimeoutSeconds: 60,
    });
  }

  start(): void {
    this.source.start();
  }

  /** Stops the pollers after their running invocations, then the SQS server (its messages are lost). */
  async stop(): Promise<void> {
    await this.source.stop();
    await this.localSqs.stop();
  }

  /** Resolves when the queue is empty and no invocation runs. */
  drain(timeoutMs: number): Promise<void> {
    return this.source.drain({ timeoutMs });
  }
}

/** A Machine `modified` event as the forwarder would publish it (self mode). */
export function machineModified(namespace: string, machine: string, uid: string, resourceVersion: string, nodeName: string, observedAt: Date): TaintEvent {
  const data: MachineEventData = {
    kind: 'Machine',
    cluster: { mode: 'self' },
    machine: { namespace, name: machine, uid, resourceVersion },
    nodeName,
    observedAt: observedAt.toISOString(),
  };
  return {
    id: eventIdFor(uid, resourceVersion, 'modified'),
    source: sourceFor(data.cluster),
    type: eventTypeFor('Machine', 'modified'),
    subject: subjectFor(data),
    time: data.observedAt,
    data,
  };
}

/** Publishes events through the product's SQS publisher (batches of 10), failing loudly on any unsent one. */
export async function publishAll(publisher: EventPublisher, events: readonly TaintEvent[]): Promise<void> {
  for (let i = 0; i < events.length; i += 100) {
    const r = await publisher.publish(events.slice(i, i + 100));
    if (r.unsent.length > 0) throw new Error(`could not enqueue ${r.unsent.length} events: ${r.unsent[0]?.reason}`);
  }
}

/** A production-composed forwarder sending into a ReconcilePipeline's queue, with its messages counted. */
export interface CountedForwarder {
  /** Queue messages the forwarder has sent so far. */
  messages(): number;
  readonly telemetry: CountingForwarderTelemetry;
  /** Resolves when the forwarder has stopped (after `signal` aborts). */
  readonly done: Promise<unknown>;
}

/**
 * Starts the watch-forwarder as production composes and runs it (real watches, real Lease, windows of the rota; here a
 * rota of one whose windows follow one another, as `npm run forwarder`), in `self` mode (default) or
 * `capi` mode (the run's Clusters; each one's Nodes in its workload cluster), watching the run's namespace and
 * labelled Nodes, publishing into `pipeline`'s queue; counts the messages it sends. Its Lease is
 * `forwarder-<run>` unless `leaseName` is given (a forwarder taking over a Lease resumes from its checkpoint).
 */
export function startCountedForwarder(o: {
  pipeline: ReconcilePipeline;
  kubeConfig: KubeConfig;
  namespace: string;
  run: string;
  nodeLabel: string;
  signal: AbortSignal;
  mode?: 'self' | 'capi';
  leaseName?: string;
}): CountedForwarder {
  let messages = 0;
  const sqs = {
    send: async (command: SendMessageBatchCommand) => {
      messages += command.input.Entries?.length ?? 0;
      return o.pipeline.sqs.send(command);
    },
  };
  const config = loadForwarderConfig({
    QUEUE_URL: o.pipeline.queue.url,
    CLUSTER_MODE: o.mode ?? 'self',
    STATE_NAMESPACE: o.namespace,
    LEASE_NAME: o.leaseName ?? `forwarder-${o.run}`,
    MACHINE_NAMESPACE: o.namespace,
    NODE_LABEL_SELECTOR: `${o.nodeLabel}=${o.run}`,
    // The forwarder judges relevance with the reconcile function's owner of spec.taints (product on a bare API server).
    SPEC_TAINTS_OWNER: o.pipeline.config.specTaintsOwner,
    // As `npm run forwarder`: windows of a rota of one, one after another.
    WATCH_MEMBERS: String(LOCAL_WATCH_MEMBERS),
  });
  const telemetry = createForwarderTelemetry();
  const forwarder = new WatchForwarder(composeWatchForwarder({ config, managementKubeConfig: o.kubeConfig, sqs, telemetry }));
  const done = runWindows(forwarder, { signal: o.signal, rota: localRota(config), retryMs: 2_000, logger });
  return { messages: () => messages, telemetry, done };
}
