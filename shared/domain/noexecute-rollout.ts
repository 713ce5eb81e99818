/**
 * Staged NoExecute rollout (issue 51, "Staged application"): the pure rules that decide a Node's next step from what
 * the cluster shows (its mark, its group's marks, its pods). Why claims and tickets never let more than N Nodes of a
 * group go ahead together: docs/noexecute-rollout.md, "Why the bound holds without a lock".
 */
import { type PodOnNode, decideEviction } from './eviction-preview.ts';
import { formatTaint, TaintEffect, type Taint } from './taint.ts';

/** Opt-in, on the Machine (set in a MachineDeployment/MachineSet/KCP template, a topology class, or on a MachinePool). */
export const ROLLOUT_ANNOTATION = 'rollout.capi-taint-propagator.dev/no-execute';
/** On a Node in progress: the mark (JSON, see RolloutMark). */
export const ROLLOUT_MARK_ANNOTATION = 'rollout.capi-taint-propagator.dev/in-progress';
/** On a Node in progress (value `true`): lets a reconcile list the Nodes in progress of a cluster by label selector. */
export const ROLLOUT_MARK_LABEL = 'rollout.capi-taint-propagator.dev/in-progress';
/** Our NoSchedule taint on a Node that holds a place (why not a cordon: docs/noexecute-rollout.md). */
export const ROLLOUT_EVICTING_TAINT: Taint = { key: 'rollout.capi-taint-propagator.dev/evicting', effect: TaintEffect.NoSchedule };

/** Cluster API's labels that name a Machine's node group, in order, with the group's kind as the mark names it. */
const GROUP_LABELS = [
  { label: 'cluster.x-k8s.io/deployment-name', kind: 'MachineDeployment' },
  { label: 'cluster.x-k8s.io/set-name', kind: 'MachineSet' },
  { label: 'cluster.x-k8s.io/control-plane-name', kind: 'ControlPlane' },
] as const;
/** The labels that name a Machine's node group. */
export const ROLLOUT_GROUP_LABELS: readonly string[] = GROUP_LABELS.map(({ label }) => label);

/** What a reconcile knows of a Node's owner for the rollout. */
export interface RolloutOwner {
  readonly kind?: 'Machine' | 'MachinePool';
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
}

/** The opt-in, read from the owner's annotations: a bound (Nodes, or a percentage of the group), none, or why not. */
export type RolloutSetting = { readonly maxInProgress: number } | { readonly percent: number } | { readonly invalid: string } | undefined;

/**
 * The owner's rollout setting: `undefined` when it did not opt in (immediate mode), `{ maxInProgress }` for a whole
 * number ≥ 1, `{ percent }` for `N%` (1–100), `{ invalid }` otherwise (the rollout then waits: an opted-in group never
 * falls back to evicting at once because of a typo).
 * @example rolloutSettingOf({ annotations: { 'rollout.capi-taint-propagator.dev/no-execute': '25%' } }) // { percent: 25 }
 */
export function rolloutSettingOf(owner: Pick<RolloutOwner, 'annotations'>): RolloutSetting {
  const raw = owner.annotations[ROLLOUT_ANNOTATION];
  if (raw === undefined) return undefined;
  const value = raw.trim();
  if (/^[1-9][0-9]{0,5}$/.test(value)) return { maxInProgress: Number(value) };
  const percent = /^([1-9][0-9]?|100)%$/.exec(value);
  if (percent) return { percent: Number(percent[1]) };
  return { invalid: `${ROLLOUT_ANNOTATION}: ${JSON.stringify(raw)} is neither a whole number of Nodes ≥ 1 nor a percentage from 1% to 100%` };
}

/**
 * The most Nodes of a group of `groupSize` in progress at once: the number, or the percentage rounded down as Cluster
 * API rounds maxUnavailable, but at least 1 (the rollout must be able to go on).
 * @example maxInProgressOf({ percent: 25 }, 10) // 2
 */
export function maxInProgressOf(setting: { readonly maxInProgress: number } | { readonly percent: number }, groupSize: number): number {
  if ('maxInProgress' in setting) return setting.maxInProgress;
  return Math.max(1, Math.floor((setting.percent * groupSize) / 100));
}

/** The label selector of a group's Machines (its kind's Cluster API label), or undefined for a MachinePool or a lone Machine. */
export function groupMachineSelectorOf(owner: RolloutOwner): string | undefined {
  const group = owner.kind === 'MachinePool' ? undefined : GROUP_LABELS.find(({ label }) => owner.labels[label]);
  return group && `${group.label}=${owner.labels[group.label]}`;
}

/**
 * The node group a Machine belongs to, as `<Kind>/<namespace>/<name>`: its MachineDeployment, else its MachineSet,
 * else its control plane (Cluster API's labels), a MachinePool itself, else the Machine alone.
 * @example nodeGroupOf({ namespace: 'a', name: 'm', labels: { 'cluster.x-k8s.io/deployment-name': 'md' }, annotations: {} }) // 'MachineDeployment/a/md'
 */
