/**
 * A list+watch session over one Kubernetes collection, in the spirit of client-node's `src/cache.ts`
 * but without its silent spots:
 * - list, then watch from the list's resourceVersion, with bookmarks; resume exactly from a
 *   checkpoint by listing *at* that resourceVersion (`resourceVersionMatch=Exact`), so the replayed
 *   changes are filtered against the state the forwarder last knew;
 * - 410 Gone (watch or resume) → relist and announce only what changed while away, plus deletions;
 * - a watchdog that restarts a watch that stays silent (no event, no bookmark) for `idleTimeoutMs`;
 * - bounded, jittered backoff between failed attempts; a periodic full resync;
 * - a deadline on every list page and on every watch's connect (`requestTimeoutMs`): a hung call is
 *   a transient failure, retried with backoff, never a stuck stream;
 * - every line that is not a watch event we understand is counted (MalformedWatchEvents) and logged;
 * - its health is told to the consumer: `failing` at the first failed attempt after a success (or before any),
 *   `recovered` at the next successful list or watch connect, each with a safe description of the error.
 *
 * It reads the responses itself, as they arrive, over the product's HTTP client (kube-http.ts's `openRequest`, with the
 * endpoint's credentials), instead of using client-node's `Watch`, because that class drops unparseable lines and
 * swallows exceptions thrown by the callback.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type http from 'node:http';
import { createInterface } from 'node:readline';
import type { ChangeKind } from '#shared/domain/cloud-event.ts';
import { changedSince, diffRelist } from '#shared/domain/relevance.ts';
import { objectKeyOf, type WatchedFacts } from '#shared/domain/watch-event.ts';
import { AccessDeniedError, TaintPropagatorError, TransientError } from '#shared/errors.ts';
import type { StreamEvent, StreamHealthEvent, WatchStream } from '#shared/ports/watch-source.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { logger as defaultLogger } from '#shared/observability/logger.ts';
import { backoffDelay } from '#shared/domain/backoff.ts';
import { isSystemError } from './api-errors.ts';
import { openRequest, readBody, type ClusterEndpoint } from './kube-http.ts';
import { ListFramingError, ListItemReader } from './list-items.ts';

/** Thrown when the requested resourceVersion has been compacted away (HTTP 410 / watch ERROR 410). */
export class ResourceVersionGoneError extends TaintPropagatorError {
  readonly resourceVersion: string | undefined;
  constructor(resourceVersion: string | undefined, cause?: unknown) {
    super(`resourceVersion ${resourceVersion ?? '(none)'} is too old`, { retryable: true, cause });
    this.resourceVersion = resourceVersion;
  }
}

/** HTTP 404 for the collection itself: its group version (or CRD) is not served (any more). Retried with backoff. */
export class CollectionNotServedError extends TransientError {}

type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

export interface WatchSessionOptions<T extends WatchedFacts> {
  /** Stream name for logs, e.g. `machines` or `nodes/default/c1`. */
  readonly name: string;
  /** Credentials, resolved at every (re)connect so rotated kubeconfigs are picked up. */
  readonly kubeConfig: () => Promise<ClusterEndpoint>;
  /**
   * Collection path, e.g. `/api/v1/nodes`; or a function resolved before every (re)connect (the Cluster API group
   * version comes from discovery). A 404 for the collection calls `collectionNotServed` and is retried with backoff.
   */
  readonly path: string | (() => Promise<string>);
  /** Told when the server answers 404 for the collection (e.g. a group version no longer served). */
  readonly collectionNotServed?: () => void;
  readonly labelSelector?: string;
  readonly toFacts: (obj: unknown) => T | undefined;
  /** Resume exactly from this resourceVersion; without it the first list announces every object as `resynced`. */
  readonly resumeFrom?: string;
  /** Restart a watch silent for this long (default 90 s: above kube-apiserver's bookmark cadence of about a minute). */
  readonly idleTimeoutMs?: number;
  /** Full resync period; 0 = off (default 0). */
  readonly resyncIntervalMs?: number;
  /** Server-side watch timeout; jittered up to twice this (default 300 s). */
  readonly watchTimeoutSeconds?: number;
  readonly backoff?: { readonly initialMs: number; readonly maxMs: number };
  /**
   * Deadline of one list page (request and body) and of a watch's connect (until its response
   * headers); a call that misses it is a transient failure, retried with backoff (default 30 s).
   */
  readonly requestTimeoutMs?: number;
  readonly pageSize?: number;
  readonly telemetry?: ForwarderTelemetry;
  readonly logger?: Logger;
  readonly random?: () => number;
  readonly now?: () => Date;
}

