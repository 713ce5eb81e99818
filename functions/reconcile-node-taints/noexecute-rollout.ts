/**
 * The staged NoExecute rollout, as one step of the reconcile between plan and patch (docs/noexecute-rollout.md, "What
 * happens on a Node"): all it knows is read from the cluster, and each record writes the Node at most once.
 */
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import type { EffectiveDeclaration } from '#shared/domain/declarations.ts';
import { nodeTaintsAfter } from '#shared/domain/eviction-preview.ts';
import {
  decodeRolloutMark,
  encodeRolloutMark,
  groupMachineSelectorOf,
  nodeGroupOf,
  planEvictions,
  planRolloutSlot,
  rolloutSettingOf,
  ROLLOUT_EVICTING_TAINT,
  ROLLOUT_MARK_ANNOTATION,
  ROLLOUT_MARK_LABEL,
  type NodeInProgress,
  type RolloutMark,
} from '#shared/domain/noexecute-rollout.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import type { NodeWithTaints, OwnerFacts } from '#shared/model/views.ts';
import type { NodeTaintPatch, NodeTaintPlan } from '#shared/domain/taint-plan.ts';
import { isSameTaint, valueOf, type Taint } from '#shared/domain/taint.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { ClusterConnections } from '#shared/ports/cluster-connections.ts';
import type { EventRecorder } from '#shared/ports/event-recorder.ts';
import type { MachineStore } from '#shared/ports/machine-store.ts';
import type { NodeStore } from '#shared/ports/node-store.ts';
import { recordEvent } from './deferred-events.ts';

/** How long a record waits after each step (seconds; the table in docs/noexecute-rollout.md), and the stuck bound. */
export interface RolloutTimings {
  readonly claimedSeconds: number;
  readonly waitSeconds: number;
  readonly evictingSeconds: number;
  /** After a 429: the disruption controller needs time to see the replacements Ready. */
  readonly refusedSeconds: number;
  /** A pod still terminating this long after its deletionTimestamp is reported as stuck. */
  readonly stuckAfterSeconds: number;
}

/** Evictions sent together (each is one API call; the API server serializes a budget's accounting itself). */
const EVICTIONS_AT_ONCE = 10;

export const DEFAULT_ROLLOUT_TIMINGS: RolloutTimings = { claimedSeconds: 0, waitSeconds: 10, evictingSeconds: 5, refusedSeconds: 15, stuckAfterSeconds: 300 };

export interface RolloutDeps {
  readonly machines: MachineStore;
  readonly clusters: ClusterConnections;
  readonly recorder: EventRecorder;
  readonly clock: Clock;
  readonly settings: { readonly dryRun: boolean; readonly rollout?: RolloutTimings };
}

/** What the spine hands the step. */
export interface RolloutInput {
  readonly cluster: ClusterRef;
  /** The Machine or MachinePool whose declaration the Node carries. */
  readonly owner: OwnerFacts;
  readonly declaration: EffectiveDeclaration;
  readonly nodes: NodeStore;
  readonly node: NodeWithTaints;
  readonly plan: NodeTaintPlan;
  /** Plans the Node again for another declaration (the spine's planner, first-enablement rule included). */
  readonly replan: (declaration: EffectiveDeclaration) => Promise<NodeTaintPlan>;
}

/** The rollout's part of a result: what the logs and `npm run status` show. */
export interface RolloutReport {
  readonly group: string;
  readonly taints: readonly string[];
  readonly ahead?: readonly string[];
  readonly evicted?: readonly string[];
  readonly refused?: readonly string[];
  readonly terminating?: readonly string[];
  readonly stuck?: readonly string[];
  readonly leftToTaint?: readonly string[];
}

/** What the step decided: the spine goes on with `plan`, or the record ends with this outcome. */
export type RolloutStepResult =
  | { readonly kind: 'proceed'; readonly plan: NodeTaintPlan }
  | {
      readonly kind: 'stop';
      readonly outcome: ReconcileOutcome;
      readonly reason: string;
      readonly retryInSeconds?: number;
      readonly writtenResourceVersion?: string;
      readonly rollout?: RolloutReport;
      readonly evictions?: { readonly evicted: number; readonly refused: number };
    };

/**
 * The rollout step. Returns `proceed` with the plan to write (unchanged for a Node the rollout does not concern; with
 * the mark and the evicting taint removed when its pods are gone or the rollout was withdrawn), or `stop` when this
 * record's work is a rollout step (a claim, a wait, evictions). Throws what the stores throw (a 409 is retried by the
 * spine's retryOnConflict with a fresh read; anything else through the queue).
 */
