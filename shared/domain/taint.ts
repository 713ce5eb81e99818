/** Taint vocabulary of every part of the product: Node and Machine taints, Cluster API's well-known keys. */

/** The three taint effects Kubernetes knows. */
export const TaintEffect = {
  NoSchedule: 'NoSchedule',
  PreferNoSchedule: 'PreferNoSchedule',
  NoExecute: 'NoExecute',
} as const;
export type TaintEffect = (typeof TaintEffect)[keyof typeof TaintEffect];

/** How a Machine taint is propagated to its Node (upstream `MachineTaintPropagation`). */
export const Propagation = {
  /** Kept on the Node: re-added when removed, value corrected, removed when dropped from the Machine. */
  Always: 'Always',
  /** Set once, when the Node is initialized (has no tracking annotation yet); then left alone. */
  OnInitialization: 'OnInitialization',
} as const;
export type Propagation = (typeof Propagation)[keyof typeof Propagation];

/** A taint on a Node (`V1Taint`-compatible): `effect` is any string, as read; no `value` and `""` mean the same. */
export interface Taint {
  readonly key: string;
  readonly value?: string;
  readonly effect: string;
  readonly timeAdded?: string;
}

/** A taint declared for a Machine (upstream `MachineTaint`), from `spec.taints` or an annotation. */
export interface MachineTaint {
  readonly key: string;
  readonly value?: string;
  readonly effect: TaintEffect;
  readonly propagation: Propagation;
}

/** CAPI's tracking annotation: the Always taints it owns on a Node, present once it initialized it; never written. */
export const TRACKING_ANNOTATION = 'cluster.x-k8s.io/taints-from-machine';
/** The product's tracking annotation, upstream's format: CAPI rewrites its own to exactly its set (a write war). */
export const OWN_TRACKING_ANNOTATION = 'taints.capi-taint-propagator.dev/applied';
/** CAPI's startup taint on worker Nodes; CAPI removes it in its first Node patch, gate on or off. */
export const UNINITIALIZED_TAINT_KEY = 'node.cluster.x-k8s.io/uninitialized';
/** The product's default startup gate, unknown to CAPI: added at registration, removed once the taints are applied. */
export const STARTUP_GATE_TAINT_KEY = 'taints.capi-taint-propagator.dev/uninitialized';
/** CAPI's rollout taint; reserved, never declared on Machines. */
export const OUTDATED_REVISION_TAINT_KEY = 'node.cluster.x-k8s.io/outdated-revision';
/** Field manager of the reconcile function's Node writes (recorded by the API server in managedFields). */
export const FIELD_MANAGER = 'capi-taint-propagator';
/** Node annotations CAPI writes that lead from a Node back to its Machine. */
export const MACHINE_ANNOTATION = 'cluster.x-k8s.io/machine';
export const CLUSTER_NAME_ANNOTATION = 'cluster.x-k8s.io/cluster-name';
export const CLUSTER_NAMESPACE_ANNOTATION = 'cluster.x-k8s.io/cluster-namespace';
/** Machine label naming its Cluster, and the control-plane label. */
export const CLUSTER_NAME_LABEL = 'cluster.x-k8s.io/cluster-name';
export const CONTROL_PLANE_LABEL = 'cluster.x-k8s.io/control-plane';

/** The identity of a taint (upstream `MatchTaint`): same key and effect, the same taint whatever its value. */
export interface TaintId {
  readonly key: string;
  readonly effect: string;
}

/**
 * The `key:effect` form of a taint's identity.
 * @example taintId({ key: 'gpu', effect: 'NoSchedule' }) // 'gpu:NoSchedule'
 */
export function taintId(taint: TaintId): string {
  return `${taint.key}:${taint.effect}`;
}

/**
 * Whether two taints are the same taint to Kubernetes: the same key and effect, whatever their values.
 * @example isSameTaint({ key: 'gpu', effect: 'NoSchedule' }, { key: 'gpu', effect: 'NoExecute' }) // false
 */
export function isSameTaint(a: TaintId, b: TaintId): boolean {
  return a.key === b.key && a.effect === b.effect;
}

/** The value of a taint with "absent" and `""` folded into `""`. */
export function valueOf(taint: { readonly value?: string | undefined }): string {
  return taint.value ?? '';
}

/**
 * Kubernetes' string form of a taint: `key=value:effect`, or `key:effect` without a value.
 * @example formatTaint({ key: 'gpu', value: 'a100', effect: 'NoSchedule' }) // 'gpu=a100:NoSchedule'
 */
export function formatTaint(taint: Taint | MachineTaint): string {
  const value = valueOf(taint);
  return value === '' ? `${taint.key}:${taint.effect}` : `${taint.key}=${value}:${taint.effect}`;
}
