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
  /** `spec.providerID` (links a joining Node to its Machine before Cluster API's `status.nodeRef`; see node-link.ts). */
  readonly providerID?: string;
}

/**
 * A Cluster API Machine as read from the management cluster (v1beta2 or v1beta1: one shape) — or, with `kind`
 * `MachinePool`, a MachinePool seen from one of its Nodes (see `declarationOwnerOf` in `machine-pool.ts`): the object
 * whose declaration the Node carries, and on which Events about it are recorded.
 */
export interface MachineSnapshot {
  /** Absent for a Machine. */
  readonly kind?: 'MachinePool';
  /** The group version it was read in (`cluster.x-k8s.io/v1beta2` or `…/v1beta1`): Events about it name it. */
  readonly apiVersion: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** `spec.taints` exactly as stored (unvalidated: the API server may not have run CAPI's webhooks). */
  readonly specTaints: unknown;
  /** `spec.clusterName`. */
  readonly clusterName?: string;
  /** `status.nodeRef.name`. */
  readonly nodeName?: string;
  /** `spec.providerID` (Cluster API copies it from the infrastructure Machine once that is provisioned). */
  readonly providerID?: string;
  /** True when `metadata.deletionTimestamp` is set. */
  readonly deleting: boolean;
}

/** A Cluster API MachinePool as read from the management cluster (v1beta2 or v1beta1, or the v1.8–v1.10 `exp` API). */
export interface MachinePoolSnapshot {
  readonly apiVersion: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly labels: Readonly<Record<string, string>>;
  /** `metadata.annotations`. */
  readonly annotations: Readonly<Record<string, string>>;
  /** `spec.template.metadata.annotations`. */
  readonly templateAnnotations: Readonly<Record<string, string>>;
  /** `spec.template.spec.taints` as stored (no Cluster API version accepts it yet; read where present). */
  readonly specTaints: unknown;
  readonly clusterName?: string;
  /** Names of `status.nodeRefs`: the Nodes of the pool. */
  readonly nodeNames: readonly string[];
  readonly deleting: boolean;
}

/** A write of a Node's taints and annotations, guarded by the resourceVersion it was planned from. */
export interface NodeTaintPatch {
  readonly resourceVersion: string;
  /** The complete new taint list (`spec.taints` is atomic). */
  readonly taints: readonly Taint[];
  /** Annotations to set (string) or remove (null); others are left alone. */
  readonly annotations: Readonly<Record<string, string | null>>;
  /** Labels to set or remove, as annotations (only the staged NoExecute rollout's own label; absent: none). */
  readonly labels?: Readonly<Record<string, string | null>>;
}
