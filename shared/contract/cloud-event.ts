/**
 * The CloudEvents contract between the watch-forwarder and the reconcile function: event types,
 * their data, the JSON Schemas of that data, and the pure mapping rules (ids, groups, subjects).
 * The SDK work (building and parsing envelopes) lives in shared/adapters/cloudevents.
 */

/** Reverse-DNS prefix of every event type. */
const EVENT_TYPE_PREFIX = 'io.github.capi-taint-propagator';

/** What changed, as the watch saw it. `resynced` is an object re-announced by a relist or periodic resync. */
export type ChangeKind = 'added' | 'modified' | 'deleted' | 'resynced';

/** Kinds of object an event can name. */
export type ObjectKind = TaintEventData['kind'];
const OBJECT_KINDS: readonly ObjectKind[] = ['Machine', 'Node', 'MachinePool', 'ScalableResource'];

/** Every event type the reconcile function accepts, e.g. `io.github.capi-taint-propagator.machine.modified.v1`. */
export type EventType = `${typeof EVENT_TYPE_PREFIX}.${Lowercase<ObjectKind>}.${ChangeKind}.v1`;

/** Builds the event type for an object kind and change. */
export function eventTypeFor(kind: ObjectKind, change: ChangeKind): EventType {
  return `${EVENT_TYPE_PREFIX}.${kind.toLowerCase() as Lowercase<ObjectKind>}.${change}.v1`;
}

/** Splits an accepted event type into kind and change; undefined for anything we do not accept. */
export function parseEventType(type: string): { kind: ObjectKind; change: ChangeKind } | undefined {
  const m = /^io\.github\.capi-taint-propagator\.(\w+)\.(added|modified|deleted|resynced)\.v1$/.exec(type);
  const kind = OBJECT_KINDS.find((k) => k.toLowerCase() === m?.[1]);
  return m && kind ? { kind, change: m[2] as ChangeKind } : undefined;
}

/** Which cluster an event is about: `self` (single-cluster mode), or a workload Cluster of the management cluster. */
export type ClusterRef = { readonly mode: 'self' } | { readonly mode: 'capi'; readonly namespace: string; readonly name: string };

/** A namespaced object at one version, as an event names it. */
export interface ObjectVersion {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
  readonly resourceVersion: string;
}

/** What the data of every event carries. */
interface EventDataOf<K extends string> {
  readonly kind: K;
  readonly cluster: ClusterRef;
  /** Time the forwarder observed the change (RFC 3339); for event-to-write latency. */
  readonly observedAt: string;
}

/** Data of a Machine event: the Machine (in the management cluster) and the Node it points to, if any. */
export interface MachineEventData extends EventDataOf<'Machine'> {
  readonly machine: ObjectVersion;
  /** `status.nodeRef.name`, else the Node the forwarder linked by provider ID (the reconcile checks the link). */
  readonly nodeName?: string;
  /** Hint: the declaration was invalid in the previous version the forwarder saw (a Normal Event says it took). */
  readonly declarationRecovered?: true;
}

/** Data of a Node event: the Node (in a workload cluster) and the Machine its CAPI annotations name. */
export interface NodeEventData extends EventDataOf<'Node'> {
  readonly node: { readonly name: string; readonly uid: string; readonly resourceVersion: string };
  /**
   * From the Node's `cluster.x-k8s.io/machine` and `cluster.x-k8s.io/cluster-namespace` annotations; before Cluster API
   * writes them, the Machine the forwarder linked by provider ID (the reconcile checks it).
   */
  readonly machine?: { readonly namespace: string; readonly name: string };
}

/** Data of a MachinePool event: one per affected Node, so that each Node is reconciled in its own FIFO group. */
export interface MachinePoolEventData extends EventDataOf<'MachinePool'> {
  readonly machinePool: ObjectVersion;
  /** The Node of the pool this event is about (one of `status.nodeRefs`). */
  readonly nodeName: string;
  /** Hint: the declaration was invalid in the previous version the forwarder saw. */
  readonly declarationRecovered?: true;
}

/**
 * Data of a ScalableResource event: a MachineDeployment, MachineSet or MachinePool whose cluster-autoscaler taints
 * annotation may need a write (docs/autoscaler.md). The reconcile function reads the resource again.
 */
export interface ScalableResourceEventData extends EventDataOf<'ScalableResource'> {
  readonly resource: ObjectVersion & { readonly kind: 'MachineDeployment' | 'MachineSet' | 'MachinePool' };
}

/** The data of every event the reconcile function accepts. */
export type TaintEventData = MachineEventData | NodeEventData | MachinePoolEventData | ScalableResourceEventData;

/** The data of the events that name a Node to reconcile (every kind but ScalableResource). */
export type NodeTaintEventData = MachineEventData | NodeEventData | MachinePoolEventData;

/** A validated event as the reconcile function sees it. */
export interface TaintEvent {
  readonly id: string;
  readonly source: string;
  readonly type: EventType;
  readonly subject: string;
  readonly time: string;
  readonly data: TaintEventData;
}

/** An event that names a Node to reconcile. */
export interface NodeTaintEvent extends TaintEvent {
  readonly data: NodeTaintEventData;
}

/** True for an event that names a Node to reconcile (not a ScalableResource event). */
export function isNodeTaintEvent(event: TaintEvent): event is NodeTaintEvent {
  return event.data.kind !== 'ScalableResource';
}

/** `source` attribute for a cluster: `/clusters/self` or `/clusters/<namespace>/<name>`. */
export function sourceFor(cluster: ClusterRef): string {
  return `/clusters/${clusterKey(cluster)}`;
}

