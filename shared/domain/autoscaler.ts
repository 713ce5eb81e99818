/**
 * Scale from zero (docs/autoscaler.md): the cluster-autoscaler builds a template Node from `spec.template.spec.taints`
 * and its taints annotation, never from the product's annotations; these rules decide what the product writes there.
 */
import { declaredTaintsOf, type DeclarationOptions, type EffectiveDeclaration } from './declarations.ts';
import { toNodeTaint } from './propagation.ts';
import { formatTaint, Propagation, taintId, type Taint } from './taint.ts';

/** The autoscaler's scale-from-zero taints annotation (cluster-autoscaler `clusterapi_utils.go`, `taintsKey`). */
export const AUTOSCALER_TAINTS_ANNOTATION = 'capacity.cluster-autoscaler.kubernetes.io/taints';
/** The autoscaler's node group size annotations (default `CAPI_GROUP`); a resource with the max one is a node group. */
export const AUTOSCALER_MIN_SIZE_ANNOTATION = 'cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size';
export const AUTOSCALER_MAX_SIZE_ANNOTATION = 'cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size';
/** The value the product last wrote into the taints annotation: what makes that value the product's. */
export const AUTOSCALER_OWNED_ANNOTATION = 'taints.capi-taint-propagator.dev/autoscaler-taints';

/**
 * Key prefixes the autoscaler drops from every template Node (`utils/taints/taints.go`, `SanitizeTaints`, 1.34.3 to
 * 1.36.1); its flags (`--startup-taint-prefix`, `--startup-taint`, ...) add more the product cannot see.
 */
export const AUTOSCALER_DROPPED_TAINT_PREFIXES = ['ignore-taint.cluster-autoscaler.kubernetes.io/', 'startup-taint.cluster-autoscaler.kubernetes.io/', 'status-taint.cluster-autoscaler.kubernetes.io/'] as const;
/** Keys it drops too (`NodeConditionTaints`; the rest of that list has prefixes declarations may not use). */
const AUTOSCALER_DROPPED_TAINT_KEYS: ReadonlySet<string> = new Set(['cloud.google.com/impending-node-termination', 'NodeWithImpairedVolumes']);

/**
 * True when the autoscaler (without flags) drops a taint of this key from the template Node of a node group.
 * @example isDroppedByAutoscaler('startup-taint.cluster-autoscaler.kubernetes.io/driver') // true
 */
export function isDroppedByAutoscaler(key: string): boolean {
  return AUTOSCALER_DROPPED_TAINT_PREFIXES.some((p) => key.startsWith(p)) || AUTOSCALER_DROPPED_TAINT_KEYS.has(key);
}

/** The resources the autoscaler scales. */
export type ScalableKind = 'MachineDeployment' | 'MachineSet' | 'MachinePool';
export const SCALABLE_KINDS: readonly ScalableKind[] = ['MachineDeployment', 'MachineSet', 'MachinePool'];

/** What these rules read of a MachineDeployment, MachineSet or MachinePool: fields of its view (`views.ts`). */
export interface ScalableResource {
  readonly kind: ScalableKind;
  readonly annotations: Readonly<Record<string, string>>;
  readonly specTaints: unknown;
  readonly deleting: boolean;
  readonly templateAnnotations?: Readonly<Record<string, string>>;
  readonly templateLabels?: Readonly<Record<string, string>>;
  readonly ownedByMachineDeployment?: boolean;
}

/** Only `out-of-sync` plans a write; `foreign`: a value the product did not write; `not-needed`: no taint to write. */
export type AutoscalerState =
  | 'not-opted-in'
  | 'not-needed'
  | 'in-sync'
  | 'out-of-sync'
  | 'foreign'
  | 'invalid'
  | 'deleting';

export interface AutoscalerPlan {
  readonly state: AutoscalerState;
  /** The value the product wants in the annotation (undefined: none). */
  readonly desired?: string;
  readonly current?: string;
  /** The annotations to set (string) or remove (null); present exactly when the state is `out-of-sync`. */
  readonly patch?: Readonly<Record<string, string | null>>;
  /** The taints a new Node of the resource gets (valid declarations only). */
  readonly nodeTaints?: readonly Taint[];
  /** countedStartupTaints of a node group with a valid declaration; present only when non-empty. */
  readonly countedStartupTaints?: readonly Taint[];
}

/** Options: the startup gate, refused as a declaration exactly as for a Machine. */
export type AutoscalerOptions = DeclarationOptions;

/**
 * True when the resource is a node group: it has the max size annotation (`parseScalingBounds` skips a group whose max
 * is 0 or missing; the values are the autoscaler's business) and is not a MachineSet of a MachineDeployment.
 */
