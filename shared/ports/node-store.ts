import type { NodeTaintPatch } from '#shared/domain/taint-plan.ts';
import type { NodeFacts, NodeWithTaints } from '#shared/model/views.ts';

/** Reads and writes Nodes of one cluster. */
export interface NodeStore {
  /** The Node, or undefined when none; TransientError when the answer is not that Node or its taints are unreadable. */
  getNode(name: string): Promise<NodeWithTaints | undefined>;
  /** Writes if `patch.resourceVersion` holds; returns the Node as written. PatchConflictError, NodeNotFoundError. */
  patchNodeTaints(name: string, patch: NodeTaintPatch): Promise<NodeFacts>;
  /** The Nodes with a label selector (the staged NoExecute rollout lists the Nodes in progress by its label). */
  listNodes(labelSelector: string): Promise<readonly NodeFacts[]>;
}