/** Stable text key of a cluster, used in group ids and client caches: `self` or `<namespace>/<name>`. */
export function clusterKey(cluster: ClusterRef): string {
  return cluster.mode === 'self' ? 'self' : `${cluster.namespace}/${cluster.name}`;
}

/**
 * Deterministic event id: the same object version seen twice (relist, second forwarder) gets the same id, so SQS
 * deduplication can drop it; a later change has a new resourceVersion. Returns `<uid>:<rv>:<change>[:<node>]`.
 */
export function eventIdFor(uid: string, resourceVersion: string, change: ChangeKind, node?: string): string {
  // A MachinePool version becomes one event per Node: the Node is part of the id, or deduplication would keep one.
  return node === undefined ? `${uid}:${resourceVersion}:${change}` : `${uid}:${resourceVersion}:${change}:${node}`;
}

/** FIFO message group, so that one Node is never reconciled twice at once: the Node's, else the Machine's. */
export function messageGroupIdFor(data: TaintEventData): string {
  const key = clusterKey(data.cluster);
  if (data.kind === 'ScalableResource') return `${key}/${data.resource.kind.toLowerCase()}/${data.resource.namespace}/${data.resource.name}`;
  if (data.kind === 'Machine' && !data.nodeName) return `${key}/machine/${data.machine.namespace}/${data.machine.name}`;
  return `${key}/node/${data.kind === 'Node' ? data.node.name : data.nodeName}`;
}

/** `subject` attribute: `nodes/<name>`, else the named object's `<kind, lower case, plural>/<namespace>/<name>`. */
export function subjectFor(data: TaintEventData): string {
  if (data.kind === 'ScalableResource') return `${data.resource.kind.toLowerCase()}s/${data.resource.namespace}/${data.resource.name}`;
  if (data.kind === 'MachinePool') return `machinepools/${data.machinePool.namespace}/${data.machinePool.name}`;
  return data.kind === 'Machine' ? `machines/${data.machine.namespace}/${data.machine.name}` : `nodes/${data.node.name}`;
}

const dns = { type: 'string', minLength: 1, maxLength: 253 } as const;
const nonEmpty = { type: 'string', minLength: 1 } as const;
const dateTime = { type: 'string', format: 'date-time' } as const;
const scalableKind = { enum: ['MachineDeployment', 'MachineSet', 'MachinePool'] } as const;
const clusterRefSchema = {
  oneOf: [
    { type: 'object', additionalProperties: false, required: ['mode'], properties: { mode: { const: 'self' } } },
    {
      type: 'object',
      additionalProperties: false,
      required: ['mode', 'namespace', 'name'],
      properties: { mode: { const: 'capi' }, namespace: dns, name: dns },
    },
  ],
} as const;

const objectVersionSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['namespace', 'name', 'uid', 'resourceVersion'],
  properties: { namespace: dns, name: dns, uid: nonEmpty, resourceVersion: nonEmpty },
} as const;

/**
 * Fields that forwarders before names-only events sent (the Node's state, a MachineSet template hint): accepted and
 * ignored, so that messages still queued from such a forwarder during an upgrade are reconciled, not dead-lettered.
 */
const ignoredLegacyField = { type: 'object', description: 'sent by earlier forwarders; ignored' } as const;

/** The JSON Schema (draft-07) of one kind's event data: `kind` and `cluster`, the kind's own fields, `observedAt`. */
function eventDataSchema<K extends ObjectKind, R extends string, P>(kind: K, required: R[], properties: P) {
  return {
    $schema: 'http://json-schema.org/draft-07/schema#',
    $id: `${EVENT_TYPE_PREFIX}/schemas/${kind.toLowerCase()}-event-data.v1.json`,
    title: `${kind} event data (v1)`,
    type: 'object',
    additionalProperties: false,
    required: ['kind', 'cluster', ...required, 'observedAt'],
    properties: { kind: { const: kind }, cluster: clusterRefSchema, ...properties, observedAt: dateTime },
  } as const;
}

/** JSON Schema (draft-07) of `MachineEventData`; `events/schemas/` holds the same schema as a file. */
export const machineEventDataSchema = eventDataSchema('Machine', ['machine'], {
  machine: objectVersionSchema,
  nodeName: dns,
  declarationRecovered: { const: true },
  template: ignoredLegacyField,
  nodeState: ignoredLegacyField,
});

/** JSON Schema (draft-07) of `NodeEventData`. */
export const nodeEventDataSchema = eventDataSchema('Node', ['node'], {
  node: {
    ...objectVersionSchema,
    required: ['name', 'uid', 'resourceVersion'],
    properties: { name: dns, uid: nonEmpty, resourceVersion: nonEmpty },
  },
  machine: { ...objectVersionSchema, required: ['namespace', 'name'], properties: { namespace: dns, name: dns } },
  template: ignoredLegacyField,
  nodeState: ignoredLegacyField,
});

/** JSON Schema (draft-07) of `MachinePoolEventData`. */
export const machinePoolEventDataSchema = eventDataSchema('MachinePool', ['machinePool', 'nodeName'], {
  machinePool: objectVersionSchema,
  nodeName: dns,
  declarationRecovered: { const: true },
  nodeState: ignoredLegacyField,
});

/** JSON Schema (draft-07) of `ScalableResourceEventData`. */
export const scalableResourceEventDataSchema = eventDataSchema('ScalableResource', ['resource'], {
  resource: {
    ...objectVersionSchema,
    required: ['kind', 'namespace', 'name', 'uid', 'resourceVersion'],
    properties: { kind: scalableKind, ...objectVersionSchema.properties },
  },
});
