/**
 * What the product keeps of a watched Cluster API object or Node: only the facts that matter to a Node's taints (never
 * the whole object), read defensively from plain Kubernetes JSON. Pure: no client library, no clock.
 */
import { AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_MIN_SIZE_ANNOTATION, AUTOSCALER_OWNED_ANNOTATION, AUTOSCALER_TAINTS_ANNOTATION } from '#shared/domain/autoscaler.ts';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';
import { poolDeclarations } from '#shared/domain/machine-pool.ts';
import { pausedReason } from '#shared/domain/pause.ts';
import {
  CLUSTER_NAME_ANNOTATION,
  CLUSTER_NAME_LABEL,
  CLUSTER_NAMESPACE_ANNOTATION,
  CONTROL_PLANE_LABEL,
  MACHINE_ANNOTATION,
  OWN_TRACKING_ANNOTATION,
  TRACKING_ANNOTATION,
} from '#shared/domain/taint.ts';
import { isObject, obj, objectParts, pick, str, stringMap, type ObjectParts } from './json.ts';

/** What every view carries of `metadata`. */
interface ObjectIdentity {
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
}

/** What every Cluster API object's view carries. */
interface CapiObjectFacts extends ObjectIdentity {
  readonly namespace: string;
  /** `spec.clusterName`. */
  readonly clusterName?: string;
  /** The `cluster.x-k8s.io/cluster-name` label. */
  readonly clusterNameLabel?: string;
  /** The object carries `cluster.x-k8s.io/paused` (it and its Nodes are left alone; `pause.ts`). */
  readonly paused: boolean;
  readonly deleting: boolean;
}

/** The facts of a Cluster API Machine that can change what its Node should carry. */
export interface MachineFacts extends CapiObjectFacts {
  readonly kind: 'Machine';
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
  readonly controlPlaneLabel?: string;
}

