/**
 * What the product keeps of a Cluster API object or Node: only the facts that matter to a Node's taints, read
 * defensively from plain JSON. One view per object for both functions (forwarder's watches, reconcile's stores).
 */
import { AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_MIN_SIZE_ANNOTATION, AUTOSCALER_OWNED_ANNOTATION, AUTOSCALER_TAINTS_ANNOTATION } from '#shared/domain/autoscaler.ts';
import { capiApiVersionString, SUPPORTED_CAPI_API_VERSIONS } from '#shared/domain/capi-api.ts';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';
import { MACHINE_POOL_NAME_LABEL, poolDeclarations } from '#shared/domain/machine-pool.ts';
import { ROLLOUT_ANNOTATION, ROLLOUT_GROUP_LABELS, ROLLOUT_MARK_ANNOTATION, ROLLOUT_MARK_LABEL } from '#shared/domain/noexecute-rollout.ts';
import { PAUSED_ANNOTATION, pausedReason, type ClusterView } from '#shared/domain/pause.ts';
import {
  CLUSTER_NAME_ANNOTATION,
  CLUSTER_NAME_LABEL,
  CLUSTER_NAMESPACE_ANNOTATION,
  CONTROL_PLANE_LABEL,
  MACHINE_ANNOTATION,
  OWN_TRACKING_ANNOTATION,
  TRACKING_ANNOTATION,
  type Taint,
} from '#shared/domain/taint.ts';
import { isObject, obj, objectParts, pick, str, stringMap, type ObjectParts } from './json.ts';

/** What every view carries of `metadata`. */
type ObjectIdentity = Readonly<Pick<ObjectParts, 'name' | 'uid' | 'resourceVersion'>>;

/** The labels a view keeps: the ones the product reads. */
export const VIEW_LABELS: readonly string[] = [CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, MACHINE_POOL_NAME_LABEL, ...ROLLOUT_GROUP_LABELS];
/** The annotations a CAPI object's view keeps, those the rules read: the forwarder caches tens of thousands. */
const VIEW_ANNOTATIONS: readonly string[] = [
  ...DECLARATION_ANNOTATIONS,
  PAUSED_ANNOTATION,
  ROLLOUT_ANNOTATION,
  AUTOSCALER_MIN_SIZE_ANNOTATION,
  AUTOSCALER_MAX_SIZE_ANNOTATION,
  AUTOSCALER_TAINTS_ANNOTATION,
  AUTOSCALER_OWNED_ANNOTATION,
];

/** What every Cluster API object's view carries. */
interface CapiObjectFacts extends ObjectIdentity {
  /** The group version it was read in: Events about it name it. */
  readonly apiVersion: string;
  readonly namespace: string;
  readonly clusterName?: string;
  /** The labels of {@link VIEW_LABELS} that are set. */
  readonly labels: Readonly<Record<string, string>>;
  /** The annotations of {@link VIEW_ANNOTATIONS} that are set. */
  readonly annotations: Readonly<Record<string, string>>;
  readonly deleting: boolean;
}

/** A Cluster API Machine (v1beta2 or v1beta1: one shape): what can change what its Node should carry. */
export interface MachineFacts extends CapiObjectFacts {
  readonly kind: 'Machine';
  /** `spec.taints` as stored (unvalidated: the API server may not have run CAPI's webhooks; the reconcile validates). */
  readonly specTaints: unknown;
  readonly nodeName?: string;
  /** `spec.providerID`, kept only while there is no `status.nodeRef` (`#shared/domain/node-link.ts`). */
  readonly providerID?: string;
}

/** The annotations a Node's view keeps: the reconcile's write sets or removes only its own keys, so no others. */
export const NODE_ANNOTATIONS: readonly string[] = [
  TRACKING_ANNOTATION,
  OWN_TRACKING_ANNOTATION,
  MACHINE_ANNOTATION,
  CLUSTER_NAME_ANNOTATION,
  CLUSTER_NAMESPACE_ANNOTATION,
  ROLLOUT_MARK_ANNOTATION,
];
/** The labels a Node's view keeps: the staged NoExecute rollout's mark. */
export const NODE_LABELS: readonly string[] = [ROLLOUT_MARK_LABEL];

