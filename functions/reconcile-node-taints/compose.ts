/** The reconcile function's dependencies from configuration and clients: the Lambda and `npm start` run this code. */
import { startupGateWarning } from '#shared/domain/ownership.ts';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { withCallDeadline } from '#shared/adapters/kubernetes/call-deadline.ts';
import { KubernetesClusterConnections, type WorkloadKubeConfigLoader } from '#shared/adapters/kubernetes/cluster-connections.ts';
import { clusterCredentialsReporter } from '#shared/adapters/kubernetes/credentials-reporter.ts';
import { ConfigMapEnablementState } from '#shared/adapters/kubernetes/enablement-state.ts';
import { KubernetesEventRecorder } from '#shared/adapters/kubernetes/event-recorder.ts';
import { KubernetesCapiDiscovery } from '#shared/adapters/kubernetes/capi-discovery.ts';
import type { ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { KubernetesMachineStore } from '#shared/adapters/kubernetes/machine-store.ts';
import { KubernetesScalableResourceStore } from '#shared/adapters/kubernetes/scalable-resource-store.ts';
import { SqsRecordQueue } from '#shared/adapters/sqs/record-queue.ts';
import type { SqsClientSource } from '#shared/adapters/sqs/sdk.ts';
import type { ReconcileConfig } from '#shared/config/reconcile-config.ts';
import { logger as defaultLogger } from '#shared/observability/logger.ts';
import { metrics as defaultMetrics } from '#shared/observability/metrics.ts';
import { ReconcileMetric } from '#shared/observability/metric-names.ts';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { FailingClusters } from './cluster-guard.ts';
import type { BatchDeps } from './process-batch.ts';

export interface ComposeArgs {
  readonly config: ReconcileConfig;
  readonly clusterMode: 'capi' | 'self';
  /** The management cluster (Machines, Events, state; in `self` mode the Nodes too): a RestConfig or a KubeConfig. */
  readonly managementKubeConfig: ClusterEndpoint;
  readonly workloadKubeConfig: WorkloadKubeConfigLoader;
  readonly sqs: SqsClientSource;
  readonly logger?: BatchDeps['logger'];
  readonly metrics?: BatchDeps['metrics'];
}

/** The dependencies of `processBatch`, and the set-up that can be done before the first record. */
export interface ReconcileComposition extends BatchDeps {
  /** Discovery and first-enablement time ahead of the first record; never throws: returns what failed, no secret. */
  readonly warmUp: () => Promise<string[]>;
}

export function composeReconcile(args: ComposeArgs): ReconcileComposition {
  const clock = { now: () => new Date() };
  // Connections are pooled by the HTTP client (kube-http.ts), one keep-alive pool for every cluster.
  const { config, managementKubeConfig: kc, logger = defaultLogger, metrics = defaultMetrics } = args;
  const gateWarning = startupGateWarning(config.startupTaint);
  if (gateWarning) logger.warn(`STARTUP_TAINT_KEY: ${gateWarning}`);
  const recorder = new KubernetesEventRecorder(kc, clock);
  // Which Cluster API version to read: discovered once per container (and again after a 404 on the group version).
  const capi = new KubernetesCapiDiscovery(kc, {
    onUnsupported: (error) => {
      metrics.addMetric(ReconcileMetric.UnsupportedClusterApi, MetricUnit.Count, 1);
      logger.error('No supported Cluster API version on the management cluster; the record goes back to the queue', { reason: error.message });
    },
    onChosen: (version) => logger.info('Cluster API version chosen by discovery', { capiApiVersion: version }),
  });
  const callTimeoutMs = (config.apiTimeoutSeconds ?? 10) * 1000;
  const fixed = config.firstEnabledAt; // FIRST_ENABLED_AT, when set, instead of the ConfigMap's record
  const enablement = fixed
    ? { enabledAt: async () => fixed }
    : new ConfigMapEnablementState(kc, config.stateNamespace, clock);
  return {
    warmUp: async () => {
      const settled = await Promise.allSettled([capi.version(), enablement.enabledAt()]);
      return settled.flatMap((r) => (r.status === 'rejected' ? [r.reason instanceof Error ? r.reason.message : String(r.reason)] : []));
    },
    machines: new KubernetesMachineStore(kc, capi),
    scalables: new KubernetesScalableResourceStore(kc, capi),
    clusters: new KubernetesClusterConnections({
      management: async () => kc,
      workload: args.workloadKubeConfig,
      clock,
      // A Cluster whose kubeconfig is unusable or refused: log, metric, Warning Event on the Cluster.
      reporter: clusterCredentialsReporter({ kubeConfig: kc, capi, recorder, logger, clock, count: () => metrics.addMetric(ReconcileMetric.UnusableKubeconfigs, MetricUnit.Count, 1) }),
    }),
    recorder,
    enablement,
    clock,
    settings: { clusterMode: args.clusterMode, dryRun: config.dryRun, startupTaint: config.startupTaint, specTaintsOwner: config.specTaintsOwner },
    queue: new SqsRecordQueue(args.sqs, config.queueUrl, config.deadLetterQueueUrl),
    parse: fromCloudEventBody,
    logger,
    metrics,
    retry: { baseSeconds: config.retryBaseSeconds, maxSeconds: config.retryMaxSeconds },
    random: Math.random,
    reissueAtReceive: Math.max(1, (config.maxReceiveCount ?? 10) - 1),
    withDeadline: (deadline, fn) => withCallDeadline(Math.min(deadline, Date.now() + callTimeoutMs), fn, callTimeoutMs),
    failingClusters: new FailingClusters(clock),
  };
}
