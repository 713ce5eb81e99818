/**
 * The scale-from-zero use case (docs/autoscaler.md): one ScalableResource event in, its cluster-autoscaler taints
 * annotation brought in line with what a new Node of it gets, in at most one write; level-triggered, paused as a Node.
 */
import { formatTaint, type Taint } from '#shared/domain/taint.ts';
import { planAutoscalerTaints, type AutoscalerPlan } from '#shared/domain/autoscaler.ts';
import { clusterKey, type ScalableResourceEventData, type TaintEvent } from '#shared/contract/cloud-event.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { pausedReason } from '#shared/domain/pause.ts';
import { clusterNameOf, type ScalableResourceFacts } from '#shared/model/views.ts';
import { retryOnConflict, type ReconcileDeps, type ReconcileResult } from './reconcile-node-taints.ts';
import { recordEvent } from './deferred-events.ts';

/**
 * Reconciles the autoscaler annotation of the resource the event names; throws what the queue retries. A first 409 is
 * retried at once: on a new group it is nearly always Cluster API's own first writes (docs/autoscaler.md).
 */
export async function reconcileAutoscalerTaints(deps: ReconcileDeps, event: TaintEvent & { readonly data: ScalableResourceEventData }): Promise<ReconcileResult> {
  return retryOnConflict(() => reconcileOnce(deps, event));
}

async function reconcileOnce(deps: ReconcileDeps, event: TaintEvent & { readonly data: ScalableResourceEventData }): Promise<ReconcileResult> {
  const ref = event.data.resource;
  const id = `${ref.kind} ${ref.namespace}/${ref.name}`;
  const base = { cluster: clusterKey(event.data.cluster), scalableResource: id };
  if (!deps.scalables) throw new Error(`Cannot reconcile ${id}: the reconcile function was composed without a scalable resource store`);
  const resource = await deps.scalables.get(ref.kind, ref.namespace, ref.name);
  if (!resource) return { ...base, outcome: ReconcileOutcome.resourceGone, reason: `the ${ref.kind} does not exist` };
  const plan = planAutoscalerTaints(resource, deps.settings);
  const read = { ...base, resourceVersion: resource.resourceVersion };
  // Nothing to write and nothing to report: no Cluster read either.
  if (plan.state !== 'foreign' && !plan.patch) return { ...read, outcome: ReconcileOutcome.unchanged, reason: plan.state };
  const paused = await pauseOf(deps, resource);
  if (paused) return { ...read, outcome: ReconcileOutcome.paused, reason: paused };
  if (plan.state === 'foreign') {
    await recordEvent(deps, resource, 'Warning', 'AutoscalerTaintsNotManaged',
      `capacity.cluster-autoscaler.kubernetes.io/taints holds ${JSON.stringify(plan.current)}, which capi-taint-propagator did not write: left alone. A new Node gets ${JSON.stringify(plan.desired ?? '')}; remove the annotation to let the product manage it.`);
    const reason = 'foreign: the taints annotation was written by someone else';
    return { ...read, outcome: ReconcileOutcome.unchanged, reason };
  }
  const patch = plan.patch ?? {};
  const description = Object.entries(patch).map(([k, v]) => `${k}=${v === null ? '(removed)' : JSON.stringify(v)}`).join('; ');
  if (deps.settings.dryRun) return { ...read, outcome: ReconcileOutcome.dryRun, reason: `planned: ${description}` };
  const written = await deps.scalables.patchAnnotations(resource, patch);
  if (plan.desired !== undefined) await warnStartupTaints(deps, resource, plan);
  return { ...read, outcome: ReconcileOutcome.autoscalerPatched, writtenResourceVersion: written, reason: description };
}

/** Why the resource is paused (its annotation, else its Cluster's `spec.paused`), or undefined. */
async function pauseOf(deps: ReconcileDeps, r: ScalableResourceFacts): Promise<string | undefined> {
  const own = pausedReason(r, undefined);
  if (own) return own;
  const name = clusterNameOf(r);
  const cluster = name ? await deps.machines.getCluster(r.namespace, name) : undefined;
  return pausedReason(r, cluster);
}

/** With a write that sets a value: a Warning when the value holds OnInitialization taints the autoscaler counts. */
async function warnStartupTaints(deps: ReconcileDeps, r: ScalableResourceFacts, plan: AutoscalerPlan): Promise<void> {
  const counted: readonly Taint[] = plan.countedStartupTaints ?? [];
  if (counted.length === 0) return;
  const list = counted.map(formatTaint).join(', ');
  const keys = [...new Set(counted.map((t) => t.key))];
  await recordEvent(deps, r, 'Warning', 'AutoscalerCountsStartupTaints',
    `${list} ${counted.length === 1 ? 'is' : 'are'} declared OnInitialization, but the cluster-autoscaler ignores propagation and counts ${counted.length === 1 ? 'it' : 'them'} in this node group's template: ` +
      `a pending pod that does not tolerate ${counted.length === 1 ? 'it' : 'them'} will not make it scale up from zero. If something removes ${counted.length === 1 ? 'it' : 'them'} from new Nodes, ` +
      `prefix the key with startup-taint.cluster-autoscaler.kubernetes.io/ or run the autoscaler with ${keys.map((k) => `--startup-taint=${k}`).join(' ')} (docs/autoscaler.md).`);
}
