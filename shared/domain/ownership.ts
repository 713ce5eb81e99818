/**
 * One owner per taint next to upstream Cluster API (the table: docs/next-to-cluster-api.md). Upstream owns what
 * `spec.taints` declares and tracks it in `cluster.x-k8s.io/taints-from-machine`, which it rewrites to exactly its own
 * set on every reconcile; the product owns what its annotations declare and tracks it in its own annotation, same
 * format, so there is no write war. A taint that becomes upstream's is handed over: it leaves the product's annotation
 * and stays on the Node, so the migration to `spec.taints` never flaps. With `specTaintsOwner: 'product'` (no upstream
 * controller propagates `spec.taints`) the product owns every source.
 */
import type { EffectiveDeclaration } from './declarations.ts';
import { planNodeTaints, type NodeTaintPlan, type PlanInput, type PlannedNode } from './taint-plan.ts';
import { OWN_TRACKING_ANNOTATION, STARTUP_GATE_TAINT_KEY, TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY, taintId, type MachineTaint, type TaintId } from './taint.ts';
import { decodeOwnedTaints } from './tracking-annotation.ts';

/** Who propagates `Machine.spec.taints`. */
export const SpecTaintsOwner = {
  /** Upstream CAPI's propagation (the default: `spec.taints` can only be set with its gate on). */
  upstream: 'upstream',
  product: 'product',
} as const;
export type SpecTaintsOwner = (typeof SpecTaintsOwner)[keyof typeof SpecTaintsOwner];

/** The split of one Machine's declaration between the product and upstream CAPI, for one Node. */
export interface Ownership {
  /** The taints the product propagates. */
  readonly productTaints: readonly MachineTaint[];
  /** The taints the Machine declares that upstream CAPI propagates (`spec.taints`). */
  readonly upstreamTaints: readonly MachineTaint[];
  /** `key:effect` ids upstream holds: declared in `spec.taints` or tracked in its annotation on the Node. */
  readonly upstreamIds: ReadonlySet<string>;
  /** The Machine declares `spec.taints` and CAPI has not initialized the Node yet (no upstream annotation). */
  readonly awaitingUpstream: boolean;
}

/**
 * Splits a declaration between the owners for a Node.
 * @example ownershipOf(declaration, { annotations: {} }).awaitingUpstream // true when spec.taints declares something
 */
export function ownershipOf(
  declaration: EffectiveDeclaration,
  node: Pick<PlannedNode, 'annotations'>,
  specTaintsOwner: SpecTaintsOwner = SpecTaintsOwner.upstream,
): Ownership {
  if (specTaintsOwner === SpecTaintsOwner.product) {
    return { productTaints: declaration.taints, upstreamTaints: [], upstreamIds: new Set(), awaitingUpstream: false };
  }
  const fromSpec = (t: MachineTaint) => declaration.sourceOf[taintId(t)] === 'spec.taints';
  const upstreamTaints = declaration.taints.filter(fromSpec);
  const tracked = node.annotations[TRACKING_ANNOTATION];
  const upstreamIds = new Set([...upstreamTaints.map(taintId), ...(tracked === undefined ? [] : decodeOwnedTaints(tracked))]);
  return {
    productTaints: declaration.taints.filter((t) => !fromSpec(t)),
    upstreamTaints,
    upstreamIds,
    awaitingUpstream: upstreamTaints.length > 0 && tracked === undefined,
  };
}

/** Everything the product's planner needs besides the Node and the declaration. */
export interface OwnedPlanOptions extends Pick<PlanInput, 'startupTaint' | 'adoptAsInitialized'> {
  readonly specTaintsOwner?: SpecTaintsOwner;
}

/**
 * The product's plan for a Node: its own taints in its own annotation, upstream's left alone, the startup gate
 * held while upstream has not applied `spec.taints`. The reconcile function and the status view both call this,
 * so "in sync" means exactly "the reconcile function would not write".
 */
export function planOwnedTaints(
  node: PlannedNode,
  declaration: EffectiveDeclaration,
  options: OwnedPlanOptions = {},
): { readonly plan: NodeTaintPlan; readonly ownership: Ownership } {
  const ownership = ownershipOf(declaration, node, options.specTaintsOwner);
  const plan = planNodeTaints({
    node,
    taints: ownership.productTaints,
    annotation: OWN_TRACKING_ANNOTATION,
    handedOver: ownership.upstreamIds,
    holdStartupTaint: ownership.awaitingUpstream,
    ...(options.startupTaint ? { startupTaint: options.startupTaint } : {}),
    ...(options.adoptAsInitialized ? { adoptAsInitialized: true } : {}),
  });
  return { plan, ownership };
}

/**
 * Returns a warning when the configured startup gate cannot hold workloads off next to CAPI: CAPI removes
 * `node.cluster.x-k8s.io/uninitialized` in its first Node patch (gate on or off), before the product's taints
 * may be there. Undefined when the gate is fine or disabled.
 */
export function startupGateWarning(gate: TaintId | undefined): string | undefined {
  if (gate?.key !== UNINITIALIZED_TAINT_KEY) return undefined;
  return `the startup gate ${gate.key}:${gate.effect} is removed by Cluster API itself in its first Node patch, so it does not hold workloads off until the product's taints are there; use the default ${STARTUP_GATE_TAINT_KEY}:NoSchedule, added at registration (e.g. CABPK nodeRegistration.taints)`;
}