/**
 * Opens a GET through the product's HTTP client (kube-http.ts: credentials, Accept header, keep-alive pool, one retry
 * of a reused socket the server had closed); the caller reads (or destroys) the body.
 */
async function request(endpoint: ClusterEndpoint, pathAndQuery: string, signal: AbortSignal): Promise<http.IncomingMessage> {
  if (!endpoint.getCurrentCluster()) throw new TransientError('connecting', 'the kubeconfig has no current cluster');
  return await openRequest(endpoint, 'GET', pathAndQuery, { signal });
}

function statusError(status: number, body: string, operation: string, rv: string | undefined): Error {
  if (status === 410) return new ResourceVersionGoneError(rv);
  // Only a Kubernetes Status's reason and message, never the raw body (a server named by a kubeconfig may echo anything).
  let detail = `HTTP ${status}`;
  try {
    const parsed = JSON.parse(body) as { reason?: unknown; message?: unknown };
    const text = [parsed.reason, parsed.message].filter((v): v is string => typeof v === 'string').join(' ');
    if (text !== '') detail = `${detail}: ${text.slice(0, 300)}`;
  } catch {
    // not a Status: the status code alone
  }
  if (status === 401 || status === 403) return new AccessDeniedError(operation, detail);
  if (status === 404) return new CollectionNotServedError(operation, detail);
  return new TransientError(operation, detail);
}

/**
 * What went wrong in a stream's attempt, safe to log and to hand to the consumer: the product's own errors (their
 * messages are built from status codes, a Kubernetes Status's reason and message, deadlines, and credential problems
 * named without content), or a system error's code and message (`connect ECONNREFUSED 127.0.0.1:6443`, a TLS
 * verification failure). Anything else is named by its class only, because its message may quote a response body.
 */
export function describeStreamFailure(err: unknown): string {
  if (err instanceof TaintPropagatorError) return err.message;
  if (isSystemError(err)) return err.message.includes(err.code) ? err.message.slice(0, 300) : `${err.code}: ${err.message.slice(0, 300)}`;
  if (err instanceof Error) return `${err.name} (details withheld: the message may quote a response)`;
  return 'unknown error';
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Waits `ms`, or less when `signal` aborts (then resolves instead of rejecting). */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch(() => undefined);
}

/** Objects by their key within the stream (objectKeyOf). */
function byKey<T extends WatchedFacts>(items: readonly T[]): Map<string, T> {
  return new Map(items.map((facts) => [objectKeyOf(facts), facts]));
}

const WATCH_TYPES: Readonly<Record<string, ChangeKind>> = { ADDED: 'added', MODIFIED: 'modified', DELETED: 'deleted' };

type WatchEnd = 'closed' | 'idle' | 'gone' | 'resync' | 'aborted';

/** One list+watch session; `run` keeps it going until the signal aborts. */
export class WatchSession<T extends WatchedFacts> implements WatchStream<T> {
  private readonly o: WatchSessionOptions<T>;
  private readonly log: Logger;
  private readonly random: () => number;
  private readonly now: () => Date;
  /** The last facts seen of each object, by objectKeyOf: what the relevance rules compare the next change with. */
  private known = new Map<string, T>();
  private resourceVersion: string | undefined;
  private resumeExpired = false;
  /** The collection path of the current attempt (see WatchSessionOptions.path). */
  private path = '';
  /** The consumer of the current run, told about health changes. */
  private consumer: ((event: StreamEvent<T>) => Promise<void>) | undefined;
  /** Set while failing: when the first failed attempt since the last success ended. */
  private failingSince: Date | undefined;
  /** What the current attempt is doing (`listing /api/v1/nodes`), to say where a system error happened. */
  private operation = 'connecting';

