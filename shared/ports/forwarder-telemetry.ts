import type { ForwarderMetric } from '#shared/observability/metric-names.ts';

/** Where the watch-forwarder reports its counters and lag (Powertools Metrics in AWS, memory in tests). */
export interface ForwarderTelemetry {
  /** Adds `value` to a counter (a count) or records one sample (ForwarderLag in milliseconds; the gauge UnreachableClusters, a number of clusters). */
  record(metric: ForwarderMetric, value: number): void;
}
