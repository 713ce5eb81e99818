/**
 * What the watch-forwarder keeps of a watched object: only the facts that matter to a Node's taints
 * (never the whole object), read from plain Kubernetes JSON. Pure: no client library, no clock.
 */
import {
  ObjectKind,
  eventIdFor,
  eventTypeFor,
  sourceFor,
  subjectFor,
  type ChangeKind,
  type ClusterRef,
  type MachineEventData,
  type MachinePoolEventData,
  type NodeEventData,
  type ScalableResourceEventData,
  type TaintEvent,
  type TaintEventData,
} from './cloud-event.ts';
import {
  AUTOSCALER_MAX_SIZE_ANNOTATION,
  AUTOSCALER_MIN_SIZE_ANNOTATION,
  AUTOSCALER_OWNED_ANNOTATION,
  AUTOSCALER_TAINTS_ANNOTATION,
  type ScalableResourceSnapshot,
} from './autoscaler.ts';
import { DECLARATION_ANNOTATIONS } from './declaration-keys.ts';
import { poolDeclarations } from './machine-pool.ts';
import { PAUSED_ANNOTATION, pausedReason } from './pause.ts';
import {
  CLUSTER_NAME_ANNOTATION,
  CLUSTER_NAME_LABEL,
  CLUSTER_NAMESPACE_ANNOTATION,
  CONTROL_PLANE_LABEL,
  MACHINE_ANNOTATION,
  OWN_TRACKING_ANNOTATION,
  TRACKING_ANNOTATION,
} from './taint.ts';

/** The facts of a Cluster API Machine that can change what its Node should carry. */
export interface MachineFacts {
  readonly kind: 'Machine';
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  /** `spec.taints` as stored (unvalidated; the reconcile function validates). */
  readonly specTaints: unknown;
  /** Values of the declaration annotations that are set, by key. */
  readonly declarations: Readonly<Record<string, string>>;
  readonly nodeName?: string;
  /**
   * `spec.providerID`, kept only while the Machine has no `status.nodeRef`: it links a joining Node to the Machine
   * before Cluster API does (`#shared/domain/node-link.ts`); once `nodeRef` is set it decides nothing.
   */
  readonly providerID?: string;
  readonly clusterName?: string;
  readonly clusterNameLabel?: string;
  readonly controlPlaneLabel?: string;
  /** The Machine carries `cluster.x-k8s.io/paused` (its Node is left alone; `pause.ts`). */
  readonly paused: boolean;
  readonly deleting: boolean;
}

/** The facts of a Node that the reconcile function reads. */
export interface NodeFacts {
  readonly kind: 'Node';
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly taints: unknown;
  /** Upstream CAPI's tracking annotation (it decides which taints the product leaves to CAPI). */
  readonly trackingAnnotation?: string;
  /** The product's own tracking annotation. */
  readonly ownTrackingAnnotation?: string;
  readonly machineAnnotation?: string;
  /**
   * `spec.providerID`, kept only while the Node has no `cluster.x-k8s.io/machine` annotation (Cluster API has not
   * linked it yet): it links the joining Node to its Machine (`#shared/domain/node-link.ts`).
   */
  readonly providerID?: string;
  readonly clusterNameAnnotation?: string;
  readonly clusterNamespaceAnnotation?: string;
  /**
   * The field managers that last wrote `spec.taints` and the product's tracking annotation (from managedFields).
   * Not part of the relevant fingerprint; used to recognise the echo of the reconcile function's own write.
   */
  readonly writers?: { readonly taints?: string; readonly ownTrackingAnnotation?: string };
}

/** A CAPI Cluster in the management cluster, whose Nodes the forwarder watches. */
export interface ClusterFacts {
  readonly kind: 'Cluster';
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  /** `spec.paused` is true: every object of the Cluster is left alone (`pause.ts`). */
  readonly paused: boolean;
  readonly deleting: boolean;
}

