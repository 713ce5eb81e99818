import type { NodeSnapshot, NodeTaintPatch } from '#shared/domain/snapshots.ts';

/** Reads and writes Nodes of one cluster. */
export interface NodeStore {
  /** Returns the Node, or undefined when it does not exist. */
  getNode(name: string): Promise<NodeSnapshot | undefined>;
  /**
   * Writes taints and annotations with `patch.resourceVersion` as a precondition and returns the Node
   * as written. Throws PatchConflictError on 409, NodeNotFoundError on 404, TransientError/AccessDeniedError.
   */
  patchNodeTaints(name: string, patch: NodeTaintPatch): Promise<NodeSnapshot>;
  /** The Nodes with a label selector (the staged NoExecute rollout lists the Nodes in progress by its label). */
  listNodes?(labelSelector: string): Promise<readonly NodeSnapshot[]>;
}