export function nodeGroupOf(owner: RolloutOwner): string {
  if (owner.kind === 'MachinePool') return `MachinePool/${owner.namespace}/${owner.name}`;
  const group = GROUP_LABELS.find(({ label }) => owner.labels[label]);
  if (!group) return `Machine/${owner.namespace}/${owner.name}`;
  return `${group.kind}/${owner.namespace}/${owner.labels[group.label]}`;
}

/** The mark a Node in progress carries (annotation ROLLOUT_MARK_ANNOTATION, JSON). */
export interface RolloutMark {
  /** The node group (nodeGroupOf). */
  readonly group: string;
  /** The NoExecute taints being rolled out, formatted (`key=value:NoExecute`), for people. */
  readonly taints: readonly string[];
  /** The resourceVersion at which the Node read its own claim; absent right after the claim. */
  readonly ticket?: string;
  /** Set once a pod stayed terminating past the bound: the Node then no longer counts against the group's bound. */
  readonly stuck?: readonly string[];
  /** Pods whose eviction a PodDisruptionBudget refused (429) at the last attempt, `<namespace>/<name>`. */
  readonly refused?: readonly string[];
}

/** The mark as its annotation value: its fields in a fixed order (compared as text), empty lists left out. */
export function encodeRolloutMark({ group, taints, ticket, stuck, refused }: RolloutMark): string {
  const some = (list?: readonly string[]): readonly string[] | undefined => (list?.length ? list : undefined);
  return JSON.stringify({ group, taints, ticket, stuck: some(stuck), refused: some(refused) }); // undefined: left out
}

/**
 * The mark of a Node, or undefined when it has none. A value that is not a mark (edited by hand) is read as a claim
 * of an unknown group without ticket: it is then cleared or re-claimed by the Node's own reconcile, never trusted.
 */
export function decodeRolloutMark(annotations: Readonly<Record<string, string>>): RolloutMark | undefined {
  const raw = annotations[ROLLOUT_MARK_ANNOTATION];
  if (raw === undefined) return undefined;
  try {
    const parsed = JSON.parse(raw) as Record<string, unknown>;
    const strings = (v: unknown): string[] | undefined => (Array.isArray(v) && v.every((s) => typeof s === 'string') ? (v as string[]) : undefined);
    if (typeof parsed['group'] !== 'string') return { group: '', taints: [] };
    const stuck = strings(parsed['stuck']);
    const refused = strings(parsed['refused']);
    return {
      group: parsed['group'],
      taints: strings(parsed['taints']) ?? [],
      ...(typeof parsed['ticket'] === 'string' && isResourceVersion(parsed['ticket']) ? { ticket: parsed['ticket'] } : {}),
      ...(stuck ? { stuck } : {}),
      ...(refused ? { refused } : {}),
    };
  } catch {
    return { group: '', taints: [] };
  }
}

/** Another Node in progress, as listed. */
export interface NodeInProgress {
  readonly name: string;
  readonly resourceVersion: string;
  readonly mark: RolloutMark;
}

/** Input of planRolloutSlot. */
export interface RolloutSlotInput {
  readonly setting: RolloutSetting;
  readonly group: string;
  /** The NoExecute taints the reconcile would add (nodeTaintsAfter's `added`). */
  readonly pending: readonly Taint[];
  readonly node: { readonly name: string; readonly resourceVersion: string; readonly annotations: Readonly<Record<string, string>> };
  /** The other Nodes in progress of the cluster (any group; this Node is ignored if listed). Needed for `hold` only. */
  readonly others: readonly NodeInProgress[];
  /** The number of Machines (or pool Nodes) of the group: the base of a percentage (default 1). */
  readonly groupSize?: number;
}

/** What a reconcile does about the rollout before (or instead of) its taint write. */
export type RolloutSlotStep =
  /** Nothing to stage and no mark: the reconcile goes on exactly as without this feature. */
  | { readonly kind: 'immediate' }
  /** A mark but nothing to stage (declaration withdrawn, group opted out, or the taints are on): remove the mark. */
  | { readonly kind: 'clear'; readonly reason: string }
  /** The opt-in is invalid: wait (nothing is evicted, the taint is not applied) and report. */
  | { readonly kind: 'invalid'; readonly reason: string }
  /** Write the claim: the mark without ticket. */
  | { readonly kind: 'claim'; readonly mark: RolloutMark }
  /** Write the ticket: the resourceVersion at which the Node's own claim was read. */
  | { readonly kind: 'ticket'; readonly mark: RolloutMark }
  /** The group is at its bound, or a claim of the group is still without its ticket: wait (nothing written). */
  | { readonly kind: 'wait'; readonly ahead: readonly string[] }
  /** The Node holds a slot: evict its pods, then apply the taint. */
  | { readonly kind: 'hold'; readonly mark: RolloutMark };