/** The facts of a Cluster API MachinePool that can change what its Nodes should carry (see `machine-pool.ts`). */
export interface MachinePoolFacts {
  readonly kind: 'MachinePool';
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  /** `spec.template.spec.taints` as stored. */
  readonly specTaints: unknown;
  /** The pool's declaration annotations (metadata, else template metadata), by key. */
  readonly declarations: Readonly<Record<string, string>>;
  /** `status.nodeRefs` names, sorted. */
  readonly nodeNames: readonly string[];
  readonly clusterName?: string;
  readonly clusterNameLabel?: string;
  /** The pool carries `cluster.x-k8s.io/paused` (its Nodes and its autoscaler annotation are left alone). */
  readonly paused: boolean;
  readonly deleting: boolean;
  /** The cluster-autoscaler annotations that are set (size, taints, the product's record), by key (docs/autoscaler.md). */
  readonly autoscaler?: Readonly<Record<string, string>>;
}

/**
 * The facts of a MachineDeployment or MachineSet that decide its cluster-autoscaler taints annotation
 * (docs/autoscaler.md): what a new Machine of it declares, and the autoscaler annotations.
 */
export interface ScalableFacts {
  readonly kind: 'MachineDeployment' | 'MachineSet';
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
  /** `spec.template.spec.taints` as stored. */
  readonly specTaints: unknown;
  /** The declaration annotations of `spec.template.metadata.annotations`, by key. */
  readonly declarations: Readonly<Record<string, string>>;
  /** `spec.template.metadata.labels[cluster.x-k8s.io/control-plane]`, when set. */
  readonly controlPlaneLabel?: string;
  /** The cluster-autoscaler annotations that are set (size, taints, the product's record), by key. */
  readonly autoscaler: Readonly<Record<string, string>>;
  readonly ownedByMachineDeployment: boolean;
  readonly clusterName?: string;
  readonly clusterNameLabel?: string;
  /** The resource carries `cluster.x-k8s.io/paused` (its autoscaler annotation is left alone). */
  readonly paused: boolean;
  readonly deleting: boolean;
}

export type WatchedFacts = MachineFacts | NodeFacts | ClusterFacts | MachinePoolFacts | ScalableFacts;

/**
 * The resume points of the forwarder's streams, by stream key (`machines`, `nodes/self`,
 * `nodes/<namespace>/<name>`): the resourceVersion up to which every relevant change was sent.
 */
export type Checkpoint = Readonly<Record<string, string>>;

/** Stream key of the Machine watch. */
export const MACHINES_STREAM = 'machines';

/** Stream key of the MachinePool watch. */
export const MACHINE_POOLS_STREAM = 'machinepools';

/** Stream keys of the MachineDeployment and MachineSet watches (scale from zero, docs/autoscaler.md). */
export const MACHINE_DEPLOYMENTS_STREAM = 'machinedeployments';
export const MACHINE_SETS_STREAM = 'machinesets';

/** Stream key of the Cluster watch (it has no resume point: it always starts from a fresh list). */
export const CLUSTERS_STREAM = 'clusters';

/** Stream key of the Node watch of a cluster: `nodes/self` or `nodes/<namespace>/<name>`. */
export function nodeStreamKey(cluster: ClusterRef): string {
  return cluster.mode === 'self' ? 'nodes/self' : `nodes/${cluster.namespace}/${cluster.name}`;
}

type Json = Record<string, unknown>;

/** A JSON object (not null, not an array). */
export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

function stringMap(v: unknown): Record<string, string> {
  if (!isObject(v)) return {};
  const out: Record<string, string> = {};
  for (const [k, val] of Object.entries(v)) if (typeof val === 'string') out[k] = val;
  return out;
}

interface Meta {
  readonly name: string;
  readonly namespace?: string;
  readonly uid: string;
  readonly resourceVersion: string;
  readonly labels: Record<string, string>;
  readonly annotations: Record<string, string>;
  readonly deleting: boolean;
}

