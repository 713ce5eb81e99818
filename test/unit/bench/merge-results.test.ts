import { describe, expect, it } from 'vitest';
import { FIGURE_KEYS, judge, mergeResults, type BenchResults } from '../../../bench/lib/bench.ts';

const results = (figures: Partial<Record<(typeof FIGURE_KEYS)[number], number>>, scenarios: BenchResults['scenarios'], startedAt: string): BenchResults => ({
  schema: 1,
  profile: 'full',
  startedAt,
  durationSeconds: 1,
  machine: { loadAverage1m: 1 },
  versions: {},
  ...figures,
  targets: judge(figures, { throughputAtN: 1000, e2eRate: 50, forwarderObjects: 5000, forwarder20kObjects: 20000, fleet: undefined, sideBySide: { replicas: 500, joining: 400 } }),
  scenarios,
  failures: {},
});

describe('Function: mergeResults()', () => {
  it('puts the figures and details of a re-run scenario next to the earlier full run, and records where they came from', () => {
    // Prepare
    const base = { ...results({ throughputRatio: 0.5, callsPerForeignChange: 1 }, { throughput: { ratio: 1 } as never }, '2026-11-24T00:00:00Z'), failures: { 'side-by-side': 'Error: earlier' } };
    const partial = results({ callsPerForeignChange: 0, joinP99RatioVsCapi: 0.8 }, { sideBySide: { sizes: [100, 500] } as never }, '2026-11-25T03:00:00Z');

    // Act
    const merged = mergeResults(base, partial, ['side-by-side']);

    // Assess
    expect(merged).toMatchObject({ throughputRatio: 0.5, callsPerForeignChange: 0, joinP99RatioVsCapi: 0.8, failures: {} });
    expect(Object.keys(merged.scenarios).sort()).toEqual(['sideBySide', 'throughput']);
    expect(merged.targets.map((t) => t.figure)).toEqual([...FIGURE_KEYS]);
    expect(merged.targets.find((t) => t.figure === 'callsPerForeignChange')).toMatchObject({ measured: 0, met: true });
    expect(merged.targets.find((t) => t.figure === 'joinP99RatioVsCapi')).toMatchObject({ measured: 0.8, met: true });
    expect(merged.targets.find((t) => t.figure === 'throughputRatio')).toMatchObject({ measured: 0.5, met: false });
    expect(merged.partialRuns).toEqual([{ scenarios: ['side-by-side'], startedAt: '2026-11-25T03:00:00Z', durationSeconds: 1, machine: { loadAverage1m: 1 }, versions: {} }]);
  });
});