  constructor(options: WatchSessionOptions<T>) {
    this.o = options;
    this.log = options.logger ?? defaultLogger;
    this.random = options.random ?? Math.random;
    this.now = options.now ?? (() => new Date());
  }

  /** The last state of an object this session holds (from its last list or watch event), by key. */
  latest(key: string): T | undefined {
    return this.known.get(key);
  }

  /** Runs list+watch until `signal` aborts; every failure is retried with backoff, never thrown. */
  async run(signal: AbortSignal, onEvent: (event: StreamEvent<T>) => Promise<void>): Promise<void> {
    const backoff = this.o.backoff ?? { initialMs: 250, maxMs: 30_000 };
    const resyncMs = this.o.resyncIntervalMs ?? 0;
    let failures = 0;
    let resyncAt = resyncMs > 0 ? Date.now() + resyncMs : Infinity;
    let pending: 'start' | 'relist' | 'resync' | undefined = 'start';
    this.consumer = onEvent;
    while (!signal.aborted) {
      try {
        this.operation = 'resolving the collection';
        this.path = typeof this.o.path === 'string' ? this.o.path : await this.o.path();
        if (pending === 'start') await this.start(signal, onEvent);
        else if (pending === 'relist') await this.relist(signal, onEvent, false, 'watch expired (410 Gone)');
        else if (pending === 'resync') await this.relist(signal, onEvent, true, 'periodic resync');
        if (pending === 'resync') resyncAt = Date.now() + resyncMs;
        pending = undefined;
        if (signal.aborted) break;
        const started = Date.now();
        const end = await this.watch(signal, onEvent, resyncAt);
        if (end === 'gone') pending = 'relist';
        else if (end === 'resync') pending = 'resync';
        else if (end === 'idle') {
          this.o.telemetry?.record(ForwarderMetric.WatchRestarts, 1);
          this.log.warn('Restarting silent watch', { stream: this.o.name, resourceVersion: this.resourceVersion });
        }
        if (Date.now() - started > 5_000 || end !== 'idle') failures = 0;
      } catch (err) {
        if (signal.aborted) break;
        if (err instanceof ResourceVersionGoneError) {
          // A stale checkpoint or an expired list continuation: start again from a fresh list.
          if (pending === 'start') this.resumeExpired = true; // the checkpoint was compacted away
          else if (pending === undefined) pending = 'relist'; // the watch's resourceVersion was compacted away
          // else: a list continuation expired; list again
          continue;
        }
        if (err instanceof CollectionNotServedError) this.o.collectionNotServed?.();
        failures++;
        const delay = Math.floor(backoffDelay(failures + 1, { base: backoff.initialMs, max: backoff.maxMs, jitter: 'full' }, this.random));
        const reason = err instanceof TaintPropagatorError ? describeStreamFailure(err) : `${this.operation} failed: ${describeStreamFailure(err)}`;
        this.o.telemetry?.record(ForwarderMetric.WatchRestarts, 1);
        this.log.warn('Retrying watch after error', { stream: this.o.name, resourceVersion: this.resourceVersion, delayMs: delay, reason });
        if (this.failingSince === undefined) {
          this.failingSince = this.now();
          await this.tell({ type: 'failing', reason, since: this.failingSince });
        }
        await sleep(delay, signal);
      }
    }
  }

  /** A list or a watch connect succeeded: tells the consumer the stream recovered when it was failing. */
  private async succeeded(): Promise<void> {
    const since = this.failingSince;
    if (since === undefined) return;
    this.failingSince = undefined;
    await this.tell({ type: 'recovered', since, at: this.now() });
  }

