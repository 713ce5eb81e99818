/** What one reconcile did. Every outcome is counted (metric `Reconciles`, dimension `Outcome`). */
export const ReconcileOutcome = {
  /** The Node was written (taints and/or tracking annotation). */
  patched: 'patched',
  /** The Node already matched its Machine: no write. */
  unchanged: 'unchanged',
  /** Dry-run: the write was planned and logged, not sent. */
  dryRun: 'dry-run',
  /** The Node does not exist (any more): nothing to do. */
  nodeGone: 'node-gone',
  /** The Machine does not exist (any more), or a Node names no Machine: nothing to do. */
  machineGone: 'machine-gone',
  /** The Machine has no Node yet (no `status.nodeRef`). */
  noNode: 'no-node',
  /** The Machine or MachinePool (or its Cluster) is paused (Cluster API's pause): its Node is left as it is. */
  paused: 'paused',
  /** The Machine is being deleted: its Node is left as it is. */
  machineDeleting: 'machine-deleting',
  /** The declaration is invalid: no write, Warning Event on the Machine. */
  invalidDeclaration: 'invalid-declaration',
  /** The Node's tracking annotation is malformed: no write, Warning Event on the Machine. */
  malformedAnnotation: 'malformed-annotation',
  /** A scalable resource's cluster-autoscaler taints annotation was written (docs/autoscaler.md). */
  autoscalerPatched: 'autoscaler-annotation-patched',
  /** The scalable resource does not exist (any more): nothing to do. */
  resourceGone: 'resource-gone',
  /** Staged NoExecute rollout: the Node's claim or ticket was written; the record comes back at once. */
  rolloutClaimed: 'rollout-claimed',
  /** Staged NoExecute rollout: the node group is at its bound (or a claim is unsettled); the record comes back later. */
  rolloutWaiting: 'rollout-waiting',
  /** Staged NoExecute rollout: pods are being evicted through the Eviction API; the record comes back later. */
  rolloutEvicting: 'rollout-evicting',
  /** Staged NoExecute rollout: a PodDisruptionBudget refused an eviction (429): waited out, never overridden. */
  rolloutRefused: 'rollout-refused',
  /** Staged NoExecute rollout: a pod stays terminating past the bound; reported, it holds only its own Node. */
  rolloutStuck: 'rollout-stuck',
  /** Staged NoExecute rollout: the declaration (or the opt-in) was withdrawn mid-way; the Node's mark was removed. */
  rolloutWithdrawn: 'rollout-withdrawn',
  /** 409 Conflict: retried through the queue. */
  conflict: 'conflict',
  /** A transient failure: retried through the queue. */
  transientError: 'transient-error',
  /** The record can never succeed and was sent to the dead-letter queue. */
  deadLettered: 'dead-lettered',
} as const;
export type ReconcileOutcome = (typeof ReconcileOutcome)[keyof typeof ReconcileOutcome];
