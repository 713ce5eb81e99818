/**
 * The minimal views of Kubernetes objects the domain works on. Adapters map `V1Node` and the
 * Machine custom object to these; nothing here knows a client library.
 */
import type { Taint } from './taint.ts';

/** A Node as read, with the resourceVersion that any write must carry as its precondition. */
export interface NodeSnapshot {
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly creationTimestamp?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly taints: readonly Taint[];
}

/** A Cluster API Machine as read from the management cluster (v1beta2 or v1beta1: one shape). */
export interface MachineSnapshot {
  /** The group version it was read in (`cluster.x-k8s.io/v1beta2` or `…/v1beta1`): Events about it name it. */
  readonly apiVersion: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly creationTimestamp?: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** `spec.taints` exactly as stored (unvalidated: the API server may not have run CAPI's webhooks). */
  readonly specTaints: unknown;
  /** `spec.clusterName`. */
  readonly clusterName?: string;
  /** `status.nodeRef.name`. */
  readonly nodeName?: string;
  /** True when `metadata.deletionTimestamp` is set. */
  readonly deleting: boolean;
}

/** A write of a Node's taints and annotations, guarded by the resourceVersion it was planned from. */
export interface NodeTaintPatch {
  readonly resourceVersion: string;
  /** The complete new taint list (`spec.taints` is atomic). */
  readonly taints: readonly Taint[];
  /** Annotations to set (string) or remove (null); others are left alone. */
  readonly annotations: Readonly<Record<string, string | null>>;
}
