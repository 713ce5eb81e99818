import type { ClaimedState } from '#shared/domain/node-state.ts';
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
  /**
   * Writes like patchNodeTaints a plan made from a claimed state instead of a read (see NodeState): the write goes
   * through only when the live Node is exactly as `claim` says — its resourceVersion, taints, both tracking annotations
   * and creation time, and that it has no annotation at all when `claim.withoutAnnotations` says so — and the API
   * server checks that in the same request. Returns the Node as written, or
   * undefined when the claim did not hold (nothing was written; read the Node). Throws NodeNotFoundError on 404,
   * PatchConflictError on 409, TransientError/AccessDeniedError.
   */
  patchClaimedNode(name: string, claim: ClaimedState, patch: NodeTaintPatch): Promise<NodeSnapshot | undefined>;
}