function metaOf(obj: unknown): Meta | undefined {
  if (!isObject(obj) || !isObject(obj.metadata)) return undefined;
  const m = obj.metadata;
  const name = str(m.name);
  const uid = str(m.uid);
  const resourceVersion = str(m.resourceVersion);
  if (!name || !uid || !resourceVersion) return undefined;
  const namespace = str(m.namespace);
  return {
    name,
    uid,
    resourceVersion,
    ...(namespace ? { namespace } : {}),
    labels: stringMap(m.labels),
    annotations: stringMap(m.annotations),
    deleting: m.deletionTimestamp !== undefined && m.deletionTimestamp !== null,
  };
}

/**
 * Reads a Machine (cluster.x-k8s.io/v1beta2 JSON) into its facts.
 * Returns undefined when the object lacks name, namespace, uid or resourceVersion (a malformed event).
 */
export function toMachineFacts(obj: unknown): MachineFacts | undefined {
  const meta = metaOf(obj);
  if (!meta?.namespace || !isObject(obj)) return undefined;
  const spec = isObject(obj.spec) ? obj.spec : {};
  const status = isObject(obj.status) ? obj.status : {};
  const nodeRef = isObject(status.nodeRef) ? status.nodeRef : {};
  const declarations: Record<string, string> = {};
  for (const key of DECLARATION_ANNOTATIONS) {
    const v = meta.annotations[key];
    if (v !== undefined) declarations[key] = v;
  }
  const nodeName = str(nodeRef.name);
  const providerID = nodeName ? undefined : str(spec.providerID);
  const clusterName = str(spec.clusterName);
  const clusterNameLabel = meta.labels[CLUSTER_NAME_LABEL];
  const controlPlaneLabel = meta.labels[CONTROL_PLANE_LABEL];
  return {
    kind: 'Machine',
    namespace: meta.namespace,
    name: meta.name,
    uid: meta.uid,
    resourceVersion: meta.resourceVersion,
    specTaints: spec.taints ?? null,
    declarations,
    ...(nodeName ? { nodeName } : {}),
    ...(providerID ? { providerID } : {}),
    ...(clusterName ? { clusterName } : {}),
    ...(clusterNameLabel !== undefined ? { clusterNameLabel } : {}),
    ...(controlPlaneLabel !== undefined ? { controlPlaneLabel } : {}),
    paused: pausedReason(meta, undefined) !== undefined,
    deleting: meta.deleting,
  };
}

/**
 * Reads a MachinePool (cluster.x-k8s.io JSON, any served version) into its facts.
 * Returns undefined when the object lacks name, namespace, uid or resourceVersion (a malformed event).
 */
export function toMachinePoolFacts(obj: unknown): MachinePoolFacts | undefined {
  const meta = metaOf(obj);
  if (!meta?.namespace || !isObject(obj)) return undefined;
  const spec = isObject(obj.spec) ? obj.spec : {};
  const status = isObject(obj.status) ? obj.status : {};
  const template = isObject(spec.template) ? spec.template : {};
  const templateSpec = isObject(template.spec) ? template.spec : {};
  const templateMeta = isObject(template.metadata) ? template.metadata : {};
  const nodeRefs = Array.isArray(status.nodeRefs) ? status.nodeRefs : [];
  const nodeNames = [...new Set(nodeRefs.map((r) => (isObject(r) ? str(r.name) : undefined)).filter((n): n is string => n !== undefined))].sort();
  const clusterName = str(spec.clusterName);
  const clusterNameLabel = meta.labels[CLUSTER_NAME_LABEL];
  return {
    kind: 'MachinePool',
    namespace: meta.namespace,
    name: meta.name,
    uid: meta.uid,
    resourceVersion: meta.resourceVersion,
    specTaints: templateSpec.taints ?? null,
    declarations: poolDeclarations({ annotations: meta.annotations, templateAnnotations: stringMap(templateMeta.annotations) }),
    nodeNames,
    ...(clusterName ? { clusterName } : {}),
    ...(clusterNameLabel !== undefined ? { clusterNameLabel } : {}),
    paused: pausedReason(meta, undefined) !== undefined,
    deleting: meta.deleting,
    ...autoscalerFactsOf(meta.annotations),
  };
}

