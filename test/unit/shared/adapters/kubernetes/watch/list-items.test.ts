import { describe, expect, it } from 'vitest';
import { StreamCapError } from '#shared/adapters/kubernetes/watch/caps.ts';
import { ListItemReader, type ListEnvelope } from '#shared/adapters/kubernetes/watch/list-items.ts';

/** Reads `text` in chunks of `size` bytes; returns the items handed over and the envelope. */
function read(text: string, size = Infinity): { items: Array<string | undefined>; envelope: ListEnvelope } {
  const items: Array<string | undefined> = [];
  const reader = new ListItemReader((json) => items.push(json));
  const bytes = Buffer.from(text, 'utf8');
  for (let i = 0; i < bytes.length; i += Math.min(size, bytes.length)) reader.push(bytes.subarray(i, i + size));
  return { items, envelope: reader.end() };
}

// Strings that look like structure, escapes, and multi-byte characters (split across chunks below).
const tricky = { metadata: { name: 'n{1}', uid: 'u"[', resourceVersion: '7', annotations: { 'a/b': 'x\\"}],{', 'é': '日本 ✓' } }, spec: { taints: [] } };
const plain = { metadata: { name: 'n2', uid: 'u2', resourceVersion: '8' } };

describe('Class: ListItemReader', () => {
  it('hands over each item and the list metadata, however the bytes are split', () => {
    // Prepare
    const text = JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: '9', continue: 'c"1' }, items: [tricky, plain] }, null, 1);

    for (let size = 1; size <= text.length; size++) {
      // Act
      const { items, envelope } = read(text, size);

      // Assess
      expect(items.map((i) => JSON.parse(i ?? 'null')), `chunks of ${size}`).toEqual([tricky, plain]);
      expect(envelope, `chunks of ${size}`).toEqual({ metadata: { resourceVersion: '9', continue: 'c"1' }, hadItems: true });
    }
  });

  it('reads the metadata wherever it comes, and keys that only look like ours inside items are left alone', () => {
    // Prepare
    const text = JSON.stringify({ items: [{ metadata: { name: 'x' }, items: [1] }], kind: 'List', metadata: { resourceVersion: '3' } });

    // Act
    const { items, envelope } = read(text, 7);

    // Assess
    expect(items.map((i) => JSON.parse(i ?? 'null'))).toEqual([{ metadata: { name: 'x' }, items: [1] }]);
    expect(envelope).toEqual({ metadata: { resourceVersion: '3' }, hadItems: true });
  });

  const envelopes: ReadonlyArray<{ name: string; text: string; want: ListEnvelope; items: number }> = [
    { name: 'an empty list', text: '{"metadata":{"resourceVersion":"1"},"items":[]}', want: { metadata: { resourceVersion: '1' }, hadItems: true }, items: 0 },
    { name: 'no items', text: '{"metadata":{"resourceVersion":"1"}}', want: { metadata: { resourceVersion: '1' }, hadItems: false }, items: 0 },
    { name: 'items null', text: '{"metadata":{},"items":null}', want: { metadata: {}, hadItems: false }, items: 0 },
    { name: 'no metadata', text: '{"items":[{"a":1}]}', want: { metadata: undefined, hadItems: true }, items: 1 },
  ];
  it.each(envelopes)('reports $name', ({ text, want, items }) => {
    // Act
    const got = read(text, 5);

    // Assess
    expect(got.envelope).toEqual(want);
    expect(got.items).toHaveLength(items);
  });

  it('hands over an element that is not an object as undefined, once per element', () => {
    // Act
    const { items } = read('{"metadata":{},"items":[{"a":1}, "s,]", 12, null, [1,{"b":2}], {"c":3}]}', 3);

    // Assess
    expect(items).toEqual(['{"a":1}', undefined, undefined, undefined, undefined, '{"c":3}']);
  });

  const broken: ReadonlyArray<{ name: string; text: string }> = [
    { name: 'a truncated list', text: '{"metadata":{},"items":[{"a":1},{"b"' },
    { name: 'a string left open', text: '{"metadata":{},"items":[],"x":"abc}' },
    { name: 'an array', text: '[{"a":1}]' },
    { name: 'an HTML page', text: '<html>hello</html>' },
    { name: 'nothing', text: '  ' },
    { name: 'mismatched brackets', text: '{"metadata":{},"items":[{"a":1]]}' },
    { name: 'data after the list', text: '{"metadata":{},"items":[]} {}' },
  ];
  it.each(broken)('refuses $name', ({ text }) => {
    // Act / Assess
    expect(() => read(text, 4)).toThrow(SyntaxError);
  });

  it('keeps only the bytes of the item being read, not the page', () => {
    // Prepare: 2 000 items of about 1 KB each, in chunks of 16 KiB, as a response arrives.
    const item = (i: number) => ({ metadata: { name: `n${i}`, uid: `u${i}`, resourceVersion: String(i) }, status: { images: ['x'.repeat(1000)] } });
    const bytes = Buffer.from(JSON.stringify({ metadata: { resourceVersion: '1' }, items: Array.from({ length: 2000 }, (_, i) => item(i)) }));
    let count = 0;
    let most = 0;
    const reader = new ListItemReader(() => count++);

    // Act
    for (let i = 0; i < bytes.length; i += 16_384) {
      reader.push(bytes.subarray(i, i + 16_384));
      most = Math.max(most, reader.bufferedBytes);
    }

    // Assess
    expect(count).toBe(2000);
    expect(bytes.length).toBeGreaterThan(2_000_000);
    expect(most).toBeLessThan(16_384 + 1_200);
    expect(reader.end().hadItems).toBe(true);
  });

  it('never holds more than its cap of a 100 MiB item (or metadata), and refuses it before keeping the bytes past the cap', () => {
    for (const opening of ['{"items":[{"x":"', '{"metadata":{"x":"']) {
      // Prepare
      const cap = 4 * 1024 * 1024;
      const reader = new ListItemReader(() => undefined, { maxBufferedBytes: cap, operation: 'listing /api/v1/nodes' });
      const chunk = Buffer.alloc(64 * 1024, 0x61);
      reader.push(Buffer.from(opening));
      let fed = 0;
      let most = 0;
      let error: unknown;

      // Act
      while (fed < 100 * 1024 * 1024 && error === undefined) {
        try {
          reader.push(chunk);
          fed += chunk.length;
          most = Math.max(most, reader.bufferedBytes);
        } catch (e) {
          error = e;
        }
      }

      // Assess
      expect(error, opening).toBeInstanceOf(StreamCapError);
      expect((error as Error).message).toBe(`listing /api/v1/nodes failed: a list item exceeds ${cap} bytes`);
      expect(most, opening).toBeLessThanOrEqual(cap);
      expect(fed, opening).toBeLessThan(cap);
    }
  });
});
