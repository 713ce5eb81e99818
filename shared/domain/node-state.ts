/**
 * What the reconcile function makes of the Node state an event claims (`NodeState`, from `nodeStateOf` in
 * watch-event.ts): the snapshot a write is planned from. The claim saves the Node read of a changed Node (3 API calls instead of 4): the
 * write that follows it carries `test` operations for every field read here, so the API server refuses it unless the
 * live Node is exactly as claimed. Pure.
 */
import type { NodeState } from './cloud-event.ts';
import type { NodeSnapshot } from './snapshots.ts';
import { OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION, type Taint } from './taint.ts';

/**
 * The snapshot a write is planned from when an event claims the Node's state: only the fields the plan reads (the
 * two tracking annotations, the taints, the resourceVersion, the creation time) — each of them checked by the write.
 * @example claimedNode('n1', { uid: 'u', resourceVersion: '7', taints: [] }).taints // []
 */
export function claimedNode(name: string, state: NodeState): NodeSnapshot {
  const annotations: Record<string, string> = {};
  if (state.trackingAnnotation !== undefined) annotations[TRACKING_ANNOTATION] = state.trackingAnnotation;
  if (state.ownTrackingAnnotation !== undefined) annotations[OWN_TRACKING_ANNOTATION] = state.ownTrackingAnnotation;
  return {
    name,
    uid: state.uid,
    resourceVersion: state.resourceVersion,
    ...(state.creationTimestamp !== undefined ? { creationTimestamp: state.creationTimestamp } : {}),
    labels: {},
    annotations,
    taints: state.taints.map(storedTaint),
  };
}

/**
 * How long after its creation a Node counts as joining. A joining Node's state moves within moments of each event (the
 * kubelet's first status report follows its registration, then the cloud's and Cluster API's first writes), so the
 * state an event claims is usually stale by its write: the reconcile function also reads the Node beside the Machine
 * and plans the claimed write from that read.
 */
export const JOINING_NODE_MS = 30_000;

/**
 * True when the claimed Node was created less than JOINING_NODE_MS before `now` (a Node without a creation time is not).
 * @example isJoiningNode({ uid: 'u', resourceVersion: '7', taints: [], creationTimestamp: '2026-01-01T00:00:00Z' }, new Date('2026-01-01T00:00:05Z')) // true
 */
export function isJoiningNode(state: NodeState, now: Date): boolean {
  if (state.creationTimestamp === undefined) return false;
  const age = now.getTime() - new Date(state.creationTimestamp).getTime();
  return Number.isFinite(age) && age < JOINING_NODE_MS;
}

/**
 * The state a claimed write is planned from: an event's claim, or a read in a claim's form (nodeStateOfSnapshot),
 * which can also say that the Node has no annotation at all (an event's claim cannot: the write then tests that the
 * annotation map is absent and adds it whole, where an event's claim on such a Node is refused).
 */
export type ClaimedState = NodeState & { readonly withoutAnnotations?: true };

/**
 * The state of a Node as read, in the form a claim takes: a write planned from it carries the same `test` operations
 * as one planned from an event's claim (its resourceVersion first), so it goes through only if the Node has not
 * changed since the read.
 * @example nodeStateOfSnapshot({ name: 'n1', uid: 'u', resourceVersion: '8', labels: {}, annotations: {}, taints: [] }).withoutAnnotations // true
 */
export function nodeStateOfSnapshot(node: NodeSnapshot): ClaimedState {
  const tracking = node.annotations[TRACKING_ANNOTATION];
  const own = node.annotations[OWN_TRACKING_ANNOTATION];
  return {
    ...(Object.keys(node.annotations).length === 0 ? { withoutAnnotations: true as const } : {}),
    uid: node.uid,
    resourceVersion: node.resourceVersion,
    ...(node.creationTimestamp !== undefined ? { creationTimestamp: node.creationTimestamp } : {}),
    taints: node.taints.map(storedTaint),
    ...(tracking !== undefined ? { trackingAnnotation: tracking } : {}),
    ...(own !== undefined ? { ownTrackingAnnotation: own } : {}),
  };
}

/** A taint with the fields the API server stores: no empty value, no empty time. */
function storedTaint(t: Taint): Taint {
  return { key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect, ...(t.timeAdded ? { timeAdded: t.timeAdded } : {}) };
}
