/**
 * MachinePools: taints declared on a MachinePool reach the Nodes in its `status.nodeRefs` (the proposal's FR1 for
 * pools, which upstream Cluster API never built: its webhook refuses `spec.template.spec.taints`). Pure rules:
 * - **Where a pool declares.** The same declaration annotations as a Machine's, read from the MachinePool's
 *   `metadata.annotations` (where a Cluster topology's `machinePools[].metadata` lands), else from
 *   `spec.template.metadata.annotations` (where CAPI copies it down to MachinePool Machines), key by key; and
 *   `spec.template.spec.taints` where a Cluster API version stores it. Same validation, same precedence as a Machine's.
 * - **One source per Node.** A Machine that belongs to a MachinePool (label `cluster.x-k8s.io/pool-name`, set by
 *   Cluster API on the Machines some providers create for pool members) is not a declaration source of its own: its
 *   Node follows the pool, so the two can never disagree.
 * - **Members.** A Node in `status.nodeRefs` gets the pool's taints (Always and OnInitialization, the same tracking
 *   annotation as a Machine's Node); a Node that leaves the pool is left alone.
 */
import { DECLARATION_ANNOTATIONS } from './declaration-keys.ts';

/** Label Cluster API sets on a Machine that belongs to a MachinePool (`clusterv1.MachinePoolNameLabel`). */
export const MACHINE_POOL_NAME_LABEL = 'cluster.x-k8s.io/pool-name';

/** The MachinePool a Machine belongs to (its name, in the Machine's namespace), if any. */
export function machinePoolOf(machine: { readonly labels: Readonly<Record<string, string>> }): string | undefined {
  const name = machine.labels[MACHINE_POOL_NAME_LABEL];
  return name === undefined || name === '' ? undefined : name;
}

/** The pool's declaration annotations (or other `keys`): from `metadata.annotations`, else from the template's, key by key. */
export function poolDeclarations(
  pool: { readonly annotations: Readonly<Record<string, string>>; readonly templateAnnotations: Readonly<Record<string, string>> },
  keys: readonly string[] = DECLARATION_ANNOTATIONS,
): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of keys) {
    const value = pool.annotations[key] ?? pool.templateAnnotations[key];
    if (value !== undefined) out[key] = value;
  }
  return out;
}

/**
 * The MachinePool as the declaration owner of one of its Nodes: the pool with that Node as its `nodeName`. Returns
 * undefined when the Node is not (or no longer) in the pool's `status.nodeRefs`: such a Node is left alone.
 * @example declarationOwnerOf(pool, pool.nodeNames[0])?.nodeName // pool.nodeNames[0]
 */
export function declarationOwnerOf<P extends { readonly nodeNames: readonly string[] }>(pool: P, nodeName: string): (P & { readonly nodeName: string }) | undefined {
  return pool.nodeNames.includes(nodeName) ? { ...pool, nodeName } : undefined;
}
