import { describe, expect, it } from 'vitest';
import { StreamCapError } from '#shared/adapters/kubernetes/watch/caps.ts';
import { LineSplitter, readLines } from '#shared/adapters/kubernetes/watch/line-reader.ts';

const MiB = 1024 * 1024;

/** Every line `text` gives when fed in chunks of `size` bytes. */
function split(text: string, size: number, cap = 1024): string[] {
  const splitter = new LineSplitter(cap);
  const bytes = Buffer.from(text, 'utf8');
  const lines: string[] = [];
  for (let i = 0; i < bytes.length; i += size) lines.push(...splitter.push(bytes.subarray(i, i + size)));
  const last = splitter.end();
  return last === undefined ? lines : [...lines, last];
}

describe('Class: LineSplitter', () => {
  it('gives the same lines however the bytes are split, multi-byte characters and CRLF included', () => {
    // Prepare
    const text = '{"a":"日本 ✓"}\r\n\n{"b":"é"}\n{"c":1}';

    for (let size = 1; size <= Buffer.byteLength(text); size++) {
      // Act
      const lines = split(text, size);

      // Assess
      expect(lines, `chunks of ${size}`).toEqual(['{"a":"日本 ✓"}', '', '{"b":"é"}', '{"c":1}']);
    }
  });

  it('takes a line of exactly the cap, and refuses one byte more before keeping it', () => {
    // Prepare
    const fits = new LineSplitter(8);
    const over = new LineSplitter(8);

    // Act
    const lines = fits.push(Buffer.from('12345678\n'));
    over.push(Buffer.from('1234'));
    const error = (() => {
      try {
        over.push(Buffer.from('56789'));
        return undefined;
      } catch (e) {
        return e;
      }
    })();

    // Assess
    expect(lines).toEqual(['12345678']);
    expect(error).toBeInstanceOf(StreamCapError);
    expect((error as Error).message).toBe('reading a watch failed: a line exceeds 8 bytes');
    expect(over.bufferedBytes).toBe(0);
  });

  it('never holds more than the cap of a 100 MiB line fed in 64 KiB chunks, and stops at the first chunk past it', () => {
    // Prepare
    const cap = 4 * MiB;
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const splitter = new LineSplitter(cap);
    let fed = 0;
    let most = 0;
    let error: unknown;

    // Act
    while (fed < 100 * MiB && error === undefined) {
      try {
        splitter.push(chunk);
        fed += chunk.length;
        most = Math.max(most, splitter.bufferedBytes);
      } catch (e) {
        error = e;
      }
    }

    // Assess
    expect(error).toBeInstanceOf(StreamCapError);
    expect(most).toBeLessThanOrEqual(cap);
    expect(fed).toBe(cap);
  });
});

describe('Function: readLines()', () => {
  it('reads a 100 MiB line only up to the cap, then throws and pulls no more', async () => {
    // Prepare: a lazy source; nothing of the 100 MiB exists until it is pulled.
    const cap = 4 * MiB;
    let pulled = 0;
    async function* source(): AsyncGenerator<Buffer> {
      yield Buffer.from('{"type":"BOOKMARK"}\n');
      for (let i = 0; i < 100 * 16; i++) {
        pulled++;
        yield Buffer.alloc(64 * 1024, 0x61);
      }
    }
    const lines: string[] = [];

    // Act
    const error = await (async () => {
      for await (const line of readLines(source(), cap)) lines.push(line);
    })().then(
      () => undefined,
      (e: unknown) => e,
    );

    // Assess
    expect(lines).toEqual(['{"type":"BOOKMARK"}']);
    expect(error).toBeInstanceOf(StreamCapError);
    expect(pulled).toBe(cap / (64 * 1024) + 1);
  });

  it('gives the last line of a stream that ends without a line end, and strings as bytes', async () => {
    // Prepare
    async function* source(): AsyncGenerator<Buffer | string> {
      yield 'a\nb';
      yield Buffer.from('c');
    }
    const lines: string[] = [];

    // Act
    for await (const line of readLines(source(), 16)) lines.push(line);

    // Assess
    expect(lines).toEqual(['a', 'bc']);
  });
});
