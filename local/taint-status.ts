/**
 * The status view of one Machine/Node pair: what the Machine declares, what the Node carries, who
 * owns each Node taint, and whether the Node is in sync (the next reconcile would not write). Pure:
 * it reuses the very planner the reconcile function runs, so "in sync" means exactly "no write".
 */
import type { DeclarationIssue } from '#shared/errors.ts';
import { declaredTaintsOf, type DeclarationSource, type EffectiveDeclaration, type PreviewTaint } from '#shared/domain/declarations.ts';
import {
  countEvictions,
  noExecuteChangeOf,
  previewNoExecuteEvictions,
  type EvictionCounts,
  type PodEvictionPreview,
  type PodOnNode,
} from '#shared/domain/eviction-preview.ts';
import { MACHINE_POOL_NAME_LABEL } from '#shared/domain/machine-pool.ts';
import { PAUSED_ANNOTATION, pausedReason, type ClusterView } from '#shared/domain/pause.ts';
import type { NodeWithTaints, OwnerFacts } from '#shared/model/views.ts';
import { planOwnedTaints, SpecTaintsOwner, type Ownership } from '#shared/domain/ownership.ts';
import type { TaintDiff } from '#shared/domain/taint-plan.ts';
import { OWN_TRACKING_ANNOTATION, Propagation, TRACKING_ANNOTATION, formatTaint, isSameTaint, taintId, valueOf, type MachineTaint, type Taint, type TaintId } from '#shared/domain/taint.ts';
import { decodeOwnedTaints } from '#shared/domain/tracking-annotation.ts';
import { decodeRolloutMark, type RolloutMark } from '#shared/domain/noexecute-rollout.ts';

/** Who a Node taint belongs to, as far as the product can tell. */
export const TaintOwner = {
  /** Listed in the product's tracking annotation: the product keeps it (an `Always` taint). */
  tracked: 'tracked',
  /** Upstream Cluster API's: declared in `spec.taints` or listed in `cluster.x-k8s.io/taints-from-machine`. */
  upstream: 'upstream',
  /** Set once when the Node was initialized (an `OnInitialization` declaration); now left alone. */
  initializationOnly: 'initialization-only',
  /** The startup gate taint; removed in the write that applies the Machine's taints. */
  startupGate: 'startup-gate',
  /** Anyone else's (kubelet, autoscaler, users, another controller): never touched. */
  foreign: 'foreign',
} as const;
export type TaintOwner = (typeof TaintOwner)[keyof typeof TaintOwner];

/** Whether a pair is in sync, and if not, why. */
export const SyncState = {
  /** The next reconcile would not write. */
  inSync: 'in-sync',
  /** The next reconcile would write (see `pending`). */
  outOfSync: 'out-of-sync',
  /** The product's part is done; upstream CAPI has not applied the Machine's `spec.taints` yet. */
  waitingForUpstream: 'waiting-for-upstream',
  /** The declaration is invalid: the Node is deliberately left as it is. */
  invalidDeclaration: 'invalid-declaration',
  /** The tracking annotation has an entry that cannot be read: the Node is deliberately not written. */
  malformedAnnotation: 'malformed-annotation',
  /** The Machine has no Node yet (`status.nodeRef` unset). */
  noNode: 'no-node',
  /** The Machine names a Node that does not exist. */
  nodeMissing: 'node-missing',
  /** The Machine is being deleted: its Node is left as it is. */
  machineDeleting: 'machine-deleting',
  /** Cluster API's pause (its Cluster's `spec.paused`, or the object's `cluster.x-k8s.io/paused`): the Node is left as it is. */
  paused: 'paused',
} as const;
export type SyncState = (typeof SyncState)[keyof typeof SyncState];

