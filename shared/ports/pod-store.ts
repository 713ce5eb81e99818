import type { PodOnNode } from '#shared/domain/eviction-preview.ts';

/** What the Eviction API answered for one pod. */
export type EvictionAnswer =
  /** Accepted (201): the pod is being deleted with its own grace period. */
  | 'evicted'
  /** The pod no longer exists (404). */
  | 'gone'
  /** A PodDisruptionBudget forbids it now (429): waited out, never overridden. */
  | 'refused';

/** Reads the pods bound to a Node and evicts them through the Eviction API, in one workload cluster. */
export interface PodStore {
  /** The pods whose `spec.nodeName` is the Node, as the eviction rules read them. */
  listPodsOnNode(nodeName: string): Promise<readonly PodOnNode[]>;
  /** POSTs `pods/eviction` for the pod: the API server consults its PodDisruptionBudgets. */
  evictPod(namespace: string, name: string): Promise<EvictionAnswer>;
}
