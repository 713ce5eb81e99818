/**
 * A list+watch session over one Kubernetes collection: the reflector loop (client-go's `Reflector.ListAndWatch` run by
 * `BackoffUntil`), its parts in `./watch/` (docs/watch-layer.md). It reads over kube-http.ts, not client-node's
 * `Watch`, which drops unparseable lines, swallows the callback's exceptions, does not await it, and ends every watch
 * after 30 s.
 */
import type { WatchedFacts } from '#shared/model/views.ts';
import { TaintPropagatorError, TransientError } from '#shared/errors.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { logger as defaultLogger } from '#shared/observability/logger.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import type { StreamEvent, StreamHealthEvent, StreamStart, WatchStream } from '#shared/ports/watch-source.ts';
import { sleep } from '#shared/sleep.ts';
import { CollectionNotServedError, describeStreamFailure, ResourceVersionGoneError, safeExcerpt, streamStatusError } from './api-errors.ts';
import { isCallTimeout } from './call-deadline.ts';
import { openRequest, pathWithQuery, type ClusterEndpoint } from './kube-http.ts';
import { DEFAULT_STREAM_CAPS, StreamCapError, type StreamCaps } from './watch/caps.ts';
import { listPages, readErrorBody, type PageResponse } from './watch/list-pager.ts';
import { ObjectCache } from './watch/object-cache.ts';
import { StreamLog, type Logger } from './watch/stream-log.ts';
import { DEFAULT_RETRY, StreamRetry, type AttemptEnd } from './watch/stream-retry.ts';
import { WatchConnection, type WatchEnd } from './watch/watch-connection.ts';
import { decodeWatchLine } from './watch/watch-decoder.ts';

export interface WatchSessionOptions<T extends WatchedFacts> extends StreamStart {
  /** Stream name for logs, e.g. `machines` or `nodes/default/c1`. */
  readonly name: string;
  /** Credentials, resolved at every (re)connect so rotated kubeconfigs are picked up. */
  readonly kubeConfig: () => Promise<ClusterEndpoint>;
  /** Collection path (e.g. `/api/v1/nodes`), or a function resolved before every (re)connect (discovery's version). */
  readonly path: string | (() => Promise<string>);
  /** Told when the server answers 404 for the collection (e.g. a group version no longer served); then retried. */
  readonly collectionNotServed?: () => void;
  readonly labelSelector?: string;
  readonly toFacts: (obj: unknown) => T | undefined;
  /**
   * Which objects it keeps (default all; a shard's own: shared/policy/shards.ts); the others never reach the cache or
   * the consumer, but the resourceVersion moves past them, and one that stops being kept leaves the cache unannounced.
   */
  readonly keep?: (facts: T) => boolean;
  /** Restart a watch silent for this long (default 90 s: above kube-apiserver's bookmark cadence of about a minute). */
  readonly idleTimeoutMs?: number;
  /** Resync period (a list of the whole collection; a full one unless `quietLists`); 0 = off (default 0). */
  readonly resyncIntervalMs?: number;
  /** Server-side watch timeout; jittered up to twice this (default 300 s). */
  readonly watchTimeoutSeconds?: number;
  /** First step and cap of the backoff (default 800 ms and 30 s; stream-retry.ts). */
  readonly backoff?: { readonly initialMs: number; readonly maxMs: number };
  /** Deadline of one list page and of a watch's connect; a call that misses it is a failed attempt (default 30 s). */
  readonly requestTimeoutMs?: number;
  /** Byte, page and time caps (default caps.ts's). */
  readonly caps?: Partial<StreamCaps>;
  /** At most one log line of a kind per this interval (default 30 s; stream-log.ts). */
  readonly logIntervalMs?: number;
  readonly telemetry?: ForwarderTelemetry;
  readonly logger?: Logger;
}

/** How the next attempt lists: first list (exact at the checkpoint, or fresh), since a compacted checkpoint, after a 410, periodic. */
type ListMode = 'start' | 'since' | 'relist' | 'resync';

type Consumer<T extends WatchedFacts> = (event: StreamEvent<T>) => Promise<void>;

