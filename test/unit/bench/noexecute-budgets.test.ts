import { describe, expect, it } from 'vitest';
import { judge } from '../../../bench/lib/bench.ts';
import { budgetViolations, mostAtOnce, type BudgetSpec, type PodSample } from '../../../bench/scenarios/noexecute.ts';

const pod = (name: string, budget: string, healthy = true, deleted = false): PodSample => ({ name, budget, healthy, deleted });
const BUDGETS: BudgetSpec[] = [
  { name: 'a', minAvailable: 2 },
  { name: 'b', minAvailable: 1 },
];
const BASELINE = [pod('a1', 'a'), pod('a2', 'a'), pod('a3', 'a'), pod('b1', 'b'), pod('b2', 'b')];

describe('Function: budgetViolations()', () => {
  it.each([
    {
      case: 'nothing happens: every budget kept at its baseline',
      samples: [],
      expected: [
        { budget: 'a', minAvailable: 2, fewestHealthy: 3, shortfall: 0 },
        { budget: 'b', minAvailable: 1, fewestHealthy: 2, shortfall: 0 },
      ],
    },
    {
      case: 'one at a time, each replaced (a new pod, then Ready) before the next goes: kept',
      samples: [pod('a1', 'a', true, true), pod('r1', 'a', false), pod('r1', 'a'), pod('a2', 'a', false), pod('a2', 'a', false, true), pod('r2', 'a', false), pod('r2', 'a')],
      expected: [
        { budget: 'a', minAvailable: 2, fewestHealthy: 2, shortfall: 0 },
        { budget: 'b', minAvailable: 1, fewestHealthy: 2, shortfall: 0 },
      ],
    },
    {
      case: 'all deleted at once (the taint-eviction controller), replaced after: both below their minimum, by how much',
      samples: [pod('a1', 'a', false), pod('a2', 'a', true, true), pod('a3', 'a', true, true), pod('b1', 'b', true, true), pod('b2', 'b', true, true), pod('r1', 'a'), pod('r2', 'a'), pod('r3', 'b')],
      expected: [
        { budget: 'a', minAvailable: 2, fewestHealthy: 0, shortfall: 2 },
        { budget: 'b', minAvailable: 1, fewestHealthy: 0, shortfall: 1 },
      ],
    },
    {
      case: 'a pod of no budget and a repeated event of the same pod change nothing',
      samples: [pod('x', 'other', false, true), pod('b1', 'b', true, true), pod('b1', 'b', true, true)],
      expected: [
        { budget: 'a', minAvailable: 2, fewestHealthy: 3, shortfall: 0 },
        { budget: 'b', minAvailable: 1, fewestHealthy: 1, shortfall: 0 },
      ],
    },
  ])('$case', ({ samples, expected }) => {
    // Act
    const violations = budgetViolations(BUDGETS, BASELINE, samples);

    // Assess
    expect(violations).toEqual(expected);
  });
});

describe('Function: mostAtOnce()', () => {
  it.each([
    { case: 'none', transitions: [], expected: 0 },
    { case: 'one after the other', transitions: [{ member: 'n1', in: true }, { member: 'n1', in: false }, { member: 'n2', in: true }, { member: 'n2', in: false }], expected: 1 },
    { case: 'overlapping, a repeated "in" counted once', transitions: [{ member: 'n1', in: true }, { member: 'n2', in: true }, { member: 'n2', in: true }, { member: 'n1', in: false }, { member: 'n3', in: true }], expected: 2 },
    { case: 'an "out" of a Node never in', transitions: [{ member: 'n1', in: false }, { member: 'n2', in: true }], expected: 1 },
  ])('$case → $expected', ({ transitions, expected }) => {
    expect(mostAtOnce(transitions)).toBe(expected);
  });
});

describe('Function: judge() on the NoExecute figures', () => {
  it('judges the staged figures at 50 × 20 against the bound and 0 violations, reports the rest, and leaves smaller runs unjudged', () => {
    // Prepare
    const figures = { noExecuteImmediatePodsDeletedPerSecond: 900, noExecuteImmediateBudgetsViolated: 3, noExecuteStagedMaxInProgress: 6, noExecuteStagedBudgetsViolated: 0, noExecuteStagedSeconds: 120 };

    // Act
    const atSize = judge(figures, { throughputAtN: undefined, e2eRate: undefined, forwarderObjects: undefined, forwarder20kObjects: undefined, fleet: undefined, noExecute: { nodes: 50, podsPerNode: 20, bound: 5 } }).filter((t) => t.figure.startsWith('noExecute'));
    const smoke = judge(figures, { throughputAtN: undefined, e2eRate: undefined, forwarderObjects: undefined, forwarder20kObjects: undefined, fleet: undefined, noExecute: { nodes: 3, podsPerNode: 4, bound: 1 } }).filter((t) => t.figure.startsWith('noExecute'));

    // Assess
    expect(atSize.map((t) => [t.figure, t.met])).toEqual([
      ['noExecuteImmediatePodsDeletedPerSecond', true],
      ['noExecuteImmediateBudgetsViolated', true],
      ['noExecuteStagedMaxInProgress', false],
      ['noExecuteStagedBudgetsViolated', true],
      ['noExecuteStagedSeconds', true],
    ]);
    expect(smoke.every((t) => t.met === undefined && t.measured !== undefined)).toBe(true);
  });
});
