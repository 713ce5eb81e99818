/**
 * Annotation keys through which taints can be declared on a Machine when `spec.taints` is not
 * available (CAPI before v1.12, or its MachineTaintPropagation gate off). CAPI copies these
 * annotations down ClusterClass/Cluster topology → MachineDeployment/KCP → MachineSet → Machine.
 * Listed from lowest to highest precedence; `spec.taints` ranks above all of them.
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