/** The facts of a Node that the reconcile function reads. */
export interface NodeFacts extends ObjectIdentity {
  readonly kind: 'Node';
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
export interface ClusterFacts extends ObjectIdentity {
  readonly kind: 'Cluster';
  readonly namespace: string;
  /** `spec.paused` is true: every object of the Cluster is left alone (`pause.ts`). */
  readonly paused: boolean;
  readonly deleting: boolean;
}

/** The facts of a Cluster API MachinePool that can change what its Nodes should carry (see `machine-pool.ts`). */
export interface MachinePoolFacts extends CapiObjectFacts {
  readonly kind: 'MachinePool';
  /** `spec.template.spec.taints` as stored. */
  readonly specTaints: unknown;
  /** The pool's declaration annotations (metadata, else template metadata), by key. */
  readonly declarations: Readonly<Record<string, string>>;
  /** `status.nodeRefs` names, sorted. */
  readonly nodeNames: readonly string[];
  /** The cluster-autoscaler annotations that are set (size, taints, the product's record), by key (docs/autoscaler.md). */
  readonly autoscaler?: Readonly<Record<string, string>>;
}

/**
 * The facts of a MachineDeployment or MachineSet that decide its cluster-autoscaler taints annotation
 * (docs/autoscaler.md): what a new Machine of it declares, and the autoscaler annotations.
 */
export interface ScalableFacts extends CapiObjectFacts {
  readonly kind: 'MachineDeployment' | 'MachineSet';
  /** `spec.template.spec.taints` as stored. */
  readonly specTaints: unknown;
  /** The declaration annotations of `spec.template.metadata.annotations`, by key. */
  readonly declarations: Readonly<Record<string, string>>;
  /** `spec.template.metadata.labels[cluster.x-k8s.io/control-plane]`, when set. */
  readonly controlPlaneLabel?: string;
  readonly autoscaler: Readonly<Record<string, string>>;
  readonly ownedByMachineDeployment: boolean;
}

export type WatchedFacts = MachineFacts | NodeFacts | ClusterFacts | MachinePoolFacts | ScalableFacts;

/** The object's parts; undefined when it lacks name, uid or resourceVersion (a malformed event). */
function parse(o: unknown): ObjectParts | undefined {
  const p = objectParts(o);
  return p.name && p.uid && p.resourceVersion ? p : undefined;
}

/** The facts every Cluster API object shares; undefined when malformed or not namespaced. */
function capiObject(o: unknown): (CapiObjectFacts & { parsed: ObjectParts }) | undefined {
  const p = parse(o);
  if (!p?.namespace) return undefined;
  const clusterName = str(p.spec.clusterName);
  const clusterNameLabel = p.labels[CLUSTER_NAME_LABEL];
  return {
    namespace: p.namespace,
    name: p.name,
    uid: p.uid,
    resourceVersion: p.resourceVersion,
    ...(clusterName ? { clusterName } : {}),
    ...(clusterNameLabel !== undefined ? { clusterNameLabel } : {}),
    paused: pausedReason(p, undefined) !== undefined,
    deleting: p.deleting,
    parsed: p,
  };
}

/** Reads a Machine (cluster.x-k8s.io/v1beta2 JSON); undefined when malformed. */
export function toMachineFacts(o: unknown): MachineFacts | undefined {
  const c = capiObject(o);
  if (!c) return undefined;
  const { parsed: p, ...common } = c;
  const nodeName = str(obj(p.status.nodeRef).name);
  const providerID = nodeName ? undefined : str(p.spec.providerID);
  const controlPlaneLabel = p.labels[CONTROL_PLANE_LABEL];
  return {
    kind: 'Machine',
    ...common,
    specTaints: p.spec.taints ?? null,
    declarations: pick(p.annotations, DECLARATION_ANNOTATIONS),
    ...(nodeName ? { nodeName } : {}),
    ...(providerID ? { providerID } : {}),
    ...(controlPlaneLabel !== undefined ? { controlPlaneLabel } : {}),
  };
}

const AUTOSCALER_KEYS = [AUTOSCALER_MIN_SIZE_ANNOTATION, AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_TAINTS_ANNOTATION, AUTOSCALER_OWNED_ANNOTATION];

/** Reads a MachinePool (cluster.x-k8s.io JSON, any served version); undefined when malformed. */
export function toMachinePoolFacts(o: unknown): MachinePoolFacts | undefined {
  const c = capiObject(o);
  if (!c) return undefined;
  const { parsed: p, ...common } = c;
  const template = obj(p.spec.template);
  const nodeRefs = Array.isArray(p.status.nodeRefs) ? p.status.nodeRefs : [];
  const nodeNames = [...new Set(nodeRefs.map((r) => str(obj(r).name)).filter((n): n is string => n !== undefined))].sort();
  const autoscaler = pick(p.annotations, AUTOSCALER_KEYS);
  return {
    kind: 'MachinePool',
    ...common,
    specTaints: obj(template.spec).taints ?? null,
    declarations: poolDeclarations({ annotations: p.annotations, templateAnnotations: stringMap(obj(template.metadata).annotations) }),
    nodeNames,
    // Nothing at all when no autoscaler annotation is set (a pool's facts stay as they were).
    ...(Object.keys(autoscaler).length > 0 ? { autoscaler } : {}),
  };
}

/** Reads a MachineDeployment or MachineSet (cluster.x-k8s.io JSON, any served version); undefined when malformed. */
export function toScalableFacts(kind: ScalableFacts['kind'], o: unknown): ScalableFacts | undefined {
  const c = capiObject(o);
  if (!c) return undefined;
  const { parsed: p, ...common } = c;
  const template = obj(p.spec.template);
  const templateMeta = obj(template.metadata);
  const controlPlaneLabel = stringMap(templateMeta.labels)[CONTROL_PLANE_LABEL];
  const owners: unknown[] = Array.isArray(p.metadata.ownerReferences) ? p.metadata.ownerReferences : [];
  return {
    kind,
    ...common,
    specTaints: obj(template.spec).taints ?? null,
    declarations: pick(stringMap(templateMeta.annotations), DECLARATION_ANNOTATIONS),
    ...(controlPlaneLabel !== undefined ? { controlPlaneLabel } : {}),
    autoscaler: pick(p.annotations, AUTOSCALER_KEYS),
    ownedByMachineDeployment: owners.some((r) => obj(r).kind === 'MachineDeployment'),
  };
}

/** Reads a Node (core/v1 JSON); undefined when name, uid or resourceVersion is missing. */
export function toNodeFacts(o: unknown): NodeFacts | undefined {
  const p = parse(o);
  if (!p) return undefined;
  const a = p.annotations;
  const providerID = a[MACHINE_ANNOTATION] === undefined ? str(p.spec.providerID) : undefined;
  const optional = (field: string, key: string) => (a[key] !== undefined ? { [field]: a[key] } : {});
  return {
    kind: 'Node',
    name: p.name,
    uid: p.uid,
    resourceVersion: p.resourceVersion,
    taints: p.spec.taints ?? null,
    ...optional('trackingAnnotation', TRACKING_ANNOTATION),
    ...optional('ownTrackingAnnotation', OWN_TRACKING_ANNOTATION),
    ...optional('machineAnnotation', MACHINE_ANNOTATION),
    ...(providerID ? { providerID } : {}),
    ...optional('clusterNameAnnotation', CLUSTER_NAME_ANNOTATION),
    ...optional('clusterNamespaceAnnotation', CLUSTER_NAMESPACE_ANNOTATION),
    writers: writersOf(p.metadata.managedFields),
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
    if (obj(entry.fieldsV1['f:spec'])['f:taints'] !== undefined) taints.add(entry.manager);
    if (obj(obj(entry.fieldsV1['f:metadata'])['f:annotations'])[`f:${OWN_TRACKING_ANNOTATION}`] !== undefined) annotation.add(entry.manager);
  }
  const only = (set: Set<string>) => (set.size === 1 ? [...set][0] : undefined);
  const t = only(taints);
  const a = only(annotation);
  return { ...(t ? { taints: t } : {}), ...(a ? { ownTrackingAnnotation: a } : {}) };
}

/** Reads a CAPI Cluster (v1beta1 or v1beta2 JSON); undefined when malformed. */
export function toClusterFacts(o: unknown): ClusterFacts | undefined {
  const p = parse(o);
  if (!p?.namespace) return undefined;
  return { kind: 'Cluster', namespace: p.namespace, name: p.name, uid: p.uid, resourceVersion: p.resourceVersion, paused: p.spec.paused === true, deleting: p.deleting };
}

/** Cache key of an object within its stream: `<namespace>/<name>` or `<name>`. */
export function objectKeyOf(facts: WatchedFacts): string {
  return facts.kind === 'Node' ? facts.name : `${facts.namespace}/${facts.name}`;
}
