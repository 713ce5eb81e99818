/**
 * ClusterConnections over real API servers: the management cluster's own Nodes in `self` mode, or a workload cluster's
 * through its CAPI kubeconfig Secret. Stores are cached per cluster and rebuilt after CACHE_TTL_MS, so that rotated
 * credentials are picked up without a Secret read per event, and at once when the API server refuses the cached
 * credential (401/403): a revoked credential costs one retry, not a TTL.
 */
import { clusterKey, type ClusterRef } from '#shared/contract/cloud-event.ts';
import { AccessDeniedError, ClusterCredentialsError } from '#shared/errors.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { ClusterConnections } from '#shared/ports/cluster-connections.ts';
import type { NodeStore } from '#shared/ports/node-store.ts';
import type { PodStore } from '#shared/ports/pod-store.ts';
import type { ClusterCredentialsReporter } from './credentials-reporter.ts';
import type { ClusterEndpoint } from './kube-http.ts';
import { KubernetesNodeStore } from './node-store.ts';
import { KubernetesPodStore } from './pod-store.ts';

const CACHE_TTL_MS = 5 * 60_000;

/** Loads the credentials of a workload cluster (throws ClusterCredentialsError when it cannot). */
export type WorkloadKubeConfigLoader = (cluster: { namespace: string; name: string }) => Promise<ClusterEndpoint>;

interface Deps {
  readonly management: () => Promise<ClusterEndpoint>;
  readonly workload: WorkloadKubeConfigLoader;
  readonly clock: Clock;
  /** Told of an unusable or refused workload kubeconfig; the error still propagates (queue retry). */
  readonly reporter?: ClusterCredentialsReporter;
}

export class KubernetesClusterConnections implements ClusterConnections {
  readonly #d: Deps;
  readonly #cache = new Map<string, { store: NodeStore; kubeConfig: ClusterEndpoint; expires: number }>();
  /** Workload credentials being loaded: calls made meanwhile share the load (one Secret read). */
  readonly #loading = new Map<string, Promise<ClusterEndpoint>>();

  constructor(deps: Deps) {
    this.#d = deps;
  }

  async nodesOf(cluster: ClusterRef, options: { readonly report?: boolean } = {}): Promise<NodeStore> {
    const key = clusterKey(cluster);
    const now = this.#d.clock.now().getTime();
    const kubeConfig = cluster.mode === 'self' ? await this.#d.management() : undefined;
    const cached = this.#cache.get(key);
    // In self mode the management credentials object changes when its token is refreshed.
    if (cached && cached.expires > now && (kubeConfig === undefined || cached.kubeConfig === kubeConfig)) return cached.store;
    const fresh = kubeConfig ?? (await this.#loadWorkload(cluster as { namespace: string; name: string }, options.report ?? true));
    const store = this.#forgettingOnRefusal(key, new KubernetesNodeStore(fresh));
    this.#cache.set(key, { store, kubeConfig: fresh, expires: now + CACHE_TTL_MS });
    return store;
  }

  async #loadWorkload(cluster: { namespace: string; name: string }, report: boolean): Promise<ClusterEndpoint> {
    const key = clusterKey({ mode: 'capi', ...cluster });
    let loading = this.#loading.get(key);
    if (loading === undefined) {
      loading = this.#d.workload(cluster).finally(() => this.#loading.delete(key));
      this.#loading.set(key, loading);
    }
    try {
      return await loading;
    } catch (err) {
      // Each caller that reports says so itself: a load started by one that does not (a speculative read) is reported
      // by the ordinary caller that shared it.
      if (err instanceof ClusterCredentialsError && report) await this.#d.reporter?.report(cluster, err);
      throw err;
    }
  }

  /** The store, dropping its cache entry when the API server refuses its credential. */
  #forgettingOnRefusal(key: string, store: KubernetesNodeStore): NodeStore {
    const guard = <T>(call: Promise<T>): Promise<T> =>
      call.catch((error: unknown) => {
        if (error instanceof AccessDeniedError && this.#cache.get(key)?.store === wrapped) this.#cache.delete(key);
        throw error;
      });
    const wrapped: NodeStore = {
      getNode: (name) => guard(store.getNode(name)),
      patchNodeTaints: (name, patch) => guard(store.patchNodeTaints(name, patch)),
      listNodes: (selector) => guard(store.listNodes(selector)),
    };
    return wrapped;
  }

  async podsOf(cluster: ClusterRef): Promise<PodStore> {
    await this.nodesOf(cluster);
    const cached = this.#cache.get(clusterKey(cluster));
    if (!cached) throw new Error(`no connection cached for ${clusterKey(cluster)}`);
    return new KubernetesPodStore(cached.kubeConfig);
  }
}
