import type { NodeTaintPatch } from '#shared/domain/taint-plan.ts';
import type { NodeFacts, NodeWithTaints } from '#shared/model/views.ts';

/** Reads and writes Nodes of one cluster. */
export interface NodeStore {
  /**
   * Returns the Node, or undefined when it does not exist. Throws TransientError when the answer is not that Node or
   * its `spec.taints` cannot be read (a broken or hostile server: nothing is planned, nor written, from it).
   */
  getNode(name: string): Promise<NodeWithTaints | undefined>;
  /**
   * Writes taints and annotations with `patch.resourceVersion` as a precondition and returns the Node
   * as written. Throws PatchConflictError on 409, NodeNotFoundError on 404, TransientError/AccessDeniedError.
   */
  patchNodeTaints(name: string, patch: NodeTaintPatch): Promise<NodeFacts>;
  /** The Nodes with a label selector (the staged NoExecute rollout lists the Nodes in progress by its label). */
  listNodes(labelSelector: string): Promise<readonly NodeFacts[]>;
}
