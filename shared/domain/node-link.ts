/**
 * True when the Machine's declaration applies to this Node (same workload cluster assumed; the caller checks it), by
 * Cluster API's own rule: `status.nodeRef` names the Node once linked and always wins; before that, the Node whose
 * non-empty `spec.providerID` equals the Machine's, the match Cluster API links by, so the product taints a joining
 * Node as early as Cluster API can (docs/side-by-side.md, joining Nodes).
 */
export function machineOwnsNode(
  machine: { readonly nodeName?: string | undefined; readonly providerID?: string | undefined },
  node: { readonly name: string; readonly providerID?: string | undefined },
): boolean {
  if (machine.nodeName !== undefined && machine.nodeName !== '') return machine.nodeName === node.name;
  return machine.providerID !== undefined && machine.providerID !== '' && machine.providerID === node.providerID;
}