/** A Node (core/v1): what decides its taints, for both functions (the forwarder's Node watch, the reconcile's NodeStore). */
export interface NodeFacts extends ObjectIdentity {
  readonly kind: 'Node';
  /** For the first-enablement rule: a Node older than the enablement is adopted. */
  readonly creationTimestamp?: string;
  /** The labels of {@link NODE_LABELS} that are set. */
  readonly labels: Readonly<Record<string, string>>;
  /** The annotations of {@link NODE_ANNOTATIONS} that are set. */
  readonly annotations: Readonly<Record<string, string>>;
  /** Undefined when not a list of taints (a broken or hostile server): the reconcile then does not write. */
  readonly taints: readonly Taint[] | undefined;
  readonly providerID?: string;
  /** The last writers of `spec.taints` and the own tracking annotation (not fingerprinted): the reconcile's echo. */
  readonly writers?: { readonly taints?: string; readonly ownTrackingAnnotation?: string };
}

/** The provider ID linking a Node to its Machine while Cluster API has not (no machine annotation); else undefined. */
export function unlinkedProviderID(node: NodeFacts): string | undefined {
  return node.annotations[MACHINE_ANNOTATION] === undefined ? node.providerID : undefined;
}

/** A Node whose `spec.taints` could be read: what the reconcile plans from. */
export type NodeWithTaints = NodeFacts & { readonly taints: readonly Taint[] };

/** A CAPI Cluster in the management cluster, whose Nodes the forwarder watches; paused, its objects are left alone. */
export interface ClusterFacts extends ObjectIdentity, ClusterView {
  readonly kind: 'Cluster';
  readonly deleting: boolean;
}

/** A Cluster API MachinePool; its `annotations` hold the declaration keys wherever the pool declares them. */
export interface MachinePoolFacts extends CapiObjectFacts {
  readonly kind: 'MachinePool';
  /** `spec.template.spec.taints` (no Cluster API version accepts it yet; read where present). */
  readonly specTaints: unknown;
  /** `status.nodeRefs` names, sorted. */
  readonly nodeNames: readonly string[];
}

/** What the cluster-autoscaler scales (docs/autoscaler.md): a MachineDeployment, a MachineSet or a MachinePool. */
export type ScalableResourceFacts = ScalableFacts | MachinePoolFacts;

/** The object whose declaration a Node carries: its Machine, or its MachinePool (as the owner of that Node: `declarationOwnerOf`). */
export type OwnerFacts = MachineFacts | (MachinePoolFacts & { readonly nodeName?: string });

/** A MachineDeployment or MachineSet: what decides its cluster-autoscaler taints annotation (docs/autoscaler.md). */
export interface ScalableFacts extends CapiObjectFacts {
  readonly kind: 'MachineDeployment' | 'MachineSet';
  readonly specTaints: unknown;
  /** The declaration annotations of the template: what a new Machine of it carries. */
  readonly templateAnnotations: Readonly<Record<string, string>>;
  /** The control-plane label of the template, when set. */
  readonly templateLabels: Readonly<Record<string, string>>;
  readonly ownedByMachineDeployment: boolean;
}

export type WatchedFacts = MachineFacts | NodeFacts | ClusterFacts | MachinePoolFacts | ScalableFacts;

/** The same string for every object of a supported version: the forwarder's cache keeps one copy. */
const API_VERSIONS = new Map(SUPPORTED_CAPI_API_VERSIONS.map((v) => [capiApiVersionString(v), capiApiVersionString(v)]));
const NONE: Readonly<Record<string, string>> = Object.freeze({});

/** The entries of `map` whose key is in `keys`; one shared empty map when there are none. */
function kept(map: Readonly<Record<string, string>>, keys: readonly string[]): Readonly<Record<string, string>> {
  const out = pick(map, keys);
  return Object.keys(out).length > 0 ? out : NONE;
}