  /** Hands a health change to the consumer; a consumer that throws is logged, and the stream goes on. */
  private async tell(event: StreamHealthEvent): Promise<void> {
    try {
      await this.consumer?.(event);
    } catch (err) {
      this.log.error('Reporting the stream health failed', { stream: this.o.name, health: event.type, reason: describeStreamFailure(err) });
    }
  }

  /** First list: exact at the checkpoint (no announcements), or fresh (announce everything). */
  private async start(signal: AbortSignal, onEvent: (e: StreamEvent<T>) => Promise<void>): Promise<void> {
    const resumeFrom = this.resumeExpired ? undefined : this.o.resumeFrom;
    if (resumeFrom === undefined && this.resumeExpired && this.o.resumeFrom !== undefined) {
      await this.relistSince(signal, onEvent, this.o.resumeFrom);
      return;
    }
    if (resumeFrom === undefined) {
      await this.relist(signal, onEvent, true, undefined);
      return;
    }
    const { items, resourceVersion } = await this.list(signal, resumeFrom);
    this.known = byKey(items);
    this.resourceVersion = resourceVersion;
    this.log.info('Resuming watch from checkpoint', { stream: this.o.name, resourceVersion, objects: items.length });
  }

  private async relist(signal: AbortSignal, onEvent: (e: StreamEvent<T>) => Promise<void>, full: boolean, reason: string | undefined): Promise<void> {
    if (reason !== undefined) {
      this.o.telemetry?.record(ForwarderMetric.Relists, 1);
      this.log.info('Relisting', { stream: this.o.name, reason, resourceVersion: this.resourceVersion });
    }
    const { items, resourceVersion } = await this.list(signal, undefined);
    const observedAt = this.now();
    const { resynced, deleted } = diffRelist(this.known, items, full);
    this.known = byKey(items);
    for (const facts of resynced) await onEvent({ type: 'change', change: 'resynced', facts, observedAt });
    for (const facts of deleted) await onEvent({ type: 'change', change: 'deleted', facts, observedAt });
    this.resourceVersion = resourceVersion;
    await onEvent({ type: 'progress', resourceVersion });
    if (reason !== undefined) {
      this.log.info('Relisted', { stream: this.o.name, resourceVersion, objects: items.length, resynced: resynced.length, deleted: deleted.length });
    }
  }

  /**
   * The checkpoint was compacted away and there is no baseline to compare with: a fresh list, of which the domain's
   * rule (changedSince) picks what is announced.
   */
  private async relistSince(signal: AbortSignal, onEvent: (e: StreamEvent<T>) => Promise<void>, since: string): Promise<void> {
    this.o.telemetry?.record(ForwarderMetric.Relists, 1);
    this.log.warn('Relisting: checkpoint is older than the API server history', { stream: this.o.name, resourceVersion: since });
    const { items, resourceVersion } = await this.list(signal, undefined);
    const observedAt = this.now();
    this.known = byKey(items);
    const changed = changedSince(items, since);
    for (const facts of changed) await onEvent({ type: 'change', change: 'resynced', facts, observedAt });
    this.resourceVersion = resourceVersion;
    await onEvent({ type: 'progress', resourceVersion });
    this.log.info('Relisted', { stream: this.o.name, resourceVersion, objects: items.length, resynced: changed.length });
  }

