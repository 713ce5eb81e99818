import type { ClusterRef } from '#shared/domain/cloud-event.ts';
import type { NodeStore } from './node-store.ts';

/** Hands out a NodeStore for a workload cluster (or for the management cluster itself in `self` mode). */
export interface ClusterConnections {
  /** Throws ClusterCredentialsError when the cluster's kubeconfig is missing or unusable. */
  nodesOf(cluster: ClusterRef): Promise<NodeStore>;
}