export function isNodeGroup(r: Pick<ScalableResource, 'kind' | 'annotations' | 'ownedByMachineDeployment'>): boolean {
  if (r.kind === 'MachineSet' && r.ownedByMachineDeployment) return false;
  return r.annotations[AUTOSCALER_MAX_SIZE_ANNOTATION] !== undefined;
}

/**
 * The annotation value: every declared taint, `spec.taints` included (autoscalers before 1.36.0 read only the
 * annotation), sorted bytewise by id (a reordered declaration costs no write), comma-joined; undefined when none.
 * @example autoscalerTaintsValue({ taints: [gpu], sourceOf: { 'nvidia.com/gpu:NoSchedule': 'taints.capi-taint-propagator.dev/machine' }, overrides: [] }) // 'nvidia.com/gpu=a100:NoSchedule'
 */
export function autoscalerTaintsValue(declaration: EffectiveDeclaration): string | undefined {
  const sorted = [...declaration.taints].sort((a, b) => (taintId(a) < taintId(b) ? -1 : 1)); // ids are unique
  return sorted.length === 0 ? undefined : sorted.map(formatTaint).join(',');
}

/**
 * Decides the resource's taints annotation (docs/autoscaler.md). Returns the state, and the patch to apply with the
 * resource's resourceVersion as precondition when it is `out-of-sync`.
 * @example planAutoscalerTaints(nodeGroupWithGpuAnnotation).patch // { 'capacity.cluster-autoscaler.kubernetes.io/taints': 'nvidia.com/gpu:NoSchedule', 'taints.capi-taint-propagator.dev/autoscaler-taints': 'nvidia.com/gpu:NoSchedule' }
 */
export function planAutoscalerTaints(r: ScalableResource, options: AutoscalerOptions = {}): AutoscalerPlan {
  const current = r.annotations[AUTOSCALER_TAINTS_ANNOTATION];
  const owned = r.annotations[AUTOSCALER_OWNED_ANNOTATION];
  const base = current === undefined ? {} : { current };
  // A MachineSet of a MachineDeployment: Cluster API copies the MachineDeployment's annotations (ours included) onto
  // it, and the autoscaler never reads it. Never written, whatever it carries.
  if (r.kind === 'MachineSet' && r.ownedByMachineDeployment) return { state: 'not-opted-in', ...base };
  if (r.deleting) return { state: 'deleting', ...base };
  // What a new Machine gets: its template's declaration; a MachinePool's own annotations hold it (machine-pool.ts).
  const pool = r.kind === 'MachinePool';
  const annotations = pool ? r.annotations : (r.templateAnnotations ?? {});
  const labels = pool ? {} : (r.templateLabels ?? {});
  const declared = declaredTaintsOf({ specTaints: r.specTaints, annotations, labels }, options);
  if (!declared.valid) return { state: 'invalid', ...base };
  const nodeTaints = declared.declaration.taints.map(toNodeTaint);
  const nodeGroup = isNodeGroup(r);
  const desired = nodeGroup ? autoscalerTaintsValue(declared.declaration) : undefined;
  const counted = nodeGroup ? countedStartupTaints(declared.declaration) : [];
  const facts = { ...base, ...(desired !== undefined ? { desired } : {}), nodeTaints, ...(counted.length > 0 ? { countedStartupTaints: counted } : {}) };
  const ours = owned !== undefined && (current === undefined || current === owned);
  if (current !== undefined && !ours) return { state: 'foreign', ...facts };
  if (desired === undefined) {
    if (owned === undefined) return { state: nodeGroup ? 'not-needed' : 'not-opted-in', ...facts };
    return { state: 'out-of-sync', ...facts, patch: { [AUTOSCALER_TAINTS_ANNOTATION]: null, [AUTOSCALER_OWNED_ANNOTATION]: null } };
  }
  if (current === desired && owned === desired) return { state: 'in-sync', ...facts };
  return { state: 'out-of-sync', ...facts, patch: { [AUTOSCALER_TAINTS_ANNOTATION]: desired, [AUTOSCALER_OWNED_ANNOTATION]: desired } };
}

/**
 * The OnInitialization taints of a declaration that the autoscaler keeps in its template Node (it ignores
 * `propagation`; see {@link isDroppedByAutoscaler}), in the Node form, sorted by key and effect.
 * @example countedStartupTaints(declarationOf('warming:NoSchedule@OnInitialization')) // [{ key: 'warming', effect: 'NoSchedule' }]
 */
export function countedStartupTaints(declaration: EffectiveDeclaration): Taint[] {
  const initial = declaration.taints.filter((t) => t.propagation === Propagation.OnInitialization && !isDroppedByAutoscaler(t.key));
  return initial.map(toNodeTaint).sort((a, b) => (taintId(a) < taintId(b) ? -1 : 1));
}
