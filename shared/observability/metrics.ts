/** The one metrics emitter (Powertools Metrics, CloudWatch EMF); every metric name comes from metric-names.ts. */
import { Metrics } from '@aws-lambda-powertools/metrics';
import { METRIC_NAMESPACE } from './metric-names.ts';

export const metrics = new Metrics({ namespace: METRIC_NAMESPACE, serviceName: 'capi-taint-propagator' });
