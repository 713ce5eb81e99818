import type { ScalableKind } from '#shared/domain/autoscaler.ts';
import type { ScalableResourceFacts } from '#shared/model/views.ts';

/** Reads and annotates the resources the cluster-autoscaler scales (MachineDeployments, MachineSets, MachinePools). */
export interface ScalableResourceStore {
  /** Returns the resource, or undefined when it does not exist (or its kind is not served). */
  get(kind: ScalableKind, namespace: string, name: string): Promise<ScalableResourceFacts | undefined>;
  /** Sets (string) or removes (null) annotations under `resourceVersion` (PatchConflictError); returns the new one. */
  patchAnnotations(resource: ScalableResourceFacts, annotations: Readonly<Record<string, string | null>>): Promise<string>;
}
