/**
 * One owner per taint next to upstream Cluster API (docs/next-to-cluster-api.md): upstream owns `spec.taints`, the
 * product its annotations, each tracked in its own (no write war); a taint moving to upstream is handed over (no flap).
 */
import type { EffectiveDeclaration } from './declarations.ts';
import { planNodeTaints, type NodeTaintPlan, type PlanInput, type PlannedNode } from './taint-plan.ts';
import { OWN_TRACKING_ANNOTATION, STARTUP_GATE_TAINT_KEY, TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY, taintId, type MachineTaint, type TaintId } from './taint.ts';
import { decodeOwnedTaints } from './tracking-annotation.ts';

/** Who propagates `Machine.spec.taints`. */
export const SpecTaintsOwner = {
  /** Upstream CAPI's propagation (the default: `spec.taints` can only be set with its gate on). */
  upstream: 'upstream',
  /** No upstream controller propagates `spec.taints`: the product owns every source. */
  product: 'product',
} as const;
export type SpecTaintsOwner = (typeof SpecTaintsOwner)[keyof typeof SpecTaintsOwner];

/** The split of one Machine's declaration between the product and upstream CAPI, for one Node. */
export interface Ownership {
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
 * The product's plan for a Node: upstream's taints left alone, the startup gate held until upstream applied
 * `spec.taints`. Returns the plan and the split; the status view calls it too, so "in sync" means "would not write".
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
    startupTaint: options.startupTaint,
    adoptAsInitialized: options.adoptAsInitialized,
  });
  return { plan, ownership };
}

/**
 * A warning when the startup gate is CAPI's own `node.cluster.x-k8s.io/uninitialized`, which CAPI removes in its
 * first Node patch (gate on or off), before the product's taints may be there. Undefined when fine or disabled.
 */
export function startupGateWarning(gate: TaintId | undefined): string | undefined {
  if (gate?.key !== UNINITIALIZED_TAINT_KEY) return undefined;
  return `the startup gate ${gate.key}:${gate.effect} is removed by Cluster API itself in its first Node patch, so it does not hold workloads off until the product's taints are there; use the default ${STARTUP_GATE_TAINT_KEY}:NoSchedule, added at registration (e.g. CABPK nodeRegistration.taints)`;
}
