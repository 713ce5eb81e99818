/**
 * One watch request (docs/watch-layer.md): its connect deadline, idle watchdog (kube-apiserver sends a bookmark about
 * once a minute, so a watch silent for longer is a dead connection; client-go relies on HTTP/2 pings, the product
 * speaks HTTP/1.1), resync timer and line cap. It yields lines; it does not decode. The watchdog's tick (at most every
 * second) also checks the resync time and `onEstablished`: only the connect deadline, due before any answer, has a
 * timer of its own.
 */
import { TransientError } from '#shared/errors.ts';
import { linkAbort } from './abort-link.ts';
import { readLines } from './line-reader.ts';
import type { PageResponse } from './list-pager.ts';

export type WatchEnd = 'closed' | 'idle' | 'resync' | 'aborted';

export interface WatchConnectionOptions {
  /** Opens the watch request (the caller builds its query and credentials). */
  readonly open: (signal: AbortSignal) => Promise<PageResponse>;
  readonly failed: (response: PageResponse, status: number) => Promise<Error>;
  /** Names the watch in errors, e.g. `watching /api/v1/nodes`. */
  readonly operation: string;
  readonly connectTimeoutMs: number;
  readonly idleTimeoutMs: number;
  /** Epoch ms at which to end the watch for a periodic resync (Infinity: never). */
  readonly resyncAt: number;
  readonly maxLineBytes: number;
  /** The session's signal: its abort ends the watch as `aborted`. */
  readonly signal: AbortSignal;
  /** Called once, at the first watchdog tick after the watch has been open for `establishedAfterMs`. */
  readonly onEstablished?: () => void;
  readonly establishedAfterMs?: number;
}

export class WatchConnection {
  private readonly o: WatchConnectionOptions;
  private readonly controller: AbortController;
  private readonly res: PageResponse;
  private readonly watchdog: NodeJS.Timeout;
  private readonly unlink: () => void;
  /** Epoch ms when the answer's headers arrived. */
  readonly openedAt: number;
  private lastActivity: number;
  private busy = false;
  private established = false;
  private why: WatchEnd = 'closed';

  /**
   * Opens the watch; rejects with a TransientError when no answer came within the connect deadline, with `failed`'s
   * error for a non-200 answer, or with the transport's error.
   */
  static async open(o: WatchConnectionOptions): Promise<WatchConnection> {
    // The request ends when the session aborts, at the connect deadline, or when this watch is cut or closed.
    const controller = new AbortController();
    const unlink = linkAbort(controller, [o.signal]);
    const deadline = AbortSignal.timeout(o.connectTimeoutMs);
    const unlinkDeadline = linkAbort(controller, [deadline]);
    let res: PageResponse;
    try {
      res = await o.open(controller.signal);
    } catch (err) {
      unlink();
      controller.abort();
      const late = deadline.aborted && !o.signal.aborted;
      throw late ? new TransientError(o.operation, `not connected within ${o.connectTimeoutMs} ms`, err) : err;
    } finally {
      unlinkDeadline();
    }
    const status = res.statusCode ?? 0;
    if (status !== 200) {
      try {
        throw await o.failed(res, status);
      } finally {
        unlink();
        res.destroy();
        controller.abort();
      }
    }
    return new WatchConnection(o, controller, res, unlink);
  }

  private constructor(o: WatchConnectionOptions, controller: AbortController, res: PageResponse, unlink: () => void) {
    this.o = o;
    this.controller = controller;
    this.res = res;
    this.unlink = unlink;
    this.openedAt = Date.now();
    this.lastActivity = this.openedAt;
    this.watchdog = setInterval(() => this.tick(), Math.min(1_000, o.idleTimeoutMs / 4));
  }

  /** Why the watch ended (valid once {@link lines} finished). */
  get end(): WatchEnd {
    return this.o.signal.aborted ? 'aborted' : this.why;
  }

  /** The watch delivered an event or a bookmark: the idle watchdog starts over. */
  activity(): void {
    this.lastActivity = Date.now();
  }

  /**
   * The watch's non-empty lines as they arrive; returns when the server ends the watch or it is cut (see {@link end}).
   * Throws StreamCapError for a line over the cap, or the transport's error. While the caller handles a line (between
   * two `next()` calls) the idle watchdog waits.
   */
  async *lines(): AsyncGenerator<string> {
    try {
      for await (const line of readLines(this.res, this.o.maxLineBytes, this.o.operation)) {
        if (line.trim() === '') continue;
        this.busy = true;
        yield line;
        this.busy = false;
      }
    } catch (err) {
      if (!this.controller.signal.aborted && !this.o.signal.aborted) throw err;
    } finally {
      this.close();
    }
  }

  /** Ends the watch and releases its connection and timers (idempotent). */
  close(): void {
    this.unlink();
    clearInterval(this.watchdog);
    this.res.destroy();
    this.controller.abort();
  }

  private tick(): void {
    const now = Date.now();
    if (!this.established && this.o.onEstablished && now - this.openedAt >= (this.o.establishedAfterMs ?? 0)) {
      this.established = true;
      this.o.onEstablished();
    }
    if (!this.busy && now - this.lastActivity > this.o.idleTimeoutMs) this.cut('idle');
    else if (now >= this.o.resyncAt) this.cut('resync');
  }

  private cut(why: WatchEnd): void {
    this.why = why;
    this.close();
  }
}
