/**
 * The forwarder's drift rule for a list's quiet objects: may this Node need a write? The answer is the reconcile
 * function's own plan, from the forwarder's last state (functions/watch-forwarder/README.md, "Quiet lists"). Pure.
 */
import { declaredTaintsOf } from '#shared/domain/declarations.ts';
import { planOwnedTaints } from '#shared/domain/ownership.ts';
import { ROLLOUT_EVICTING_TAINT, ROLLOUT_MARK_ANNOTATION } from '#shared/domain/noexecute-rollout.ts';
import { mayAdoptAsInitialized } from '#shared/domain/taint-plan.ts';
import { MACHINE_ANNOTATION, OWN_TRACKING_ANNOTATION, isSameTaint, type TaintId } from '#shared/domain/taint.ts';
import { isPaused, type MachineFacts, type MachinePoolFacts, type NodeFacts } from '#shared/model/views.ts';
import type { RelevanceOptions } from './relevance.ts';

/** What the forwarder knows of a Node's declaration owner. */
export type NodeOwner =
  /** The owner the reconcile function would read: the Machine, or the MachinePool whose `status.nodeRefs` lists the Node; `clusterPaused`: its Cluster is known to have `spec.paused`. */
  | { readonly kind: 'known'; readonly owner: MachineFacts | MachinePoolFacts; readonly clusterPaused?: boolean }
  /** The management streams hold every Machine and MachinePool, and none owns the Node (the reconcile would end `machine-gone`). */
  | { readonly kind: 'none' }
  /** The management streams have not listed yet: the owner cannot be resolved. */
  | { readonly kind: 'unknown' };

/**
 * True when the reconcile function may write to this Node (or report on it), judged from the forwarder's last state
 * (README, "Quiet lists"); with the owner unknown (a first list racing the Machines'), when the Node carries anything
 * of the product's or of Cluster API's link. A wrong "false" only delays a repair until the Node's next event or
 * resync; a wrong "true" costs one message.
 */
export function mayNeedWrite(node: NodeFacts, owner: NodeOwner, options: RelevanceOptions = {}): boolean {
  if (owner.kind === 'none') return false;
  const { taints, annotations } = node;
  if (owner.kind === 'unknown') {
    const gated = options.startupTaint !== undefined && (taints === undefined || taints.some((t) => isSameTaint(t, options.startupTaint as TaintId)));
    return annotations[OWN_TRACKING_ANNOTATION] !== undefined || annotations[MACHINE_ANNOTATION] !== undefined || node.providerID !== undefined || gated;
  }
  const { owner: o, clusterPaused } = owner;
  if (isPaused(o) || clusterPaused === true || o.deleting) return false;
  if (o.kind === 'Machine' && o.nodeName !== undefined && o.nodeName !== node.name) return false;
  if (o.kind === 'MachinePool' && !o.nodeNames.includes(node.name)) return false;
  // A Node's rollout mark holds a place in its group: announced, a lost record resumes or clears it.
  if (taints === undefined || annotations[ROLLOUT_MARK_ANNOTATION] !== undefined || taints.some((t) => isSameTaint(t, ROLLOUT_EVICTING_TAINT))) return true;
  const declared = declaredTaintsOf(o, options);
  if (!declared.valid) return true;
  const snapshot = { resourceVersion: node.resourceVersion, taints, annotations };
  const plan = (adoptAsInitialized: boolean) =>
    planOwnedTaints(snapshot, declared.declaration, { ...options, adoptAsInitialized }).plan.kind !== 'unchanged';
  return plan(false) || (mayAdoptAsInitialized(snapshot, options.startupTaint) && plan(true));
}