/** The common facts of a Cluster API object, then `read`'s of its parts; undefined when malformed or not namespaced. */
function capiObject<K extends string, T>(kind: K, o: unknown, read: (p: ObjectParts) => T) {
  const p = objectParts(o);
  if (!p?.namespace) return undefined;
  const apiVersion = str(obj(o).apiVersion) ?? '';
  const clusterName = str(p.spec.clusterName);
  return {
    kind,
    apiVersion: API_VERSIONS.get(apiVersion) ?? apiVersion,
    namespace: p.namespace,
    name: p.name,
    uid: p.uid,
    resourceVersion: p.resourceVersion,
    ...(clusterName ? { clusterName } : {}),
    labels: kept(p.labels, VIEW_LABELS),
    annotations: kept(p.annotations, VIEW_ANNOTATIONS),
    deleting: p.deleting,
    ...read(p),
  };
}

/** Reads a Machine (cluster.x-k8s.io JSON, any served version); undefined when malformed. */
export function toMachineFacts(o: unknown): MachineFacts | undefined {
  return capiObject('Machine', o, (p) => {
    const nodeName = str(obj(p.status.nodeRef).name);
    return { specTaints: p.spec.taints ?? null, nodeName, providerID: nodeName ? undefined : str(p.spec.providerID) };
  });
}

/** Reads a MachinePool (cluster.x-k8s.io JSON, any served version); undefined when malformed. */
export function toMachinePoolFacts(o: unknown): MachinePoolFacts | undefined {
  return capiObject('MachinePool', o, (p) => {
    const template = obj(p.spec.template);
    const nodeRefs = Array.isArray(p.status.nodeRefs) ? p.status.nodeRefs : [];
    const nodeNames = nodeRefs.map((r) => str(obj(r).name)).filter((n): n is string => n !== undefined);
    const templateAnnotations = stringMap(obj(template.metadata).annotations);
    const keys = [...DECLARATION_ANNOTATIONS, ROLLOUT_ANNOTATION];
    const declared = poolDeclarations({ annotations: p.annotations, templateAnnotations }, keys);
    return {
      annotations: { ...kept(p.annotations, VIEW_ANNOTATIONS), ...declared },
      specTaints: obj(template.spec).taints ?? null,
      nodeNames: [...new Set(nodeNames)].sort(),
    };
  });
}

/** The Cluster an object belongs to: `spec.clusterName`, else its `cluster.x-k8s.io/cluster-name` label. */
export function clusterNameOf(o: Pick<CapiObjectFacts, 'clusterName' | 'labels'>): string | undefined {
  return o.clusterName ?? (o.labels[CLUSTER_NAME_LABEL] || undefined);
}

/** Cluster API's pause of the object itself: a Cluster's `spec.paused`, any other object's paused annotation (pause.ts). */
export function isPaused(facts: WatchedFacts): boolean {
  if (facts.kind === 'Node') return false;
  return facts.kind === 'Cluster' ? facts.paused : pausedReason(facts, undefined) !== undefined;
}

/** Reads a MachineDeployment or MachineSet (cluster.x-k8s.io JSON, any served version); undefined when malformed. */
export function toScalableFacts(kind: ScalableFacts['kind'], o: unknown): ScalableFacts | undefined {
  return capiObject(kind, o, (p) => {
    const template = obj(p.spec.template);
    const templateMeta = obj(template.metadata);
    const owners: unknown[] = Array.isArray(p.metadata.ownerReferences) ? p.metadata.ownerReferences : [];
    return {
      specTaints: obj(template.spec).taints ?? null,
      templateAnnotations: kept(stringMap(templateMeta.annotations), DECLARATION_ANNOTATIONS),
      templateLabels: kept(stringMap(templateMeta.labels), [CONTROL_PLANE_LABEL]),
      ownedByMachineDeployment: owners.some((r) => obj(r).kind === 'MachineDeployment'),
    };
  });
}

