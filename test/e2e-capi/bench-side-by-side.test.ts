/**
 * Smoke run of benchmark scenario 10 (side by side with Cluster API) at tiny sizes, so that it never rots: it starts a
 * control plane of its own with the Cluster API manager (gate on), one workload API server with an audit log, and the
 * product: its local pipeline, then its deployed form (the packaged zips under the Lambda runner) with serverless.yml's
 * default EKS auth through the EKS stand-in (local/lambda/eks-authenticator.ts). Asserts that it ran and produced its
 * figures under their stable keys; never timings.
 */
import { expect, it } from 'vitest';
import { runBench, SIDE_BY_SIDE_KEYS, type BenchResults } from '../../bench/lib/bench.ts';
import { capiControlPlane, describeWithCapi } from '#test/support/capi.ts';

describeWithCapi('Benchmarks: smoke run of the side-by-side scenario', () => {
  it('joins, changes and measures both sides, and produces its figures', async () => {
    // Prepare
    const cp = capiControlPlane();
    if (!cp.available) throw new Error(cp.reason);
    const lines: string[] = [];

    // Act
    const results: BenchResults = await runBench({ profile: 'smoke', kubeconfigPath: cp.kubeconfigPath, only: ['side-by-side'], log: (l) => lines.push(l) });

    // Assess
    expect(results.failures, lines.join('\n')).toEqual({});
    const s = results.scenarios.sideBySide;
    expect(s?.joins.map((j) => [j.joining, j.capi.n, j.product.n])).toEqual([[2, 2, 2], [1, 1, 1]]);
    expect(s?.changes.map((c) => [c.replicas, c.capi.n, c.product.n])).toEqual([[2, 2, 2], [3, 3, 3]]);
    for (const key of SIDE_BY_SIDE_KEYS) expect(Number.isFinite(results[key]), `${key} = ${results[key]}`).toBe(true);
    // Counted at the workload API server: each side wrote each changed Node at least once.
    for (const c of s?.changes ?? []) {
      expect(c.capi.workloadCallsPerChangedNode).toBeGreaterThanOrEqual(1);
      expect(c.product.workloadCallsPerChangedNode).toBeGreaterThanOrEqual(1);
    }
    // Changes Cluster API owns cost the product nothing (every one of them reached the forwarder and was filtered).
    expect(s?.changes.map((c) => c.foreign)).toEqual(s?.changes.map((c) => ({ productReconciles: 0, productWorkloadCalls: 0, callsPerForeignChange: 0, filteredMachineChanges: c.replicas, filteredNodeChanges: c.replicas, forwardedMessages: 0, productWorkloadRequests: {} })));
  }, 300_000);

  it("runs the deployed form with serverless.yml's default EKS auth: the packaged functions' tokens pass the EKS stand-in, their access entries' groups carry the product's RBAC, and the joins and changes converge", async () => {
    // Prepare
    const cp = capiControlPlane();
    if (!cp.available) throw new Error(cp.reason);
    const lines: string[] = [];

    // Act
    const results: BenchResults = await runBench({ profile: 'smoke', kubeconfigPath: cp.kubeconfigPath, only: ['side-by-side'], deployed: 'short-windows', deployedAuth: 'eks', log: (l) => lines.push(l) });

    // Assess: every Node of both steps carried its taint, through functions that authenticated only with EKS tokens.
    expect(results.failures, lines.join('\n')).toEqual({});
    const s = results.scenarios.sideBySideDeployed;
    expect(s?.packageArgs).toEqual(expect.arrayContaining(['--param=managementAuth=eks', '--param=eksCaData=<the local CA>']));
    expect(s?.packageArgs?.some((a) => a.includes('ssm') || a.startsWith('--stage'))).toBe(false);
    expect(s?.joins.map((j) => [j.joining, j.capi.n, j.product.n])).toEqual([[2, 2, 2], [1, 1, 1]]);
    expect(s?.changes.map((c) => [c.replicas, c.capi.n, c.product.n])).toEqual([[2, 2, 2], [3, 3, 3]]);
    expect(s?.eksTokenReviews?.authenticated).toBeGreaterThan(0);
    expect(s?.eksTokenReviews?.refused).toBe(0);
  }, 420_000);
});