/** What pauses a pair: its Cluster's `spec.paused`, or the `cluster.x-k8s.io/paused` annotation of its Machine or MachinePool. */
export const PausedBy = {
  cluster: 'Cluster',
  machine: 'Machine',
  machinePool: 'MachinePool',
} as const;
export type PausedBy = (typeof PausedBy)[keyof typeof PausedBy];

/** A declared taint with the source that won for its key+effect. */
export interface DesiredTaint extends MachineTaint {
  readonly source: DeclarationSource;
}

/** A `@Preview` declaration with the source that won for its key+effect. */
export interface PreviewedTaint extends PreviewTaint {
  readonly source: DeclarationSource;
}

/** A NoExecute taint the Node does not carry yet: added by the next write, or previewed only (`@Preview`, never added). */
export interface NoExecuteAddition {
  readonly taint: Taint;
  readonly previewOnly: boolean;
}

/**
 * What the Node's NoExecute additions would do to its pods (docs/noexecute-preview.md): for the applied ones, what
 * the next write sets off; for the previewed ones, what applying them would. The pods are judged with every addition
 * on the Node at once. `counts` and `pods` are absent until the Node's pods are read, `podsError` when that failed.
 */
export interface NoExecutePreview {
  readonly taints: readonly NoExecuteAddition[];
  readonly counts?: EvictionCounts;
  readonly pods?: readonly PodEvictionPreview[];
  readonly podsError?: string;
}

/** The pods bound to the Node as read, or why they could not be read. */
export type PodsRead = readonly PodOnNode[] | { readonly error: string };

/** A taint on the Node and its owner. `declaredAs` is set when the Machine declares the same key+effect. */
export interface OwnedTaint {
  readonly taint: Taint;
  readonly owner: TaintOwner;
  readonly declaredAs?: DesiredTaint;
}

/** The status of one Machine/Node pair. */
export interface TaintStatus {
  /** `namespace/name` of the Machine (of the MachinePool when `machinePool` is true). */
  readonly machine: string;
  /** True for a Node of a MachinePool: `machine` names the pool. */
  readonly machinePool?: true;
  readonly node?: string;
  readonly state: SyncState;
  /** The Machine's effective declaration (empty when invalid). */
  readonly desired: readonly DesiredTaint[];
  /** The Node's taints as they are, with their owners (empty without a Node). */
  readonly actual: readonly OwnedTaint[];
  /** True when the Node carries the product's tracking annotation. */
  readonly initialized: boolean;
  /** Out of sync: what the next reconcile would change. */
  readonly pending?: TaintDiff;
  /** Out of sync: the complete taint list after that write. */
  readonly expected?: readonly Taint[];
  readonly issues?: readonly DeclarationIssue[];
  readonly reason?: string;
  /** Paused: which object's pause it is (the Cluster's wins, as in Cluster API). */
  readonly pausedBy?: PausedBy;
  /** The `@Preview` declarations (never applied, never drift). */
  readonly previewed?: readonly PreviewedTaint[];
  /** NoExecute taints the Node does not carry yet, and the pods they would evict (in sync or out of sync only). */
  readonly noExecutePreview?: NoExecutePreview;
  /** `MachineDeployment ns/name`, `MachineSet ns/name` or `MachinePool ns/name`: the node group the Node belongs to. */
  readonly nodeGroup?: string;
  /** A staged NoExecute rollout in progress on the Node: its mark (docs/noexecute-rollout.md), read from the Node. */
  readonly rollout?: RolloutProgress;
}

/**
 * Where a Node of a staged NoExecute rollout stands, from its mark: `claimed` (waiting for its place in the group),
 * `evicting` (its pods go through the Eviction API), `refused` (a PodDisruptionBudget refused an eviction; waited out),
 * `stuck` (a pod stayed terminating past the bound; the Node no longer counts against the group's bound).
 */
export interface RolloutProgress extends RolloutMark {
  readonly phase: 'claimed' | 'evicting' | 'refused' | 'stuck';
}