export async function stageNoExecuteRollout(deps: RolloutDeps, input: RolloutInput): Promise<RolloutStepResult> {
  const { node, plan, owner } = input;
  if (plan.kind === 'rejected' || deps.settings.dryRun) return { kind: 'proceed', plan };
  const timings = deps.settings.rollout ?? DEFAULT_ROLLOUT_TIMINGS;
  const setting = rolloutSettingOf(owner);
  const group = nodeGroupOf(owner);
  const planned = plan.kind === 'patch' ? plan.patch.taints : node.taints;
  const pending = nodeTaintsAfter(planned, node.taints).added;
  // The Nodes in progress and the group's size are read only when they can matter: the common case costs no call.
  const others = setting !== undefined && !('invalid' in setting) && pending.length > 0 ? await nodesInProgress(input.nodes) : [];
  const groupSize = setting !== undefined && 'percent' in setting && others.length > 0 ? await groupSizeOf(deps, owner) : 1;
  const step = planRolloutSlot({ setting, group, pending, node, others, groupSize });
  const taints = step.kind === 'claim' || step.kind === 'ticket' || step.kind === 'hold' ? step.mark.taints : [];
  const report: RolloutReport = { group, taints };

  if (step.kind === 'immediate') return { kind: 'proceed', plan };
  if (step.kind === 'clear') {
    if (plan.kind === 'patch') return { kind: 'proceed', plan: { ...plan, patch: withRollout(plan.patch, node, null) } };
    const written = await input.nodes.patchNodeTaints(node.name, withRollout(basePatch(node), node, null));
    await recordEvent(deps, owner, 'Normal', 'NoExecuteRolloutStopped', `Node ${node.name}: rollout stopped, ${step.reason}`);
    return { kind: 'stop', outcome: ReconcileOutcome.rolloutWithdrawn, reason: step.reason, writtenResourceVersion: written.resourceVersion };
  }
  if (step.kind === 'invalid') {
    await recordEvent(deps, owner, 'Warning', 'InvalidTaintDeclaration', `Node ${node.name} not written: ${step.reason}`);
    return { kind: 'stop', outcome: ReconcileOutcome.invalidDeclaration, reason: step.reason };
  }

  // Everything but the pending NoExecute taints is written as without the rollout, in the same write as any mark.
  const held = await input.replan(withheld(input.declaration, pending, node.taints));
  const heldPatch = held.kind === 'patch' ? held.patch : basePatch(node);
  const heldChanged = held.kind === 'patch';

  if (step.kind === 'claim' || step.kind === 'ticket') {
    const written = await input.nodes.patchNodeTaints(node.name, withRollout(heldPatch, node, step.mark));
    const reason = step.kind === 'claim' ? `claimed a place in ${group}` : `took ticket ${step.mark.ticket ?? ''} in ${group}`;
    return { kind: 'stop', outcome: ReconcileOutcome.rolloutClaimed, reason, retryInSeconds: timings.claimedSeconds, writtenResourceVersion: written.resourceVersion, rollout: report };
  }
  if (step.kind === 'wait') {
    const written = heldChanged ? await input.nodes.patchNodeTaints(node.name, heldPatch) : undefined;
    const reason = `${group} has its bound of Nodes in progress (${step.ahead.join(', ') || 'a claim being settled'})`;
    return { kind: 'stop', outcome: ReconcileOutcome.rolloutWaiting, reason, retryInSeconds: timings.waitSeconds, ...(written ? { writtenResourceVersion: written.resourceVersion } : {}), rollout: { ...report, ahead: step.ahead } };
  }

  // The Node holds a slot. First the evicting taint (nothing new lands while it empties), then the evictions.
  const starting = !node.taints.some((t) => isSameTaint(t, ROLLOUT_EVICTING_TAINT));
  if (starting || heldChanged) {
    const written = await input.nodes.patchNodeTaints(node.name, withRollout(heldPatch, node, step.mark, true));
    if (starting) await recordEvent(deps, owner, 'Normal', 'NoExecuteRolloutStarted', `Node ${node.name}: evicting through the Eviction API before ${taints.join(', ')}`);
    return { kind: 'stop', outcome: ReconcileOutcome.rolloutClaimed, reason: `holds a place in ${group}`, retryInSeconds: timings.claimedSeconds, writtenResourceVersion: written.resourceVersion, rollout: report };
  }
  const pods = await deps.clusters.podsOf(input.cluster);
  const evictions = planEvictions({ taintsAfter: planned, pods: await pods.listPodsOnNode(node.name), now: deps.clock.now(), stuckAfterSeconds: timings.stuckAfterSeconds });
  if (evictions.done) {
    // The pods are gone: the taint goes on and the mark comes off, in the spine's one write.
    return { kind: 'proceed', plan: plan.kind === 'patch' ? { ...plan, patch: withRollout(plan.patch, node, null) } : plan };
  }
  // A few at a time: a Node's 110 pods stay well within the record's call timeout, and the answers keep the pods' order.
  const answers: string[] = [];
  for (let i = 0; i < evictions.evict.length; i += EVICTIONS_AT_ONCE) {
    answers.push(...(await Promise.all(evictions.evict.slice(i, i + EVICTIONS_AT_ONCE).map((pod) => pods.evictPod(pod.namespace, pod.name)))));
  }
  const ids = evictions.evict.map((pod) => `${pod.namespace}/${pod.name}`);
  const evicted = ids.filter((_, i) => answers[i] === 'evicted');
  const refused = ids.filter((_, i) => answers[i] === 'refused');
  const mark: RolloutMark = { ...step.mark, stuck: evictions.stuck, refused };
  const rollout: RolloutReport = { ...report, evicted, refused, terminating: evictions.terminating, stuck: evictions.stuck, leftToTaint: evictions.leftToTaint };
  const counts = { evicted: evicted.length, refused: refused.length };
  // The status on the Node changes only when the refused or stuck pods do: one write then, and one Event.
  let writtenResourceVersion: string | undefined;
  if (encodeRolloutMark(mark) !== node.annotations[ROLLOUT_MARK_ANNOTATION]) {
    writtenResourceVersion = (await input.nodes.patchNodeTaints(node.name, withRollout(heldPatch, node, mark, true))).resourceVersion;
    if (evictions.stuck.length > 0 && evictions.stuck.join() !== step.mark.stuck?.join()) {
      await recordEvent(deps, owner, 'Warning', 'EvictionStuck', `Node ${node.name}: ${evictions.stuck.join(', ')} still terminating ${timings.stuckAfterSeconds}s after deletion; ${taints.join(', ')} waits for it, the rest of ${group} goes on`);
    } else if (refused.length > 0 && refused.join() !== step.mark.refused?.join()) {
      await recordEvent(deps, owner, 'Warning', 'EvictionRefused', `Node ${node.name}: a PodDisruptionBudget refuses the eviction of ${refused.join(', ')}; retrying, ${taints.join(', ')} waits`);
    }
  }
  const common = { kind: 'stop' as const, rollout, evictions: counts, ...(writtenResourceVersion ? { writtenResourceVersion } : {}) };
  if (evictions.stuck.length > 0) return { ...common, outcome: ReconcileOutcome.rolloutStuck, reason: `pods stuck terminating: ${evictions.stuck.join(', ')}`, retryInSeconds: timings.refusedSeconds };
  if (refused.length > 0) return { ...common, outcome: ReconcileOutcome.rolloutRefused, reason: `a PodDisruptionBudget refused the eviction of ${refused.join(', ')}`, retryInSeconds: timings.refusedSeconds };
  return { ...common, outcome: ReconcileOutcome.rolloutEvicting, reason: `${evicted.length} evicted, ${evictions.terminating.length} terminating`, retryInSeconds: timings.evictingSeconds };
}