/** One list+watch session; `run` keeps it going until the signal aborts. */
export class WatchSession<T extends WatchedFacts> implements WatchStream<T> {
  private readonly o: WatchSessionOptions<T>;
  private readonly log: StreamLog;
  private readonly caps: StreamCaps;
  private readonly retry: StreamRetry;
  private readonly cache = new ObjectCache<T>();
  /** Requests (list pages, watch connects) of the current attempt: a failed one waits at least a second per request. */
  private requests = 0;
  private notServed = false;
  /** Health changes are told one after the other (one may come from the watchdog's tick). */
  private telling: Promise<void> = Promise.resolve();

  constructor(options: WatchSessionOptions<T>) {
    this.o = options;
    this.log = new StreamLog(options.name, options.logger ?? defaultLogger, { intervalMs: options.logIntervalMs });
    this.caps = { ...DEFAULT_STREAM_CAPS, ...options.caps };
    this.retry = new StreamRetry(options.backoff);
  }

  latest(key: string): T | undefined {
    return this.cache.latest(key);
  }

  objects(): Iterable<T> {
    return this.cache.values();
  }

  /** True once the session holds its collection (it has listed), or while the server does not serve it (404). */
  hasSynced(): boolean {
    return this.cache.resourceVersion !== undefined || this.notServed;
  }

