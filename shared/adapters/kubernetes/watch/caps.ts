/**
 * The byte, page and time caps of the streaming reads (issue "One bad workload cluster cannot hurt the others"), in one
 * place with their reasons. A stream that exceeds one is cut with a {@link StreamCapError} (its message names the cap,
 * never the bytes), which the retry policy treats like any failed attempt: backoff, and the cluster reported failing.
 *
 * Why these numbers:
 * - **4 MiB for one watch line and one list item.** etcd stores at most 1.5 MiB per object, and kube-apiserver accepts
 *   request bodies of at most 3 MiB; an object's JSON (which is what a watch event or a list item carries) can be larger
 *   than its stored protobuf, but not larger than the biggest body a client could have written. 4 MiB is above both,
 *   with room for the event's envelope (`{"type":"MODIFIED","object":…}`), and it bounds what one stream holds at once.
 * - **64 MiB for one list page.** A page of 500 Nodes is about 1.5 MB (the review's measure); 64 MiB is forty times
 *   that. Items are read one at a time (list-items.ts), so this bounds traffic and time, not memory.
 * - **512 MiB and 200 pages for one whole list.** 200 pages of 500 are 100 000 objects: above Kubernetes' published
 *   scalability envelope (5 000 Nodes, 150 000 Pods per cluster) for the Nodes of a cluster, and above any management
 *   cluster's Machines we know of. A server whose `continue` tokens never end is cut here.
 * - **10 minutes for one whole list.** Each page already has its own deadline (the request timeout, 30 s); this bounds a
 *   server that answers every page just in time. A list of 100 000 objects at 500 per page is 200 pages; at the
 *   1-2 s a page of that size takes, a tenth of the time.
 * - **20 malformed watch lines in a row** end a watch as failed: one odd line among events is skipped (and counted),
 *   as before; a stream of nothing but garbage is not a watch.
 */
import { TransientError } from '#shared/errors.ts';

export interface StreamCaps {
  /** Longest watch line (one event), in bytes. */
  readonly maxLineBytes: number;
  /** Largest list item (one object's JSON), in bytes; also bounds the list's `metadata` and any key. */
  readonly maxItemBytes: number;
  /** Largest list page, in bytes. */
  readonly maxPageBytes: number;
  /** Largest whole list (every page), in bytes. */
  readonly maxListBytes: number;
  /** Most pages of one list. */
  readonly maxPages: number;
  /** Longest time a whole list may take, in ms. */
  readonly maxListMs: number;
  /** Malformed watch lines in a row after which the watch ends as failed. */
  readonly maxMalformedInARow: number;
}

const MiB = 1024 * 1024;

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
