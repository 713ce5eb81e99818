/**
 * The forwarder's index of the not-yet-linked halves of Cluster API's Machine ↔ Node link
 * (`#shared/domain/node-link.ts`): Machines with `spec.providerID` but no `status.nodeRef`, and Nodes with
 * `spec.providerID` but no `cluster.x-k8s.io/machine` annotation, per workload cluster. A joining Node's event then
 * names its Machine (one GET for the reconcile instead of listing the cluster's Machines and MachinePools, and no
 * wait for Cluster API's `nodeRef`), and a Machine that gets its provider ID after its Node appeared names that Node.
 * Only unlinked objects are kept (the facts drop the provider ID once linked), so the index holds the joining few,
 * not the fleet.
 */
import { clusterKey, type ClusterRef } from '#shared/domain/cloud-event.ts';
import type { MachineFacts, NodeFacts } from '#shared/domain/watch-event.ts';

type Ref = { readonly namespace: string; readonly name: string };

export class ProviderIdLinks {
  readonly #machines = new Map<string, Ref>();
  readonly #nodes = new Map<string, string>();

  /** Records a Machine change (its cluster as the forwarder resolved it). */
  observeMachine(previous: MachineFacts | undefined, current: MachineFacts, deleted: boolean, cluster: ClusterRef | undefined): void {
    if (!cluster) return;
    if (previous?.providerID) this.#drop(this.#machines, key(cluster, previous.providerID), (r) => r.namespace === previous.namespace && r.name === previous.name);
    if (!deleted && !current.deleting && current.providerID) this.#machines.set(key(cluster, current.providerID), { namespace: current.namespace, name: current.name });
  }

  /** Records a Node change of a workload cluster. */
  observeNode(previous: NodeFacts | undefined, current: NodeFacts, deleted: boolean, cluster: ClusterRef): void {
    if (previous?.providerID) this.#drop(this.#nodes, key(cluster, previous.providerID), (n) => n === previous.name);
    if (!deleted && current.providerID) this.#nodes.set(key(cluster, current.providerID), current.name);
  }

  /** The unlinked Machine whose provider ID the unlinked Node has. */
  machineFor(node: NodeFacts, cluster: ClusterRef): Ref | undefined {
    return node.providerID ? this.#machines.get(key(cluster, node.providerID)) : undefined;
  }

  /** The unlinked Node whose provider ID the unlinked Machine has. */
  nodeFor(machine: MachineFacts, cluster: ClusterRef): string | undefined {
    return machine.providerID ? this.#nodes.get(key(cluster, machine.providerID)) : undefined;
  }

  /** Forgets a workload cluster's Nodes (its Node stream stopped). */
  forgetCluster(cluster: ClusterRef): void {
    const prefix = `${clusterKey(cluster)}|`;
    for (const k of this.#nodes.keys()) if (k.startsWith(prefix)) this.#nodes.delete(k);
  }

  #drop<T>(map: Map<string, T>, k: string, same: (v: T) => boolean): void {
    const v = map.get(k);
    if (v !== undefined && same(v)) map.delete(k);
  }
}

function key(cluster: ClusterRef, providerID: string): string {
  return `${clusterKey(cluster)}|${providerID}`;
}
