import { describe, expect, it } from 'vitest';
import { parseSideBySideSizes } from '../../../bench/scenarios/side-by-side.ts';

describe('Function: parseSideBySideSizes()', () => {
  it('reads the size steps, one or several, in order', () => {
    // Act & Assess
    expect(parseSideBySideSizes('100')).toEqual([100]);
    expect(parseSideBySideSizes('100,500')).toEqual([100, 500]);
    expect(parseSideBySideSizes(' 20, 50')).toEqual([20, 50]);
  });

  it('refuses a step that is not a positive integer, or not above the one before, quoting the text', () => {
    // Act & Assess
    for (const text of ['', '0', '-5', '100,', '1.5', 'a', '500,100', '100,100']) {
      expect(() => parseSideBySideSizes(text), text).toThrow(`--side-by-side-sizes must be increasing positive integers (replicas per side after each scale-up, comma-separated), got ${JSON.stringify(text)}`);
    }
  });
});
