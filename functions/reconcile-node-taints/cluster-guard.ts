/**
 * What keeps one workload cluster from costing the others (the function's README, "Isolation"). A record the guard
 * refuses (its cluster's breaker or backoff) fails at once as transient, without a request.
 */
import { CallTimeoutError, OversizedAnswerError, TransientError } from '#shared/errors.ts';
import { clusterKey, type ClusterRef } from '#shared/contract/cloud-event.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { ClusterConnections } from '#shared/ports/cluster-connections.ts';

/** Records of one workload cluster that run at once in a batch. */
export const CLUSTER_CONCURRENCY = 2;

/** The failing-cluster backoff: `baseMs` after the first failure, doubling with each further one, at most `maxMs`. */
export const FAILING_CLUSTER_BACKOFF = { baseMs: 1_000, maxMs: 30_000 } as const;

/** The workload clusters whose last call failed, with when each may be called again. One per container. */
export class FailingClusters {
  readonly #clock: Clock;
  readonly #failing = new Map<string, { failures: number; until: number; trying: boolean }>();

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Why the cluster may not be called now, or undefined when it may. */
  refusal(cluster: string): string | undefined {
    const state = this.#failing.get(cluster);
    if (!state) return undefined;
    if (state.trying) return 'a call is trying the cluster again after its failures';
    const waitMs = state.until - this.#clock.now().getTime();
    return waitMs > 0 ? `its calls failed ${state.failures} time(s) in a row; the next one goes in ${waitMs} ms` : undefined;
  }

  /** Takes the cluster's next call: after a failure, the first call once the backoff has passed tries it alone. */
  admit(cluster: string): string | undefined {
    const refused = this.refusal(cluster);
    const state = this.#failing.get(cluster);
    if (refused === undefined && state) state.trying = true;
    return refused;
  }

  answered(cluster: string): void {
    this.#failing.delete(cluster);
  }

  failed(cluster: string): void {
    const failures = (this.#failing.get(cluster)?.failures ?? 0) + 1;
    const delay = Math.min(FAILING_CLUSTER_BACKOFF.maxMs, FAILING_CLUSTER_BACKOFF.baseMs * 2 ** Math.min(failures - 1, 30));
    this.#failing.set(cluster, { failures, until: this.#clock.now().getTime() + delay, trying: false });
  }
}

/** The batch's view of its clusters: the breaker, the concurrency limit, and the container's failing clusters. */
export class ClusterGuard {
  readonly #failing: FailingClusters;
  readonly #broken = new Set<string>();
  readonly #running = new Map<string, number>();
  readonly #waiting = new Map<string, (() => void)[]>();

  constructor(failing: FailingClusters) {
    this.#failing = failing;
  }

  /** Runs one record of `cluster` once fewer than CLUSTER_CONCURRENCY of its records run. */
  async run<T>(cluster: string, fn: () => Promise<T>): Promise<T> {
    while ((this.#running.get(cluster) ?? 0) >= CLUSTER_CONCURRENCY) {
      await new Promise<void>((resolve) => this.#waiting.set(cluster, [...(this.#waiting.get(cluster) ?? []), resolve]));
    }
    this.#running.set(cluster, (this.#running.get(cluster) ?? 0) + 1);
    try {
      return await fn();
    } finally {
      this.#running.set(cluster, (this.#running.get(cluster) ?? 1) - 1);
      this.#waiting.get(cluster)?.shift()?.();
    }
  }

  /** Throws, without a request, when the cluster is not to be called now (the breaker, or its backoff). */
  check(cluster: string): void {
    const refused = this.#broken.has(cluster) ? BROKEN : this.#failing.refusal(cluster);
    if (refused) throw notTried(cluster, refused);
  }

  /** `clusters` whose Node calls go through this guard. */
  guarding(clusters: ClusterConnections): ClusterConnections {
    return {
      nodesOf: async (ref, options) => {
        const nodes = await clusters.nodesOf(ref, options);
        const cluster = clusterKey(ref);
        return {
          getNode: (name) => this.#call(cluster, () => nodes.getNode(name)),
          patchNodeTaints: (name, patch) => this.#call(cluster, () => nodes.patchNodeTaints(name, patch)),
          listNodes: (selector) => this.#call(cluster, () => nodes.listNodes(selector)),
        };
      },
      podsOf: async (ref) => {
        const pods = await clusters.podsOf(ref);
        const cluster = clusterKey(ref);
        return {
          listPodsOnNode: (node) => this.#call(cluster, () => pods.listPodsOnNode(node)),
          evictPod: (namespace, name) => this.#call(cluster, () => pods.evictPod(namespace, name)),
        };
      },
    };
  }

  async #call<T>(cluster: string, call: () => Promise<T>): Promise<T> {
    const refused = this.#broken.has(cluster) ? BROKEN : this.#failing.admit(cluster);
    if (refused) throw notTried(cluster, refused);
    try {
      const value = await call();
      this.#failing.answered(cluster);
      return value;
    } catch (error) {
      // A transient error is no answer from the cluster; anything else (404, 409, 401/403) is one.
      if (!(error instanceof TransientError)) this.#failing.answered(cluster);
      else this.#failing.failed(cluster);
      if (error instanceof CallTimeoutError || error instanceof OversizedAnswerError) this.#broken.add(cluster);
      throw error;
    }
  }
}

const BROKEN = 'an API call for this cluster timed out or was answered past the byte cap earlier in this batch';

function notTried(cluster: string, why: string): TransientError {
  return new TransientError(`Reconciling a Node of cluster ${cluster}`, `not tried: ${why}`);
}
