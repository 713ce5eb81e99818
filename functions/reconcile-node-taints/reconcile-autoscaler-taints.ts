/**
 * The scale-from-zero use case (docs/autoscaler.md): one ScalableResource event in, the resource's
 * cluster-autoscaler taints annotation brought in line with what a new Node of it gets, with at most one write.
 * Level-triggered like the Node reconcile: the resource is read again; the write carries the resourceVersion it was
 * planned from (a 409 goes back to the queue and is retried from a fresh read).
 */
import { planAutoscalerTaints } from '#shared/domain/autoscaler.ts';
import type { ScalableResourceEventData, TaintEvent } from '#shared/domain/cloud-event.ts';
import { clusterKey } from '#shared/domain/cloud-event.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import type { ReconcileDeps, ReconcileResult } from './reconcile-node-taints.ts';

/** Reason of the Warning Event on a resource whose taints annotation someone else wrote. */
export const AUTOSCALER_TAINTS_NOT_MANAGED = 'AutoscalerTaintsNotManaged';

/**
 * Reconciles the autoscaler annotation of the resource the event names. Returns the outcome; throws PatchConflictError
 * or TransientError for failures the queue retries.
 */
export async function reconcileAutoscalerTaints(deps: ReconcileDeps, event: TaintEvent & { readonly data: ScalableResourceEventData }): Promise<ReconcileResult> {
  const ref = event.data.resource;
  const id = `${ref.kind} ${ref.namespace}/${ref.name}`;
  const base = { cluster: clusterKey(event.data.cluster), scalableResource: id };
  if (!deps.scalables) throw new Error(`Cannot reconcile ${id}: the reconcile function was composed without a scalable resource store`);
  const resource = await deps.scalables.get(ref.kind, ref.namespace, ref.name);
  if (!resource) return { ...base, outcome: ReconcileOutcome.resourceGone, reason: `the ${ref.kind} does not exist` };
  const plan = planAutoscalerTaints(resource, deps.settings.startupTaint ? { startupTaint: deps.settings.startupTaint } : {});
  const read = { ...base, resourceVersion: resource.resourceVersion };
  if (plan.state === 'foreign') {
    const eventError = await record(deps, resource, 'Warning', AUTOSCALER_TAINTS_NOT_MANAGED,
      `capacity.cluster-autoscaler.kubernetes.io/taints holds ${JSON.stringify(plan.current)}, which capi-taint-propagator did not write: left alone. A new Node gets ${JSON.stringify(plan.desired ?? '')}; remove the annotation to let the product manage it.`);
    return { ...read, outcome: ReconcileOutcome.unchanged, reason: 'foreign: the taints annotation was written by someone else', eventError };
  }
  if (!plan.patch) return { ...read, outcome: ReconcileOutcome.unchanged, reason: plan.state };
  const description = Object.entries(plan.patch).map(([k, v]) => `${k}=${v === null ? '(removed)' : JSON.stringify(v)}`).join('; ');
  if (deps.settings.dryRun) return { ...read, outcome: ReconcileOutcome.dryRun, reason: `planned: ${description}` };
  const written = await deps.scalables.patchAnnotations(resource, plan.patch);
  return { ...read, outcome: ReconcileOutcome.autoscalerPatched, writtenResourceVersion: written, reason: description };
}

async function record(deps: ReconcileDeps, r: { apiVersion: string; kind: string; namespace: string; name: string; uid: string }, type: 'Normal' | 'Warning', reason: string, message: string): Promise<unknown> {
  try {
    await deps.recorder.record({ apiVersion: r.apiVersion, kind: r.kind, namespace: r.namespace, name: r.name, uid: r.uid }, type, reason, message);
    return undefined;
  } catch (error) {
    return error;
  }
}