/** The Nodes in progress of the cluster (all groups; the rule keeps those of the Node's group). */
async function nodesInProgress(nodes: NodeStore): Promise<NodeInProgress[]> {
  const listed = await nodes.listNodes(`${ROLLOUT_MARK_LABEL}=true`);
  return listed.flatMap((n) => {
    const mark = decodeRolloutMark(n.annotations);
    return mark ? [{ name: n.name, resourceVersion: n.resourceVersion, mark }] : [];
  });
}

/** The base of a percentage: the group's Machines, a MachinePool's Nodes, or 1 for a lone Machine. */
async function groupSizeOf(deps: RolloutDeps, owner: OwnerFacts): Promise<number> {
  if (owner.kind === 'MachinePool') return (await deps.machines.getMachinePool(owner.namespace, owner.name))?.nodeNames.length ?? 1;
  const selector = groupMachineSelectorOf(owner);
  if (selector === undefined) return 1;
  return deps.machines.countMachines(owner.namespace, selector);
}

/**
 * The declaration without the pending NoExecute taints: a new one is left out, a changed value keeps the Node's
 * current value (its taint stays as it is, owned as before), so the rest of the plan is written as without the rollout.
 */
function withheld(declaration: EffectiveDeclaration, pending: readonly Taint[], nodeTaints: readonly Taint[]): EffectiveDeclaration {
  const taints = declaration.taints.flatMap((t) => {
    if (!pending.some((p) => isSameTaint(p, t))) return [t];
    const current = nodeTaints.find((n) => isSameTaint(n, t));
    if (!current) return [];
    const { value: _value, ...valueless } = t;
    return [valueOf(current) ? { ...t, value: valueOf(current) } : valueless];
  });
  return { ...declaration, taints };
}

/** A patch that leaves the Node's taints and annotations as read (for a write of the mark only). */
function basePatch(node: NodeWithTaints): NodeTaintPatch {
  return { resourceVersion: node.resourceVersion, taints: node.taints, annotations: {} };
}

/** `patch` with the mark (and the evicting taint, when `evicting` or on already) or, for `null`, all of it removed. */
function withRollout(patch: NodeTaintPatch, node: NodeWithTaints, mark: RolloutMark | null, evicting = false): NodeTaintPatch {
  const withoutEvicting = patch.taints.filter((t) => !isSameTaint(t, ROLLOUT_EVICTING_TAINT));
  const hadEvicting = node.taints.some((t) => isSameTaint(t, ROLLOUT_EVICTING_TAINT));
  const keepEvicting = mark !== null && (evicting || hadEvicting);
  return {
    ...patch,
    taints: keepEvicting ? [...withoutEvicting, ROLLOUT_EVICTING_TAINT] : withoutEvicting,
    annotations: { ...patch.annotations, [ROLLOUT_MARK_ANNOTATION]: mark === null ? null : encodeRolloutMark(mark) },
    labels: { ...(patch.labels ?? {}), [ROLLOUT_MARK_LABEL]: mark === null ? null : 'true' },
  };
}
