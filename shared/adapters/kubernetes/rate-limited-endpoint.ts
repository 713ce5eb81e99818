/**
 * A client-side rate limit on the requests to one cluster, as client-go's `rest.Config` QPS and Burst: one bucket per
 * workload cluster's Node stream, whatever credentials it reconnects with (docs/hostile-clusters.md).
 */
import { setTimeout as delay } from 'node:timers/promises';
import type https from 'node:https';
import { fullBucket, takeToken, type BucketState, type RateLimit } from '#shared/policy/rate-limit.ts';
import type { ClusterEndpoint } from './kube-http.ts';

/**
 * The Node stream's limit: 30 at once covers a relist of 15 000 Nodes (30 pages of 500, three times Kubernetes'
 * envelope per cluster) without waiting; then 1 per second, the bound for a failing stream.
 */
export const NODE_STREAM_RATE_LIMIT: RateLimit = { burst: 30, perSecond: 1 };

export class EndpointRateLimiter {
  readonly #limit: RateLimit;
  #state: BucketState;

  constructor(limit: RateLimit) {
    this.#limit = limit;
    this.#state = fullBucket(limit, Date.now());
  }

  /** The endpoint, each request of which takes a token (waiting when none is left) before applying the credentials. */
  wrap(endpoint: ClusterEndpoint): ClusterEndpoint {
    return {
      getCurrentCluster: () => endpoint.getCurrentCluster(),
      applyToHTTPSOptions: async (opts: https.RequestOptions): Promise<void> => {
        const { state, waitMs } = takeToken(this.#state, Date.now(), this.#limit);
        this.#state = state;
        if (waitMs > 0) await delay(waitMs);
        await endpoint.applyToHTTPSOptions(opts);
      },
    };
  }
}