const AUTOSCALER_KEYS = [AUTOSCALER_MIN_SIZE_ANNOTATION, AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_TAINTS_ANNOTATION, AUTOSCALER_OWNED_ANNOTATION] as const;

/** The autoscaler annotations that are set; nothing at all when none is (a pool's facts stay as they were). */
function autoscalerFactsOf(annotations: Readonly<Record<string, string>>): { autoscaler?: Record<string, string> } {
  const out: Record<string, string> = {};
  for (const key of AUTOSCALER_KEYS) if (annotations[key] !== undefined) out[key] = annotations[key];
  return Object.keys(out).length === 0 ? {} : { autoscaler: out };
}

/**
 * Reads a MachineDeployment or MachineSet (cluster.x-k8s.io JSON, any served version) into its facts.
 * Returns undefined when the object lacks name, namespace, uid or resourceVersion (a malformed event).
 */
export function toScalableFacts(kind: ScalableFacts['kind'], obj: unknown): ScalableFacts | undefined {
  const meta = metaOf(obj);
  if (!meta?.namespace || !isObject(obj)) return undefined;
  const spec = isObject(obj.spec) ? obj.spec : {};
  const template = isObject(spec.template) ? spec.template : {};
  const templateSpec = isObject(template.spec) ? template.spec : {};
  const templateMeta = isObject(template.metadata) ? template.metadata : {};
  const templateAnnotations = stringMap(templateMeta.annotations);
  const declarations: Record<string, string> = {};
  for (const key of DECLARATION_ANNOTATIONS) if (templateAnnotations[key] !== undefined) declarations[key] = templateAnnotations[key];
  const controlPlaneLabel = stringMap(templateMeta.labels)[CONTROL_PLANE_LABEL];
  const owners = isObject(obj.metadata) && Array.isArray(obj.metadata.ownerReferences) ? obj.metadata.ownerReferences : [];
  const clusterName = str(spec.clusterName);
  const clusterNameLabel = meta.labels[CLUSTER_NAME_LABEL];
  return {
    kind,
    namespace: meta.namespace,
    name: meta.name,
    uid: meta.uid,
    resourceVersion: meta.resourceVersion,
    specTaints: templateSpec.taints ?? null,
    declarations,
    ...(controlPlaneLabel !== undefined ? { controlPlaneLabel } : {}),
    autoscaler: autoscalerFactsOf(meta.annotations).autoscaler ?? {},
    ownedByMachineDeployment: owners.some((o) => isObject(o) && o.kind === 'MachineDeployment'),
    ...(clusterName ? { clusterName } : {}),
    ...(clusterNameLabel !== undefined ? { clusterNameLabel } : {}),
    paused: pausedReason(meta, undefined) !== undefined,
    deleting: meta.deleting,
  };
}

/**
 * The scalable-resource view of facts (a MachineDeployment's, a MachineSet's or a MachinePool's), enough to plan its
 * autoscaler annotation exactly as the reconcile function would from the same version (`planAutoscalerTaints`).
 */
export function scalableSnapshotOfFacts(facts: ScalableFacts | MachinePoolFacts): ScalableResourceSnapshot {
  const paused: Record<string, string> = facts.paused ? { [PAUSED_ANNOTATION]: '' } : {};
  const common = { apiVersion: '', namespace: facts.namespace, name: facts.name, uid: facts.uid, resourceVersion: facts.resourceVersion, specTaints: facts.specTaints ?? undefined, deleting: facts.deleting };
  if (facts.kind === 'MachinePool') {
    // `declarations` already merges the pool's own keys over its template's (poolDeclarations).
    return { ...common, kind: 'MachinePool', annotations: { ...(facts.autoscaler ?? {}), ...facts.declarations, ...paused }, templateAnnotations: {}, templateLabels: {}, ownedByMachineDeployment: false, ...(facts.clusterName ? { clusterName: facts.clusterName } : {}) };
  }
  return {
    ...common,
    kind: facts.kind,
    annotations: { ...facts.autoscaler, ...paused },
    templateAnnotations: facts.declarations,
    templateLabels: facts.controlPlaneLabel !== undefined ? { [CONTROL_PLANE_LABEL]: facts.controlPlaneLabel } : {},
    ownedByMachineDeployment: facts.ownedByMachineDeployment,
    ...(facts.clusterName ? { clusterName: facts.clusterName } : {}),
  };
}

