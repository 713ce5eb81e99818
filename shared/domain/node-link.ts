/**
 * How a Node is linked to its Machine before Cluster API has written `status.nodeRef`. Cluster API itself links them
 * by `spec.providerID`: its Machine controller looks up the Node whose `spec.providerID` equals the Machine's, writes
 * that Node (its annotations, labels, taints: in one patch), and only then records `status.nodeRef` on the Machine,
 * when the Machine's status is patched at the end of that reconcile — half a second to seconds later, under load. A
 * joining Node would wait that long for the product's taints, and with it every workload kept off by the startup
 * gate. The product applies the same rule, to live objects: the Machine is read from the management cluster, the Node
 * from the workload cluster, and both must carry the same non-empty `spec.providerID`. Pure.
 */
import type { MachineSnapshot, NodeSnapshot } from './snapshots.ts';

/**
 * True when `node` is `machine`'s Node by Cluster API's rule although the Machine has no `status.nodeRef` yet: the
 * Machine is a plain Machine (a MachinePool's Node follows the pool's `status.nodeRefs`), it names no other Node, and
 * both carry the same non-empty `spec.providerID`.
 * @example isNodeOfMachine({ ...machine, providerID: 'local://m1' }, { ...node, providerID: 'local://m1' }) // true
 */
export function isNodeOfMachine(machine: Pick<MachineSnapshot, 'kind' | 'nodeName' | 'providerID'>, node: Pick<NodeSnapshot, 'name' | 'providerID'>): boolean {
  if (machine.kind === 'MachinePool') return false;
  if (machine.nodeName !== undefined && machine.nodeName !== node.name) return false;
  return machine.providerID !== undefined && machine.providerID !== '' && machine.providerID === node.providerID;
}
