/**
 * Which pods a NoExecute taint would evict, and when: the rules of Kubernetes' taint-eviction controller (v1.34.3),
 * ported exactly (issue 51, "Preview"). docs/noexecute-preview.md ("How the preview decides") names the upstream
 * function of each rule, what the controller does not look at, and the one case only the controller can time.
 */
import { isSameTaint, TaintEffect, valueOf, type Taint } from './taint.ts';

/**
 * A pod toleration (`V1Toleration`-compatible). An empty or absent `operator` means `Equal`. API validation accepts
 * `tolerationSeconds` only with effect `NoExecute` (422 otherwise, seen on v1.34.3); the rule below takes any.
 */
export interface Toleration {
  readonly key?: string;
  readonly operator?: string;
  readonly value?: string;
  readonly effect?: string;
  readonly tolerationSeconds?: number | null;
}

/** A pod bound to the Node, as the preview needs it. */
export interface PodOnNode {
  readonly namespace: string;
  readonly name: string;
  readonly tolerations: readonly Toleration[];
  readonly phase?: string;
  readonly deletionTimestamp?: string;
  /** Kind of the controlling owner (`ReplicaSet`, `DaemonSet`, `Node` for a mirror pod, …). */
  readonly ownerKind?: string;
}

/** When the taint-eviction controller deletes the pod: at once, after a delay, or never. */
export type EvictionTime = 'now' | { readonly afterSeconds: number } | 'never';

/** Why: the first untolerated NoExecute taint, else the toleration with the shortest `tolerationSeconds`. */
export type EvictionReason =
  | { readonly kind: 'untolerated'; readonly taint: Taint }
  | { readonly kind: 'toleration-seconds'; readonly taint: Taint; readonly toleration: Toleration }
  | { readonly kind: 'tolerated' }
  | { readonly kind: 'no-noexecute-taint' };

/** A decision of the controller with its reason. */
export interface EvictionDecision {
  readonly evict: EvictionTime;
  readonly reason: EvictionReason;
}

/** What the controller would do with one pod once the taints are added, decided at the moment of the change. */
export interface PodEvictionPreview extends EvictionDecision, Pick<PodOnNode, 'namespace' | 'name' | 'ownerKind'> {
  /** `terminal`: Succeeded or Failed (the controller deletes only its object); `terminating`: being deleted. */
  readonly podState: 'active' | 'terminal' | 'terminating';
  /** The controller's decision on the Node's current NoExecute taints (`never` when it has none): what already happens. */
  readonly current: EvictionTime;
  /** True when the controller keeps the eviction `current` has pending: the pod goes within its `afterSeconds`. */
  readonly keepsPendingEviction: boolean;
}

/**
 * Whether one toleration tolerates one taint, exactly as Kubernetes' `Toleration.ToleratesTaint`: an unknown operator
 * matches nothing.
 * @example toleratesTaint({ key: 'gpu', operator: 'Exists' }, { key: 'gpu', value: 'a100', effect: 'NoExecute' }) // true
 */
export function toleratesTaint(toleration: Toleration, taint: Taint): boolean {
  if (toleration.effect && toleration.effect !== taint.effect) return false;
  if (toleration.key && toleration.key !== taint.key) return false;
  const operator = toleration.operator ?? '';
  if (operator === 'Exists') return true;
  return (operator === '' || operator === 'Equal') && (toleration.value ?? '') === valueOf(taint);
}

/**
 * The taint-eviction controller's decision for a pod with these tolerations on a Node with these taints, for a pod
 * with no eviction pending. Returns `now` for an untolerated NoExecute taint, else the shortest `tolerationSeconds`
 * (0 when ≤ 0), else `never` (with `no-noexecute-taint` when the Node has none).
 * @example
 * decideEviction([{ key: 'maint', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 30 }], [{ key: 'maint', effect: 'NoExecute' }])
 * // { evict: { afterSeconds: 30 }, reason: { kind: 'toleration-seconds', taint: …, toleration: … } }
 */
export function decideEviction(tolerations: readonly Toleration[], taints: readonly Taint[]): EvictionDecision {
  const noExecute = taints.filter((t) => t.effect === TaintEffect.NoExecute);
  if (noExecute.length === 0) return { evict: 'never', reason: { kind: 'no-noexecute-taint' } };
  let shortest: { seconds: number; taint: Taint; toleration: Toleration } | undefined;
  for (const taint of noExecute) {
    const used = tolerations.find((t) => toleratesTaint(t, taint)); // the first match counts (GetMatchingTolerations)
    if (used === undefined) return { evict: 'now', reason: { kind: 'untolerated', taint } };
    const seconds = used.tolerationSeconds;
    if (seconds === undefined || seconds === null) continue;
    if (shortest === undefined || Math.max(0, seconds) < shortest.seconds) shortest = { seconds: Math.max(0, seconds), taint, toleration: used };
  }
  if (shortest === undefined) return { evict: 'never', reason: { kind: 'tolerated' } };
  return { evict: { afterSeconds: shortest.seconds }, reason: { kind: 'toleration-seconds', taint: shortest.taint, toleration: shortest.toleration } };
}

/**
 * The NoExecute taints of `taintsToAdd` that the Node does not carry yet (same key, effect and value), and the Node's
 * taints once they are added: a taint of the same key and effect is replaced (the product's taint identity).
 * @example nodeTaintsAfter([{ key: 'm', effect: 'NoExecute' }], [{ key: 'm', value: 'old', effect: 'NoExecute' }]).added // [{ key: 'm', effect: 'NoExecute' }]
 */
