/**
 * The taint vocabulary: identity by key+effect, value folding and the Kubernetes string form.
 */
import { describe, expect, it } from 'vitest';
import { formatTaint, isSameTaint, taintId, valueOf } from '#shared/domain/taint.ts';
import { machineTaint, nodeTaint } from '#test/support/builders.ts';

describe('Function: taintId()', () => {
  it('joins key and effect with a colon, ignoring the value', () => {
    // Act
    const id = taintId(nodeTaint('example.com/gpu', 'a100', 'NoExecute'));

    // Assess
    expect(id).toBe('example.com/gpu:NoExecute');
  });
});

describe('Function: isSameTaint()', () => {
  const cases = [
    { name: 'matches the same key and effect whatever the values', a: nodeTaint('a', '1'), b: nodeTaint('a', '2'), want: true },
    { name: 'does not match another effect', a: nodeTaint('a'), b: nodeTaint('a', undefined, 'NoExecute'), want: false },
    { name: 'does not match another key', a: nodeTaint('a'), b: nodeTaint('b'), want: false },
  ];

  it.each(cases)('$name', ({ a, b, want }) => {
    // Act
    const same = isSameTaint(a, b);

    // Assess
    expect(same).toBe(want);
  });
});

describe('Function: valueOf()', () => {
  it('folds an absent value into the empty string', () => {
    // Assess
    expect([valueOf(nodeTaint('a')), valueOf({ value: '' }), valueOf(nodeTaint('a', 'v'))]).toEqual(['', '', 'v']);
  });
});

describe('Function: formatTaint()', () => {
  const cases = [
    { name: 'formats key=value:effect', taint: machineTaint('gpu', 'a100'), want: 'gpu=a100:NoSchedule' },
    { name: 'formats key:effect without a value', taint: nodeTaint('gpu', undefined, 'NoExecute'), want: 'gpu:NoExecute' },
    { name: 'formats an explicit empty value as no value', taint: { key: 'gpu', value: '', effect: 'NoSchedule' }, want: 'gpu:NoSchedule' },
  ];

  it.each(cases)('$name', ({ taint, want }) => {
    // Act
    const formatted = formatTaint(taint);

    // Assess
    expect(formatted).toBe(want);
  });
});
