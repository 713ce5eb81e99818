import type { ScalableKind, ScalableResourceSnapshot } from '#shared/domain/autoscaler.ts';

/** Reads and annotates the resources the cluster-autoscaler scales (MachineDeployments, MachineSets, MachinePools). */
export interface ScalableResourceStore {
  /** Returns the resource, or undefined when it does not exist (or its kind is not served). */
  get(kind: ScalableKind, namespace: string, name: string): Promise<ScalableResourceSnapshot | undefined>;
  /**
   * Sets (string) or removes (null) annotations, guarded by `resourceVersion`: throws PatchConflictError when the
   * resource changed since it was read. Returns the resourceVersion after the write.
   */
  patchAnnotations(resource: ScalableResourceSnapshot, annotations: Readonly<Record<string, string | null>>): Promise<string>;
}
