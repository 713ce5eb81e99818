/**
 * The one paged list of the product (client-go's `tools/pager`; docs/watch-layer.md). The request (`openPage`, as the
 * pager's ListFunc) and the error of a non-200 answer (`failed`) are the caller's: the watch session and `kubeList`
 * (kube-http.ts) share it with their own credentials, deadline and errors.
 */
import { isObject } from '#shared/model/json.ts';
import { TransientError } from '#shared/errors.ts';
import { DEFAULT_STREAM_CAPS, StreamCapError, type StreamCaps } from './caps.ts';
import { ListItemReader } from './list-items.ts';
import { linkAbort } from './abort-link.ts';

/** An answer to one page's request: its status and its body as a byte stream (node:http's IncomingMessage is one). */
export interface PageResponse extends AsyncIterable<Buffer | string> {
  readonly statusCode?: number | undefined;
  destroy(error?: Error): unknown;
}

export interface ListPagesOptions {
  /** Opens the request of one page; `query` holds limit, continue, resourceVersion and resourceVersionMatch. */
  readonly openPage: (query: Readonly<Record<string, string | undefined>>, signal: AbortSignal) => Promise<PageResponse>;
  /** The error for a non-200 answer (reads what it needs of the body). */
  readonly failed: (response: PageResponse, status: number) => Promise<Error>;
  /** The signal of one page (a fresh deadline for each). */
  readonly pageSignal: () => AbortSignal;
  /** A long-lived signal (a session's) that also ends every page: linked to each page, unlinked after it. */
  readonly signal?: AbortSignal;
  /** Each item's JSON text, in order; undefined for an element of `items` that is not an object. */
  readonly onItem: (json: string | undefined) => void;
  readonly pageSize: number;
  /** List exactly at this resourceVersion (the first page; the continue token carries it on). */
  readonly exactly?: string;
  /** Names the list in errors, e.g. `listing /api/v1/nodes`. */
  readonly operation: string;
  readonly caps?: Partial<StreamCaps>;
  /** The time in epoch ms, for the whole-list time cap (default Date.now). */
  readonly now?: () => number;
}

/**
 * Reads every page of a list; returns the list's resourceVersion (from its first page; undefined when it has none).
 * Rejects with `failed`'s error for a non-200 page, a TransientError for an answer that is not a list (empty, not
 * JSON, no `items`), a StreamCapError at a cap, or the page signal's reason when it fired.
 */
export async function listPages(o: ListPagesOptions): Promise<{ resourceVersion: string | undefined }> {
  const caps = { ...DEFAULT_STREAM_CAPS, ...o.caps };
  const now = o.now ?? Date.now;
  const started = now();
  let cont: string | undefined;
  let resourceVersion: string | undefined;
  let pages = 0;
  let bytes = 0;
  do {
    if (pages >= caps.maxPages) throw new StreamCapError(o.operation, `the list has more than ${caps.maxPages} pages`);
    if (now() - started > caps.maxListMs) throw new StreamCapError(o.operation, `the list took longer than ${caps.maxListMs} ms`);
    const query = cont
      ? { limit: String(o.pageSize), continue: cont }
      : { limit: String(o.pageSize), resourceVersion: o.exactly, resourceVersionMatch: o.exactly ? 'Exact' : undefined };
    const page = new AbortController();
    const unlink = linkAbort(page, o.signal ? [o.signal, o.pageSignal()] : [o.pageSignal()]);
    let envelope;
    let pageBytes = 0;
    try {
      const res = await o.openPage(query, page.signal);
      const status = res.statusCode ?? 0;
      if (status !== 200) throw await o.failed(res, status);
      const reader = new ListItemReader(o.onItem, { maxBufferedBytes: caps.maxItemBytes, operation: o.operation });
      try {
        for await (const c of res) {
          const chunk = typeof c === 'string' ? Buffer.from(c) : c;
          pageBytes += chunk.length;
          if (pageBytes > caps.maxPageBytes) throw new StreamCapError(o.operation, `a list page exceeds ${caps.maxPageBytes} bytes`);
          if (bytes + pageBytes > caps.maxListBytes) throw new StreamCapError(o.operation, `the list exceeds ${caps.maxListBytes} bytes`);
          reader.push(chunk);
        }
        envelope = reader.end();
      } catch (err) {
        res.destroy();
        if (page.signal.aborted) throw page.signal.reason;
        // Never the text itself in the error (a SyntaxError quotes it): a server named by a kubeconfig may echo anything.
        if (err instanceof SyntaxError) {
          throw new TransientError(o.operation, `the list answer is ${pageBytes === 0 ? 'empty' : 'not JSON'}`);
        }
        throw err;
      }
    } finally {
      unlink();
    }
    pages++;
    bytes += pageBytes;
    const metadata = envelope.metadata;
    if (!isObject(metadata) || !envelope.hadItems) throw new TransientError(o.operation, 'the answer is not a list');
    resourceVersion ??= typeof metadata.resourceVersion === 'string' && metadata.resourceVersion !== '' ? metadata.resourceVersion : undefined;
    cont = typeof metadata.continue === 'string' && metadata.continue !== '' ? metadata.continue : undefined;
  } while (cont);
  return { resourceVersion };
}

/** At most `max` bytes of an error answer's body (a Status), as text; the rest is not read (the stream is destroyed). */
export async function readErrorBody(res: PageResponse, max = 4096): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const c of res) {
      const chunk = typeof c === 'string' ? Buffer.from(c) : c;
      chunks.push(chunk.subarray(0, max - size));
      size += Math.min(chunk.length, max - size);
      if (size >= max) break;
    }
  } catch {
    // what arrived is enough to name the status
  } finally {
    res.destroy();
  }
  return Buffer.concat(chunks).toString('utf8');
}
