/**
 * The CloudEvents the forwarder sends for observed changes, built from the objects' views. Pure: time arrives as a
 * parameter; every id is deterministic.
 */
import { clusterNameOf, type ClusterFacts, type MachineFacts, type MachinePoolFacts, type NodeFacts, type ScalableFacts } from '#shared/model/views.ts';
import { CLUSTER_NAMESPACE_ANNOTATION, MACHINE_ANNOTATION } from '#shared/domain/taint.ts';
import {
  eventIdFor,
  eventTypeFor,
  sourceFor,
  subjectFor,
  type ChangeKind,
  type ClusterRef,
  type MachineEventData,
  type MachinePoolEventData,
  type ObjectVersion,
  type NodeEventData,
  type ScalableResourceEventData,
  type TaintEvent,
  type TaintEventData,
} from './cloud-event.ts';

/** The cluster a Cluster API object belongs to (`clusterNameOf`); undefined when a capi one names no cluster. */
export function clusterOfMachine(machine: MachineFacts | MachinePoolFacts | ScalableFacts, mode: 'capi' | 'self'): ClusterRef | undefined {
  if (mode === 'self') return { mode: 'self' };
  const name = clusterNameOf(machine);
  return name ? { mode: 'capi', namespace: machine.namespace, name } : undefined;
}

/** The envelope of one event: `time` is the observation time; the id is deterministic (`eventIdFor`). */
function envelope(id: string, change: ChangeKind, data: TaintEventData): TaintEvent {
  const type = eventTypeFor(data.kind, change);
  return { id, source: sourceFor(data.cluster), type, subject: subjectFor(data), time: data.observedAt, data };
}

function refOf(o: ObjectVersion): ObjectVersion {
  return { namespace: o.namespace, name: o.name, uid: o.uid, resourceVersion: o.resourceVersion };
}

/** The CloudEvent that asks for a reconcile of a scalable resource's autoscaler annotation. */
export function toScalableResourceEvent(facts: ScalableFacts | MachinePoolFacts, change: ChangeKind, cluster: ClusterRef, observedAt: Date): TaintEvent {
  const resource = { kind: facts.kind, ...refOf(facts) };
  const data: ScalableResourceEventData = { kind: 'ScalableResource', cluster, resource, observedAt: observedAt.toISOString() };
  return envelope(eventIdFor(facts.uid, facts.resourceVersion, change, 'autoscaler'), change, data);
}

/** The event data for an object: names only (the reconcile function reads the Machine and the Node itself). */
function toEventData(facts: MachineFacts | NodeFacts, cluster: ClusterRef, observedAt: string, hints: EventHints): MachineEventData | NodeEventData {
  if (facts.kind === 'Machine') {
    const nodeName = facts.nodeName ?? hints.providerIdNode;
    return {
      kind: 'Machine',
      cluster,
      machine: refOf(facts),
      ...(nodeName ? { nodeName } : {}),
      ...(hints.declarationRecovered ? { declarationRecovered: true as const } : {}),
      observedAt,
    };
  }
  // The Machine annotation's namespace defaults to the cluster's.
  const machineNamespace = facts.annotations[CLUSTER_NAMESPACE_ANNOTATION] || (cluster.mode === 'capi' ? cluster.namespace : undefined);
  const named = facts.annotations[MACHINE_ANNOTATION];
  const machine = named && machineNamespace ? { namespace: machineNamespace, name: named } : hints.providerIdMachine;
  return {
    kind: 'Node',
    cluster,
    node: { name: facts.name, uid: facts.uid, resourceVersion: facts.resourceVersion },
    ...(machine ? { machine } : {}),
    observedAt,
  };
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

/** The CloudEvent for one observed change of a Machine or a Node. */
export function toTaintEvent(facts: MachineFacts | NodeFacts, change: ChangeKind, cluster: ClusterRef, observedAt: Date, hints: EventHints = {}): TaintEvent {
  const data = toEventData(facts, cluster, observedAt.toISOString(), hints);
  return envelope(eventIdFor(facts.uid, facts.resourceVersion, change), change, data);
}

/**
 * The CloudEvents for one observed MachinePool change: one per Node in `nodes` (see `poolNodesToAnnounce`), each in
 * its Node's FIFO group, with the Node in the id so that deduplication keeps every one.
 */
export function toMachinePoolEvents(facts: MachinePoolFacts, nodes: readonly string[], change: ChangeKind, cluster: ClusterRef, observedAt: Date, hints: EventHints = {}): TaintEvent[] {
  const at = observedAt.toISOString();
  return nodes.map((nodeName) => {
    const data: MachinePoolEventData = {
      kind: 'MachinePool',
      cluster,
      machinePool: refOf(facts),
      nodeName,
      ...(hints.declarationRecovered ? { declarationRecovered: true as const } : {}),
      observedAt: at,
    };
    return envelope(eventIdFor(facts.uid, facts.resourceVersion, change, nodeName), change, data);
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
 * The CloudEvents for a Cluster whose `spec.paused` changed, either way (functions/watch-forwarder/README.md#pause):
 * one per Node of its Machines and MachinePools, one ScalableResource event per scalable resource. Each id is the
 * Cluster version's followed by the object's own, so a later pause or unpause is never taken for a duplicate.
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
