/**
 * The use case: one event in, one Node brought in line with its Machine's declared taints, with at
 * most one successful write. Level-triggered: the event only says what to look at; the Machine is
 * re-read, and the Node is either read or, when the event claims its state, checked by the API server
 * in the write itself (see writeFromClaim), so duplicates, reordering and lost intermediate states are
 * harmless.
 */
import { clusterKey, isNodeTaintEvent, type ClusterRef, type NodeState, type NodeTaintEvent, type TaintEvent } from '#shared/domain/cloud-event.ts';
import { declaredTaintsOf, type EffectiveDeclaration } from '#shared/domain/declarations.ts';
import { machineOwnsNode } from '#shared/domain/node-link.ts';
import { claimedNode, isJoiningNode, nodeStateOfSnapshot, type ClaimedState } from '#shared/domain/node-state.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import type { MachineSnapshot, NodeSnapshot } from '#shared/domain/snapshots.ts';
import { declarationOwnerOf, machinePoolOf } from '#shared/domain/machine-pool.ts';
import { planOwnedTaints, type SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { mayAdoptAsInitialized, restoredTaints, type NodeTaintPlan, type TaintDiff } from '#shared/domain/taint-plan.ts';
import { CLUSTER_NAME_LABEL, OWN_TRACKING_ANNOTATION, formatTaint, type Taint } from '#shared/domain/taint.ts';
import { withTemplateDeclarations } from '#shared/domain/template-declarations.ts';
import type { ScalableResourceSnapshot } from '#shared/domain/autoscaler.ts';
import { MachineConfigurationError, NodeNotFoundError, type DeclarationIssue } from '#shared/errors.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { ClusterConnections } from '#shared/ports/cluster-connections.ts';
import type { EnablementState } from '#shared/ports/enablement-state.ts';
import type { EventRecorder } from '#shared/ports/event-recorder.ts';
import type { MachineStore } from '#shared/ports/machine-store.ts';
import type { NodeStore } from '#shared/ports/node-store.ts';
import type { ScalableResourceStore } from '#shared/ports/scalable-resource-store.ts';

export interface ReconcileSettings {
  readonly clusterMode: 'capi' | 'self';
  readonly dryRun: boolean;
  readonly startupTaint: { readonly key: string; readonly effect: string } | undefined;
  /** Who propagates `spec.taints` (default: upstream CAPI; the product then leaves those taints alone). */
  readonly specTaintsOwner?: SpecTaintsOwner;
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
  /**
   * Reads a MachineSet for its template (an event with the `template` hint); default `scalables.get`. The batch
   * boundary gives one that reads each MachineSet once per batch.
   */
  readonly machineSets?: MachineSetReader;
}

/** Reads a MachineSet (undefined when it does not exist). */
export type MachineSetReader = (namespace: string, name: string) => Promise<ScalableResourceSnapshot | undefined>;

/** What one reconcile did, with everything the boundary logs and counts. */
export interface ReconcileResult {
  readonly outcome: ReconcileOutcome;
  readonly cluster?: string;
  readonly machine?: string;
  /** A ScalableResource event: `<Kind> <namespace>/<name>` (no Node, no Machine). */
  readonly scalableResource?: string;
  /** Set instead of `machine` when the Node's declaration comes from a MachinePool. */
  readonly machinePool?: string;
  readonly node?: string;
  /** The Node's resourceVersion as read (the write's precondition). */
  readonly resourceVersion?: string;
  /** The Node's resourceVersion after our write. */
  readonly writtenResourceVersion?: string;
  readonly diff?: TaintDiff;
  /** Dry-run: the taints and annotation before and after the planned write. */
  readonly planned?: { readonly before: PlannedState; readonly after: PlannedState };
  readonly issues?: readonly DeclarationIssue[];
  readonly reason?: string;
  /** True when the first-enablement rule adopted this Node as already initialized. */
  readonly adopted?: boolean;
  /** The API server refused a write planned from the Node state the event claimed (stale or forged); the Node was then read. */
  readonly claimRefused?: true;
  /** A Kubernetes Event could not be recorded (the outcome stands; the failure is logged). */
  readonly eventError?: unknown;
}

export interface PlannedState {
  readonly taints: readonly Taint[];
  readonly trackingAnnotation: string | undefined;
}

/** Options of one reconcile. */
export interface ReconcileOptions {
  /**
   * Read the Machine and the Node in parallel (default true: one round trip for both). False reads the Node after the
   * Machine, so that the Node is as fresh as possible when the write goes out: the retry of a conflict, when another
   * writer keeps changing the Node, has the shortest window between its read and its write.
   */
  readonly parallelReads?: boolean;
}

/** Reason of the Normal Event recorded when a declaration the forwarder saw invalid is valid again. */
export const DECLARATION_VALID = 'DeclarationValid';

/**
 * Reconciles the Node an event points at. Returns the outcome; throws PatchConflictError,
 * TransientError, AccessDeniedError or ClusterCredentialsError for failures that the queue retries,
 * and MachineConfigurationError (never retried) for a Machine that cannot be reconciled as it is.
 */
export async function reconcileNodeTaints(deps: ReconcileDeps, event: TaintEvent, options: ReconcileOptions = {}): Promise<ReconcileResult> {
  // A scalable resource's event names no Node (process-batch hands it to reconcileAutoscalerTaints).
  if (!isNodeTaintEvent(event)) throw new Error(`${event.type} names no Node: reconcile it with reconcileAutoscalerTaints`);
  // An event that claims the Node's state saves the Node read: a write is planned from the claim and the API server
  // checks the claim in the same request. The Node is read only when that write does not go through (see writeFromClaim).
  const claim = deps.settings.dryRun ? undefined : nodeClaimOf(event);
  // Otherwise the Node read starts with the Machine read (one round trip for both); it is used only if the Machine confirms it.
  // So it does for a joining Node's claim, which the Node's first writers (its kubelet's first status report, Cluster
  // API) have usually made stale by then: the claimed write is planned from that read (see readInClaimForm).
  const joining = claim !== undefined && isJoiningNode(claim.state, deps.clock.now());
  const prefetch = (claim && !joining) || options.parallelReads === false ? undefined : prefetchNode(deps, event);
  // Without that read, the connection to the cluster the event names (its kubeconfig Secret, read once per container
  // and connection lifetime) is still loaded beside the Machine read: a cold container's first record does not read
  // the Secret after the Machine. A hint only, as the prefetch: a cluster the Machine does not confirm costs that read.
  if (!prefetch) warmConnection(deps, event);
  // The MachineSet the event says is ahead of its Machine is read beside the Machine (the Machine confirms it is its own).
  const templateRead = templateOfHint(deps, event);
  const found = await findMachine(deps, event);
  if ('outcome' in found) return found;
  const owner = ownerOf(found.machine);
  if (found.machine.deleting) return { outcome: ReconcileOutcome.machineDeleting, ...owner, reason: `the ${found.machine.kind ?? 'Machine'} is being deleted` };
  const ahead = templateRead ? await withTemplate(deps, found.machine, templateRead) : found.machine;
  const machine = ahead.nodeName ? ahead : await linkByProviderId(deps, event, ahead, prefetch);
  if (!machine?.nodeName) return { outcome: ReconcileOutcome.noNode, ...owner, reason: 'the Machine has no status.nodeRef yet, and no Node with its spec.providerID' };
  const cluster = clusterOf(deps.settings, machine);
  const base = { cluster: clusterKey(cluster), ...owner, node: machine.nodeName };

  const declared = declaredTaintsOf(machine, deps.settings.startupTaint ? { startupTaint: deps.settings.startupTaint } : {});
  if (!declared.valid) {
    const eventError = await recordEvent(deps, machine, 'Warning', 'InvalidTaintDeclaration',
      `Taints not propagated to Node ${machine.nodeName}; fix the declaration: ${declared.issues.map((i) => `${i.field}: ${i.message}`).join('; ')}`);
    return { ...base, outcome: ReconcileOutcome.invalidDeclaration, issues: declared.issues, eventError };
  }
  const recovered = event.data.kind !== 'Node' && event.data.declarationRecovered === true;
  const target = { base, machine, declaration: declared.declaration, recovered };

  let claimRefused = false;
  if (claim && claim.cluster === clusterKey(cluster) && claim.node === machine.nodeName) {
    const state = (await readInClaimForm(prefetch, cluster, machine.nodeName)) ?? claim.state;
    const fromClaim = await writeFromClaim(deps, target, await deps.clusters.nodesOf(cluster), state);
    if (fromClaim !== 'refused' && fromClaim !== undefined) return fromClaim;
    claimRefused = fromClaim === 'refused';
  }

  // After a refused claim the prefetched read is no newer than what was refused: the Node is read again.
  const prefetched = claimRefused ? undefined : await prefetchOf(prefetch, cluster, machine.nodeName);
  // A failed speculative read is not reported nor trusted: the read is made again the ordinary way (which reports).
  const confirmed = prefetched && !('error' in prefetched) ? prefetched : undefined;
  const nodes = confirmed ? confirmed.store : await deps.clusters.nodesOf(cluster);
  const node = confirmed ? confirmed.node : await nodes.getNode(machine.nodeName);
  if (!node) return { ...base, outcome: ReconcileOutcome.nodeGone, reason: 'the Node does not exist' };

  const { plan, adopt } = await planFor(deps, node, target.declaration);
  const read = { ...base, resourceVersion: node.resourceVersion, adopted: adopt, ...(claimRefused ? { claimRefused: true as const } : {}) };
  if (plan.kind === 'rejected') {
    const eventError = await recordEvent(deps, machine, 'Warning', 'MalformedTrackingAnnotation',
      `Node ${node.name} not written: its annotation ${OWN_TRACKING_ANNOTATION} has ${plan.error.message}; fix or remove the entry`);
    return { ...read, outcome: ReconcileOutcome.malformedAnnotation, reason: plan.error.message, eventError };
  }
  if (plan.kind === 'unchanged') {
    // The forwarder saw this declaration invalid before: say that it took, although the Node needed nothing.
    const eventError = recovered ? await recordEvent(deps, machine, 'Normal', DECLARATION_VALID, `Taint declaration is valid again; Node ${node.name} is in sync`) : undefined;
    return { ...read, outcome: ReconcileOutcome.unchanged, ...(eventError !== undefined ? { eventError } : {}) };
  }
  if (deps.settings.dryRun) {
    return {
      ...read,
      outcome: ReconcileOutcome.dryRun,
      diff: plan.diff,
      planned: {
        before: { taints: plan.before.taints, trackingAnnotation: plan.before.annotations[OWN_TRACKING_ANNOTATION] },
        after: { taints: plan.after.taints, trackingAnnotation: plan.after.annotations[OWN_TRACKING_ANNOTATION] },
      },
    };
  }
  const written = await orGone(() => nodes.patchNodeTaints(node.name, plan.patch));
  if (written === GONE) return { ...read, outcome: ReconcileOutcome.nodeGone, reason: 'the Node was deleted between the read and the write' };
  return afterWrite(deps, target, node, plan, read, written);
}

/** What a reconcile knows once the Machine is read and its declaration is valid. */
interface Target {
  readonly base: { readonly cluster: string; readonly node: string } & ({ machine: string } | { machinePool: string });
  readonly machine: MachineSnapshot;
  readonly declaration: EffectiveDeclaration;
  /** The forwarder saw the declaration invalid before (see DECLARATION_VALID). */
  readonly recovered: boolean;
}

/** The plan for a Node as read (or claimed), with the first-enablement rule applied. */
async function planFor(deps: ReconcileDeps, node: NodeSnapshot, declaration: EffectiveDeclaration): Promise<{ plan: NodeTaintPlan; adopt: boolean }> {
  const adopt = mayAdoptAsInitialized(node, deps.settings.startupTaint) && (await predatesEnablement(deps, node.creationTimestamp));
  const { plan } = planOwnedTaints(node, declaration, {
    ...(deps.settings.specTaintsOwner ? { specTaintsOwner: deps.settings.specTaintsOwner } : {}),
    ...(deps.settings.startupTaint ? { startupTaint: deps.settings.startupTaint } : {}),
    adoptAsInitialized: adopt,
  });
  return { plan, adopt };
}

/**
 * The write of a changed Node planned from the state its event claims, without reading the Node: 3 API calls (the
 * Machine, the write, its Event) instead of 4, and 2 round trips to the write. The write carries `test` operations for
 * every field the plan read, so it goes through only when the live Node is exactly as claimed. Returns undefined when
 * the claim needs no write (it may be stale: a Node is never declared in sync on a claim's word), `refused` when the
 * API server refused it (stale or forged); the Node is then read and reconciled the ordinary way.
 */
async function writeFromClaim(deps: ReconcileDeps, target: Target, nodes: NodeStore, state: ClaimedState): Promise<ReconcileResult | 'refused' | undefined> {
  const node = claimedNode(target.base.node, state);
  const { plan, adopt } = await planFor(deps, node, target.declaration);
  if (plan.kind !== 'patch') return undefined;
  const read = { ...target.base, resourceVersion: node.resourceVersion, adopted: adopt };
  const written = await orGone(() => nodes.patchClaimedNode(node.name, state, plan.patch));
  if (written === GONE) return { ...read, outcome: ReconcileOutcome.nodeGone, reason: 'the Node was deleted after the event' };
  return written ? afterWrite(deps, target, node, plan, read, written) : 'refused';
}

/** The result of a write that went through, with its Event. */
async function afterWrite(
  deps: ReconcileDeps,
  target: Target,
  node: NodeSnapshot,
  plan: Extract<NodeTaintPlan, { kind: 'patch' }>,
  read: Omit<ReconcileResult, 'outcome'>,
  written: NodeSnapshot,
): Promise<ReconcileResult> {
  const { machine, recovered } = target;
  // One Event per write: TaintRestored when an Always taint someone removed was put back, else TaintsPropagated.
  const restored = restoredTaints(plan.diff, node.annotations[OWN_TRACKING_ANNOTATION]);
  // DeclarationValid instead when the forwarder saw the declaration invalid before (the write is what the fix brought).
  const eventError = recovered
    ? await recordEvent(deps, machine, 'Normal', DECLARATION_VALID, `Taint declaration is valid again; Node ${node.name}: ${describeDiff(plan.diff)}`)
    : restored.length > 0
      ? await recordEvent(deps, machine, 'Normal', 'TaintRestored', `Node ${node.name}: put back ${restored.map(formatTaint).join(', ')}, removed by someone else (Always taints are kept); ${describeDiff(plan.diff)}`)
      : await recordEvent(deps, machine, 'Normal', 'TaintsPropagated', `Node ${node.name}: ${describeDiff(plan.diff)}`);
  return { ...read, outcome: ReconcileOutcome.patched, writtenResourceVersion: written.resourceVersion, diff: plan.diff, eventError };
}

/** A MachineSet read started from an event's `template` hint, before the Machine is known. */
interface TemplateRead {
  readonly machineSet: string;
  readonly namespace: string;
  /** Settles, never rejects: a failure is kept and thrown only if the read turns out to be the one needed. */
  readonly result: Promise<{ readonly machineSet: ScalableResourceSnapshot | undefined } | { readonly error: unknown }>;
}

function machineSetReader(deps: ReconcileDeps): MachineSetReader | undefined {
  if (deps.machineSets) return deps.machineSets;
  const scalables = deps.scalables;
  return scalables ? (namespace, name) => scalables.get('MachineSet', namespace, name) : undefined;
}

/** Starts reading the MachineSet a Machine or Node event's `template` hint names (in the Machine's namespace). */
function templateOfHint(deps: ReconcileDeps, event: NodeTaintEvent): TemplateRead | undefined {
  const data = event.data;
  if (event.type.endsWith('.deleted.v1') || data.kind === 'MachinePool' || data.template === undefined) return undefined;
  const namespace = data.kind === 'Machine' ? data.machine.namespace : data.machine?.namespace;
  const read = machineSetReader(deps);
  if (namespace === undefined || read === undefined) return undefined;
  const machineSet = data.template.machineSet;
  const result = read(namespace, machineSet).then((ms) => ({ machineSet: ms }), (error: unknown) => ({ error }));
  return { machineSet, namespace, result };
}

/**
 * The Machine with the declaration annotations its own MachineSet's template sets (`#shared/domain/template-declarations.ts`):
 * what Cluster API is about to copy onto it. The event's hint only starts the read: the MachineSet is the one the
 * Machine's controller owner reference names (read again when the hint named another), live, and not being deleted
 * (Cluster API copies nothing from a MachineSet being deleted). A pool, or a Machine of no MachineSet, is as read.
 */
async function withTemplate(deps: ReconcileDeps, machine: MachineSnapshot, hinted: TemplateRead): Promise<MachineSnapshot> {
  if (machine.kind === 'MachinePool' || machine.machineSet === undefined) return machine;
  const same = hinted.machineSet === machine.machineSet && hinted.namespace === machine.namespace;
  const read = same ? await hinted.result : await machineSetReader(deps)?.(machine.namespace, machine.machineSet).then((ms) => ({ machineSet: ms }));
  if (read === undefined) return machine;
  if ('error' in read) throw read.error;
  const ms = read.machineSet;
  if (!ms || ms.deleting) return machine;
  return { ...machine, annotations: withTemplateDeclarations(machine.annotations, ms.templateAnnotations) };
}

/** The state an event claims for the Node it names (a Machine or MachinePool event's `nodeName`, a Node event's Node). */
function nodeClaimOf(event: NodeTaintEvent): { readonly cluster: string; readonly node: string; readonly state: NodeState } | undefined {
  if (event.type.endsWith('.deleted.v1')) return undefined;
  const data = event.data;
  const node = data.kind === 'Node' ? data.node.name : data.nodeName;
  return node !== undefined && data.nodeState !== undefined ? { cluster: clusterKey(data.cluster), node, state: data.nodeState } : undefined;
}

/**
 * The Node as prefetched, in a claim's form, when that read is of the same Node in the same cluster: it was made after
 * the event, so it is as new as the event's claim or newer, and it knows what a claim cannot say (that the Node has no
 * annotation at all, which a joining Node's registration may leave it with). Undefined otherwise (no read, a failed
 * one, a deleted Node).
 */
async function readInClaimForm(prefetch: NodePrefetch | undefined, cluster: ClusterRef, node: string): Promise<ClaimedState | undefined> {
  const read = await prefetchOf(prefetch, cluster, node);
  return !read || 'error' in read || !read.node ? undefined : nodeStateOfSnapshot(read.node);
}

/** The prefetch's result when it read `node` of `cluster` (what the Machine confirmed); undefined for any other read or none. */
async function prefetchOf(prefetch: NodePrefetch | undefined, cluster: ClusterRef, node: string): Promise<Awaited<NodePrefetch['result']> | undefined> {
  return prefetch && prefetch.cluster === clusterKey(cluster) && prefetch.node === node ? prefetch.result : undefined;
}

/** Starts loading the connection to the workload cluster an event names; a failure is left to the ordinary load, which reports it. */
function warmConnection(deps: ReconcileDeps, event: NodeTaintEvent): void {
  if (event.type.endsWith('.deleted.v1') || event.data.cluster.mode !== 'capi') return;
  deps.clusters.nodesOf(event.data.cluster, { report: false }).catch(() => undefined);
}

/** A Node read started before the Machine is known, from the event's routing facts. */
interface NodePrefetch {
  readonly cluster: string;
  readonly node: string;
  /** Settles, never rejects: a failure is kept and thrown only if the read turns out to be the one needed. */
  readonly result: Promise<{ readonly store: NodeStore; readonly node: NodeSnapshot | undefined } | { readonly error: unknown }>;
}

/**
 * Starts reading the Node the event names (a Machine event's `nodeName`, a Node event's Node) in the cluster it names,
 * so that the Machine and the Node are read in parallel. The event is only a hint: the result is used only when the
 * Machine, read from the management cluster, names the same Node in the same cluster; otherwise the Node is read again
 * (a forged or outdated message costs at most this one extra read; its credential problems are not reported, and a
 * failed speculative read is made again the ordinary way). A Node read that is older than a sequential one would be
 * is no risk: the write carries its resourceVersion as a precondition.
 */
function prefetchNode(deps: ReconcileDeps, event: NodeTaintEvent): NodePrefetch | undefined {
  if (event.type.endsWith('.deleted.v1')) return undefined;
  const data = event.data;
  const node = data.kind === 'Node' ? data.node.name : data.nodeName;
  if (node === undefined) return undefined;
  const result = (async () => {
    const store = await deps.clusters.nodesOf(data.cluster, { report: false });
    return { store, node: await store.getNode(node) };
  })().catch((error: unknown) => ({ error }));
  return { cluster: clusterKey(data.cluster), node, result };
}

/**
 * A Machine without `status.nodeRef` yet, and the Node the event names (a joining Node, or the Node the forwarder
 * matched to the Machine): the Machine with that Node when the Node's `spec.providerID` equals the Machine's (Cluster
 * API's own link, `#shared/domain/node-link.ts`), read from the workload cluster (the prefetched read when there is one).
 */
async function linkByProviderId(deps: ReconcileDeps, event: NodeTaintEvent, machine: MachineSnapshot, prefetch: NodePrefetch | undefined): Promise<MachineSnapshot | undefined> {
  const data = event.data;
  const candidate = data.kind === 'Node' ? data.node.name : data.nodeName;
  if (candidate === undefined || machine.kind === 'MachinePool' || !machine.providerID) return undefined;
  const cluster = clusterOf(deps.settings, machine);
  if (clusterKey(cluster) !== clusterKey(data.cluster)) return undefined;
  const prefetched = await prefetchOf(prefetch, cluster, candidate);
  const node = prefetched && !('error' in prefetched) ? prefetched.node : await (await deps.clusters.nodesOf(cluster)).getNode(candidate);
  return node && machineOwnsNode(machine, node) ? { ...machine, nodeName: candidate } : undefined;
}

/** `machine: <ns>/<name>`, or `machinePool: <ns>/<name>` for a pool's Node: what logs, metrics and results name. */
function ownerOf(owner: MachineSnapshot): { machine: string } | { machinePool: string } {
  const name = `${owner.namespace}/${owner.name}`;
  return owner.kind === 'MachinePool' ? { machinePool: name } : { machine: name };
}

/**
 * Finds the object whose declaration the event's Node carries — its Machine, or its MachinePool (see
 * `#shared/domain/machine-pool.ts`) — or the outcome that ends the reconcile early.
 */
async function findMachine(deps: ReconcileDeps, event: NodeTaintEvent): Promise<{ machine: MachineSnapshot } | ReconcileResult> {
  const data = event.data;
  const deleted = event.type.endsWith('.deleted.v1');
  if (data.kind === 'MachinePool') {
    const name = `${data.machinePool.namespace}/${data.machinePool.name}`;
    // A pool deleted, or a Node that left it: its Node is left alone (as a Machine's Node when the Machine goes).
    if (deleted) return { outcome: ReconcileOutcome.machineGone, machinePool: name, node: data.nodeName, reason: 'the MachinePool was deleted' };
    const pool = await deps.machines.getMachinePool(data.machinePool.namespace, data.machinePool.name);
    if (!pool) return { outcome: ReconcileOutcome.machineGone, machinePool: name, node: data.nodeName, reason: 'the MachinePool does not exist' };
    const owner = declarationOwnerOf(pool, data.nodeName);
    return owner ? { machine: owner } : { outcome: ReconcileOutcome.machineGone, machinePool: name, node: data.nodeName, reason: `Node ${data.nodeName} is not in the MachinePool's status.nodeRefs` };
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
    return owner ? { machine: owner } : { outcome: ReconcileOutcome.machineGone, node: data.node.name, reason: 'no Machine or MachinePool owns this Node' };
  }
  if (machine.nodeName !== undefined && machine.nodeName !== data.node.name) {
    return { outcome: ReconcileOutcome.machineGone, node: data.node.name, machine: `${machine.namespace}/${machine.name}`, reason: `the Machine's Node is ${machine.nodeName}` };
  }
  return viaPool(deps, machine);
}

/** A Machine of a MachinePool is no declaration source of its own: its Node follows the pool (one source per Node). */
async function viaPool(deps: ReconcileDeps, machine: MachineSnapshot): Promise<{ machine: MachineSnapshot } | ReconcileResult> {
  const poolName = machinePoolOf(machine);
  if (poolName === undefined) return { machine };
  const name = `${machine.namespace}/${poolName}`;
  if (!machine.nodeName) return { outcome: ReconcileOutcome.noNode, machinePool: name, reason: `Machine ${machine.name} of the MachinePool has no status.nodeRef yet` };
  const pool = await deps.machines.getMachinePool(machine.namespace, poolName);
  if (!pool) return { outcome: ReconcileOutcome.machineGone, machinePool: name, node: machine.nodeName, reason: `Machine ${machine.name} names a MachinePool that does not exist` };
  const owner = declarationOwnerOf(pool, machine.nodeName);
  // The pool's status.nodeRefs lists the Node a moment later; the pool's own event then brings the Node in line.
  return owner ? { machine: owner } : { outcome: ReconcileOutcome.noNode, machinePool: name, node: machine.nodeName, reason: `Node ${machine.nodeName} is not in the MachinePool's status.nodeRefs yet` };
}

function clusterOf(settings: ReconcileSettings, machine: MachineSnapshot): ClusterRef {
  if (settings.clusterMode === 'self') return { mode: 'self' };
  const name = machine.clusterName ?? machine.labels[CLUSTER_NAME_LABEL];
  if (!name) throw new MachineConfigurationError(`${machine.namespace}/${machine.name}`, 'names no Cluster (spec.clusterName or the cluster-name label)');
  return { mode: 'capi', namespace: machine.namespace, name };
}

const GONE = Symbol('gone');

/** A write; a 404 (the Node was deleted after it was read or claimed) is GONE, i.e. the `node-gone` outcome. */
async function orGone<T>(write: () => Promise<T>): Promise<T | typeof GONE> {
  try {
    return await write();
  } catch (error) {
    if (error instanceof NodeNotFoundError) return GONE;
    throw error;
  }
}

async function predatesEnablement(deps: ReconcileDeps, creationTimestamp: string | undefined): Promise<boolean> {
  if (!creationTimestamp) return false;
  return new Date(creationTimestamp).getTime() < (await deps.enablement.enabledAt()).getTime();
}

/** Records an Event on the Machine; returns the failure instead of throwing, so the outcome stands. */
async function recordEvent(deps: ReconcileDeps, machine: MachineSnapshot, type: 'Normal' | 'Warning', reason: string, message: string): Promise<unknown> {
  try {
    await deps.recorder.record({ apiVersion: machine.apiVersion, kind: machine.kind ?? 'Machine', namespace: machine.namespace, name: machine.name, uid: machine.uid }, type, reason, message);
    return undefined;
  } catch (error) {
    return error;
  }
}

/** A one-line, human description of a taint diff, e.g. `added gpu=a100:NoSchedule; removed spot:NoSchedule`. */
export function describeDiff(diff: TaintDiff): string {
  const parts: string[] = [];
  if (diff.added.length > 0) parts.push(`added ${diff.added.map(formatTaint).join(', ')}`);
  if (diff.removed.length > 0) parts.push(`removed ${diff.removed.map(formatTaint).join(', ')}`);
  if (diff.updated.length > 0) parts.push(`updated ${diff.updated.map((u) => `${formatTaint(u.before)} -> ${formatTaint(u.after)}`).join(', ')}`);
  if (diff.trackingAnnotation.before !== diff.trackingAnnotation.after) {
    parts.push(`${diff.trackingAnnotation.name}: ${JSON.stringify(diff.trackingAnnotation.before ?? null)} -> ${JSON.stringify(diff.trackingAnnotation.after ?? null)}`);
  }
  return parts.join('; ');
}