  async run(signal: AbortSignal, onEvent: Consumer<T>): Promise<void> {
    const resyncMs = this.o.resyncIntervalMs ?? 0;
    let resyncAt = resyncMs > 0 ? Date.now() + resyncMs : Infinity;
    let next: ListMode | undefined = 'start';
    while (!signal.aborted) {
      let end: AttemptEnd;
      let operation = 'resolving the collection';
      this.requests = 0;
      try {
        const path = typeof this.o.path === 'string' ? this.o.path : await this.o.path();
        operation = next !== undefined ? `listing ${path}` : `watching ${path}`;
        // Resolved once per attempt: its list and its watch share the credentials (a workload cluster's are a Secret
        // read or two; a reconnect, and so a rotation, resolves them again).
        const kc = await this.o.kubeConfig();
        if (next !== undefined) {
          await this.list(next, path, kc, signal, onEvent);
          if (next === 'resync') resyncAt = Date.now() + resyncMs;
          next = undefined;
        }
        if (signal.aborted) break;
        operation = `watching ${path}`;
        const watched = await this.watch(path, kc, signal, resyncAt, onEvent);
        if (watched.why === 'aborted') break;
        if (watched.why === 'resync') next = 'resync';
        if (watched.why === 'idle') {
          this.o.telemetry?.record(ForwarderMetric.WatchRestarts, 1);
          this.log.warn('Restarting silent watch', { resourceVersion: this.cache.resourceVersion });
        }
        end = { kind: 'watch-ended', why: watched.why, openMs: watched.openMs, events: watched.events };
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof ResourceVersionGoneError) {
          if (next === 'start' && this.o.resumeFrom !== undefined) next = 'since'; // the checkpoint was compacted away
          else next ??= 'relist'; // the watch's resourceVersion was compacted away (else: a list continuation expired; list again)
        }
        if (err instanceof CollectionNotServedError) {
          this.notServed = true;
          this.o.collectionNotServed?.();
        }
        const reason = err instanceof TaintPropagatorError ? describeStreamFailure(err) : `${operation} failed: ${describeStreamFailure(err)}`;
        end = { kind: 'failed', error: err, reason, requests: this.requests };
      }
      const decision = this.retry.ended(end);
      if (decision.failure) {
        this.o.telemetry?.record(ForwarderMetric.WatchRestarts, 1);
        this.log.warn('Retrying watch after error', { resourceVersion: this.cache.resourceVersion, delayMs: decision.delayMs, failures: decision.failure.count, reason: decision.failure.reason });
      }
      if (decision.failing) await this.tell(onEvent, { type: 'failing', reason: decision.failing.reason, since: decision.failing.since });
      if (decision.delayMs > 0) await sleep(decision.delayMs, signal);
    }
    await this.telling;
  }

  private delivered(onEvent: Consumer<T>): Promise<void> {
    const recovered = this.retry.delivered();
    return recovered ? this.tell(onEvent, { type: 'recovered', since: recovered.since, at: recovered.at }) : this.telling;
  }

  /** Hands a health change to the consumer, in order; a consumer that throws is logged, and the stream goes on. */
  private tell(onEvent: Consumer<T>, event: StreamHealthEvent): Promise<void> {
    this.telling = this.telling.then(async () => {
      try {
        await onEvent(event);
      } catch (err) {
        this.log.error('Reporting the stream health failed', { health: event.type, reason: describeStreamFailure(err) });
      }
    });
    return this.telling;
  }

  /** One list, as `mode` says, into the cache; announces what the mode announces, then the list's resourceVersion. */
  private async list(mode: ListMode, path: string, kc: ClusterEndpoint, signal: AbortSignal, onEvent: Consumer<T>): Promise<void> {
    const exactly = mode === 'start' ? this.o.resumeFrom : undefined;
    if (mode !== 'start') this.o.telemetry?.record(ForwarderMetric.Relists, 1);
    if (mode === 'since') {
      this.log.warn('Relisting: checkpoint is older than the API server history', { resourceVersion: this.o.resumeFrom });
    } else if (mode === 'relist' || mode === 'resync') {
      this.log.info('Relisting', { reason: mode === 'relist' ? 'watch expired (410 Gone)' : 'periodic resync', resourceVersion: this.cache.resourceVersion });
    }
    const operation = `listing ${path}`;
    const timeoutMs = this.o.requestTimeoutMs ?? 30_000;
    const items: T[] = [];
    const { resourceVersion } = await listPages({
      openPage: (query, pageSignal) => this.request(kc, path, query, pageSignal),
      failed: async (res, status) => streamStatusError(status, await readErrorBody(res), operation, exactly),
      pageSignal: () => AbortSignal.timeout(timeoutMs),
      signal,
      onItem: (json) => {
        const facts = json === undefined ? undefined : this.o.toFacts(JSON.parse(json));
        if (facts) {
          if (!this.o.keep || this.o.keep(facts)) items.push(facts);
        } else this.malformed('list item without name, uid or resourceVersion', json ?? 'not an object');
      },
      pageSize: 500,
      exactly,
      operation,
      caps: this.caps,
    }).catch((err: unknown) => {
      if (!signal.aborted && isCallTimeout(err)) {
        throw new TransientError(operation, `no answer within ${timeoutMs} ms`, err);
      }
      throw err;
    });
    if (resourceVersion === undefined) throw new TransientError(operation, 'the list has no resourceVersion');
    if (exactly !== undefined) {
      this.cache.replace(items, resourceVersion);
      this.log.info('Resuming watch from checkpoint', { resourceVersion, objects: items.length });
      await onEvent({ type: 'listed', items });
      return;
    }
    const observedAt = new Date();
    const quiet = this.o.quietLists === true && (mode === 'start' || mode === 'resync');
    let resynced: T[] = [];
    let deleted: T[] = [];
    // A quiet first list knew nothing before: every object is the consumer's to judge.
    if (mode === 'since') resynced = this.cache.relistSince(items, resourceVersion, this.o.resumeFrom ?? '');
    else if (quiet && mode === 'start') this.cache.replace(items, resourceVersion);
    else ({ resynced, deleted } = this.cache.relist(items, resourceVersion, mode !== 'relist' && !quiet));
    // What this list announces not (unchanged since the checkpoint, or since the cache had it); quiet: for the consumer to judge.
    if (quiet) {
      const announced = new Set(resynced);
      await onEvent({ type: 'listed', items, unannounced: items.filter((item) => !announced.has(item)), observedAt });
    } else if (resynced.length < items.length) await onEvent({ type: 'listed', items });
    for (const facts of resynced) await onEvent({ type: 'change', change: 'resynced', facts, observedAt });
    for (const facts of deleted) await onEvent({ type: 'change', change: 'deleted', facts, observedAt });
    await onEvent({ type: 'progress', resourceVersion });
    if (mode !== 'start') this.log.info('Relisted', { resourceVersion, objects: items.length, resynced: resynced.length, deleted: deleted.length });
  }

  /**
   * One watch from the cache's resourceVersion, until the server ends it or it is cut. Throws ResourceVersionGoneError
   * at an ERROR 410, a TransientError at another ERROR, StreamCapError at a cap (a line, malformed lines in a row).
   */
  private async watch(path: string, kc: ClusterEndpoint, signal: AbortSignal, resyncAt: number, onEvent: Consumer<T>): Promise<{ why: WatchEnd; openMs: number; events: number }> {
    const operation = `watching ${path}`;
    const rv = this.cache.resourceVersion;
    const timeoutSeconds = String(Math.floor((this.o.watchTimeoutSeconds ?? 300) * (1 + Math.random())));
    const query = { watch: '1', resourceVersion: rv, allowWatchBookmarks: 'true', timeoutSeconds };
    const connection = await WatchConnection.open({
      open: (connectSignal) => this.request(kc, path, query, connectSignal),
      failed: async (res, status) => streamStatusError(status, await readErrorBody(res), operation, rv),
      operation,
      connectTimeoutMs: this.o.requestTimeoutMs ?? 30_000,
      idleTimeoutMs: this.o.idleTimeoutMs ?? 90_000,
      resyncAt,
      maxLineBytes: this.caps.maxLineBytes,
      signal,
      establishedAfterMs: DEFAULT_RETRY.shortWatchMs,
      onEstablished: () => void this.delivered(onEvent),
    });
    let events = 0;
    let malformedInARow = 0;
    try {
      for await (const line of connection.lines()) {
        const decoded = decodeWatchLine(line, this.o.toFacts);
        if (decoded.kind === 'malformed') {
          this.malformed(decoded.reason, line);
          if (++malformedInARow >= this.caps.maxMalformedInARow) throw new StreamCapError(operation, `${malformedInARow} malformed lines in a row`);
          continue;
        }
        if (decoded.kind === 'gone') {
          this.log.info('Watch expired', { resourceVersion: this.cache.resourceVersion });
          throw new ResourceVersionGoneError(operation, this.cache.resourceVersion);
        }
        if (decoded.kind === 'error') throw new TransientError(operation, decoded.reason);
        malformedInARow = 0;
        events++;
        connection.activity();
        if (events === 1) await this.delivered(onEvent);
        if (decoded.kind === 'bookmark') {
          this.cache.advance(decoded.resourceVersion);
          await onEvent({ type: 'progress', resourceVersion: decoded.resourceVersion });
          continue;
        }
        if (this.o.keep && !this.o.keep(decoded.facts)) {
          // Not this session's object (another shard's): out of the cache, but the resume point moves past it.
          this.cache.apply('deleted', decoded.facts);
          await onEvent({ type: 'progress', resourceVersion: decoded.facts.resourceVersion });
          continue;
        }
        const previous = this.cache.apply(decoded.change, decoded.facts);
        await onEvent({
          type: 'change',
          change: decoded.change,
          facts: decoded.facts,
          // Whether it is worth a message is the use case's decision (forwardDecision), from the last state seen.
          ...(previous ? { previous } : {}),
          observedAt: new Date(),
          checkpoint: decoded.facts.resourceVersion,
        });
      }
    } finally {
      connection.close();
    }
    return { why: connection.end, openMs: Date.now() - connection.openedAt, events };
  }

  private request(kc: ClusterEndpoint, path: string, query: Readonly<Record<string, string | undefined>>, signal: AbortSignal): Promise<PageResponse> {
    this.requests++;
    return openRequest(kc, 'GET', pathWithQuery(path, { ...query, labelSelector: this.o.labelSelector || undefined }), { signal });
  }

  private malformed(reason: string, text: string): void {
    this.o.telemetry?.record(ForwarderMetric.MalformedWatchEvents, 1);
    this.log.error('Skipping malformed watch event', { reason, excerpt: safeExcerpt(text, 80), resourceVersion: this.cache.resourceVersion });
  }
}
