/**
 * The forwarder's relevance filter: a fingerprint of exactly what the reconcile function reads, and
 * the rules that decide whether a watch event is worth a queue message. Pure.
 */
import type { ChangeKind } from '#shared/contract/cloud-event.ts';
import { AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_MIN_SIZE_ANNOTATION, AUTOSCALER_OWNED_ANNOTATION, AUTOSCALER_TAINTS_ANNOTATION } from '#shared/domain/autoscaler.ts';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';
import { declaredTaintsOf } from '#shared/domain/declarations.ts';
import { ownershipOf, SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { PAUSED_ANNOTATION } from '#shared/domain/pause.ts';
import { ROLLOUT_MARK_ANNOTATION } from '#shared/domain/noexecute-rollout.ts';
import { CLUSTER_NAME_ANNOTATION, CLUSTER_NAME_LABEL, CLUSTER_NAMESPACE_ANNOTATION, CONTROL_PLANE_LABEL, FIELD_MANAGER, MACHINE_ANNOTATION, OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION, taintId, type Taint, type TaintId } from '#shared/domain/taint.ts';
import { decodeOwnedTaints } from '#shared/domain/tracking-annotation.ts';
import { pick } from '#shared/model/json.ts';
import { isPaused, NODE_ANNOTATIONS, objectKeyOf, unlinkedProviderID, type MachineFacts, type MachinePoolFacts, type NodeFacts, type WatchedFacts } from '#shared/model/views.ts';

/** Deterministic JSON: object keys sorted, so that equal facts give equal strings. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** The labels of a Cluster API object whose change alone can change a Node's reconcile (docs/relevance.md). */
const RELEVANT_LABELS = [CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL];
/** Its annotations, besides the pause (whose presence alone counts): the declarations and the cluster-autoscaler's. */
const RELEVANT_ANNOTATIONS = [...DECLARATION_ANNOTATIONS, AUTOSCALER_MIN_SIZE_ANNOTATION, AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_TAINTS_ANNOTATION, AUTOSCALER_OWNED_ANNOTATION];
/** A Node's: all its view keeps but the staged NoExecute rollout's mark (the reconcile's own, read from the Node as it is then). */
const RELEVANT_NODE_ANNOTATIONS = NODE_ANNOTATIONS.filter((key) => key !== ROLLOUT_MARK_ANNOTATION);

/**
 * The facts of an object whose change is judged: the others a view keeps (the rollout opt-in, node-group and pool
 * labels) are read by the reconcile function from the object as it is then. A Node's provider ID counts while unlinked.
 */
function relevantFacts<T extends WatchedFacts>(facts: T): T {
  if (facts.kind === 'Cluster') return facts;
  if (facts.kind === 'Node') {
    const annotations = pick(facts.annotations, RELEVANT_NODE_ANNOTATIONS);
    return { ...facts, labels: {}, annotations, providerID: unlinkedProviderID(facts) || undefined };
  }
  const annotations = pick(facts.annotations, RELEVANT_ANNOTATIONS);
  if (Object.hasOwn(facts.annotations, PAUSED_ANNOTATION)) annotations[PAUSED_ANNOTATION] = '';
  return { ...facts, labels: pick(facts.labels, RELEVANT_LABELS), annotations };
}

/**
 * The relevant fingerprint of an object: everything the reconcile function reads (the uid too: a Node re-created under
 * the same name counts as changed), nothing a heartbeat touches. Returns equal strings when no such fact differs.
 */
export function fingerprintOf(facts: WatchedFacts): string {
  // A Cluster API object's apiVersion is the version a stream reads it in: the same object in another.
  const relevant: { resourceVersion?: string; writers?: unknown; apiVersion?: string } = relevantFacts(facts);
  const { resourceVersion: _r, writers: _w, apiVersion: _v, ...fingerprinted } = relevant;
  return canonicalJson(fingerprinted);
}

/**
 * Recognises the echo of the reconcile function's own write: only a Node's taints and/or the product's tracking
 * annotation changed, each last written by its field manager (that write carried the resourceVersion precondition, so
 * the Node is as planned). Returns true when the change need not be forwarded.
 */
export function isOwnNodeWrite(previous: WatchedFacts | undefined, current: WatchedFacts): boolean {
  if (previous?.kind !== 'Node' || current.kind !== 'Node') return false;
  if (nodeRestOf(previous, OWN_TRACKING_ANNOTATION) !== nodeRestOf(current, OWN_TRACKING_ANNOTATION)) return false;
  const taintsChanged = canonicalJson(current.taints) !== canonicalJson(previous.taints);
  const annotationChanged = current.annotations[OWN_TRACKING_ANNOTATION] !== previous.annotations[OWN_TRACKING_ANNOTATION];
  const byUs = (changed: boolean, writer: string | undefined): boolean => !changed || writer === FIELD_MANAGER;
  if (!taintsChanged && !annotationChanged) return false;
  const writers = current.writers;
  return byUs(taintsChanged, writers?.taints) && byUs(annotationChanged, writers?.ownTrackingAnnotation);
}

/** A Node's relevant facts but its resourceVersion, writers, taints and annotation `key`: equal when nothing else changed. */
function nodeRestOf(node: NodeFacts, key: string): string {
  const { [key]: _k, ...annotations } = node.annotations;
  return fingerprintOf({ ...node, taints: undefined, annotations });
}

/**
 * Compares a fresh list (a relist after 410 Gone, a resume, a periodic resync) with the last facts the forwarder kept.
 * Returns `resynced`: the new objects and those whose fingerprint changed (all when `full`), and `deleted`: the known
 * objects that are gone.
 */
export function diffRelist<T extends WatchedFacts>(known: ReadonlyMap<string, T>, listed: readonly T[], full: boolean): { resynced: T[]; deleted: T[] } {
  const seen = new Set(listed.map(objectKeyOf));
  const resynced = listed.filter((obj) => {
    const before = full ? undefined : known.get(objectKeyOf(obj));
    return before === undefined || fingerprintOf(before) !== fingerprintOf(obj);
  });
  return { resynced, deleted: [...known].filter(([key]) => !seen.has(key)).map(([, obj]) => obj) };
}

/**
 * What a relist announces when the checkpoint was compacted away and there is no earlier state to compare with: the
 * objects changed since the checkpoint, in list order (deletions during the gap leave the reconcile nothing to do).
 * resourceVersions are etcd revisions (decimal integers) on every real API server; anything else counts as newer, so
 * the object is announced rather than missed.
 */
export function changedSince<T extends { readonly resourceVersion: string }>(listed: readonly T[], checkpoint: string): T[] {
  const revision = /^\d+$/;
  if (!revision.test(checkpoint)) return [...listed];
  return listed.filter(({ resourceVersion: rv }) => !revision.test(rv) || BigInt(rv) > BigInt(checkpoint));
}

/** What a declaration is made of: `spec.taints`, the declaration annotations, whether it is a worker's. */
function declarationSource(m: MachineFacts | MachinePoolFacts): string {
  return canonicalJson({ s: m.specTaints, d: pick(m.annotations, DECLARATION_ANNOTATIONS), c: m.labels[CONTROL_PLANE_LABEL] });
}

/**
 * Recognises a Machine or MachinePool whose declaration was invalid in the previous version the forwarder saw and is
 * valid in this one, so that the reconcile function records a Normal `DeclarationValid` Event. A hint: a wrong one can
 * at most cause an Event that says a valid declaration is valid. Returns true for such a recovery.
 */
export function isDeclarationRecovery(previous: WatchedFacts | undefined, current: WatchedFacts): boolean {
  const declares = (f: WatchedFacts | undefined): f is MachineFacts | MachinePoolFacts => f?.kind === 'Machine' || f?.kind === 'MachinePool';
  if (!declares(previous) || !declares(current) || previous.kind !== current.kind) return false;
  if (declarationSource(previous) === declarationSource(current)) return false;
  return !declaredTaintsOf(previous).valid && declaredTaintsOf(current).valid;
}

/**
 * Recognises someone else's write of `spec.taints` and/or Cluster API's tracking annotation on a Node the product has
 * initialized that changes nothing the product owns or gates on (docs/relevance.md, Node rows), e.g. the node lifecycle
 * controller tainting thousands of Nodes when a zone goes dark. `gateWaitsForCapi` false: the Node's Machine is known
 * to declare no `spec.taints`. Returns true when the change need not be forwarded.
 */
export function isForeignTaintNoise(previous: WatchedFacts | undefined, current: WatchedFacts, startupTaint?: TaintId, gateWaitsForCapi = true): boolean {
  if (previous?.kind !== 'Node' || current.kind !== 'Node') return false;
  if (nodeRestOf(previous, TRACKING_ANNOTATION) !== nodeRestOf(current, TRACKING_ANNOTATION)) return false;
  const own = current.annotations[OWN_TRACKING_ANNOTATION];
  if (own === undefined) return false; // not initialized by the product yet
  const owned = decodeOwnedTaints(own);
  if (!wellFormedIds(owned)) return false; // malformed: the reconcile reports it
  const [beforeCapi, capi, writers] = [previous.annotations[TRACKING_ANNOTATION], current.annotations[TRACKING_ANNOTATION], current.writers];
  const before = taintIds(previous.taints);
  const after = taintIds(current.taints);
  if (!before || !after) return false;
  const taintsChanged = canonicalJson([...before.values()]) !== canonicalJson([...after.values()]);
  const capiChanged = beforeCapi !== capi;
  if (!taintsChanged && !capiChanged) return false; // not a change of either
  if (taintsChanged && (writers?.taints === FIELD_MANAGER || writers?.taints === undefined)) return false;
  const gate = startupTaint !== undefined ? taintId(startupTaint) : undefined;
  if (capiChanged) {
    if (gateWaitsForCapi && (beforeCapi === undefined) !== (capi === undefined) && gate !== undefined && (before.has(gate) || after.has(gate))) return false;
    const was = decodeOwnedTaints(beforeCapi ?? '');
    const is = decodeOwnedTaints(capi ?? '');
    if (!wellFormedIds(was) || !wellFormedIds(is)) return false;
    for (const id of was.symmetricDifference(is)) if (owned.has(id)) return false; // an id changes hands
  }
  const unchanged = (id: string): boolean => before.get(id) === after.get(id);
  return [...owned].every((id) => after.has(id) && unchanged(id)) && (gate === undefined || unchanged(gate));
}

/** True when every entry of a decoded tracking annotation is a `key:effect` pair (upstream's rule). */
function wellFormedIds(ids: ReadonlySet<string>): boolean {
  return [...ids].every((id) => id.split(':').length === 2);
}

/** What the forwarder knows besides the change itself: the reconcile function's settings, its other streams' state. */
export interface RelevanceOptions {
  /** The startup gate the reconcile function removes; undefined when off. */
  readonly startupTaint?: TaintId;
  /** Who propagates `spec.taints` (default upstream Cluster API, as the reconcile function's SPEC_TAINTS_OWNER). */
  readonly specTaintsOwner?: SpecTaintsOwner;
  /** The last state the forwarder saw of a Node of the Machine's cluster, by name (undefined: not seen). */
  readonly nodeFacts?: (name: string) => NodeFacts | undefined;
  /**
   * The Node the forwarder links a Machine without `status.nodeRef` to (by provider ID or Cluster API's annotation on
   * it); undefined: none known. Given, a Machine change that names no Node is filtered `no-node`.
   */
  readonly linkedNodeOf?: (machine: MachineFacts) => string | undefined;
  /**
   * The Machine the forwarder links an unlinked Node to by provider ID (undefined: none known). Given, a joining Node
   * no known Machine has is filtered `no-node` (its reconcile could only end `machine-gone`).
   */
  readonly linkedMachineOf?: (node: NodeFacts) => { readonly namespace: string; readonly name: string } | undefined;
  /** The last state the forwarder saw of a Machine (undefined: not seen). */
  readonly machineFactsOf?: (machine: { readonly namespace: string; readonly name: string }) => MachineFacts | undefined;
}

/**
 * Recognises a Machine change the product cannot act on while Cluster API owns `spec.taints` (docs/relevance.md,
 * Machine `spec.taints` row). Returns true when the change need not be forwarded.
 */
export function isForeignDeclarationChange(previous: WatchedFacts | undefined, current: WatchedFacts, options: RelevanceOptions = {}): boolean {
  if (previous?.kind !== 'Machine' || current.kind !== 'Machine') return false;
  if ((options.specTaintsOwner ?? SpecTaintsOwner.upstream) !== SpecTaintsOwner.upstream) return false;
  const withoutSpec = (m: MachineFacts): string => fingerprintOf({ ...m, specTaints: undefined });
  if (withoutSpec(previous) !== withoutSpec(current)) return false;
  if (canonicalJson(previous.specTaints) === canonicalJson(current.specTaints)) return false;
  const before = declaredTaintsOf(previous, options);
  const after = declaredTaintsOf(current, options);
  if (!before.valid || !after.valid) return false;
  // Without the Node's annotation, upstreamIds are the `key:effect` ids of `spec.taints`.
  const was = ownershipOf(before.declaration, { annotations: {} });
  const is = ownershipOf(after.declaration, { annotations: {} });
  if (canonicalJson(was.productTaints) !== canonicalJson(is.productTaints)) return false;
  if (current.nodeName === undefined) return true; // no Node before or after (rest is equal): the reconcile ends no-node
  const moved = was.upstreamIds.symmetricDifference(is.upstreamIds);
  const emptiness = (was.upstreamIds.size === 0) !== (is.upstreamIds.size === 0);
  if (moved.size === 0 && !emptiness) return true;
  const node = options.nodeFacts?.(current.nodeName);
  if (node === undefined) return false; // the Node's state is unknown: let the reconcile judge
  if (emptiness && node.annotations[TRACKING_ANNOTATION] === undefined) return false; // the product may hold or release the startup gate
  const owned = decodeOwnedTaints(node.annotations[OWN_TRACKING_ANNOTATION] ?? '');
  return wellFormedIds(owned) && [...moved].every((id) => !owned.has(id));
}

/** `key:effect` → canonical taint of a Node's taints; undefined when they could not be read. */
function taintIds(taints: readonly Taint[] | undefined): Map<string, string> | undefined {
  return taints && new Map(taints.map(({ key, effect, value }) => [taintId({ key, effect }), canonicalJson({ key, effect, value: value ?? '' })]));
}

/**
 * Recognises Cluster API confirming a link the product already acted on (by provider ID, `node-link.ts`; the change
 * that made the link was forwarded naming both): a Machine's `status.nodeRef` or a Node's `cluster.x-k8s.io/machine`
 * annotations naming what the forwarder had linked it to. Returns 'filter' (nothing else changed, or on a Node only
 * foreign taints), the two states without the link to judge instead, or undefined (not a confirmation).
 */
function linkConfirmation(previous: WatchedFacts, current: WatchedFacts, options: RelevanceOptions): 'filter' | { previous: NodeFacts; current: NodeFacts } | undefined {
  if (previous.kind === 'Machine' && current.kind === 'Machine') {
    if (previous.nodeName !== undefined || current.nodeName === undefined || previous.providerID === undefined) return undefined;
    if (options.linkedNodeOf?.(previous) !== current.nodeName) return undefined;
    const unlinked = (m: MachineFacts): MachineFacts => ({ ...m, nodeName: undefined, providerID: undefined });
    return fingerprintOf(unlinked(previous)) === fingerprintOf(unlinked(current)) ? 'filter' : undefined;
  }
  if (previous.kind !== 'Node' || current.kind !== 'Node') return undefined;
  const machineOf = (n: NodeFacts) => n.annotations[MACHINE_ANNOTATION];
  if (machineOf(previous) !== undefined || machineOf(current) === undefined || previous.providerID === undefined) return undefined;
  const linked = options.linkedMachineOf?.(previous);
  if (linked === undefined || linked.name !== machineOf(current) || linked.namespace !== current.annotations[CLUSTER_NAMESPACE_ANNOTATION]) return undefined;
  const unlinked = (n: NodeFacts): NodeFacts => {
    const { [MACHINE_ANNOTATION]: _m, [CLUSTER_NAME_ANNOTATION]: _c, [CLUSTER_NAMESPACE_ANNOTATION]: _ns, ...annotations } = n.annotations;
    return { ...n, providerID: undefined, annotations };
  };
  const [before, after] = [unlinked(previous), unlinked(current)];
  if (fingerprintOf(before) === fingerprintOf(after)) return 'filter';
  // Cluster API's annotation arriving on a gated Node matters only when the Machine declares spec.taints it propagates.
  const machine = options.machineFactsOf?.(linked);
  const gateWaitsForCapi = machine === undefined || ((options.specTaintsOwner ?? SpecTaintsOwner.upstream) === SpecTaintsOwner.upstream && !noSpecTaints(machine));
  // Not initialized by the product yet: judged as initialized with nothing owned (its addition's reconcile reads it).
  const initialized = previous.annotations[OWN_TRACKING_ANNOTATION] !== undefined || current.annotations[OWN_TRACKING_ANNOTATION] !== undefined;
  const judged = (n: NodeFacts): NodeFacts =>
    initialized ? n : { ...n, annotations: { ...n.annotations, [OWN_TRACKING_ANNOTATION]: '' } };
  if (isForeignTaintNoise(judged(before), judged(after), options.startupTaint, gateWaitsForCapi)) return 'filter';
  return { previous: before, current: after };
}

/** True when a Machine's `spec.taints` is empty (unset, null or []); an invalid value counts as declaring some. */
function noSpecTaints(m: MachineFacts): boolean {
  return m.specTaints === undefined || m.specTaints === null || (Array.isArray(m.specTaints) && m.specTaints.length === 0);
}

/** Why a watch change is or is not forwarded. */
export type ForwardDecision =
  | { readonly forward: true; readonly declarationRecovered?: true }
  | { readonly forward: false; readonly filtered: 'unchanged' | 'own-write' | 'foreign-taints' | 'foreign-declaration' | 'no-node' | 'link-confirmed' };

/**
 * The forwarder's rule for one watch change (docs/relevance.md), given the last state it saw of the object (`previous`,
 * undefined when none). Returns whether it is forwarded, else the rule that filtered it.
 */
export function forwardDecision(change: ChangeKind, previous: WatchedFacts | undefined, current: WatchedFacts, options: RelevanceOptions = {}): ForwardDecision {
  if (current.kind === 'Machine' && change !== 'deleted' && current.nodeName === undefined && options.linkedNodeOf && options.linkedNodeOf(current) === undefined) {
    return { forward: false, filtered: 'no-node' };
  }
  if (current.kind === 'Node' && change === 'added' && unlinkedProviderID(current) !== undefined && options.linkedMachineOf && options.linkedMachineOf(current) === undefined) {
    return { forward: false, filtered: 'no-node' };
  }
  if (change !== 'modified' || previous === undefined) return { forward: true };
  if (fingerprintOf(previous) === fingerprintOf(current)) return { forward: false, filtered: 'unchanged' };
  const confirmed = linkConfirmation(previous, current, options);
  if (confirmed === 'filter') return { forward: false, filtered: 'link-confirmed' };
  if (confirmed !== undefined) return forwardDecision(change, confirmed.previous, confirmed.current, options);
  if (isOwnNodeWrite(previous, current)) return { forward: false, filtered: 'own-write' };
  if (isForeignTaintNoise(previous, current, options.startupTaint)) return { forward: false, filtered: 'foreign-taints' };
  if (isForeignDeclarationChange(previous, current, options)) return { forward: false, filtered: 'foreign-declaration' };
  return isDeclarationRecovery(previous, current) ? { forward: true, declarationRecovered: true } : { forward: true };
}

/**
 * The Nodes a MachinePool change is announced to, one event each (docs/relevance.md, MachinePool rows): every Node of
 * the pool, or only those that joined when what decides their taints is unchanged; none for a deleted or deleting pool.
 */
export function poolNodesToAnnounce(change: ChangeKind, previous: WatchedFacts | undefined, current: MachinePoolFacts): readonly string[] {
  if (change === 'deleted' || current.deleting) return [];
  if (change !== 'modified' || previous?.kind !== 'MachinePool') return current.nodeNames;
  const decides = (p: MachinePoolFacts): string => canonicalJson({ d: declarationSource(p), c: p.clusterName, l: p.labels[CLUSTER_NAME_LABEL], p: isPaused(p) });
  if (decides(previous) !== decides(current) || previous.deleting) return current.nodeNames;
  const before = new Set(previous.nodeNames);
  return current.nodeNames.filter((n) => !before.has(n));
}

/**
 * Recognises a pause or an unpause in a watch modification: both are forwarded, so that what changed meanwhile
 * converges once unpaused. A relist announcement is not one (the periodic resync covers a flip the forwarder missed).
 */
export function pausedChanged(change: ChangeKind, previous: WatchedFacts | undefined, current: WatchedFacts): boolean {
  return change === 'modified' && previous !== undefined && isPaused(previous) !== isPaused(current);
}
