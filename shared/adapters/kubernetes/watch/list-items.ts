/**
 * Reads a Kubernetes list response (`{"kind":…,"metadata":{…},"items":[{…},…]}`) from its bytes one item at a time,
 * as they arrive, holding only the current item's bytes: read whole, a page of 500 Nodes (about 1.5 MB of JSON) was
 * one large string (kept by V8 until a full collection) and some MB of parsed objects at once, for every page. It
 * frames, it does not validate: items and `metadata` are still read by JSON.parse; bytes that are not one JSON object
 * throw a SyntaxError, as JSON.parse would.
 */
import { StreamCapError } from './caps.ts';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

/** The list's own fields, once the whole response was read. */
export interface ListEnvelope {
  /** `metadata` (resourceVersion, continue), parsed; undefined when the list has none. */
  readonly metadata: unknown;
  /** Whether the list had an `items` array (an empty one counts). */
  readonly hadItems: boolean;
}

/**
 * Feed it the response's chunks in order ({@link push}), then call {@link end}. `onItem` receives the JSON text of
 * each element of the top-level `items` array (an element that is not an object is handed over as `undefined`).
 */
export class ListItemReader {
  private readonly onItem: (json: string | undefined) => void;
  /** Bytes not yet released: from the earliest start still needed (an item, `metadata`, a key) to the end of input. */
  private buf: Buffer = Buffer.alloc(0);
  private pos = 0;
  /** The open brackets (`{` or `[`), outermost first. */
  private readonly open: number[] = [];
  private inString = false;
  private escaped = false;
  /** Whether anything but white space came yet. */
  private started = false;
  private closed = false;
  /** At depth 1: a key is expected next (after `{` or `,`), and the last key read. */
  private expectKey = false;
  private key: string | undefined;
  private keyStart = -1;
  /** Start of `metadata`'s value (depth 1 → 2), of the current item (depth 2 → 3); -1 when none. */
  private metaStart = -1;
  private itemStart = -1;
  private inItems = false;
  /** The current element of `items` is not an object (reported once, at its end). */
  private oddItem = false;
  private metadata: unknown;
  private hadItems = false;

  private readonly maxBufferedBytes: number;
  private readonly operation: string;

  constructor(onItem: (json: string | undefined) => void, options: { readonly maxBufferedBytes?: number; readonly operation?: string } = {}) {
    this.onItem = onItem;
    this.maxBufferedBytes = options.maxBufferedBytes ?? Infinity;
    this.operation = options.operation ?? 'reading a list';
  }

  /**
   * Scans one more chunk; items completed by it are handed over before it returns. Throws StreamCapError when the
   * value being read (an item, the list's `metadata`, a key) would take more than `maxBufferedBytes`.
   */
  push(chunk: Buffer): void {
    for (let offset = 0; offset < chunk.length; ) {
      const room = this.maxBufferedBytes - this.buf.length;
      if (room <= 0) {
        this.buf = Buffer.alloc(0);
        throw new StreamCapError(this.operation, `a list item exceeds ${this.maxBufferedBytes} bytes`);
      }
      const piece = chunk.subarray(offset, offset + Math.min(room, chunk.length - offset));
      offset += piece.length;
      this.scan(piece);
    }
  }

  private scan(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const b = this.buf;
    const open = this.open;
    for (let i = this.pos; i < b.length; i++) {
      const c = b[i] as number;
      if (this.inString) {
        if (this.escaped) this.escaped = false;
        else if (c === BACKSLASH) this.escaped = true;
        else if (c === QUOTE) {
          this.inString = false;
          if (this.keyStart >= 0) {
            this.key = JSON.parse(b.toString('utf8', this.keyStart, i + 1)) as string;
            this.keyStart = -1;
          }
        }
        continue;
      }
      if (isSpace(c)) continue;
      if (this.closed) throw new SyntaxError('data after the end of the list');
      if (!this.started) {
        this.started = true;
        if (c !== OPEN_BRACE) throw new SyntaxError('the list is not a JSON object');
      }
      const depth = open.length;
      if (this.inItems && depth === 2 && c !== COMMA && c !== CLOSE_BRACKET && c !== OPEN_BRACE) this.oddItem = true;
      switch (c) {
        case QUOTE:
          this.inString = true;
          if (depth === 1 && this.expectKey) this.keyStart = i;
          break;
        case OPEN_BRACE:
        case OPEN_BRACKET:
          if (depth === 0) this.expectKey = true;
          else if (depth === 1) {
            if (this.key === 'metadata' && c === OPEN_BRACE) this.metaStart = i;
            if (this.key === 'items' && c === OPEN_BRACKET) {
              this.inItems = true;
              this.hadItems = true;
            }
          } else if (depth === 2 && this.inItems) {
            if (c === OPEN_BRACE) this.itemStart = i;
            else this.oddItem = true;
          }
          open.push(c);
          break;
        case CLOSE_BRACE:
        case CLOSE_BRACKET: {
          const opened = open.pop();
          if (opened !== (c === CLOSE_BRACE ? OPEN_BRACE : OPEN_BRACKET)) throw new SyntaxError('unbalanced brackets');
          const left = open.length;
          if (left === 2 && this.itemStart >= 0) {
            this.onItem(b.toString('utf8', this.itemStart, i + 1));
            this.itemStart = -1;
          } else if (left === 1) {
            if (this.metaStart >= 0) {
              this.metadata = JSON.parse(b.toString('utf8', this.metaStart, i + 1));
              this.metaStart = -1;
            }
            if (this.inItems) {
              this.endOddItem();
              this.inItems = false;
            }
          } else if (left === 0) this.closed = true;
          break;
        }
        case COMMA:
          if (depth === 1) this.expectKey = true;
          else if (depth === 2 && this.inItems) this.endOddItem();
          break;
        case COLON:
          if (depth === 1) this.expectKey = false;
          break;
        default:
          break;
      }
    }
    // Release what no pending value needs any more (a copy: a view would keep the whole chunk alive for its tail).
    const keep = Math.min(...[this.itemStart, this.metaStart, this.keyStart].filter((s) => s >= 0), b.length);
    this.buf = keep === b.length ? Buffer.alloc(0) : keep === 0 ? b : Buffer.from(b.subarray(keep));
    this.pos = b.length - keep;
    if (this.itemStart >= 0) this.itemStart -= keep;
    if (this.metaStart >= 0) this.metaStart -= keep;
    if (this.keyStart >= 0) this.keyStart -= keep;
  }

  /** Bytes held now (the part of the current item, `metadata` or key read so far): what a page costs at most. */
  get bufferedBytes(): number {
    return this.buf.length;
  }

  /** The input is complete: the list's own fields. Throws SyntaxError unless it was exactly one closed object. */
  end(): ListEnvelope {
    if (!this.closed || this.inString) throw new SyntaxError('the list ends early');
    return { metadata: this.metadata, hadItems: this.hadItems };
  }

  private endOddItem(): void {
    if (!this.oddItem) return;
    this.oddItem = false;
    this.onItem(undefined);
  }
}