  private query(params: Record<string, string | undefined>): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, v);
    if (this.o.labelSelector) q.set('labelSelector', this.o.labelSelector);
    return `${this.path}?${q.toString()}`;
  }

  /**
   * Paginated list, current (no resourceVersion) or exactly at `at`. Each page is read as it arrives, one item at a
   * time (ListItemReader): only the facts of each object are kept, never a page's text or its parsed objects.
   */
  private async list(signal: AbortSignal, at: string | undefined): Promise<{ items: T[]; resourceVersion: string }> {
    this.operation = 'reading credentials';
    const kc = await this.o.kubeConfig();
    this.operation = `listing ${this.path}`;
    const items: T[] = [];
    let cont: string | undefined;
    let listRv: string | undefined;
    do {
      const params = cont
        ? { limit: String(this.o.pageSize ?? 500), continue: cont }
        : { limit: String(this.o.pageSize ?? 500), resourceVersion: at, resourceVersionMatch: at ? 'Exact' : undefined };
      const page = await this.bounded(`listing ${this.path}`, signal, async (bound) => {
        const res = await request(kc, this.query(params), bound);
        if (res.statusCode !== 200) throw statusError(res.statusCode ?? 0, await readBody(res), `listing ${this.path}`, at);
        const reader = new ListItemReader((json) => this.listItem(json, items));
        try {
          for await (const chunk of res) reader.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
          return reader.end();
        } catch (err) {
          // Never the text itself in the error (a SyntaxError quotes it): a server named by a kubeconfig may echo anything.
          if (err instanceof ListFramingError || err instanceof SyntaxError) throw new TransientError(`listing ${this.path}`, 'list response is not JSON');
          throw err;
        }
      });
      const metadata = page.metadata;
      if (!isObject(metadata) || !page.hadItems) throw new TransientError(`listing ${this.path}`, 'unexpected list response');
      listRv ??= typeof metadata.resourceVersion === 'string' ? metadata.resourceVersion : undefined;
      cont = typeof metadata.continue === 'string' && metadata.continue !== '' ? metadata.continue : undefined;
    } while (cont);
    if (!listRv) throw new TransientError(`listing ${this.path}`, 'list has no resourceVersion');
    await this.succeeded();
    return { items, resourceVersion: listRv };
  }

  /** One item of a list page (its JSON text; undefined when it is not an object): its facts join `items`. */
  private listItem(json: string | undefined, items: T[]): void {
    const facts = json === undefined ? undefined : this.o.toFacts(JSON.parse(json));
    if (!facts) {
      this.malformed('list item without name, uid or resourceVersion', (json ?? 'not an object').slice(0, 300));
      return;
    }
    items.push(facts);
  }

  /** Runs one request under the session's signal and the request deadline; a missed deadline is a TransientError. */
  private async bounded<R>(operation: string, signal: AbortSignal, fn: (bound: AbortSignal) => Promise<R>): Promise<R> {
    const timeoutMs = this.o.requestTimeoutMs ?? 30_000;
    const deadline = AbortSignal.timeout(timeoutMs);
    try {
      return await fn(AbortSignal.any([signal, deadline]));
    } catch (err) {
      if (deadline.aborted && !signal.aborted) throw new TransientError(operation, `no answer within ${timeoutMs} ms`, err);
      throw err;
    }
  }

  private malformed(reason: string, line: string): void {
    this.o.telemetry?.record(ForwarderMetric.MalformedWatchEvents, 1);
    this.log.error('Skipping malformed watch event', { stream: this.o.name, reason, line: line.slice(0, 500), resourceVersion: this.resourceVersion });
  }

  /** One watch request from the current resourceVersion; resolves with why it ended. */
  private async watch(signal: AbortSignal, onEvent: (e: StreamEvent<T>) => Promise<void>, resyncAt: number): Promise<WatchEnd> {
    this.operation = 'reading credentials';
    const kc = await this.o.kubeConfig();
    this.operation = `watching ${this.path}`;
    const timeout = this.o.watchTimeoutSeconds ?? 300;
    const controller = new AbortController();
    const abort = (): void => controller.abort();
    signal.addEventListener('abort', abort, { once: true });
    let end: WatchEnd = 'closed';
    let lastActivity = Date.now();
    let busy = false;
    const idleMs = this.o.idleTimeoutMs ?? 90_000;
    const watchdog = setInterval(() => {
      if (!busy && Date.now() - lastActivity > idleMs) {
        end = 'idle';
        controller.abort();
      } else if (Date.now() >= resyncAt) {
        end = 'resync';
        controller.abort();
      }
    }, Math.min(1_000, idleMs / 4));
    const connectTimeoutMs = this.o.requestTimeoutMs ?? 30_000;
    let connected = false;
    let connectTimedOut = false;
    const connectDeadline = setTimeout(() => {
      if (connected) return;
      connectTimedOut = true;
      controller.abort();
    }, connectTimeoutMs);
    try {
      const res = await request(
        kc,
        this.query({
          watch: '1',
          resourceVersion: this.resourceVersion,
          allowWatchBookmarks: 'true',
          timeoutSeconds: String(Math.floor(timeout * (1 + this.random()))),
        }),
        controller.signal,
      );
      connected = true;
      clearTimeout(connectDeadline);
      if (res.statusCode !== 200) throw statusError(res.statusCode ?? 0, await readBody(res), `watching ${this.path}`, this.resourceVersion);
      await this.succeeded();
      res.on('data', () => {
        lastActivity = Date.now();
      });
      const lines = createInterface({ input: res, crlfDelay: Infinity });
      for await (const line of lines) {
        if (line.trim() === '') continue;
        busy = true;
        const outcome = await this.handleLine(line, onEvent);
        busy = false;
        lastActivity = Date.now();
        if (outcome === 'gone') {
          end = 'gone';
          break;
        }
      }
      res.destroy();
    } catch (err) {
      if (connectTimedOut && !signal.aborted) throw new TransientError(`watching ${this.path}`, `not connected within ${connectTimeoutMs} ms`, err);
      if (!controller.signal.aborted) throw err;
    } finally {
      clearTimeout(connectDeadline);
      clearInterval(watchdog);
      signal.removeEventListener('abort', abort);
      controller.abort();
    }
    return signal.aborted ? 'aborted' : end;
  }

  private async handleLine(line: string, onEvent: (e: StreamEvent<T>) => Promise<void>): Promise<'ok' | 'gone'> {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      this.malformed('not JSON', line);
      return 'ok';
    }
    if (!isObject(parsed) || typeof parsed.type !== 'string') {
      this.malformed('no event type', line);
      return 'ok';
    }
    const obj = parsed.object;
    if (parsed.type === 'BOOKMARK') {
      const rv = isObject(obj) && isObject(obj.metadata) ? obj.metadata.resourceVersion : undefined;
      if (typeof rv !== 'string' || rv === '') {
        this.malformed('bookmark without resourceVersion', line);
        return 'ok';
      }
      this.resourceVersion = rv;
      await onEvent({ type: 'progress', resourceVersion: rv });
      return 'ok';
    }
    if (parsed.type === 'ERROR') {
      const code = isObject(obj) ? obj.code : undefined;
      if (code === 410) {
        this.log.info('Watch expired', { stream: this.o.name, resourceVersion: this.resourceVersion });
        return 'gone';
      }
      throw new TransientError(`watching ${this.path}`, `watch ERROR ${JSON.stringify(obj).slice(0, 300)}`);
    }
    const change = WATCH_TYPES[parsed.type];
    const facts = change ? this.o.toFacts(obj) : undefined;
    if (!change || !facts) {
      this.malformed(change ? 'object without name, uid or resourceVersion' : `unknown event type ${parsed.type}`, line);
      return 'ok';
    }
    const key = objectKeyOf(facts);
    const known = this.known.get(key);
    if (change === 'deleted') this.known.delete(key);
    else this.known.set(key, facts);
    this.resourceVersion = facts.resourceVersion;
    await onEvent({
      type: 'change',
      change,
      facts,
      // Whether it is worth a message is the use case's decision (forwardDecision), from the last state seen.
      ...(known ? { previous: known } : {}),
      observedAt: this.now(),
      checkpoint: facts.resourceVersion,
    });
    return 'ok';
  }
}
