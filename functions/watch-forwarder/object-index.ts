/**
 * The forwarder's listers and indexers (client-go's names): the last state the streams hold, and the unlinked halves
 * of Cluster API's Machine ↔ Node link (`#shared/domain/node-link.ts`) by provider ID, per workload cluster: the
 * joining few, not the fleet (docs/side-by-side.md). Between Cluster API's two writes of a link (the Node's Machine
 * annotation, then the Machine's `status.nodeRef`) `#annotated` keeps the Machine's Node, so its changes name it.
 */
import { clusterKey, type ClusterRef } from '#shared/contract/cloud-event.ts';
import { nodeStreamKey } from '#shared/contract/streams.ts';
import { clusterNameOf, unlinkedProviderID, type ClusterFacts, type MachineFacts, type MachinePoolFacts, type NodeFacts, type ScalableFacts, type WatchedFacts } from '#shared/model/views.ts';
import { CLUSTER_NAMESPACE_ANNOTATION, MACHINE_ANNOTATION } from '#shared/domain/taint.ts';
import type { ClusterMembers } from '#shared/contract/events.ts';
import type { NodeOwner } from '#shared/policy/drift.ts';
import type { WatchStream } from '#shared/ports/watch-source.ts';

type Ref = { readonly namespace: string; readonly name: string };

interface ManagementStreams {
  readonly machines: WatchStream<MachineFacts>;
  readonly machinePools?: WatchStream<MachinePoolFacts> | undefined;
  readonly scalables: readonly WatchStream<ScalableFacts>[];
}

export class ObjectIndex {
  readonly #machines = new Map<string, Ref>();
  readonly #nodes = new Map<string, string>();
  /** Machine (`<cluster>|<namespace>/<name>`) → the Node Cluster API annotated for it, until the Machine's nodeRef. */
  readonly #annotated = new Map<string, string>();
  #management: ManagementStreams | undefined;
  #clusters: WatchStream<ClusterFacts> | undefined;
  readonly #nodeStreams = new Map<string, WatchStream<NodeFacts>>();

  watchManagement(streams: ManagementStreams): void {
    this.#management = streams;
  }

  /** Reads the Cluster stream of the term that starts (whose `spec.paused` the drift rule honours). */
  watchClusters(stream: WatchStream<ClusterFacts>): void {
    this.#clusters = stream;
  }

  /** Reads the Node stream of a workload cluster while it runs. */
  watchNodes(cluster: ClusterRef, stream: WatchStream<NodeFacts>): void {
    this.#nodeStreams.set(nodeStreamKey(cluster), stream);
  }