/** Reads a MachineDeployment, MachineSet or MachinePool of `kind`; undefined when malformed. */
export function toScalableResourceFacts(kind: ScalableResourceFacts['kind'], o: unknown): ScalableResourceFacts | undefined {
  return kind === 'MachinePool' ? toMachinePoolFacts(o) : toScalableFacts(kind, o);
}

/** Reads a Node (core/v1 JSON); undefined when name, uid or resourceVersion is missing. */
export function toNodeFacts(o: unknown): NodeFacts | undefined {
  const p = objectParts(o);
  if (!p) return undefined;
  return {
    kind: 'Node',
    name: p.name,
    uid: p.uid,
    resourceVersion: p.resourceVersion,
    creationTimestamp: kubeTime(p.metadata.creationTimestamp),
    labels: kept(p.labels, NODE_LABELS),
    annotations: kept(p.annotations, NODE_ANNOTATIONS),
    taints: taintsOf(p.spec.taints),
    providerID: str(p.spec.providerID),
    writers: writersOf(p.metadata.managedFields),
  };
}

/** One shared empty list, exact-size lists otherwise: the forwarder's cache holds tens of thousands of Nodes. */
const NO_TAINTS: readonly Taint[] = Object.freeze([]);

/** A Node's `spec.taints` ({@link NodeFacts.taints}); an empty value is left out, as the API server does. */
function taintsOf(raw: unknown): readonly Taint[] | undefined {
  if (raw === null || raw === undefined) return NO_TAINTS;
  const readable = (t: unknown): t is Record<string, unknown> & { key: string; effect: string } => isObject(t) && typeof t.key === 'string' && typeof t.effect === 'string';
  if (!Array.isArray(raw) || !raw.every(readable)) return undefined;
  if (raw.length === 0) return NO_TAINTS;
  return raw.map((t) => ({ key: t.key, value: str(t.value), effect: t.effect, timeAdded: kubeTime(t.timeAdded) }));
}

/** A time as the API's JSON has it (RFC 3339); a Date (client-node's model) in the same form. */
function kubeTime(v: unknown): string | undefined {
  if (v instanceof Date) return v.toISOString().replace(/\.\d{3}Z$/, 'Z');
  return str(v);
}

/** Who last wrote `spec.taints` and the own tracking annotation (managedFields); anything ambiguous is left out. */
function writersOf(managedFields: unknown): NodeFacts['writers'] {
  const taints = new Set<string>();
  const annotation = new Set<string>();
  for (const entry of Array.isArray(managedFields) ? managedFields : []) {
    if (!isObject(entry) || typeof entry.manager !== 'string' || !isObject(entry.fieldsV1)) continue;
    if (obj(entry.fieldsV1['f:spec'])['f:taints'] !== undefined) taints.add(entry.manager);
    if (obj(obj(entry.fieldsV1['f:metadata'])['f:annotations'])[`f:${OWN_TRACKING_ANNOTATION}`] !== undefined) annotation.add(entry.manager);
  }
  const only = (set: Set<string>) => (set.size === 1 ? [...set][0] : undefined);
  return { taints: only(taints), ownTrackingAnnotation: only(annotation) };
}

/** Reads a CAPI Cluster (v1beta1 or v1beta2 JSON); undefined when malformed. */
export function toClusterFacts(o: unknown): ClusterFacts | undefined {
  const p = objectParts(o);
  if (!p?.namespace) return undefined;
  return { kind: 'Cluster', namespace: p.namespace, name: p.name, uid: p.uid, resourceVersion: p.resourceVersion, paused: p.spec.paused === true, deleting: p.deleting };
}

/** Cache key of an object within its stream: `<namespace>/<name>` or `<name>`. */
export function objectKeyOf(facts: WatchedFacts): string {
  return facts.kind === 'Node' ? facts.name : `${facts.namespace}/${facts.name}`;
}
