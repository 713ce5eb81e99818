/**
 * The Machine → Node propagation step, rule for rule as upstream's `propagateMachineTaintsToNode` (upstream-capi.md
 * §3.3), but pure: inputs are never mutated; a malformed tracking annotation is an error, not a half-applied state.
 */
import { MalformedTrackingAnnotationError } from '#shared/errors.ts';
import { Propagation, TRACKING_ANNOTATION, isSameTaint, taintId, valueOf, type MachineTaint, type Taint, type TaintId } from './taint.ts';
import { decodeOwnedTaints, encodeOwnedTaints, parseOwnedTaintId } from './tracking-annotation.ts';

/** The parts of a Node that propagation reads and writes. */
export interface NodeTaintState {
  readonly taints: readonly Taint[];
  readonly annotations: Readonly<Record<string, string>>;
}

/** Which tracking annotation an owner keeps, and what it has handed over to another owner. */
export interface PropagationOptions {
  /** The owner's tracking annotation (default: upstream's `cluster.x-k8s.io/taints-from-machine`). */
  readonly annotation?: string;
  /** `key:effect` ids another owner now holds: they leave this owner's annotation, their taints stay (a hand-over). */
  readonly handedOver?: ReadonlySet<string>;
}

/** Result of a propagation: the new state and whether it differs, or the error that forbids any write. */
export type PropagationResult =
  | { readonly ok: true; readonly state: NodeTaintState; readonly changed: boolean }
  | { readonly ok: false; readonly error: MalformedTrackingAnnotationError };

/**
 * Applies a Machine's taints to a Node's state by upstream's rules (upstream-capi.md §3.3); a tracked taint handed
 * over (`options.handedOver`) only leaves the annotation. Returns `changed: true` when taints or the annotation differ,
 * `ok: false` when an entry to remove is not `key:effect` (no write may happen).
 * @example
 * propagateMachineTaints({ taints: [], annotations: {} }, [{ key: 'gpu', effect: 'NoSchedule', propagation: 'Always' }])
 * // { ok: true, changed: true, state: { taints: [{ key: 'gpu', effect: 'NoSchedule' }], annotations: { 'cluster.x-k8s.io/taints-from-machine': 'gpu:NoSchedule' } } }
 */
export function propagateMachineTaints(node: NodeTaintState, machineTaints: readonly MachineTaint[], options: PropagationOptions = {}): PropagationResult {
  const annotation = options.annotation ?? TRACKING_ANNOTATION;
  const handedOver = options.handedOver ?? new Set<string>();
  const initialized = Object.hasOwn(node.annotations, annotation);
  const stored = node.annotations[annotation] ?? '';
  const owned = decodeOwnedTaints(stored);
  const always = new Set(machineTaints.filter((t) => t.propagation === Propagation.Always).map(taintId));
  const onInit = new Set(machineTaints.filter((t) => t.propagation === Propagation.OnInitialization).map(taintId));

  // Interpret every entry to delete before changing anything: a malformed one forbids the whole write.
  const toDelete: TaintId[] = [];
  for (const entry of owned) {
    if (always.has(entry) || onInit.has(entry) || handedOver.has(entry)) continue;
    try {
      toDelete.push(parseOwnedTaintId(entry));
    } catch (error) {
      if (error instanceof MalformedTrackingAnnotationError) return { ok: false, error };
      throw error;
    }
  }

  // Each step returns the list it was given when it changes nothing, so a new list means a change.
  let taints: readonly Taint[] = node.taints;
  for (const taint of machineTaints) {
    if (taint.propagation === Propagation.OnInitialization && initialized) continue;
    taints = ensureNodeTaint(taints, taint).taints;
  }
  for (const id of toDelete) taints = removeNodeTaint(taints, id).taints;

  const encoded = encodeOwnedTaints(always);
  const rewrite = !initialized || encoded !== stored;
  const annotations = rewrite ? { ...node.annotations, [annotation]: encoded } : node.annotations;
  return { ok: true, state: { taints, annotations }, changed: rewrite || taints !== node.taints };
}

/**
 * Ensures a taint with the Machine taint's key, effect and value: the first with its key+effect gets the value in place
 * (its `timeAdded` dropped, as upstream does), else it is appended. Returns a new list, `changed: true` when modified.
 */
export function ensureNodeTaint(taints: readonly Taint[], wanted: MachineTaint): { taints: readonly Taint[]; changed: boolean } {
  const index = taints.findIndex((t) => isSameTaint(t, wanted));
  const desired = toNodeTaint(wanted);
  if (index === -1) return { taints: [...taints, desired], changed: true };
  if (valueOf(taints[index] as Taint) === valueOf(wanted)) return { taints, changed: false };
  return { taints: taints.map((t, i) => (i === index ? desired : t)), changed: true };
}

/** Removes every taint of that key and effect, any value (upstream `RemoveNodeTaint`); `changed: true` when any was. */
export function removeNodeTaint(taints: readonly Taint[], drop: TaintId): { taints: readonly Taint[]; changed: boolean } {
  const kept = taints.filter((t) => !isSameTaint(t, drop));
  return kept.length === taints.length ? { taints, changed: false } : { taints: kept, changed: true };
}

/** The Node form of a Machine taint: key, effect and the value only when it has one. */
export function toNodeTaint(taint: MachineTaint): Taint {
  const value = valueOf(taint);
  return value === '' ? { key: taint.key, effect: taint.effect } : { key: taint.key, value, effect: taint.effect };
}