/** The rollout progress a Node's mark shows, if it carries one. */
export function rolloutProgressOf(annotations: Readonly<Record<string, string>>): RolloutProgress | undefined {
  const mark = decodeRolloutMark(annotations);
  if (!mark) return undefined;
  const phase = mark.stuck?.length ? 'stuck' : mark.refused?.length ? 'refused' : mark.ticket === undefined ? 'claimed' : 'evicting';
  return { ...mark, phase };
}

export interface TaintStatusInput {
  readonly machine: OwnerFacts;
  /** The Node named by the Machine's `status.nodeRef`, or undefined when it does not exist. */
  readonly node: NodeWithTaints | undefined;
  /** The startup gate taint the reconcile function removes (as configured), if any. */
  readonly startupTaint?: TaintId;
  /** Who propagates `spec.taints` (as configured; default upstream CAPI). */
  readonly specTaintsOwner?: SpecTaintsOwner;
  /** The Machine's (or MachinePool's) Cluster, for its `spec.paused`; undefined when unknown or absent. */
  readonly cluster?: ClusterView;
  /** The pods bound to the Node, for the NoExecute preview; absent when not read (the preview then has no counts). */
  readonly pods?: PodsRead;
}

/**
 * Computes the status of a Machine/Node pair. Returns `in-sync` exactly when the reconcile planner
 * would not write the Node. A Node without the tracking annotation is reported out of sync (its
 * first reconcile initializes it), even if the first-enablement rule would later adopt it. A paused
 * pair (Cluster API's pause, checked first as Cluster API's controllers do) is `paused` whatever its Node.
 * @example
 * taintStatusOf({ machine: { ...m, specTaints: [{ key: 'gpu', effect: 'NoSchedule', propagation: 'Always' }] }, node: { ...n, taints: [{ key: 'gpu', effect: 'NoSchedule' }], annotations: { 'cluster.x-k8s.io/taints-from-machine': 'gpu:NoSchedule' } } }).state
 * // 'in-sync'
 */
export function taintStatusOf(input: TaintStatusInput): TaintStatus {
  const { machine, node } = input;
  const specTaintsOwner = input.specTaintsOwner ?? SpecTaintsOwner.upstream;
  const nodeGroup = nodeGroupOf(machine);
  const base = {
    machine: `${machine.namespace}/${machine.name}`,
    ...(machine.kind === 'MachinePool' ? { machinePool: true as const } : {}),
    ...(machine.nodeName ? { node: machine.nodeName } : {}),
    ...(nodeGroup ? { nodeGroup } : {}),
  };
  const declared = declaredTaintsOf(machine, input.startupTaint ? { startupTaint: input.startupTaint } : {});
  const desired: DesiredTaint[] = declared.valid
    ? declared.declaration.taints.map((t) => ({ ...t, source: declared.declaration.sourceOf[taintId(t)] ?? 'spec.taints' }))
    : [];
  const initialized = node !== undefined && Object.hasOwn(node.annotations, OWN_TRACKING_ANNOTATION);
  const actual = node ? ownersOf(node, desired, input.startupTaint, specTaintsOwner) : [];
  const previewed: PreviewedTaint[] = declared.valid ? declared.declaration.previews.map((t) => ({ ...t, source: declared.declaration.sourceOf[taintId(t)] ?? 'spec.taints' })) : [];
  const rollout = node ? rolloutProgressOf(node.annotations) : undefined;
  const common = { ...base, desired, actual, initialized, ...(previewed.length > 0 ? { previewed } : {}), ...(rollout ? { rollout } : {}) };

  const pausedBy = pausedByOf(input);
  if (pausedBy) return { ...common, state: SyncState.paused, pausedBy, reason: pauseReason(pausedBy, input) };
  if (machine.deleting) return { ...common, state: SyncState.machineDeleting, reason: 'the Machine is being deleted' };
  if (!machine.nodeName) return { ...common, state: SyncState.noNode, reason: 'the Machine has no status.nodeRef yet' };
  if (!node) return { ...common, state: SyncState.nodeMissing, reason: `Node ${machine.nodeName} does not exist` };
  if (!declared.valid) {
    return { ...common, state: SyncState.invalidDeclaration, issues: declared.issues, reason: declared.issues.map((i) => `${i.field}: ${i.message}`).join('; ') };
  }
  const { plan, ownership } = planOwnedTaints(node, declared.declaration, {
    specTaintsOwner,
    ...(input.startupTaint ? { startupTaint: input.startupTaint } : {}),
  });
  if (plan.kind === 'rejected') return { ...common, state: SyncState.malformedAnnotation, reason: plan.error.message };
  if (plan.kind === 'unchanged') {
    const waiting = upstreamPending(ownership, node.taints);
    const preview = noExecutePreviewOf(node.taints, node.taints, declared.declaration, input.pods);
    return waiting ? { ...common, ...preview, state: SyncState.waitingForUpstream, reason: waiting } : { ...common, ...preview, state: SyncState.inSync };
  }
  return {
    ...common,
    ...noExecutePreviewOf(node.taints, plan.after.taints, declared.declaration, input.pods),
    state: SyncState.outOfSync,
    pending: plan.diff,
    expected: plan.after.taints,
    reason: initialized ? 'the next reconcile would write the Node' : `the Node is not initialized yet (no ${OWN_TRACKING_ANNOTATION} annotation)`,
  };
}

