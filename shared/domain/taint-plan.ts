/** The plan of one reconcile for one Node: the single write (or none) that propagates its taints and lifts the gate. */
import type { MalformedTrackingAnnotationError } from '#shared/errors.ts';
import { propagateMachineTaints, removeNodeTaint, type NodeTaintState } from './propagation.ts';
import { decodeOwnedTaints } from './tracking-annotation.ts';
import { OWN_TRACKING_ANNOTATION, taintId, valueOf, type MachineTaint, type Taint, type TaintId } from './taint.ts';

/** A Node as the plan reads it (the Node's view: `#shared/model/views.ts`). */
export interface PlannedNode extends NodeTaintState {
  readonly resourceVersion: string;
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

/** What changed between two taint lists, by key+effect. */
export interface TaintDiff {
  readonly added: readonly Taint[];
  readonly removed: readonly Taint[];
  readonly updated: readonly { readonly before: Taint; readonly after: Taint }[];
  readonly trackingAnnotation: { readonly name: string; readonly before: string | undefined; readonly after: string | undefined };
}

export interface PlanInput {
  readonly node: PlannedNode;
  /** The effective, validated taints this owner propagates (the product: see `ownershipOf`). */
  readonly taints: readonly MachineTaint[];
  /** The owner's tracking annotation (default: the product's; the conformance runner passes upstream's). */
  readonly annotation?: string;
  /** `key:effect` ids another owner holds (`Ownership.upstreamIds`): never removed, only left out of the annotation. */
  readonly handedOver?: ReadonlySet<string>;
  /** The startup gate taint removed in the same write (upstream: `node.cluster.x-k8s.io/uninitialized:NoSchedule`). */
  readonly startupTaint?: TaintId;
  /** True while another owner still has to apply its taints: the gate stays until every declared taint is there. */
  readonly holdStartupTaint?: boolean;
  /** First-enablement rule: the Node predates the enablement, so only its Always taints apply if it may be adopted. */
  readonly adoptAsInitialized?: boolean;
}

export type NodeTaintPlan =
  | { readonly kind: 'unchanged'; readonly state: NodeTaintState }
  | { readonly kind: 'patch'; readonly patch: NodeTaintPatch; readonly before: NodeTaintState; readonly after: NodeTaintState; readonly diff: TaintDiff }
  | { readonly kind: 'rejected'; readonly error: MalformedTrackingAnnotationError };

/**
 * Whether the first-enablement rule may adopt this Node as initialized: no own tracking annotation and no startup gate.
 * A gated Node is new however close its creation is to the enablement (the first Nodes predate it by seconds).
 * @example mayAdoptAsInitialized({ taints: [{ key: 'g', effect: 'NoSchedule' }], annotations: {} }, { key: 'g', effect: 'NoSchedule' }) // false
 */
export function mayAdoptAsInitialized(
  node: NodeTaintState,
  startupTaint: TaintId | undefined,
  annotation: string = OWN_TRACKING_ANNOTATION,
): boolean {
  if (Object.hasOwn(node.annotations, annotation)) return false;
  return !startupTaint || !removeNodeTaint(node.taints, startupTaint).changed;
}

/**
 * Plans the owner's Node write. Returns `unchanged` (no write), `patch` guarded by
 * the Node's resourceVersion, or `rejected` when the tracking annotation is malformed (no write at all).
 * @example planNodeTaints({ node: { resourceVersion: '7', taints: [], annotations: { 'taints.capi-taint-propagator.dev/applied': '' } }, taints: [] }).kind // 'unchanged'
 */
export function planNodeTaints(input: PlanInput): NodeTaintPlan {
  const annotation = input.annotation ?? OWN_TRACKING_ANNOTATION;
  const before: NodeTaintState = { taints: input.node.taints, annotations: input.node.annotations };
  let annotations = before.annotations;
  if (input.adoptAsInitialized && mayAdoptAsInitialized(before, input.startupTaint, annotation)) {
    annotations = { ...annotations, [annotation]: '' };
  }
  const gated = input.startupTaint && !input.holdStartupTaint ? removeNodeTaint(before.taints, input.startupTaint).taints : before.taints;
  const owner = { annotation, handedOver: input.handedOver };
  const result = propagateMachineTaints({ taints: gated, annotations }, input.taints, owner);
  if (!result.ok) return { kind: 'rejected', error: result.error };

  const after = result.state;
  const annotationBefore = before.annotations[annotation];
  const annotationAfter = after.annotations[annotation];
  const annotationChanged = annotationBefore !== annotationAfter;
  if (after.taints === before.taints && !annotationChanged) return { kind: 'unchanged', state: before };
  return {
    kind: 'patch',
    before,
    after,
    patch: {
      resourceVersion: input.node.resourceVersion,
      taints: after.taints,
      annotations: annotationChanged ? { [annotation]: annotationAfter ?? null } : {},
    },
    diff: { ...diffTaints(before.taints, after.taints), trackingAnnotation: { name: annotation, before: annotationBefore, after: annotationAfter } },
  };
}

/**
 * The taints a write puts back: Always taints the annotation already tracked that someone removed from the Node.
 * Returns them in the diff's order, empty without an annotation.
 * @example restoredTaints({ ...diff, added: [gpu] }, 'gpu:NoSchedule') // [gpu]
 */
export function restoredTaints(diff: Pick<TaintDiff, 'added'>, trackedBefore: string | undefined): readonly Taint[] {
  if (trackedBefore === undefined) return [];
  const tracked = decodeOwnedTaints(trackedBefore);
  return diff.added.filter((t) => tracked.has(taintId(t)));
}

/** Compares two taint lists by key+effect. */
export function diffTaints(before: readonly Taint[], after: readonly Taint[]): Omit<TaintDiff, 'trackingAnnotation'> {
  const beforeById = new Map(before.map((t) => [taintId(t), t]));
  const afterById = new Map(after.map((t) => [taintId(t), t]));
  return {
    added: after.filter((t) => !beforeById.has(taintId(t))),
    removed: before.filter((t) => !afterById.has(taintId(t))),
    updated: after.flatMap((t) => {
      const old = beforeById.get(taintId(t));
      return old && valueOf(old) !== valueOf(t) ? [{ before: old, after: t }] : [];
    }),
  };
}
