/**
 * The byte, page and time caps of the streaming reads (issue "One bad workload cluster cannot hurt the others"): a
 * stream over one is cut with a {@link StreamCapError}, a failed attempt like any other (backoff, reported failing).
 */
import { TransientError } from '#shared/errors.ts';

export interface StreamCaps {
  /** Longest watch line (one event), in bytes. */
  readonly maxLineBytes: number;
  /** Largest list item (one object's JSON), in bytes; also bounds the list's `metadata` and any key. */
  readonly maxItemBytes: number;
  readonly maxPageBytes: number;
  /** Largest whole list (every page), in bytes. */
  readonly maxListBytes: number;
  readonly maxPages: number;
  /** Longest time a whole list may take, in ms: bounds a server that answers every page just within its deadline. */
  readonly maxListMs: number;
  /** Malformed watch lines in a row after which the watch ends as failed. */
  readonly maxMalformedInARow: number;
}

const MiB = 1024 * 1024;

/** The caps of every stream unless its caller sets one; why these numbers: docs/watch-layer.md, "Caps". */
export const DEFAULT_STREAM_CAPS: StreamCaps = {
  maxLineBytes: 4 * MiB,
  maxItemBytes: 4 * MiB,
  maxPageBytes: 64 * MiB,
  maxListBytes: 512 * MiB,
  maxPages: 200,
  maxListMs: 10 * 60_000,
  maxMalformedInARow: 20,
};

/** A stream was cut at one of its caps; the message names the cap, never the bytes that exceeded it. */
export class StreamCapError extends TransientError {}