/**
 * The NoExecute preview of a Node whose taints go from `before` to `after` (the planned write), with the declaration's
 * previews; nothing when no NoExecute taint is about to be added or previewed.
 */
function noExecutePreviewOf(before: readonly Taint[], after: readonly Taint[], declaration: EffectiveDeclaration, pods: PodsRead | undefined): { noExecutePreview?: NoExecutePreview } {
  const change = noExecuteChangeOf(before, after, declaration.previews);
  if (change.applied.length + change.previewed.length === 0) return {};
  const taints = [...change.applied.map((taint) => ({ taint, previewOnly: false })), ...change.previewed.map((taint) => ({ taint, previewOnly: true }))];
  if (pods === undefined) return { noExecutePreview: { taints } };
  if ('error' in pods) return { noExecutePreview: { taints, podsError: pods.error } };
  const preview = previewNoExecuteEvictions({ taintsToAdd: taints.map((t) => t.taint), nodeTaints: before, pods });
  return { noExecutePreview: { taints, counts: countEvictions(preview), pods: preview } };
}

/** True when the status names NoExecute taints whose pods are to be read (`npm run status` reads only those Nodes' pods). */
export function needsPods(status: TaintStatus): boolean {
  return status.noExecutePreview !== undefined && status.noExecutePreview.counts === undefined && status.noExecutePreview.podsError === undefined;
}

/** The node group of a Machine (by Cluster API's labels) or a MachinePool's Node; undefined for a lone Machine. */
export function nodeGroupOf(machine: Pick<OwnerFacts, 'kind' | 'namespace' | 'name' | 'labels'>): string | undefined {
  if (machine.kind === 'MachinePool') return `MachinePool ${machine.namespace}/${machine.name}`;
  const deployment = machine.labels[MACHINE_DEPLOYMENT_NAME_LABEL];
  if (deployment) return `MachineDeployment ${machine.namespace}/${deployment}`;
  const set = machine.labels[MACHINE_SET_NAME_LABEL];
  if (set) return `MachineSet ${machine.namespace}/${set}`;
  const pool = machine.labels[MACHINE_POOL_NAME_LABEL];
  return pool ? `MachinePool ${machine.namespace}/${pool}` : undefined;
}

/** Cluster API's labels on a Machine of a MachineDeployment and of a MachineSet. */
const MACHINE_DEPLOYMENT_NAME_LABEL = 'cluster.x-k8s.io/deployment-name';
const MACHINE_SET_NAME_LABEL = 'cluster.x-k8s.io/set-name';

