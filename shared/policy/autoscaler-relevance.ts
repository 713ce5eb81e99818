/**
 * The forwarder's rule for the cluster-autoscaler annotation (docs/autoscaler.md): a MachineDeployment, MachineSet or
 * MachinePool change asks for a reconcile of the resource only when the plan made from this very version has a write
 * (the reconcile function reads the resource again and plans the same, or a newer version has its own event), or when
 * someone else's value appeared or changed there (the reconcile function then records a Warning Event, once per value),
 * or when the resource was paused or unpaused (`cluster.x-k8s.io/paused`).
 * The echo of the product's own write plans nothing and costs no message. Pure.
 */
import type { ChangeKind } from '#shared/contract/cloud-event.ts';
import { planAutoscalerTaints, type AutoscalerOptions, type ScalableResourceSnapshot } from '#shared/domain/autoscaler.ts';
import { CONTROL_PLANE_LABEL } from '#shared/domain/taint.ts';
import type { MachinePoolFacts, ScalableFacts } from '#shared/model/views.ts';
import { pausedChanged } from './relevance.ts';

/**
 * True when the change should become a ScalableResource event.
 * @example autoscalerEventNeeded('modified', written, { ...written, resourceVersion: '9' }) // false: in sync
 */
export function autoscalerEventNeeded(change: ChangeKind, previous: ScalableFacts | MachinePoolFacts | undefined, current: ScalableFacts | MachinePoolFacts, options: AutoscalerOptions = {}): boolean {
  if (change === 'deleted') return false;
  if (pausedChanged(change, previous, current)) return true; // paused: the reconcile answers so; unpaused: it converges
  const plan = planAutoscalerTaints(scalableSnapshotOfFacts(current), options);
  if (plan.patch) return true;
  if (plan.state !== 'foreign' || change === 'resynced') return false;
  if (previous === undefined) return true;
  const before = planAutoscalerTaints(scalableSnapshotOfFacts(previous), options);
  return before.state !== 'foreign' || before.current !== plan.current;
}

/** The resource as `planAutoscalerTaints` reads it, from its facts: the plan the reconcile function makes of the same version. */
export function scalableSnapshotOfFacts(facts: ScalableFacts | MachinePoolFacts): ScalableResourceSnapshot {
  const common = { apiVersion: '', namespace: facts.namespace, name: facts.name, uid: facts.uid, resourceVersion: facts.resourceVersion, specTaints: facts.specTaints ?? undefined, deleting: facts.deleting, annotations: facts.annotations };
  if (facts.kind === 'MachinePool') {
    // The pool's `annotations` already merge its own declaration keys over its template's (poolDeclarations).
    return { ...common, kind: 'MachinePool', templateAnnotations: {}, templateLabels: {}, ownedByMachineDeployment: false, ...(facts.clusterName ? { clusterName: facts.clusterName } : {}) };
  }
  return {
    ...common,
    kind: facts.kind,
    templateAnnotations: facts.declarations,
    templateLabels: facts.controlPlaneLabel !== undefined ? { [CONTROL_PLANE_LABEL]: facts.controlPlaneLabel } : {},
    ownedByMachineDeployment: facts.ownedByMachineDeployment,
    ...(facts.clusterName ? { clusterName: facts.clusterName } : {}),
  };
}
