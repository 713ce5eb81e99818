/**
 * True when the Machine's declaration applies to this Node (same workload cluster assumed; the caller checks it), by
 * Cluster API's own rule, in the order it applies it:
 * - `status.nodeRef` names the Node once Cluster API has linked them; it always wins;
 * - before that, the Node whose `spec.providerID` equals the Machine's `spec.providerID` (Cluster API copies it from
 *   the infrastructure Machine once that is provisioned, and links a Node by exactly this match). Acting on the match
 *   lets the product taint a joining Node in the same moment Cluster API can, instead of after Cluster API's
 *   end-of-reconcile `nodeRef` write (docs/side-by-side.md, joining Nodes).
 * The match trusts what upstream trusts: a provider ID the workload cluster reports for its Node, compared with the one
 * the management cluster's infrastructure provider recorded for the Machine, within one workload cluster.
 * An empty provider ID never matches.
 */
export function machineOwnsNode(
  machine: { readonly nodeName?: string | undefined; readonly providerID?: string | undefined },
  node: { readonly name: string; readonly providerID?: string | undefined },
): boolean {
  if (machine.nodeName !== undefined && machine.nodeName !== '') return machine.nodeName === node.name;
  return machine.providerID !== undefined && machine.providerID !== '' && machine.providerID === node.providerID;
}