/** Whose pause holds the pair, if any: the Cluster's `spec.paused` first, then the object's annotation (`util/annotations.IsPaused`). */
function pausedByOf(input: TaintStatusInput): PausedBy | undefined {
  if (pausedReason(input.machine, input.cluster) === undefined) return undefined;
  if (input.cluster?.paused) return PausedBy.cluster;
  return input.machine.kind === 'MachinePool' ? PausedBy.machinePool : PausedBy.machine;
}

function pauseReason(pausedBy: PausedBy, input: TaintStatusInput): string {
  const { cluster, machine } = input;
  const holder =
    pausedBy === PausedBy.cluster && cluster
      ? `Cluster ${cluster.namespace}/${cluster.name} has spec.paused`
      : `${pausedBy} ${machine.namespace}/${machine.name} has the ${PAUSED_ANNOTATION} annotation`;
  return `${holder}: the Node is left as it is until the pause ends`;
}

/**
 * Why upstream's part is not done yet, or undefined when it is: CAPI has not initialized the Node, or an
 * `Always` taint of `spec.taints` is missing or has another value (CAPI's gate off, or CAPI not running).
 */
function upstreamPending(ownership: Ownership, taints: readonly Taint[]): string | undefined {
  if (ownership.awaitingUpstream) return `Cluster API has not initialized the Node yet (no ${TRACKING_ANNOTATION} annotation), so spec.taints are not applied`;
  const missing = ownership.upstreamTaints.filter(
    (t) => t.propagation === Propagation.Always && !taints.some((n) => isSameTaint(n, t) && valueOf(n) === valueOf(t)),
  );
  if (missing.length === 0) return undefined;
  return `Cluster API has not applied ${missing.map(formatTaint).join(', ')} from spec.taints (is its MachineTaintPropagation gate on?)`;
}

/**
 * Classifies each Node taint. Tracked (in the product's annotation) comes first; then upstream's (tracked in
 * CAPI's annotation, or declared in `spec.taints` when upstream owns them); then the startup gate; then a taint
 * whose key+effect is declared `OnInitialization` on an initialized Node; everything else is foreign.
 */
export function ownersOf(
  node: Pick<NodeWithTaints, 'taints' | 'annotations'>,
  desired: readonly DesiredTaint[],
  startupTaint?: TaintId,
  specTaintsOwner: SpecTaintsOwner = SpecTaintsOwner.upstream,
): OwnedTaint[] {
  const annotation = node.annotations[OWN_TRACKING_ANNOTATION];
  const tracked = annotation === undefined ? new Set<string>() : decodeOwnedTaints(annotation);
  const upstreamAnnotation = node.annotations[TRACKING_ANNOTATION];
  const upstream = new Set(upstreamAnnotation === undefined ? [] : decodeOwnedTaints(upstreamAnnotation));
  if (specTaintsOwner === SpecTaintsOwner.upstream) for (const d of desired) if (d.source === 'spec.taints') upstream.add(taintId(d));
  return node.taints.map((taint) => {
    const declaredAs = desired.find((d) => isSameTaint(d, taint));
    const withDeclaration = declaredAs ? { declaredAs } : {};
    if (tracked.has(taintId(taint))) return { taint, owner: TaintOwner.tracked, ...withDeclaration };
    if (upstream.has(taintId(taint))) return { taint, owner: TaintOwner.upstream, ...withDeclaration };
    if (startupTaint && isSameTaint(taint, startupTaint)) return { taint, owner: TaintOwner.startupGate, ...withDeclaration };
    if (annotation !== undefined && declaredAs?.propagation === Propagation.OnInitialization) {
      return { taint, owner: TaintOwner.initializationOnly, declaredAs };
    }
    return { taint, owner: TaintOwner.foreign, ...withDeclaration };
  });
}
