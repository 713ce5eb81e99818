import { describe, expect, it } from 'vitest';
import { sumRequestTotal } from '../../../bench/scenarios/fleet-deployed.ts';

describe('Function: sumRequestTotal()', () => {
  it("sums the API server's apiserver_request_total samples, leaving out PATCH and every other metric", () => {
    // Prepare
    const metrics = [
      '# HELP apiserver_request_total [STABLE] Counter of apiserver requests',
      '# TYPE apiserver_request_total counter',
      'apiserver_request_total{code="200",component="apiserver",dry_run="",group="cluster.x-k8s.io",resource="machines",scope="cluster",subresource="",verb="LIST",version="v1beta2"} 12',
      'apiserver_request_total{code="0",component="apiserver",dry_run="",group="cluster.x-k8s.io",resource="machines",scope="cluster",subresource="",verb="WATCH",version="v1beta2"} 3',
      'apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 4',
      'apiserver_request_total{code="200",component="apiserver",dry_run="",group="cluster.x-k8s.io",resource="machines",scope="resource",subresource="",verb="PATCH",version="v1beta2"} 250',
      'apiserver_request_duration_seconds_count{verb="LIST"} 99',
      '',
    ].join('\n');

    // Act
    const sum = sumRequestTotal(metrics);

    // Assess
    expect(sum).toBe(19);
  });
});