export function nodeTaintsAfter(taintsToAdd: readonly Taint[], nodeTaints: readonly Taint[]): { readonly added: readonly Taint[]; readonly after: readonly Taint[] } {
  const carries = (t: Taint): boolean => nodeTaints.some((n) => isSameTaint(n, t) && valueOf(n) === valueOf(t));
  const isFirst = (t: Taint, i: number): boolean => taintsToAdd.findIndex((o) => isSameTaint(o, t)) === i;
  const added = taintsToAdd.filter((t, i) => t.effect === TaintEffect.NoExecute && !carries(t) && isFirst(t, i));
  return { added, after: [...nodeTaints.filter((n) => !added.some((t) => isSameTaint(t, n))), ...added] };
}

/**
 * The preview of issue 51: for each pod bound to the Node, when the taint-eviction controller would delete it once the
 * NoExecute taints of `taintsToAdd` that the Node does not carry yet are added, and why (an untolerated added taint
 * before an existing one). Returns one preview per pod, in the pods' order.
 * @example
 * const web = { namespace: 'a', name: 'web', tolerations: [] };
 * previewNoExecuteEvictions({ taintsToAdd: [{ key: 'm', effect: 'NoExecute' }], nodeTaints: [], pods: [web] })[0]
 * // { evict: 'now', reason: { kind: 'untolerated', … }, … }
 */
export function previewNoExecuteEvictions(input: {
  readonly taintsToAdd: readonly Taint[];
  readonly nodeTaints: readonly Taint[];
  readonly pods: readonly PodOnNode[];
}): readonly PodEvictionPreview[] {
  const { added, after } = nodeTaintsAfter(input.taintsToAdd, input.nodeTaints);
  const addedFirst = [...added, ...after.filter((t) => !added.includes(t))];
  return input.pods.map((pod) => {
    const current = decideEviction(pod.tolerations, input.nodeTaints).evict;
    const decision = decideEviction(pod.tolerations, addedFirst);
    return {
      namespace: pod.namespace,
      name: pod.name,
      ...(pod.ownerKind === undefined ? {} : { ownerKind: pod.ownerKind }),
      podState: podStateOf(pod),
      ...decision,
      current,
      keepsPendingEviction: typeof current === 'object' && typeof decision.evict === 'object',
    };
  });
}

function podStateOf(pod: PodOnNode): PodEvictionPreview['podState'] {
  if (pod.deletionTimestamp !== undefined) return 'terminating';
  if (pod.phase === 'Succeeded' || pod.phase === 'Failed') return 'terminal';
  return 'active';
}

/** The NoExecute taints a reconcile would add to a Node: `applied` by its write, `previewed` by `@Preview` declarations. */
export interface NoExecuteChange {
  readonly applied: readonly Taint[];
  readonly previewed: readonly Taint[];
}

/**
 * The NoExecute taints the Node does not carry yet that the planned write adds (`after`: its taints after the write),
 * and the previewed ones it would still not carry after it. Returns two empty lists when there is none.
 * @example noExecuteChangeOf([], [{ key: 'm', effect: 'NoExecute' }], []).applied // [{ key: 'm', effect: 'NoExecute' }]
 */
export function noExecuteChangeOf(nodeTaints: readonly Taint[], after: readonly Taint[], previews: readonly Taint[]): NoExecuteChange {
  return { applied: nodeTaintsAfter(after, nodeTaints).added, previewed: nodeTaintsAfter(previews, after).added };
}

/** How many pods go at once, later (with the distinct delays, in seconds, ascending), or stay. */
export interface EvictionCounts {
  readonly now: number;
  readonly later: number;
  readonly laterSeconds: readonly number[];
  readonly kept: number;
}

/**
 * Counts a preview: `now` for an untolerated taint (or a `tolerationSeconds` ≤ 0), `later` for a positive
 * `tolerationSeconds`, `kept` for a pod the controller leaves alone.
 * @example countEvictions([{ evict: 'now' }, { evict: { afterSeconds: 300 } }, { evict: 'never' }]) // { now: 1, later: 1, laterSeconds: [300], kept: 1 }
 */
export function countEvictions(pods: readonly Pick<PodEvictionPreview, 'evict'>[]): EvictionCounts {
  let now = 0;
  let kept = 0;
  const later: number[] = [];
  for (const { evict } of pods) {
    if (evict === 'never') kept++;
    else if (evict === 'now' || evict.afterSeconds <= 0) now++;
    else later.push(evict.afterSeconds);
  }
  return { now, later: later.length, laterSeconds: [...new Set(later)].sort((a, b) => a - b), kept };
}

/**
 * The counts in words, as the `NoExecutePreview` Event says them.
 * @example describeEvictionCounts({ now: 3, later: 1, laterSeconds: [300], kept: 2 }) // 'would evict 3 pods now, 1 after 300 s, keeps 2'
 */
export function describeEvictionCounts(c: EvictionCounts): string {
  const pods = (n: number): string => `${n} pod${n === 1 ? '' : 's'}`;
  const when = c.laterSeconds.length <= 1 ? `after ${c.laterSeconds[0] ?? 0} s` : `after ${c.laterSeconds[0]}-${c.laterSeconds[c.laterSeconds.length - 1]} s`;
  const parts = [`would evict ${pods(c.now)} now`];
  if (c.later > 0) parts.push(`${c.later} ${when}`);
  parts.push(`keeps ${c.kept}`);
  return parts.join(', ');
}
