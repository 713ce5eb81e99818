/**
 * Builds the watch-forwarder's dependencies for every form (Lambda, `npm run forwarder`, local pipeline, tests,
 * benchmarks), so all of them run the very same core.
 */
import { KubernetesCapiDiscovery } from '#shared/adapters/kubernetes/capi-discovery.ts';
import type { ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { KubernetesLeaderLease } from '#shared/adapters/kubernetes/lease.ts';
import { kubernetesWatchSources } from '#shared/adapters/kubernetes/watch-sources.ts';
import { workloadKubeConfigs, type WorkloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { createSqsEventPublisher } from '#shared/adapters/sqs/event-publisher.ts';
import type { SqsClientSource } from '#shared/adapters/sqs/sdk.ts';
import type { ForwarderConfig } from '#shared/config/forwarder-config.ts';
import { ConfigError } from '#shared/errors.ts';
import { shardKeeps, shardLeaseName } from '#shared/policy/shards.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { logger as defaultLogger } from '#shared/observability/logger.ts';
import type { EventPublisher } from '#shared/ports/event-publisher.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import type { WatchForwarderDeps } from './forward-watch-events.ts';

export interface ComposeForwarderArgs {
  readonly config: ForwarderConfig;
  /** The management cluster (also the Nodes' in `self` mode): a RestConfig in Lambda, a KubeConfig locally. */
  readonly managementKubeConfig: ClusterEndpoint;
  /** Where events go: an SQS client (real, local or mocked) with `config.queueUrl`, or a ready publisher. */
  readonly sqs?: SqsClientSource;
  readonly publisher?: EventPublisher;
  readonly telemetry: ForwarderTelemetry;
  readonly workloadKubeConfigs?: WorkloadKubeConfigs;
  readonly logger?: WatchForwarderDeps['logger'];
  /** Server-side watch timeout (default 300 s; tests shorten it). */
  readonly watchTimeoutSeconds?: number;
  /** Deadline of a list page and of a watch's connect (default 30 s). */
  readonly requestTimeoutMs?: number;
  /** Backoff between a stream's failed attempts (default 0.8 s doubling with jitter up to 30 s, docs/watch-layer.md; tests shorten it). */
  readonly watchBackoff?: { readonly initialMs: number; readonly maxMs: number };
}

/**
 * Wires adapters into the dependencies of WatchForwarder, for shard `config.shard` of `config.shards` (its Lease, its
 * clusters). Throws ConfigError when no queue is given.
 */
export function composeWatchForwarder(args: ComposeForwarderArgs): WatchForwarderDeps {
  const { config, managementKubeConfig: kc } = args;
  let publisher = args.publisher;
  if (!publisher) {
    if (!args.sqs || !config.queueUrl) throw new ConfigError('QUEUE_URL', 'is required to send events');
    publisher = createSqsEventPublisher({ client: args.sqs, queueUrl: config.queueUrl });
  }
  const logger = args.logger ?? defaultLogger;
  // Which Cluster API version to read: discovered before the first list, again after a 404 on the group version.
  // In `self` mode too: Machines are always read from the management cluster.
  let lastProblem: string | undefined;
  const capi = new KubernetesCapiDiscovery(kc, {
    onUnsupported: (error) => {
      args.telemetry.record(ForwarderMetric.UnsupportedClusterApi, 1);
      if (error.message === lastProblem) return; // once per problem; the metric counts every attempt
      lastProblem = error.message;
      logger.error('No supported Cluster API version on the management cluster; retrying with backoff', { reason: error.message });
    },
    onChosen: (version) => {
      lastProblem = undefined;
      logger.info('Cluster API version chosen by discovery', { capiApiVersion: version });
    },
  });
  return {
    mode: config.clusterMode,
    startupTaint: config.startupTaint,
    specTaintsOwner: config.specTaintsOwner,
    sources: kubernetesWatchSources({
      managementKubeConfig: kc,
      capi,
      workloadKubeConfigs: args.workloadKubeConfigs ?? workloadKubeConfigs(kc),
      machineNamespace: config.machineNamespace,
      nodeLabelSelector: config.nodeLabelSelector,
      // A shard keeps only its own clusters' objects (and so runs Node streams only for its own Clusters).
      keep: config.shards > 1 ? shardKeeps(config.shard, config.shards) : undefined,
      idleTimeoutMs: config.watchIdleSeconds * 1000,
      resyncIntervalMs: config.resyncIntervalSeconds * 1000,
      watchTimeoutSeconds: args.watchTimeoutSeconds,
      requestTimeoutMs: args.requestTimeoutMs,
      backoff: args.watchBackoff,
      telemetry: args.telemetry,
      logger,
    }),
    // One Lease per shard (the plain LEASE_NAME with one shard, so that an upgrade keeps its checkpoint).
    lease: new KubernetesLeaderLease({
      kubeConfig: kc,
      namespace: config.stateNamespace,
      name: shardLeaseName(config.leaseName, config.shard, config.shards),
      identity: config.forwarderId,
      leaseDurationSeconds: config.leaseDurationSeconds,
    }),
    publisher,
    telemetry: args.telemetry,
    clock: { now: () => new Date() },
    logger,
  };
}
