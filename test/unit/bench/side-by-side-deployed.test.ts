import { describe, expect, it } from 'vitest';
import { judge, mergeResults, SIDE_BY_SIDE_DEPLOYED_KEYS, SIDE_BY_SIDE_KEYS, type BenchResults } from '../../../bench/lib/bench.ts';

const at = { throughputAtN: undefined, e2eRate: undefined, forwarderObjects: undefined, forwarder20kObjects: undefined, fleet: undefined };
const run = (figures: Partial<BenchResults>, targets: BenchResults['targets'], scenarios: BenchResults['scenarios'], startedAt: string): BenchResults => ({
  schema: 1,
  profile: 'full',
  startedAt,
  durationSeconds: 1,
  machine: {},
  versions: {},
  ...figures,
  targets,
  scenarios,
  failures: {},
});

describe('Function: judge(), scenario 10 in the deployed form', () => {
  it('judges the deployed figures at their own run size, whatever the local run measured', () => {
    // Act
    const targets = judge({ joinP99RatioVsCapi: 0.9, joinP99RatioVsCapiDeployed: 1.4, vsCapiRatioP99Deployed: 0.7 }, { ...at, sideBySide: { replicas: 50, joining: 30 }, sideBySideDeployed: { replicas: 500, joining: 400 } });

    // Assess
    expect(targets.find((t) => t.figure === 'joinP99RatioVsCapi')).toMatchObject({ measured: 0.9, met: undefined });
    expect(targets.find((t) => t.figure === 'joinP99RatioVsCapiDeployed')).toMatchObject({ measured: 1.4, met: false, target: expect.stringContaining('packaged functions under the Lambda runner') });
    expect(targets.find((t) => t.figure === 'vsCapiRatioP99Deployed')).toMatchObject({ measured: 0.7, met: true });
    expect(SIDE_BY_SIDE_DEPLOYED_KEYS).toEqual(SIDE_BY_SIDE_KEYS.map((k) => `${k}Deployed`));
  });
});

describe('Function: mergeResults(), scenario 10 in both forms', () => {
  it('keeps the local figures when a deployed run of scenario 10 is merged in, and adds the deployed ones next to them', () => {
    // Prepare
    const localFigures = { joinP99RatioVsCapi: 0.8, callsPerForeignChange: 0 };
    const base = run(localFigures, judge(localFigures, { ...at, sideBySide: { replicas: 500, joining: 400 } }), { sideBySide: { form: 'local' } as never }, '2026-11-24T00:00:00Z');
    const deployedFigures = { joinP99RatioVsCapiDeployed: 1.2, callsPerForeignChangeDeployed: 0.01 };
    const deployed = run(deployedFigures, judge(deployedFigures, { ...at, sideBySideDeployed: { replicas: 500, joining: 400 } }).filter((t) => t.measured !== undefined), { sideBySideDeployed: { form: 'deployed' } as never }, '2026-11-25T03:00:00Z');

    // Act
    const merged = mergeResults(base, deployed, ['side-by-side']);

    // Assess
    expect(merged).toMatchObject({ joinP99RatioVsCapi: 0.8, callsPerForeignChange: 0, joinP99RatioVsCapiDeployed: 1.2, callsPerForeignChangeDeployed: 0.01 });
    expect(Object.keys(merged.scenarios).sort()).toEqual(['sideBySide', 'sideBySideDeployed']);
    expect(merged.targets.find((t) => t.figure === 'joinP99RatioVsCapi')).toMatchObject({ measured: 0.8, met: true });
    expect(merged.targets.find((t) => t.figure === 'joinP99RatioVsCapiDeployed')).toMatchObject({ measured: 1.2, met: false });
    expect(merged.targets.find((t) => t.figure === 'callsPerForeignChangeDeployed')).toMatchObject({ measured: 0.01, met: false });
  });
});