/** The CloudEvent that asks for a reconcile of a scalable resource's autoscaler annotation. */
export function toScalableResourceEvent(facts: ScalableFacts | MachinePoolFacts, change: ChangeKind, cluster: ClusterRef, observedAt: Date): TaintEvent {
  const at = observedAt.toISOString();
  const data: ScalableResourceEventData = {
    kind: 'ScalableResource',
    cluster,
    resource: { kind: facts.kind, namespace: facts.namespace, name: facts.name, uid: facts.uid, resourceVersion: facts.resourceVersion },
    observedAt: at,
  };
  return {
    id: eventIdFor(facts.uid, facts.resourceVersion, change, 'autoscaler'),
    source: sourceFor(cluster),
    type: eventTypeFor(ObjectKind.ScalableResource, change),
    subject: subjectFor(data),
    time: at,
    data,
  };
}

/** Reads a Node (core/v1 JSON) into its facts; undefined when name, uid or resourceVersion is missing. */
export function toNodeFacts(obj: unknown): NodeFacts | undefined {
  const meta = metaOf(obj);
  if (!meta || !isObject(obj)) return undefined;
  const spec = isObject(obj.spec) ? obj.spec : {};
  const a = meta.annotations;
  const providerID = a[MACHINE_ANNOTATION] === undefined ? str(spec.providerID) : undefined;
  return {
    kind: 'Node',
    name: meta.name,
    uid: meta.uid,
    resourceVersion: meta.resourceVersion,
    taints: spec.taints ?? null,
    ...(a[TRACKING_ANNOTATION] !== undefined ? { trackingAnnotation: a[TRACKING_ANNOTATION] } : {}),
    ...(a[OWN_TRACKING_ANNOTATION] !== undefined ? { ownTrackingAnnotation: a[OWN_TRACKING_ANNOTATION] } : {}),
    ...(a[MACHINE_ANNOTATION] !== undefined ? { machineAnnotation: a[MACHINE_ANNOTATION] } : {}),
    ...(providerID ? { providerID } : {}),
    ...(a[CLUSTER_NAME_ANNOTATION] !== undefined ? { clusterNameAnnotation: a[CLUSTER_NAME_ANNOTATION] } : {}),
    ...(a[CLUSTER_NAMESPACE_ANNOTATION] !== undefined ? { clusterNamespaceAnnotation: a[CLUSTER_NAMESPACE_ANNOTATION] } : {}),
    writers: writersOf(isObject(obj.metadata) ? obj.metadata.managedFields : undefined),
  };
}

/**
 * Who last wrote `spec.taints` and the product's tracking annotation, read from managedFields. An atomic list
 * and a single annotation have one owner after an update; anything ambiguous is left out.
 */
function writersOf(managedFields: unknown): { taints?: string; ownTrackingAnnotation?: string } {
  const taints = new Set<string>();
  const annotation = new Set<string>();
  for (const entry of Array.isArray(managedFields) ? managedFields : []) {
    if (!isObject(entry) || typeof entry.manager !== 'string' || !isObject(entry.fieldsV1)) continue;
    const spec = entry.fieldsV1['f:spec'];
    const metadata = entry.fieldsV1['f:metadata'];
    if (isObject(spec) && spec['f:taints'] !== undefined) taints.add(entry.manager);
    const annotations = isObject(metadata) ? metadata['f:annotations'] : undefined;
    if (isObject(annotations) && annotations[`f:${OWN_TRACKING_ANNOTATION}`] !== undefined) annotation.add(entry.manager);
  }
  const only = (set: Set<string>) => (set.size === 1 ? [...set][0] : undefined);
  const t = only(taints);
  const a = only(annotation);
  return { ...(t ? { taints: t } : {}), ...(a ? { ownTrackingAnnotation: a } : {}) };
}

