/**
 * The forwarder's index of the not-yet-linked halves of Cluster API's Machine ↔ Node link
 * (`#shared/domain/node-link.ts`): Machines with `spec.providerID` but no `status.nodeRef`, and Nodes with
 * `spec.providerID` but no `cluster.x-k8s.io/machine` annotation, per workload cluster. A joining Node's event then
 * names its Machine (one GET for the reconcile instead of listing the cluster's Machines and MachinePools, and no
 * wait for Cluster API's `nodeRef`), and a Machine that gets its provider ID after its Node appeared names that Node.
 * Only unlinked objects are kept (the facts drop the provider ID once linked), so the index holds the joining few,
 * not the fleet. Between Cluster API's two writes of a link — the Node's `cluster.x-k8s.io/machine` annotation, then
 * the Machine's `status.nodeRef` — the Machine keeps its Node here (`#annotated`), so a change of the Machine in that
 * moment still names its Node.
 */
import { clusterKey, type ClusterRef } from '#shared/contract/cloud-event.ts';
import type { MachineFacts, NodeFacts } from '#shared/model/views.ts';

type Ref = { readonly namespace: string; readonly name: string };

export class ProviderIdLinks {
  readonly #machines = new Map<string, Ref>();
  readonly #nodes = new Map<string, string>();
  /** Machine (`<cluster>|<namespace>/<name>`) → the Node Cluster API annotated for it, until the Machine's nodeRef. */
  readonly #annotated = new Map<string, string>();

  /** Records a Machine change (its cluster as the forwarder resolved it). */
  observeMachine(previous: MachineFacts | undefined, current: MachineFacts, deleted: boolean, cluster: ClusterRef | undefined): void {
    if (!cluster) return;
    if (previous?.providerID) this.#drop(this.#machines, key(cluster, previous.providerID), (r) => r.namespace === previous.namespace && r.name === previous.name);
    if (!deleted && !current.deleting && current.providerID) this.#machines.set(key(cluster, current.providerID), { namespace: current.namespace, name: current.name });
    if (deleted || current.nodeName !== undefined) this.#annotated.delete(key(cluster, `${current.namespace}/${current.name}`));
  }

  /** Records a Node change of a workload cluster. */
  observeNode(previous: NodeFacts | undefined, current: NodeFacts, deleted: boolean, cluster: ClusterRef): void {
    if (previous?.providerID) this.#drop(this.#nodes, key(cluster, previous.providerID), (n) => n === previous.name);
    if (!deleted && current.providerID) this.#nodes.set(key(cluster, current.providerID), current.name);
    // Cluster API linked the Node (the facts drop its provider ID once it carries the Machine annotation).
    if (!deleted && previous?.providerID && !current.providerID && current.machineAnnotation !== undefined && current.clusterNamespaceAnnotation !== undefined) {
      this.#annotated.set(key(cluster, `${current.clusterNamespaceAnnotation}/${current.machineAnnotation}`), current.name);
    }
    if (deleted && current.machineAnnotation !== undefined) {
      this.#drop(this.#annotated, key(cluster, `${current.clusterNamespaceAnnotation ?? ''}/${current.machineAnnotation}`), (n) => n === current.name);
    }
  }

  /** The unlinked Machine whose provider ID the unlinked Node has. */
  machineFor(node: NodeFacts, cluster: ClusterRef): Ref | undefined {
    return node.providerID ? this.#machines.get(key(cluster, node.providerID)) : undefined;
  }

  /** The Node of a Machine without nodeRef: the unlinked Node with its provider ID, or the Node Cluster API annotated for it. */
  nodeFor(machine: MachineFacts, cluster: ClusterRef): string | undefined {
    const byProviderId = machine.providerID ? this.#nodes.get(key(cluster, machine.providerID)) : undefined;
    return byProviderId ?? (machine.nodeName === undefined ? this.#annotated.get(key(cluster, `${machine.namespace}/${machine.name}`)) : undefined);
  }

  /** Forgets a workload cluster's Nodes (its Node stream stopped). */
  forgetCluster(cluster: ClusterRef): void {
    const prefix = `${clusterKey(cluster)}|`;
    for (const k of this.#nodes.keys()) if (k.startsWith(prefix)) this.#nodes.delete(k);
    for (const k of this.#annotated.keys()) if (k.startsWith(prefix)) this.#annotated.delete(k);
  }

  #drop<T>(map: Map<string, T>, k: string, same: (v: T) => boolean): void {
    const v = map.get(k);
    if (v !== undefined && same(v)) map.delete(k);
  }
}

function key(cluster: ClusterRef, providerID: string): string {
  return `${clusterKey(cluster)}|${providerID}`;
}
