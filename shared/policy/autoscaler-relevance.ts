/**
 * The forwarder's rule for the cluster-autoscaler annotation (docs/autoscaler.md): a MachineDeployment, MachineSet or
 * MachinePool change asks for a reconcile of the resource only when the plan made from this very version has a write
 * (the reconcile function reads the resource again and plans the same, or a newer version has its own event), or when
 * someone else's value appeared or changed there (the reconcile function then records a Warning Event, once per value),
 * or when the resource was paused or unpaused (`cluster.x-k8s.io/paused`).
 * The echo of the product's own write plans nothing and costs no message. Pure.
 */
import type { ChangeKind } from '#shared/contract/cloud-event.ts';
import { planAutoscalerTaints, type AutoscalerOptions } from '#shared/domain/autoscaler.ts';
import type { ScalableResourceFacts } from '#shared/model/views.ts';
import { pausedChanged } from './relevance.ts';

/**
 * True when the change should become a ScalableResource event.
 * @example autoscalerEventNeeded('modified', written, { ...written, resourceVersion: '9' }) // false: in sync
 */
export function autoscalerEventNeeded(change: ChangeKind, previous: ScalableResourceFacts | undefined, current: ScalableResourceFacts, options: AutoscalerOptions = {}): boolean {
  if (change === 'deleted') return false;
  if (pausedChanged(change, previous, current)) return true; // paused: the reconcile answers so; unpaused: it converges
  const plan = planAutoscalerTaints(current, options);
  if (plan.patch) return true;
  if (plan.state !== 'foreign' || change === 'resynced') return false;
  if (previous === undefined) return true;
  const before = planAutoscalerTaints(previous, options);
  return before.state !== 'foreign' || before.current !== plan.current;
}
