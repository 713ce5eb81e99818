/**
 * The use case: one event in, one Node brought in line with its owner's declared taints, at most one successful write.
 * Level-triggered, as Cluster API's `reconcileNode`: duplicates, reordering and forged events are harmless (README).
 */
import { clusterKey, isNodeTaintEvent, parseEventType, type ClusterRef, type NodeTaintEvent, type NodeTaintEventData, type TaintEvent } from '#shared/contract/cloud-event.ts';
import { declaredTaintsOf, type EffectiveDeclaration } from '#shared/domain/declarations.ts';
import { machineOwnsNode } from '#shared/domain/node-link.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { pausedReason, type ClusterView } from '#shared/domain/pause.ts';
import { declarationOwnerOf, machinePoolOf } from '#shared/domain/machine-pool.ts';
import { planOwnedTaints, type SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { mayAdoptAsInitialized, restoredTaints, type NodeTaintPlan, type TaintDiff } from '#shared/domain/taint-plan.ts';
import { OWN_TRACKING_ANNOTATION, formatTaint, type Taint, type TaintId } from '#shared/domain/taint.ts';
import { ClusterCredentialsError, MachineConfigurationError, NodeNotFoundError, PatchConflictError, type DeclarationIssue } from '#shared/errors.ts';
import { clusterNameOf, type NodeWithTaints, type OwnerFacts } from '#shared/model/views.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { ClusterConnections } from '#shared/ports/cluster-connections.ts';
import type { EnablementState } from '#shared/ports/enablement-state.ts';
import type { EventRecorder } from '#shared/ports/event-recorder.ts';
import type { MachineStore } from '#shared/ports/machine-store.ts';
import type { NodeStore } from '#shared/ports/node-store.ts';
import type { ScalableResourceStore } from '#shared/ports/scalable-resource-store.ts';
import { recordEvent } from './deferred-events.ts';
import { previewNoExecute, type NoExecutePreviewResult } from './noexecute-preview.ts';
import { stageNoExecuteRollout, type RolloutReport, type RolloutTimings } from './noexecute-rollout.ts';

export interface ReconcileSettings {
  readonly clusterMode: 'capi' | 'self';
  readonly dryRun: boolean;
  readonly startupTaint: TaintId | undefined;
  /** Who propagates `spec.taints` (default: upstream CAPI; the product then leaves those taints alone). */
  readonly specTaintsOwner?: SpecTaintsOwner;
  /** Pace of a staged NoExecute rollout (default DEFAULT_ROLLOUT_TIMINGS). */
  readonly rollout?: RolloutTimings;
}

export interface ReconcileDeps {
  readonly machines: MachineStore;
  readonly clusters: ClusterConnections;
  readonly recorder: EventRecorder;
  readonly enablement: EnablementState;
  readonly clock: Clock;
  readonly settings: ReconcileSettings;
  /** MachineDeployments, MachineSets and MachinePools, for their cluster-autoscaler annotation (docs/autoscaler.md). */
  readonly scalables?: ScalableResourceStore;
}

/** What one reconcile did, with everything the boundary logs and counts. */
export interface ReconcileResult {
  readonly outcome: ReconcileOutcome;
  readonly cluster?: string;
  readonly machine?: string;
  /** A ScalableResource event: `<Kind> <namespace>/<name>` (no Node, no Machine). */
  readonly scalableResource?: string;
  readonly machinePool?: string;
  readonly node?: string;
  /** The Node's resourceVersion as read (the write's precondition), and after our write. */
  readonly resourceVersion?: string;
  readonly writtenResourceVersion?: string;
  readonly diff?: TaintDiff;
  /** Dry-run: the taints and annotation before and after the planned write. */
  readonly planned?: { readonly before: PlannedState; readonly after: PlannedState };
  readonly issues?: readonly DeclarationIssue[];
  readonly reason?: string;
  /** True when the first-enablement rule adopted this Node as already initialized. */
  readonly adopted?: boolean;
  /** A staged NoExecute rollout: the record comes back after this many seconds; the Node's progress; evictions. */
  readonly retryInSeconds?: number;
  readonly rollout?: RolloutReport;
  readonly evictions?: { readonly evicted: number; readonly refused: number };
  readonly noExecutePreview?: NoExecutePreviewResult;
}

export interface PlannedState {
  readonly taints: readonly Taint[];
  readonly trackingAnnotation: string | undefined;
}

/**
 * Reconciles the Node an event points at. Returns the outcome; throws the failures the queue retries, and
 * MachineConfigurationError (never retried) for a Machine that cannot be reconciled as it is.
 */
export async function reconcileNodeTaints(deps: ReconcileDeps, event: TaintEvent): Promise<ReconcileResult> {
  if (!isNodeTaintEvent(event)) throw new Error(`${event.type} names no Node: reconcile it with reconcileAutoscalerTaints`);
  // The Node and the Cluster the event names are read beside the owner, as hints: one round trip for all three.
  const hinted = startHintedNodeRead(deps, event);
  const clusterRead = startClusterRead(deps, event);
  const found = await findOwner(deps, event);
  if ('outcome' in found) return found;
  const ownerName = `${found.machine.namespace}/${found.machine.name}`;
  const owner = found.machine.kind === 'MachinePool' ? { machinePool: ownerName } : { machine: ownerName };
  const cluster = clusterOf(deps.settings, found.machine);
  const paused = await pauseOf(deps, found, clusterRead);
  if (paused) return { outcome: ReconcileOutcome.paused, cluster: clusterKey(cluster), ...owner, ...(found.machine.nodeName ? { node: found.machine.nodeName } : {}), reason: paused };
  if (found.machine.deleting) return { outcome: ReconcileOutcome.machineDeleting, ...owner, reason: `the ${found.machine.kind} is being deleted` };
  const linked: { machine: OwnerFacts; read?: NodeRead } | undefined = found.machine.nodeName ? { machine: found.machine } : await linkByProviderId(deps, event, found.machine, cluster, hinted);
  const nodeName = linked?.machine.nodeName;
  if (!linked || nodeName === undefined) return { outcome: ReconcileOutcome.noNode, ...owner, reason: 'the Machine has no status.nodeRef yet, and no Node with its spec.providerID' };
  const machine = linked.machine;
  const base = { cluster: clusterKey(cluster), ...owner, node: nodeName };

  const declared = declaredTaintsOf(machine, deps.settings);
  if (!declared.valid) {
    await recordEvent(deps, machine, 'Warning', 'InvalidTaintDeclaration',
      `Taints not propagated to Node ${nodeName}; fix the declaration: ${declared.issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`);
    return { ...base, outcome: ReconcileOutcome.invalidDeclaration, issues: declared.issues };
  }
  const recovered = event.data.kind !== 'Node' && event.data.declarationRecovered === true;
  const target: Target = { base, cluster, machine, declaration: declared.declaration, recovered };

  return retryOnConflict(async (first) => {
    // The first attempt takes the Node as the provider-ID link or the hinted read found it; a retry reads it again.
    const hint = first ? (linked.read ?? (await confirmedRead(hinted, cluster, nodeName))) : undefined;
    const read = hint ?? (await readNode(deps, cluster, nodeName));
    if (!read.node) return { ...base, outcome: ReconcileOutcome.nodeGone, reason: 'the Node does not exist' };
    return planAndPatch(deps, target, read.store, read.node);
  });
}

/** What a reconcile knows once the owner is read and its declaration is valid. */
interface Target {
  readonly base: { readonly cluster: string; readonly node: string } & ({ machine: string } | { machinePool: string });
  readonly cluster: ClusterRef;
  readonly machine: OwnerFacts;
  readonly declaration: EffectiveDeclaration;
  /** The forwarder saw the declaration invalid before: a DeclarationValid Event says that the fix took. */
  readonly recovered: boolean;
}

/** Plan → patch for the Node as read: no write when nothing changes, one merge patch with its resourceVersion otherwise. */
async function planAndPatch(deps: ReconcileDeps, target: Target, nodes: NodeStore, node: NodeWithTaints): Promise<ReconcileResult> {
  const { machine, recovered } = target;
  const normal = (reason: string, message: string) => recordEvent(deps, machine, 'Normal', reason, message);
  const planned = await planFor(deps, node, target.declaration);
  // Before the write: which pods a NoExecute taint it adds (or a @Preview) would evict; no pod read otherwise.
  const noExecutePreview = planned.plan.kind === 'rejected' ? undefined : await previewNoExecute(deps.clusters, target.cluster, node, planned.plan.kind === 'patch' ? planned.plan.after.taints : node.taints, target.declaration.previews, (type, reason, message) => recordEvent(deps, machine, type, reason, message));
  const read = { ...target.base, resourceVersion: node.resourceVersion, adopted: planned.adopt, ...(noExecutePreview ? { noExecutePreview } : {}) };
  // A new NoExecute taint of a node group that opted in goes on in stages (noexecute-rollout.ts); else nothing changes.
  const staged = await stageNoExecuteRollout(deps, { cluster: target.cluster, owner: machine, declaration: target.declaration, nodes, node, plan: planned.plan, replan: async (d) => (await planFor(deps, node, d)).plan });
  if (staged.kind === 'stop') {
    const { kind: _kind, ...result } = staged;
    return { ...read, ...result };
  }
  const plan = staged.plan;
  if (plan.kind === 'rejected') {
    await recordEvent(deps, machine, 'Warning', 'MalformedTrackingAnnotation',
      `Node ${node.name} not written: its annotation ${OWN_TRACKING_ANNOTATION} has ${plan.error.message}; fix or remove the entry`);
    return { ...read, outcome: ReconcileOutcome.malformedAnnotation, reason: plan.error.message };
  }
  if (plan.kind === 'unchanged') {
    if (recovered) await normal('DeclarationValid', `Taint declaration is valid again; Node ${node.name} is in sync`);
    return { ...read, outcome: ReconcileOutcome.unchanged };
  }
  if (deps.settings.dryRun) {
    const state = (s: typeof plan.before): PlannedState => ({ taints: s.taints, trackingAnnotation: s.annotations[OWN_TRACKING_ANNOTATION] });
    return { ...read, outcome: ReconcileOutcome.dryRun, diff: plan.diff, planned: { before: state(plan.before), after: state(plan.after) } };
  }
  let writtenResourceVersion: string;
  try {
    writtenResourceVersion = (await nodes.patchNodeTaints(node.name, plan.patch)).resourceVersion;
  } catch (error) {
    if (error instanceof NodeNotFoundError) return { ...read, outcome: ReconcileOutcome.nodeGone, reason: 'the Node was deleted between the read and the write' };
    throw error;
  }
  // One Event per write; DeclarationValid before the others, since the write is what the fix brought.
  const restored = restoredTaints(plan.diff, node.annotations[OWN_TRACKING_ANNOTATION]);
  const diff = describeDiff(plan.diff);
  const putBack = `put back ${restored.map(formatTaint).join(', ')}, removed by someone else (Always taints are kept)`;
  await (recovered
    ? normal('DeclarationValid', `Taint declaration is valid again; Node ${node.name}: ${diff}`)
    : restored.length > 0
      ? normal('TaintRestored', `Node ${node.name}: ${putBack}; ${diff}`)
      : normal('TaintsPropagated', `Node ${node.name}: ${diff}`));
  return { ...read, outcome: ReconcileOutcome.patched, diff: plan.diff, writtenResourceVersion };
}

/**
 * Runs `fn` (get → plan → patch) again at once after a 409 (another writer, most often a joining Node's kubelet),
 * as client-go's `retry.RetryOnConflict`; a second 409 is thrown, for the queue's backoff.
 */
export function retryOnConflict<T>(fn: (first: boolean) => Promise<T>): Promise<T> {
  return fn(true).catch((error: unknown) => {
    if (!(error instanceof PatchConflictError)) throw error;
    return fn(false);
  });
}

/** The plan for a Node as read, with the first-enablement rule applied. */
async function planFor(deps: ReconcileDeps, node: NodeWithTaints, declaration: EffectiveDeclaration): Promise<{ plan: NodeTaintPlan; adopt: boolean }> {
  const created = node.creationTimestamp;
  const adopt = mayAdoptAsInitialized(node, deps.settings.startupTaint) && !!created && new Date(created).getTime() < (await deps.enablement.enabledAt()).getTime();
  const { plan } = planOwnedTaints(node, declaration, { ...deps.settings, adoptAsInitialized: adopt });
  return { plan, adopt };
}

/** A read of a Node, with the store of its cluster (for the write). */
interface NodeRead {
  readonly store: NodeStore;
  readonly node: NodeWithTaints | undefined;
}

async function readNode(deps: ReconcileDeps, cluster: ClusterRef, node: string, report = true): Promise<NodeRead> {
  const store = await deps.clusters.nodesOf(cluster, { report });
  return { store, node: await store.getNode(node) };
}

/** A read started from the event's names, before the owner is known. Settles, never rejects: a failure counts only when the owner confirms the read. */
interface Started<T> {
  readonly cluster: string;
  readonly result: Promise<T | { readonly error: unknown }>;
}
type HintedRead = Started<NodeRead> & { readonly node: string };
type ClusterRead = Started<{ readonly view: ClusterView | undefined }>;

function isDeletion(event: NodeTaintEvent): boolean {
  return parseEventType(event.type)?.change === 'deleted';
}

function nodeNameOf(data: NodeTaintEventData): string | undefined {
  return data.kind === 'Node' ? data.node.name : data.nodeName;
}

/**
 * Starts reading the Node the event names, so that the owner and the Node are read in one round trip. Used only when
 * the owner names the same Node in the same cluster (confirmedRead): a forged event costs at most this one read.
 */
function startHintedNodeRead(deps: ReconcileDeps, event: NodeTaintEvent): HintedRead | undefined {
  const node = nodeNameOf(event.data);
  if (node === undefined || isDeletion(event)) return undefined;
  const result = readNode(deps, event.data.cluster, node, false).catch((error: unknown) => ({ error }));
  return { cluster: clusterKey(event.data.cluster), node, result };
}

/**
 * The hinted read when it read `node` of `cluster` (what the owner confirmed), else undefined. Its failure is thrown,
 * except for unusable credentials, which the ordinary read (undefined here) meets again and reports.
 */
async function confirmedRead(hinted: HintedRead | undefined, cluster: ClusterRef, node: string): Promise<NodeRead | undefined> {
  if (!hinted || hinted.cluster !== clusterKey(cluster) || hinted.node !== node) return undefined;
  const read = await hinted.result;
  if (!('error' in read)) return read;
  if (read.error instanceof ClusterCredentialsError) return undefined;
  throw read.error;
}

function startClusterRead(deps: ReconcileDeps, event: NodeTaintEvent): ClusterRead | undefined {
  const ref = event.data.cluster;
  if (ref.mode !== 'capi' || isDeletion(event)) return undefined;
  const result = deps.machines.getCluster(ref.namespace, ref.name).then((view) => ({ view }), (error: unknown) => ({ error }));
  return { cluster: clusterKey(ref), result };
}

/**
 * Why the owner is paused (its Cluster's `spec.paused`, or a pause source's annotation), or undefined. The Cluster is
 * the owner's, in `self` mode too (README, "Pause"); a read the event started is used when it is of that Cluster.
 */
async function pauseOf(deps: ReconcileDeps, found: Owner, started?: ClusterRead): Promise<string | undefined> {
  const { machine: owner, pauseSources: sources } = found;
  let view: ClusterView | undefined;
  const name = clusterNameOf(owner);
  if (name !== undefined) {
    const read = started?.cluster === `${owner.namespace}/${name}` ? await started.result : { view: await deps.machines.getCluster(owner.namespace, name) };
    if ('error' in read) throw read.error;
    view = read.view;
  }
  for (const source of sources) {
    const reason = pausedReason(source, view);
    if (reason) return view?.paused ? reason : `${source.kind} ${source.namespace}/${source.name}: ${reason}`;
  }
  return undefined;
}

/** A Machine without `status.nodeRef`, linked to the event's Node by `spec.providerID` (node-link.ts), and the read. */
async function linkByProviderId(deps: ReconcileDeps, event: NodeTaintEvent, machine: OwnerFacts, cluster: ClusterRef, hinted: HintedRead | undefined): Promise<{ machine: OwnerFacts; read: NodeRead } | undefined> {
  const candidate = nodeNameOf(event.data);
  if (candidate === undefined || machine.kind === 'MachinePool' || !machine.providerID) return undefined;
  if (clusterKey(cluster) !== clusterKey(event.data.cluster)) return undefined;
  const read = (await confirmedRead(hinted, cluster, candidate)) ?? (await readNode(deps, cluster, candidate));
  return read.node && machineOwnsNode(machine, read.node) ? { machine: { ...machine, nodeName: candidate }, read } : undefined;
}

/** The declaration owner of a Node, and the objects whose pause annotation counts: the Machine, its pool, or both. */
interface Owner {
  readonly machine: OwnerFacts;
  readonly pauseSources: readonly OwnerFacts[];
}

/** The Machine or MachinePool whose declaration the event's Node carries, or the outcome that ends the reconcile. */
async function findOwner(deps: ReconcileDeps, event: NodeTaintEvent): Promise<Owner | ReconcileResult> {
  const data = event.data;
  const deleted = isDeletion(event);
  if (data.kind === 'MachinePool') {
    const name = `${data.machinePool.namespace}/${data.machinePool.name}`;
    // A pool deleted, or a Node that left it: its Node is left alone (as a Machine's Node when the Machine goes).
    if (deleted) return { outcome: ReconcileOutcome.machineGone, machinePool: name, node: data.nodeName, reason: 'the MachinePool was deleted' };
    const pool = await deps.machines.getMachinePool(data.machinePool.namespace, data.machinePool.name);
    if (!pool) return { outcome: ReconcileOutcome.machineGone, machinePool: name, node: data.nodeName, reason: 'the MachinePool does not exist' };
    const owner = declarationOwnerOf(pool, data.nodeName);
    return owner ? { machine: owner, pauseSources: [pool] } : { outcome: ReconcileOutcome.machineGone, machinePool: name, node: data.nodeName, reason: `Node ${data.nodeName} is not in the MachinePool's status.nodeRefs` };
  }
  if (data.kind === 'Machine') {
    const name = `${data.machine.namespace}/${data.machine.name}`;
    if (deleted) return { outcome: ReconcileOutcome.machineGone, machine: name, reason: 'the Machine was deleted' };
    const machine = await deps.machines.getMachine(data.machine.namespace, data.machine.name);
    if (!machine) return { outcome: ReconcileOutcome.machineGone, machine: name, reason: 'the Machine does not exist' };
    return viaPool(deps, machine);
  }
  if (deleted) return { outcome: ReconcileOutcome.nodeGone, node: data.node.name, reason: 'the Node was deleted' };
  const clusterNamespace = data.cluster.mode === 'capi' ? data.cluster.namespace : '';
  const clusterName = data.cluster.mode === 'capi' ? data.cluster.name : undefined;
  const machine = data.machine
    ? await deps.machines.getMachine(data.machine.namespace, data.machine.name)
    : await deps.machines.findMachineByNodeName(clusterNamespace, clusterName, data.node.name);
  if (!machine) {
    // No Machine: a MachinePool Node (most pools have no Machine objects, only status.nodeRefs).
    const pool = await deps.machines.findMachinePoolByNodeName(clusterNamespace, clusterName, data.node.name);
    const owner = pool ? declarationOwnerOf(pool, data.node.name) : undefined;
    return pool && owner ? { machine: owner, pauseSources: [pool] } : { outcome: ReconcileOutcome.machineGone, node: data.node.name, reason: 'no Machine or MachinePool owns this Node' };
  }
  if (machine.nodeName !== undefined && machine.nodeName !== data.node.name) {
    return { outcome: ReconcileOutcome.machineGone, node: data.node.name, machine: `${machine.namespace}/${machine.name}`, reason: `the Machine's Node is ${machine.nodeName}` };
  }
  return viaPool(deps, machine);
}

/** A Machine of a MachinePool is no declaration source of its own: its Node follows the pool (one source per Node). */
async function viaPool(deps: ReconcileDeps, machine: OwnerFacts): Promise<Owner | ReconcileResult> {
  const poolName = machinePoolOf(machine);
  if (poolName === undefined) return { machine, pauseSources: [machine] };
  const name = `${machine.namespace}/${poolName}`;
  if (!machine.nodeName) return { outcome: ReconcileOutcome.noNode, machinePool: name, reason: `Machine ${machine.name} of the MachinePool has no status.nodeRef yet` };
  const pool = await deps.machines.getMachinePool(machine.namespace, poolName);
  if (!pool) return { outcome: ReconcileOutcome.machineGone, machinePool: name, node: machine.nodeName, reason: `Machine ${machine.name} names a MachinePool that does not exist` };
  const owner = declarationOwnerOf(pool, machine.nodeName);
  // The pool's status.nodeRefs lists the Node a moment later; the pool's own event then brings the Node in line.
  return owner
    ? { machine: owner, pauseSources: [machine, pool] }
    : { outcome: ReconcileOutcome.noNode, machinePool: name, node: machine.nodeName, reason: `Node ${machine.nodeName} is not in the MachinePool's status.nodeRefs yet` };
}

function clusterOf(settings: ReconcileSettings, machine: OwnerFacts): ClusterRef {
  if (settings.clusterMode === 'self') return { mode: 'self' };
  const name = clusterNameOf(machine);
  if (!name) throw new MachineConfigurationError(`${machine.namespace}/${machine.name}`, 'names no Cluster (spec.clusterName or the cluster-name label)');
  return { mode: 'capi', namespace: machine.namespace, name };
}

/** A one-line, human description of a taint diff, e.g. `added gpu=a100:NoSchedule; removed spot:NoSchedule`. */
function describeDiff(diff: TaintDiff): string {
  const parts: string[] = [];
  if (diff.added.length > 0) parts.push(`added ${diff.added.map(formatTaint).join(', ')}`);
  if (diff.removed.length > 0) parts.push(`removed ${diff.removed.map(formatTaint).join(', ')}`);
  if (diff.updated.length > 0) parts.push(`updated ${diff.updated.map((u) => `${formatTaint(u.before)} -> ${formatTaint(u.after)}`).join(', ')}`);
  if (diff.trackingAnnotation.before !== diff.trackingAnnotation.after) {
    parts.push(`${diff.trackingAnnotation.name}: ${JSON.stringify(diff.trackingAnnotation.before ?? null)} -> ${JSON.stringify(diff.trackingAnnotation.after ?? null)}`);
  }
  return parts.join('; ');
}
