/**
 * The tracking annotation `cluster.x-k8s.io/taints-from-machine` (upstream-capi.md §3.6, Q7, Q8).
 */
import type { TaintId } from '#shared/domain/taint.ts';
import { describe, expect, it } from 'vitest';
import { MalformedTrackingAnnotationError } from '#shared/errors.ts';
import { decodeOwnedTaints, encodeOwnedTaints, parseOwnedTaintId } from '#shared/domain/tracking-annotation.ts';

describe('Function: encodeOwnedTaints()', () => {
  const cases: ReadonlyArray<{ name: string; ids: string[]; want: string }> = [
    { name: 'encodes no owned taints as the empty string', ids: [], want: '' },
    { name: 'encodes one entry without separators', ids: ['gpu:NoSchedule'], want: 'gpu:NoSchedule' },
    {
      name: 'sorts byte-wise: uppercase before lowercase, and a-b < a.b < a/b < a: (Q8)',
      ids: ['a:NoSchedule', 'a/b:NoSchedule', 'a.b:NoSchedule', 'a-b:NoSchedule', 'B:NoSchedule'],
      want: 'B:NoSchedule,a-b:NoSchedule,a.b:NoSchedule,a/b:NoSchedule,a:NoSchedule',
    },
    {
      name: 'sorts the effects of one key byte-wise',
      ids: ['dedicated:PreferNoSchedule', 'dedicated:NoSchedule', 'dedicated:NoExecute'],
      want: 'dedicated:NoExecute,dedicated:NoSchedule,dedicated:PreferNoSchedule',
    },
    { name: 'folds duplicates', ids: ['a:NoSchedule', 'a:NoSchedule'], want: 'a:NoSchedule' },
  ];

  it.each(cases)('$name', ({ ids, want }) => {
    // Act
    const encoded = encodeOwnedTaints(ids);

    // Assess
    expect(encoded).toBe(want);
  });

  it('accepts any iterable, such as a Set', () => {
    // Act
    const encoded = encodeOwnedTaints(new Set(['b:NoSchedule', 'a:NoSchedule']));

    // Assess
    expect(encoded).toBe('a:NoSchedule,b:NoSchedule');
  });
});

describe('Function: decodeOwnedTaints()', () => {
  const cases: ReadonlyArray<{ name: string; value: string; want: string[] }> = [
    { name: 'decodes the empty string as no entries', value: '', want: [] },
    { name: 'splits on commas', value: 'a:NoSchedule,b:NoExecute', want: ['a:NoSchedule', 'b:NoExecute'] },
    { name: 'drops a trailing comma and empty entries', value: 'a:NoSchedule,,b:NoExecute,', want: ['a:NoSchedule', 'b:NoExecute'] },
    { name: 'decodes only commas as no entries', value: ',,', want: [] },
    { name: 'folds duplicate entries', value: 'a:NoSchedule,a:NoSchedule', want: ['a:NoSchedule'] },
    { name: 'does not trim whitespace (Q8)', value: ' a:NoSchedule, b:NoExecute ', want: [' a:NoSchedule', ' b:NoExecute '] },
    { name: 'keeps malformed entries uninterpreted', value: 'junk,a:b:c', want: ['junk', 'a:b:c'] },
  ];

  it.each(cases)('$name', ({ value, want }) => {
    // Act
    const decoded = decodeOwnedTaints(value);

    // Assess
    expect([...decoded]).toEqual(want);
  });
});

describe('Function: parseOwnedTaintId()', () => {
  const valid: ReadonlyArray<{ name: string; entry: string; want: TaintId }> = [
    { name: 'parses key:effect', entry: 'example.com/gpu:NoSchedule', want: { key: 'example.com/gpu', effect: 'NoSchedule' } },
    { name: 'tolerates an empty key (":NoSchedule")', entry: ':NoSchedule', want: { key: '', effect: 'NoSchedule' } },
    { name: 'tolerates an empty effect ("a:")', entry: 'a:', want: { key: 'a', effect: '' } },
    { name: 'keeps leading whitespace in the key (" a:NoSchedule")', entry: ' a:NoSchedule', want: { key: ' a', effect: 'NoSchedule' } },
  ];

  it.each(valid)('$name', ({ entry, want }) => {
    // Act
    const parsed = parseOwnedTaintId(entry);

    // Assess
    expect(parsed).toEqual(want);
  });

  const malformed: ReadonlyArray<{ name: string; entry: string; message: string }> = [
    { name: 'refuses an entry without a colon', entry: 'junk', message: 'invalid taint format: "junk"' },
    { name: 'refuses an entry with two colons', entry: 'a:b:NoSchedule', message: 'invalid taint format: "a:b:NoSchedule"' },
    { name: 'quotes the entry like Go %q', entry: 'say "hi"', message: 'invalid taint format: "say \\"hi\\""' },
  ];

  it.each(malformed)('$name', ({ entry, message }) => {
    // Act
    const act = () => parseOwnedTaintId(entry);

    // Assess
    expect(act).toThrow(MalformedTrackingAnnotationError);
    expect(act).toThrow(message);
    try {
      act();
    } catch (error) {
      expect(error).toMatchObject({ entry, retryable: false, name: 'MalformedTrackingAnnotationError' });
    }
  });
});
