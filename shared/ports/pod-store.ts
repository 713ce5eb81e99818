import type { PodOnNode } from '#shared/domain/eviction-preview.ts';

/**
 * What the Eviction API answered for one pod: accepted (201: deleted with its own grace period), the pod no longer
 * exists (404), or a PodDisruptionBudget forbids it now (429: waited out, never overridden).
 */
export type EvictionAnswer = 'evicted' | 'gone' | 'refused';

/** Reads the pods bound to a Node and evicts them through the Eviction API, in one workload cluster. */
export interface PodStore {
  /** The pods whose `spec.nodeName` is the Node, as the eviction rules read them. */
  listPodsOnNode(nodeName: string): Promise<readonly PodOnNode[]>;
  /** POSTs `pods/eviction` for the pod: the API server consults its PodDisruptionBudgets. */
  evictPod(namespace: string, name: string): Promise<EvictionAnswer>;
}