/** Reads a CAPI Cluster (v1beta1 or v1beta2 JSON) into its facts; undefined when malformed. */
export function toClusterFacts(obj: unknown): ClusterFacts | undefined {
  const meta = metaOf(obj);
  if (!meta?.namespace || !isObject(obj)) return undefined;
  const paused = isObject(obj.spec) && obj.spec.paused === true;
  return { kind: 'Cluster', namespace: meta.namespace, name: meta.name, uid: meta.uid, resourceVersion: meta.resourceVersion, paused, deleting: meta.deleting };
}

/** Cache key of an object within its stream: `<namespace>/<name>` or `<name>`. */
export function objectKeyOf(facts: WatchedFacts): string {
  return facts.kind === 'Node' ? facts.name : `${facts.namespace}/${facts.name}`;
}

/**
 * The cluster a Machine belongs to: `self` in single-cluster mode, otherwise its namespace and
 * `spec.clusterName` (or the cluster-name label). Returns undefined when a capi Machine names no cluster.
 */
export function clusterOfMachine(machine: MachineFacts | MachinePoolFacts | ScalableFacts, mode: 'capi' | 'self'): ClusterRef | undefined {
  if (mode === 'self') return { mode: 'self' };
  const name = machine.clusterName ?? (machine.clusterNameLabel || undefined);
  return name ? { mode: 'capi', namespace: machine.namespace, name } : undefined;
}

/**
 * The small event data for an object: names and routing facts only (the reconcile function reads the Machine and the
 * Node). A Node carries `machine` when its CAPI annotations name one (namespace defaults to the cluster's).
 */
export function toEventData(facts: MachineFacts | NodeFacts, cluster: ClusterRef, observedAt: Date, hints: EventHints = {}): TaintEventData {
  const at = observedAt.toISOString();
  if (facts.kind === 'Machine') {
    const nodeName = facts.nodeName ?? hints.providerIdNode;
    const data: MachineEventData = {
      kind: 'Machine',
      cluster,
      machine: { namespace: facts.namespace, name: facts.name, uid: facts.uid, resourceVersion: facts.resourceVersion },
      ...(nodeName ? { nodeName } : {}),
      ...(hints.declarationRecovered ? { declarationRecovered: true as const } : {}),
      observedAt: at,
    };
    return data;
  }
  const machineNamespace = facts.clusterNamespaceAnnotation || (cluster.mode === 'capi' ? cluster.namespace : undefined);
  const data: NodeEventData = {
    kind: 'Node',
    cluster,
    node: { name: facts.name, uid: facts.uid, resourceVersion: facts.resourceVersion },
    ...(facts.machineAnnotation && machineNamespace
      ? { machine: { namespace: machineNamespace, name: facts.machineAnnotation } }
      : hints.providerIdMachine
        ? { machine: hints.providerIdMachine }
        : {}),
    observedAt: at,
  };
  return data;
}

/** What the forwarder knows beyond the object itself (from the previous version it saw, and from its other streams). */
export interface EventHints {
  /** A Machine's declaration went from invalid to valid. */
  readonly declarationRecovered?: boolean;
  /** A Node event: the Machine whose `spec.providerID` the Node's matches (no Cluster API annotation names one yet). */
  readonly providerIdMachine?: { readonly namespace: string; readonly name: string };
  /** A Machine event: the Node whose `spec.providerID` the Machine's matches (no `status.nodeRef` yet). */
  readonly providerIdNode?: string;
}

