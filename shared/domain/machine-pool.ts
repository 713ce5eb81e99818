/**
 * MachinePools (docs/declaring-taints.md, "MachinePools"): a pool's declaration reaches the Nodes in its
 * `status.nodeRefs`. A Machine of a pool is no declaration source of its own, so the two can never disagree.
 */
/** Label Cluster API sets on a Machine that belongs to a MachinePool (`clusterv1.MachinePoolNameLabel`). */
export const MACHINE_POOL_NAME_LABEL = 'cluster.x-k8s.io/pool-name';

/** The MachinePool a Machine belongs to (its name, in the Machine's namespace), if any. */
export function machinePoolOf(machine: { readonly labels: Readonly<Record<string, string>> }): string | undefined {
  return machine.labels[MACHINE_POOL_NAME_LABEL] || undefined;
}

/** The pool's annotations of `keys`: from `metadata.annotations`, else from the template's, key by key. */
export function poolDeclarations(
  pool: { readonly annotations: Readonly<Record<string, string>>; readonly templateAnnotations: Readonly<Record<string, string>> },
  keys: readonly string[],
): Record<string, string> {
  const values = keys.map((key) => [key, pool.annotations[key] ?? pool.templateAnnotations[key]] as const);
  return Object.fromEntries(values.filter((e): e is readonly [string, string] => e[1] !== undefined));
}

/**
 * The MachinePool as the declaration owner of one of its Nodes: the pool with that Node as its `nodeName`. Returns
 * undefined when the Node is not (or no longer) in the pool's `status.nodeRefs`: such a Node is left alone.
 * @example declarationOwnerOf(pool, pool.nodeNames[0])?.nodeName // pool.nodeNames[0]
 */
export function declarationOwnerOf<P extends { readonly nodeNames: readonly string[] }>(pool: P, nodeName: string): (P & { readonly nodeName: string }) | undefined {
  return pool.nodeNames.includes(nodeName) ? { ...pool, nodeName } : undefined;
}
