/**
 * The one metrics emitter (Powertools Metrics, CloudWatch EMF). Metric names come only from
 * metric-names.ts so that alarms and dashboards can be checked against them.
 */
import { Metrics } from '@aws-lambda-powertools/metrics';
import { METRIC_NAMESPACE } from './metric-names.ts';

export const metrics = new Metrics({ namespace: METRIC_NAMESPACE, serviceName: 'capi-taint-propagator' });
