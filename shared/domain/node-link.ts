/**
 * True when the Machine's declaration applies to this Node (same workload cluster assumed; the caller checks it), by
 * Cluster API's link: `status.nodeRef`, else the same non-empty `spec.providerID` (docs/side-by-side.md, joining Node).
 */
export function machineOwnsNode(
  machine: { readonly nodeName?: string | undefined; readonly providerID?: string | undefined },
  node: { readonly name: string; readonly providerID?: string | undefined },
): boolean {
  if (machine.nodeName !== undefined && machine.nodeName !== '') return machine.nodeName === node.name;
  return machine.providerID !== undefined && machine.providerID !== '' && machine.providerID === node.providerID;
}
