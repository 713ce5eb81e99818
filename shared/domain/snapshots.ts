/**
 * The Node as the reconcile function reads and writes it. Adapters map the Node's JSON to it; nothing here knows a
 * client library. (Cluster API objects have one view for both functions: `#shared/model/views.ts`.)
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
