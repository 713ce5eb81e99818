/** The forwarder's rule for the cluster-autoscaler annotation (docs/autoscaler.md). Pure. */
import type { ChangeKind } from '#shared/contract/cloud-event.ts';
import { planAutoscalerTaints, type AutoscalerOptions } from '#shared/domain/autoscaler.ts';
import type { ScalableResourceFacts } from '#shared/model/views.ts';
import { pausedChanged } from './relevance.ts';

/**
 * Whether a MachineDeployment, MachineSet or MachinePool change asks for a reconcile of the resource: when the plan
 * made from this very version has a write (the echo of the product's own write plans none), when someone else's value
 * appeared or changed there (the reconcile records a Warning Event, once per value), or on a pause or unpause.
 * Returns true when the change should become a ScalableResource event.
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
