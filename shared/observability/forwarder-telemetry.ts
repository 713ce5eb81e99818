import { MetricUnit, type Metrics } from '@aws-lambda-powertools/metrics';
import { ForwarderMetric } from './metric-names.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';

/** ForwarderTelemetry with in-memory totals, which a local run shows and a test asserts. */
export interface CountingForwarderTelemetry extends ForwarderTelemetry {
  /** Totals since creation, by metric (for ForwarderLag, the number of samples; for the gauge UnreachableClusters, its last sample). */
  counts(): Readonly<Record<ForwarderMetric, number>>;
  /** Largest ForwarderLag sample seen, in milliseconds. */
  maxLagMs(): number;
}

/** Creates the forwarder telemetry; pass the Powertools `metrics` singleton to also emit EMF. */
export function createForwarderTelemetry(metrics?: Pick<Metrics, 'addMetric'>): CountingForwarderTelemetry {
  const totals = Object.fromEntries(Object.values(ForwarderMetric).map((m) => [m, 0])) as Record<ForwarderMetric, number>;
  let maxLag = 0;
  return {
    record(metric: ForwarderMetric, value: number): void {
      const lag = metric === ForwarderMetric.ForwarderLag;
      if (lag) maxLag = Math.max(maxLag, value);
      totals[metric] = metric === ForwarderMetric.UnreachableClusters ? value : totals[metric] + (lag ? 1 : value);
      metrics?.addMetric(metric, lag ? MetricUnit.Milliseconds : MetricUnit.Count, value);
    },
    counts: () => ({ ...totals }),
    maxLagMs: () => maxLag,
  };
}