/**
 * Builds the CloudEvent (as a domain value) for one observed change. `time` is the observation
 * time; the id is deterministic from uid, resourceVersion and change.
 * @example toTaintEvent(nodeFacts, 'modified', { mode: 'self' }, now).type // '…node.modified.v1'
 */
export function toTaintEvent(facts: MachineFacts | NodeFacts, change: ChangeKind, cluster: ClusterRef, observedAt: Date, hints: EventHints = {}): TaintEvent {
  const data = toEventData(facts, cluster, observedAt, hints);
  return {
    id: eventIdFor(facts.uid, facts.resourceVersion, change),
    source: sourceFor(cluster),
    type: eventTypeFor(facts.kind === 'Machine' ? ObjectKind.Machine : ObjectKind.Node, change),
    subject: subjectFor(data),
    time: observedAt.toISOString(),
    data,
  };
}

/**
 * The CloudEvents for one observed MachinePool change: one per Node in `nodes` (see `poolNodesToAnnounce`), each in
 * its Node's FIFO group, with the Node in the id so that deduplication keeps every one.
 */
export function toMachinePoolEvents(
  facts: MachinePoolFacts,
  nodes: readonly string[],
  change: ChangeKind,
  cluster: ClusterRef,
  observedAt: Date,
  hints: EventHints = {},
): TaintEvent[] {
  const at = observedAt.toISOString();
  return nodes.map((nodeName) => {
    const data: MachinePoolEventData = {
      kind: 'MachinePool',
      cluster,
      machinePool: { namespace: facts.namespace, name: facts.name, uid: facts.uid, resourceVersion: facts.resourceVersion },
      nodeName,
      ...(hints.declarationRecovered ? { declarationRecovered: true as const } : {}),
      observedAt: at,
    };
    return {
      id: eventIdFor(facts.uid, facts.resourceVersion, change, nodeName),
      source: sourceFor(cluster),
      type: eventTypeFor(ObjectKind.MachinePool, change),
      subject: subjectFor(data),
      time: at,
      data,
    };
  });
}

/** The objects of one Cluster as the forwarder last saw them (see toClusterPauseEvents). */
export interface ClusterMembers {
  /** Its Machines that have a Node, each with that Node's name (`status.nodeRef`, else the provider-ID link). */
  readonly machines: readonly { readonly machine: MachineFacts; readonly nodeName: string }[];
  readonly machinePools: readonly MachinePoolFacts[];
  /** Its MachineDeployments and MachineSets. */
  readonly scalables: readonly ScalableFacts[];
}

/**
 * The CloudEvents for a Cluster whose `spec.paused` changed (either way; `pausedChanged`): one per Node of its Machines
 * and MachinePools, and one ScalableResource event per MachineDeployment, MachineSet and MachinePool, so that the
 * reconcile function answers `paused` (pause) or converges (unpause) with no other change needed. Each id is the
 * Cluster version's followed by the object's own event id: two forwarders that see the same change send the same ids
 * (SQS deduplicates them), and a later pause or unpause, a new Cluster version, is never taken for a duplicate.
 */
export function toClusterPauseEvents(cluster: ClusterFacts, ref: ClusterRef, members: ClusterMembers, observedAt: Date): TaintEvent[] {
  const events: TaintEvent[] = [
    ...members.machines.map(({ machine, nodeName }) => toTaintEvent(machine, 'modified', ref, observedAt, machine.nodeName === undefined ? { providerIdNode: nodeName } : {})),
    ...members.machinePools.flatMap((pool) => toMachinePoolEvents(pool, pool.nodeNames, 'modified', ref, observedAt)),
    ...[...members.machinePools, ...members.scalables].map((resource) => toScalableResourceEvent(resource, 'modified', ref, observedAt)),
  ];
  const prefix = eventIdFor(cluster.uid, cluster.resourceVersion, 'modified');
  return events.map((event) => ({ ...event, id: `${prefix}:${event.id}` }));
}
