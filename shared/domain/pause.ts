/**
 * Cluster API's pause, as its controllers mean it (`util/annotations.IsPaused`; docs/next-to-cluster-api.md, "Pause"):
 * a paused object is left alone. `clusterctl move` and operators' maintenance rely on it.
 */

/** The annotation that pauses one Cluster API object (its presence, whatever the value). */
export const PAUSED_ANNOTATION = 'cluster.x-k8s.io/paused';

/** A Cluster API Cluster as the pause rule needs it. */
export interface ClusterView {
  readonly namespace: string;
  readonly name: string;
  readonly paused: boolean;
}

/**
 * Why the object is paused, or undefined when it is not: its Cluster's `spec.paused`, else its own annotation.
 * @example pausedReason({ annotations: { 'cluster.x-k8s.io/paused': '' } }, undefined) // 'the object has the cluster.x-k8s.io/paused annotation'
 */
export function pausedReason(object: { readonly annotations: Readonly<Record<string, string>> }, cluster: ClusterView | undefined): string | undefined {
  if (cluster?.paused) return `Cluster ${cluster.namespace}/${cluster.name} has spec.paused`;
  if (Object.hasOwn(object.annotations, PAUSED_ANNOTATION)) return `the object has the ${PAUSED_ANNOTATION} annotation`;
  return undefined;
}