/**
 * The rollout step for one Node, from its mark, the group's other marks, the pending NoExecute taints and the opt-in.
 * @example planRolloutSlot({ setting: undefined, group: 'g', pending: [], node, others: [] }).kind // 'immediate'
 */
export function planRolloutSlot(input: RolloutSlotInput): RolloutSlotStep {
  const { setting, group, pending, node } = input;
  const mark = decodeRolloutMark(node.annotations);
  if (setting === undefined || pending.length === 0) {
    if (mark === undefined) return { kind: 'immediate' };
    return { kind: 'clear', reason: setting === undefined ? `the node group no longer opts in (${ROLLOUT_ANNOTATION})` : 'no new NoExecute taint is declared for the Node any more' };
  }
  if ('invalid' in setting) return { kind: 'invalid', reason: setting.invalid };
  const taints = pending.map(formatTaint);
  if (mark === undefined || mark.group !== group) return { kind: 'claim', mark: { group, taints } };
  if (mark.ticket === undefined) return { kind: 'ticket', mark: { ...mark, group, taints, ticket: node.resourceVersion } };
  const held = { ...mark, taints };
  // A Node whose pod is stuck keeps its mark but no longer holds a slot: it waits only for itself.
  if (mark.stuck?.length) return { kind: 'hold', mark: held };
  const mine = mark.ticket;
  const ahead: string[] = [];
  for (const other of input.others) {
    if (other.name === node.name || other.mark.group !== group || other.mark.stuck?.length) continue;
    const ticket = other.mark.ticket;
    // A claim without ticket gets one ≥ its current resourceVersion: ahead of this Node only if that is lower.
    const earliest = ticket ?? other.resourceVersion;
    if (compareResourceVersions(earliest, mine) < 0 || (ticket !== undefined && earliest === mine && other.name < node.name)) ahead.push(other.name);
  }
  return ahead.length < maxInProgressOf(setting, input.groupSize ?? 1) ? { kind: 'hold', mark: held } : { kind: 'wait', ahead: ahead.sort() };
}

/** Input of planEvictions. */
export interface EvictionInput {
  /** The Node's taints once the rollout's taints are on (the planned list). */
  readonly taintsAfter: readonly Taint[];
  readonly pods: readonly PodOnNode[];
  /** Now and the bound after which a pod still terminating is reported as stuck (time as a parameter). */
  readonly now: Date;
  readonly stuckAfterSeconds: number;
}

/** What is left to do on a Node that holds its slot. */
export interface EvictionPlan {
  /** Pods to evict now through the Eviction API. */
  readonly evict: readonly PodOnNode[];
  /** Pods already terminating that the taint would evict: the taint waits for them. */
  readonly terminating: readonly string[];
  /** Terminating pods past the bound (a stuck finalizer, a kubelet gone): reported; the Node holds only itself. */
  readonly stuck: readonly string[];
  /** DaemonSet and mirror pods the taint would evict: left to the taint. */
  readonly leftToTaint: readonly string[];
  /** True when nothing is left to wait for: the taint can go on. */
  readonly done: boolean;
}

/**
 * Which pods of the Node must go before the taint goes on (docs/noexecute-rollout.md, "Which pods are evicted").
 * Returns `done` when nothing is left to wait for.
 */
export function planEvictions(input: EvictionInput): EvictionPlan {
  const evict: PodOnNode[] = [];
  const terminating: string[] = [];
  const stuck: string[] = [];
  const leftToTaint: string[] = [];
  for (const pod of input.pods) {
    if (decideEviction(pod.tolerations, input.taintsAfter).evict === 'never') continue;
    const id = `${pod.namespace}/${pod.name}`;
    if (pod.ownerKind === 'DaemonSet' || pod.ownerKind === 'Node') leftToTaint.push(id);
    else if (pod.deletionTimestamp !== undefined) {
      terminating.push(id);
      if (input.now.getTime() - Date.parse(pod.deletionTimestamp) > input.stuckAfterSeconds * 1000) stuck.push(id);
    } else if (pod.phase !== 'Succeeded' && pod.phase !== 'Failed') evict.push(pod);
  }
  return { evict, terminating, stuck, leftToTaint, done: evict.length === 0 && terminating.length === 0 };
}

/** True for a value that looks like a resourceVersion we can order (the decimal etcd revision). */
function isResourceVersion(value: string): boolean {
  return /^[0-9]{1,30}$/.test(value);
}

/** Orders two resourceVersions (decimal etcd revisions): negative, zero or positive. A non-number sorts first. */
export function compareResourceVersions(a: string, b: string): number {
  const valid = Number(isResourceVersion(a)) - Number(isResourceVersion(b));
  if (valid !== 0 || !isResourceVersion(a)) return valid;
  return Math.sign(Number(BigInt(a) - BigInt(b)));
}