  /** Forgets a workload cluster's Node stream (if still `stream`) and its Nodes: the stream stopped. */
  unwatchNodes(cluster: ClusterRef, stream: WatchStream<NodeFacts>): void {
    if (this.#nodeStreams.get(nodeStreamKey(cluster)) === stream) this.#nodeStreams.delete(nodeStreamKey(cluster));
    const prefix = `${clusterKey(cluster)}|`;
    for (const k of this.#nodes.keys()) if (k.startsWith(prefix)) this.#nodes.delete(k);
    for (const k of this.#annotated.keys()) if (k.startsWith(prefix)) this.#annotated.delete(k);
  }

  /** The last state the Machine stream holds of a Machine (undefined when not seen). */
  machine(ref: Ref): MachineFacts | undefined {
    return this.#management?.machines.latest?.(`${ref.namespace}/${ref.name}`);
  }

  /** The last state the Node stream of `cluster` holds of a Node, by name (undefined when no such stream runs). */
  nodesOf(cluster: ClusterRef): (name: string) => NodeFacts | undefined {
    const stream = this.#nodeStreams.get(nodeStreamKey(cluster));
    return (name) => stream?.latest?.(name);
  }

  /** The objects of a Cluster, not being deleted, that name it (`spec.clusterName`, else the label); Machines with a Node. */
  membersOf(facts: ClusterFacts, cluster: ClusterRef): ClusterMembers {
    const ofCluster = (o: MachineFacts | MachinePoolFacts | ScalableFacts): boolean =>
      !o.deleting && o.namespace === facts.namespace && clusterNameOf(o) === facts.name;
    const machines = [...(this.#management?.machines.objects() ?? [])].filter(ofCluster).flatMap((machine) => {
      const nodeName = machine.nodeName ?? this.nodeFor(machine, cluster);
      return nodeName === undefined ? [] : [{ machine, nodeName }];
    });
    const machinePools = [...(this.#management?.machinePools?.objects() ?? [])].filter(ofCluster);
    const scalables = (this.#management?.scalables ?? []).flatMap((s) => [...s.objects()]).filter(ofCluster);
    return { machines, machinePools, scalables };
  }

  /** Whether the Machine and MachinePool streams hold their collections. */
  managementSynced(): boolean {
    // A stream that cannot say (or none: MachinePools not watched) is taken as holding its collection.
    const synced = (stream: WatchStream<WatchedFacts> | undefined): boolean => stream?.hasSynced?.() ?? true;
    return this.#management !== undefined && synced(this.#management.machines) && synced(this.#management.machinePools);
  }

  /**
   * The declaration owner of the Nodes of `cluster`, found as the reconcile function finds it, from the management
   * streams' last state; `unknown` until both hold their collections. One resolver per list: its lookups by Node name
   * are built once, on demand.
   */
  ownersIn(cluster: ClusterRef): (node: NodeFacts) => NodeOwner {
    const m = this.#management;
    if (!m || !this.managementSynced()) return () => ({ kind: 'unknown' });
    const ofCluster = (o: MachineFacts | MachinePoolFacts): boolean => cluster.mode === 'self' || (o.namespace === cluster.namespace && clusterNameOf(o) === cluster.name);
    let pools: Map<string, MachinePoolFacts> | undefined;
    let byNodeName: Map<string, MachineFacts> | undefined;
    const lookUp = (node: NodeFacts): MachinePoolFacts | MachineFacts | undefined => {
      pools ??= new Map([...(m.machinePools?.objects() ?? [])].filter(ofCluster).flatMap((p) => p.nodeNames.map((n) => [n, p] as const)));
      const pool = pools.get(node.name);
      if (pool) return pool;
      const annotated = node.annotations[MACHINE_ANNOTATION];
      const namespace = node.annotations[CLUSTER_NAMESPACE_ANNOTATION] || (cluster.mode === 'capi' ? cluster.namespace : undefined);
      if (annotated !== undefined && namespace !== undefined) return this.machine({ namespace, name: annotated });
      const linked = this.machineFor(node, cluster);
      if (linked) return this.machine(linked);
      byNodeName ??= new Map([...m.machines.objects()].filter((o) => o.nodeName !== undefined && ofCluster(o)).map((o) => [o.nodeName as string, o]));
      return byNodeName.get(node.name);
    };
    return (node) => {
      const owner = lookUp(node);
      if (!owner) return { kind: 'none' };
      const name = clusterNameOf(owner);
      const paused = name === undefined ? undefined : this.#clusters?.latest?.(`${owner.namespace}/${name}`)?.paused;
      return { kind: 'known', owner, ...(paused !== undefined ? { clusterPaused: paused } : {}) };
    };
  }

  /** Records a Machine change (in the cluster the forwarder resolved for it). */
  observeMachine(previous: MachineFacts | undefined, current: MachineFacts, deleted: boolean, cluster: ClusterRef | undefined): void {
    if (!cluster) return;
    if (previous?.providerID) drop(this.#machines, key(cluster, previous.providerID), (r) => r.namespace === previous.namespace && r.name === previous.name);
    if (!deleted && !current.deleting && current.providerID) this.#machines.set(key(cluster, current.providerID), { namespace: current.namespace, name: current.name });
    if (deleted || current.nodeName !== undefined) this.#annotated.delete(key(cluster, `${current.namespace}/${current.name}`));
  }

  /** Records a Node change of a workload cluster. */
  observeNode(previous: NodeFacts | undefined, current: NodeFacts, deleted: boolean, cluster: ClusterRef): void {
    const [before, after] = [previous && unlinkedProviderID(previous), unlinkedProviderID(current)];
    if (previous && before) drop(this.#nodes, key(cluster, before), (n) => n === previous.name);
    if (!deleted && after) this.#nodes.set(key(cluster, after), current.name);
    const machine = current.annotations[MACHINE_ANNOTATION];
    const namespace = current.annotations[CLUSTER_NAMESPACE_ANNOTATION];
    // Cluster API linked the Node: it carries the Machine annotation now, and its provider ID links it no more.
    if (!deleted && before && !after && machine !== undefined && namespace !== undefined) this.#annotated.set(key(cluster, `${namespace}/${machine}`), current.name);
    if (deleted && machine !== undefined) drop(this.#annotated, key(cluster, `${namespace ?? ''}/${machine}`), (n) => n === current.name);
  }

  /** The unlinked Machine whose provider ID the unlinked Node has. */
  machineFor(node: NodeFacts, cluster: ClusterRef): Ref | undefined {
    const providerID = unlinkedProviderID(node);
    return providerID ? this.#machines.get(key(cluster, providerID)) : undefined;
  }

  /** The Node of a Machine without nodeRef: the unlinked Node with its provider ID, or the Node Cluster API annotated for it. */
  nodeFor(machine: MachineFacts, cluster: ClusterRef): string | undefined {
    const byProviderId = machine.providerID ? this.#nodes.get(key(cluster, machine.providerID)) : undefined;
    return byProviderId ?? (machine.nodeName === undefined ? this.#annotated.get(key(cluster, `${machine.namespace}/${machine.name}`)) : undefined);
  }
}

function drop<T>(map: Map<string, T>, k: string, same: (v: T) => boolean): void {
  const v = map.get(k);
  if (v !== undefined && same(v)) map.delete(k);
}

function key(cluster: ClusterRef, providerID: string): string {
  return `${clusterKey(cluster)}|${providerID}`;
}
