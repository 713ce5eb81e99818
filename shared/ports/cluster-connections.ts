import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import type { NodeStore } from './node-store.ts';
import type { PodStore } from './pod-store.ts';

/** Hands out a NodeStore for a workload cluster (or for the management cluster itself in `self` mode). */
export interface ClusterConnections {
  /** Throws ClusterCredentialsError for a missing or unusable kubeconfig, reported first unless `report` is false. */
  nodesOf(cluster: ClusterRef, options?: { readonly report?: boolean }): Promise<NodeStore>;
  /** The pods of the same cluster (the staged NoExecute rollout lists and evicts them); same credentials as nodesOf. */
  podsOf(cluster: ClusterRef): Promise<PodStore>;
}
