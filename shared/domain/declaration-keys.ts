/**
 * Annotation keys that declare taints where `spec.taints` is not available (CAPI before v1.12, or its gate off); CAPI
 * copies them down to Machines. From lowest to highest precedence; `spec.taints` ranks above all of them.
 */
export const DECLARATION_ANNOTATIONS = [
  /** Set in a ClusterClass (template metadata); lowest precedence. */
  'taints.capi-taint-propagator.dev/class',
  /** Set in a Cluster topology (controlPlane / machineDeployments metadata). */
  'taints.capi-taint-propagator.dev/cluster',
  /** Set on a MachineDeployment / KubeadmControlPlane template, or on one Machine; highest annotation. */
  'taints.capi-taint-propagator.dev/machine',
] as const;
export type DeclarationAnnotation = (typeof DECLARATION_ANNOTATIONS)[number];
