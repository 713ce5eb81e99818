/**
 * Bytes → lines, with a cap on a line's bytes: the framing of a watch (one JSON event per line). It replaces
 * `node:readline`, which has no limit and so holds an endless line in memory as long as the server sends it. A line
 * is decoded as UTF-8 once complete (a character split between chunks is read whole); `\r\n` and `\n` both end it.
 */
import { StreamCapError } from './caps.ts';

const NEWLINE = 0x0a;
const CR = 0x0d;

/** Splits chunks into lines; {@link push} returns the lines each chunk completes. */
export class LineSplitter {
  private readonly maxLineBytes: number;
  private readonly operation: string;
  /** The incomplete line so far, as the pieces of chunks it came in. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;

  constructor(maxLineBytes: number, operation = 'reading a watch') {
    this.maxLineBytes = maxLineBytes;
    this.operation = operation;
  }

  /** Bytes held now (the incomplete line): never more than the cap. */
  get bufferedBytes(): number {
    return this.pendingBytes;
  }

  /** The lines this chunk completes (without their line ends). Throws StreamCapError when a line would exceed the cap. */
  push(chunk: Buffer): string[] {
    const lines: string[] = [];
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(NEWLINE, start);
      const end = nl === -1 ? chunk.length : nl;
      // A line end takes no room: bytes up to it must fit, the newline itself is never kept.
      this.keep(chunk.subarray(start, end));
      if (nl === -1) return lines;
      lines.push(this.take());
      start = nl + 1;
    }
  }

  /** The last line when the input ended without a line end (undefined when there is none). */
  end(): string | undefined {
    return this.pendingBytes === 0 ? undefined : this.take();
  }

  private keep(piece: Buffer): void {
    if (piece.length === 0) return;
    if (this.pendingBytes + piece.length > this.maxLineBytes) {
      this.pending = [];
      this.pendingBytes = 0;
      throw new StreamCapError(this.operation, `a line exceeds ${this.maxLineBytes} bytes`);
    }
    // A copy: a view would keep the whole chunk alive for the few bytes of it that start the next line.
    this.pending.push(Buffer.from(piece));
    this.pendingBytes += piece.length;
  }

  private take(): string {
    const bytes = this.pending.length === 1 ? (this.pending[0] as Buffer) : Buffer.concat(this.pending, this.pendingBytes);
    this.pending = [];
    this.pendingBytes = 0;
    const n = bytes.length > 0 && bytes[bytes.length - 1] === CR ? bytes.length - 1 : bytes.length;
    return bytes.toString('utf8', 0, n);
  }
}

/**
 * The lines of a byte stream (a watch response), read as they arrive. Throws StreamCapError at the first line longer
 * than `maxLineBytes`, having held at most that many bytes of it; the caller destroys the stream.
 */
export async function* readLines(source: AsyncIterable<Buffer | string>, maxLineBytes: number, operation?: string): AsyncGenerator<string> {
  const splitter = new LineSplitter(maxLineBytes, operation);
  for await (const chunk of source) {
    for (const line of splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)) yield line;
  }
  const last = splitter.end();
  if (last !== undefined) yield last;
}
