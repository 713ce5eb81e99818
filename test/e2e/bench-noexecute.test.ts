/**
 * Smoke run of the NoExecute benchmark (bench/scenarios/noexecute.ts) at its tiny size: it starts a control plane of
 * its own with kube-controller-manager (taint-eviction and disruption controllers), as the integration test of the
 * staged rollout does. It asserts that both modes ran to the end and produced every figure under its stable key, and
 * the outcomes that do not depend on timing: the staged rollout keeps its bound and every budget; never timings.
 */
import { expect, it } from 'vitest';
import { NOEXECUTE_KEYS, runBench, type BenchResults } from '../../bench/lib/bench.ts';
import { findBinaries } from '#local/control-plane/assets.ts';
import { controlPlane, describeWithControlPlane } from '#test/support/control-plane.ts';

const found = findBinaries();
const runnable = controlPlane().available && ((found.available && found.value.kubeControllerManager !== undefined) || process.env['CI'] === 'true');

describeWithControlPlane('Benchmarks: smoke run of the NoExecute scenario', () => {
  it.runIf(runnable)('runs immediate and staged on a group of 3 Nodes × 4 pods under 3 budgets and produces every figure', async () => {
    // Prepare
    const lines: string[] = [];

    // Act
    const results: BenchResults = await runBench({ profile: 'smoke', kubeconfigPath: '', only: ['noexecute'], log: (l) => lines.push(l) });

    // Assess
    expect(results.failures, lines.join('\n')).toEqual({});
    for (const key of NOEXECUTE_KEYS) expect(Number.isFinite(results[key]), `${key} = ${results[key]}`).toBe(true);
    const r = results.scenarios.noExecute;
    expect(r).toMatchObject({ nodes: 3, podsPerNode: 4, maxInProgressBound: 1 });
    // Every pod of the group went in both modes, and the stand-in ReplicaSet replaced each one.
    expect([r?.immediate.podsDeleted, r?.immediate.replacements, r?.staged.podsDeleted, r?.staged.replacements]).toEqual([12, 12, 12, 12]);
    // Staged: never more than the bound holding a place, every budget kept, in the watch's count and in the budgets' own view.
    expect(r?.staged.mostInProgress).toBe(1);
    expect(r?.staged.budgetsViolated).toBe(0);
    expect(Object.values(r?.staged.lowestHealthyMarginByStatus ?? {}).every((m) => m >= 0)).toBe(true);
    expect(r?.immediate.mostInProgress).toBe(0);
    // Judged only at the size (50 × 20).
    expect(results.targets.filter((t) => NOEXECUTE_KEYS.includes(t.figure)).map((t) => t.met)).toEqual([undefined, undefined, undefined, undefined, undefined]);
  }, 180_000);
});
