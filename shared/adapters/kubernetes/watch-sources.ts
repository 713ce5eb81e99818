/**
 * The forwarder's WatchSources over real API servers: the Cluster API collections of the management cluster, in the
 * version discovery chose, resolved before every (re)connect so that a Cluster API upgrade that stops serving a version
 * is followed without a restart; Nodes in each workload cluster (credentials from the kubeconfig Secret).
 */
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import { toClusterFacts, toMachineFacts, toMachinePoolFacts, toNodeFacts } from '#shared/model/views.ts';
import { toScalableFacts, type WatchedFacts } from '#shared/model/views.ts';
import type { StreamStart, WatchSources, WatchStream } from '#shared/ports/watch-source.ts';
import { WatchSession, type WatchSessionOptions } from './watch-session.ts';
import type { WorkloadKubeConfigs } from './workload-kubeconfig.ts';
import { clusterCredentialsReporter } from './credentials-reporter.ts';
import type { ClusterEndpoint } from './kube-http.ts';
import { EndpointRateLimiter, NODE_STREAM_RATE_LIMIT } from './rate-limited-endpoint.ts';
import type { RateLimit } from '#shared/policy/rate-limit.ts';
import { ClusterCredentialsError } from '#shared/errors.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { nodeStreamKey, MACHINES_STREAM, MACHINE_POOLS_STREAM, MACHINE_DEPLOYMENTS_STREAM, MACHINE_SETS_STREAM } from '#shared/contract/streams.ts';
import { capiApiVersionString, type CapiApiVersion } from '#shared/domain/capi-api.ts';
import type { CapiApi } from './capi-discovery.ts';

/** The settings every session takes (as WatchSessionOptions documents them), and the clusters to watch. */
export interface KubernetesWatchSourcesOptions extends Pick<
  WatchSessionOptions<WatchedFacts>,
  'idleTimeoutMs' | 'resyncIntervalMs' | 'watchTimeoutSeconds' | 'backoff' | 'requestTimeoutMs' | 'telemetry' | 'logger'
> {
  /** The management cluster: the Cluster API sessions' endpoint, where unusable kubeconfigs are reported. */
  readonly managementKubeConfig: ClusterEndpoint;
  readonly workloadKubeConfigs: WorkloadKubeConfigs;
  /** Which Cluster API group version to read (discovery over the management cluster). */
  readonly capi: CapiApi;
  /** Watch Machines of one namespace only (default all). */
  readonly machineNamespace?: string;
  /** Watch only Nodes matching this selector (default all). */
  readonly nodeLabelSelector?: string;
  /**
   * Which objects the sessions keep (default all): a forwarder shard's (shared/policy/shards.ts). A shard runs Node
   * streams for its own Clusters only, and its predicate keeps every Node.
   */
  readonly keep?: (facts: WatchedFacts) => boolean;
  /**
   * The request bucket of each cluster's Node stream (default NODE_STREAM_RATE_LIMIT), one per stream: a cluster that
   * makes its stream ask without end (a list whose pages never end) slows only itself.
   */
  readonly nodeStreamRateLimit?: RateLimit;
}

/**
 * Most pages of one list of a workload cluster's Nodes: 30 000 Nodes, six times Kubernetes' published envelope, and
 * low enough that an endless list is cut within the first minute at the stream's rate (docs/hostile-clusters.md).
 */
export const NODE_LIST_MAX_PAGES = 60;

/** Creates WatchSources backed by WatchSession. */
export function kubernetesWatchSources(o: KubernetesWatchSourcesOptions): WatchSources {
  const session = <T extends WatchedFacts>(start: StreamStart, options: WatchSessionOptions<T>): WatchStream<T> =>
    new WatchSession<T>({
      ...start,
      idleTimeoutMs: o.idleTimeoutMs,
      watchTimeoutSeconds: o.watchTimeoutSeconds,
      backoff: o.backoff,
      requestTimeoutMs: o.requestTimeoutMs,
      telemetry: o.telemetry,
      logger: o.logger,
      keep: o.keep,
      ...options,
    });
  /**
   * A Cluster API collection of the management cluster, in the version of the current attempt. `askAgain`: a 404 for
   * it makes discovery ask again (Machines, Clusters); one for MachinePools, MachineDeployments or MachineSets alone
   * says nothing about the group version.
   */
  function capiSession<T extends WatchedFacts>(
    name: string,
    plural: string,
    toFacts: (obj: unknown) => T | undefined,
    start: StreamStart,
    { askAgain = false, resync = true } = {},
  ): WatchStream<T> {
    let used: CapiApiVersion | undefined;
    const path = async (): Promise<string> => {
      used = await o.capi.version();
      const ns = o.machineNamespace ? `/namespaces/${encodeURIComponent(o.machineNamespace)}` : '';
      return `/apis/${capiApiVersionString(used)}${ns}/${plural}`;
    };
    const notServed = (): void => {
      if (used) o.capi.notServed(used);
    };
    return session(start, {
      name,
      kubeConfig: async () => o.managementKubeConfig,
      path,
      toFacts,
      resyncIntervalMs: resync ? o.resyncIntervalMs : 0,
      collectionNotServed: askAgain ? notServed : undefined,
    });
  }
  // A cluster whose kubeconfig is unusable or refused: error log, UnusableKubeconfigs and a Warning Event on the
  // Cluster; its stream keeps retrying with backoff, so a fixed Secret is picked up.
  const count = (): void => o.telemetry?.record(ForwarderMetric.UnusableKubeconfigs, 1);
  const reporter = clusterCredentialsReporter({ kubeConfig: o.managementKubeConfig, capi: o.capi, count });
  const workloadKubeConfig = async (cluster: ClusterRef): Promise<ClusterEndpoint> => {
    try {
      return await o.workloadKubeConfigs.get(cluster);
    } catch (err) {
      if (err instanceof ClusterCredentialsError && cluster.mode === 'capi') await reporter.report(cluster, err);
      throw err;
    }
  };
  const scalableFacts = (kind: 'MachineDeployment' | 'MachineSet') => (obj: unknown) => toScalableFacts(kind, obj);
  return {
    machines: (start) => capiSession(MACHINES_STREAM, 'machines', toMachineFacts, start, { askAgain: true }),
    machinePools: (start) => capiSession(MACHINE_POOLS_STREAM, 'machinepools', toMachinePoolFacts, start),
    // For the cluster-autoscaler annotation (docs/autoscaler.md).
    machineDeployments: (start) =>
      capiSession(MACHINE_DEPLOYMENTS_STREAM, 'machinedeployments', scalableFacts('MachineDeployment'), start),
    machineSets: (start) => capiSession(MACHINE_SETS_STREAM, 'machinesets', scalableFacts('MachineSet'), start),
    clusters: (start) => capiSession('clusters', 'clusters', toClusterFacts, start, { askAgain: true, resync: false }),
    nodes: (cluster, start) => {
      const limiter = new EndpointRateLimiter(o.nodeStreamRateLimit ?? NODE_STREAM_RATE_LIMIT);
      const kubeConfig = async () => limiter.wrap(await workloadKubeConfig(cluster));
      return session(start, {
        name: nodeStreamKey(cluster),
        kubeConfig,
        path: '/api/v1/nodes',
        toFacts: toNodeFacts,
        resyncIntervalMs: o.resyncIntervalMs,
        caps: { maxPages: NODE_LIST_MAX_PAGES },
        labelSelector: o.nodeLabelSelector,
      });
    },
  };
}
