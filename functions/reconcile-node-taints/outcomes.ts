/**
 * Each outcome's log level, message and metric besides `Reconciles` (dimension `Outcome`): one table, so that a new
 * outcome cannot be added without saying how it is logged and counted.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { MetricDimension, ReconcileMetric } from '#shared/observability/metric-names.ts';
import type { ReconcileResult } from './reconcile-node-taints.ts';

interface OutcomeReport {
  readonly level: 'info' | 'warn' | 'error';
  readonly message: string;
  readonly metric?: ReconcileMetric;
}

const OUTCOME_REPORTS: Readonly<Record<ReconcileOutcome, OutcomeReport>> = {
  [ReconcileOutcome.patched]: { level: 'info', message: 'Patched Node taints' },
  [ReconcileOutcome.unchanged]: { level: 'info', message: 'Reconciled' },
  [ReconcileOutcome.dryRun]: { level: 'info', message: 'Dry run: planned Node write not sent' },
  [ReconcileOutcome.nodeGone]: { level: 'info', message: 'Reconciled' },
  [ReconcileOutcome.machineGone]: { level: 'info', message: 'Reconciled' },
  [ReconcileOutcome.noNode]: { level: 'info', message: 'Reconciled' },
  [ReconcileOutcome.paused]: { level: 'info', message: 'Leaving a paused object alone' },
  [ReconcileOutcome.machineDeleting]: { level: 'info', message: 'Reconciled' },
  [ReconcileOutcome.invalidDeclaration]: { level: 'error', message: 'Refusing an invalid taint declaration', metric: ReconcileMetric.InvalidDeclarations },
  [ReconcileOutcome.malformedAnnotation]: { level: 'error', message: 'Refusing to write a Node with a malformed tracking annotation', metric: ReconcileMetric.MalformedTrackingAnnotations },
  [ReconcileOutcome.autoscalerPatched]: { level: 'info', message: 'Patched the cluster-autoscaler taints annotation' },
  [ReconcileOutcome.resourceGone]: { level: 'info', message: 'Reconciled' },
  [ReconcileOutcome.rolloutClaimed]: { level: 'info', message: 'Claimed a NoExecute rollout slot' },
  [ReconcileOutcome.rolloutWaiting]: { level: 'info', message: 'Waiting for a NoExecute rollout slot' },
  [ReconcileOutcome.rolloutEvicting]: { level: 'info', message: 'Evicting pods before a NoExecute taint' },
  [ReconcileOutcome.rolloutRefused]: { level: 'warn', message: 'Waiting out a disruption budget before a NoExecute taint' },
  [ReconcileOutcome.rolloutStuck]: { level: 'warn', message: 'A pod stays terminating before a NoExecute taint' },
  [ReconcileOutcome.rolloutWithdrawn]: { level: 'info', message: 'Stopped a NoExecute rollout' },
  [ReconcileOutcome.conflict]: { level: 'warn', message: 'Retrying after a conflict', metric: ReconcileMetric.Conflicts },
  [ReconcileOutcome.transientError]: { level: 'warn', message: 'Retrying after a transient failure', metric: ReconcileMetric.TransientErrors },
  [ReconcileOutcome.deadLettered]: { level: 'error', message: 'Dead-lettering a record that can never succeed', metric: ReconcileMetric.DeadLettered },
};

/** Logs and counts one outcome with `fields`; a MachinePool's Node is also counted under MachinePoolReconciles. */
export function reportOutcome(deps: { readonly logger: Logger; readonly metrics: Metrics }, outcome: ReconcileOutcome, fields: Record<string, unknown>, machinePool = false): void {
  const report = OUTCOME_REPORTS[outcome];
  countOutcome(deps.metrics, outcome, ReconcileMetric.Reconciles);
  if (machinePool) countOutcome(deps.metrics, outcome, ReconcileMetric.MachinePoolReconciles);
  if (report.metric) deps.metrics.addMetric(report.metric, MetricUnit.Count, 1);
  deps.logger[report.level](report.message, { ...fields, outcome });
}

/** The log fields of a reconcile's result (keys as Cluster API logs them: object kinds capitalised). */
export function resultFields(r: ReconcileResult): Record<string, unknown> {
  const owner = { Machine: r.machine, MachinePool: r.machinePool, ScalableResource: r.scalableResource, Node: r.node };
  const { resourceVersion, writtenResourceVersion, diff, planned, issues, reason, rollout, retryInSeconds } = r;
  const fields = { resourceVersion, writtenResourceVersion, diff, planned, issues, reason, rollout, retryInSeconds };
  return { cluster: r.cluster, ...owner, ...fields, ...(r.adopted ? { adopted: true } : {}) };
}

function countOutcome(metrics: Metrics, outcome: ReconcileOutcome, metric: ReconcileMetric): void {
  const single = metrics.singleMetric();
  single.addDimension(MetricDimension.Outcome, outcome);
  single.addMetric(metric, MetricUnit.Count, 1);
}
