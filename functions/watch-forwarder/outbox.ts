/**
 * The forwarder's outbox: the TaintEvents waiting to be sent, sent in rounds and resent with backoff, and the
 * checkpoint of every stream, which advances only over what was sent (or needed no message). It also holds watch
 * intake back while too many events wait, and sends what is left, for a bounded time, when the streams have stopped.
 *
 * The one retry layer of a send is here (README, Failure semantics: Queue): the publisher makes one attempt per event,
 * the outbox resends with backoff and no limit. Here, because only here does a waiting event hold its stream's
 * checkpoint and count against the intake bound while the other streams' events go on. (The AWS SDK's own retry
 * inside one attempt is the transport's, left at its defaults.) Bulkheads between streams: docs/hostile-clusters.md.
 */
import { messageGroupIdFor, type TaintEvent } from '#shared/contract/cloud-event.ts';
import { backoffDelay } from '#shared/policy/backoff.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { EventPublisher } from '#shared/ports/event-publisher.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { sleep } from '#shared/sleep.ts';
import type { logger as defaultLogger } from '#shared/observability/logger.ts';

type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

/** Wait before an unsent event's resend number n: 0.2 s × 2^(n−1), at most 30 s, at least half of that (equal jitter). */
const RESEND_BACKOFF = { base: 200, max: 30_000, jitter: 'equal' } as const;

/**
 * Ordered resume points of one stream; the checkpoint advances over the handled prefix only. Consecutive handled
 * points behind a waiting event are one point (the later), so a stream holds at most two per waiting event plus one,
 * however many changes needing no message (filtered, another shard's) pass while an event waits through an outage.
 */
export class StreamProgress {
  private readonly entries: Array<{ checkpoint: string | undefined; done: boolean }> = [];
  committed: string | undefined;
  /** Events of this stream waiting in the outbox (see Outbox.enqueue). */
  waiting = 0;

  constructor(initial: string | undefined) {
    this.committed = initial;
  }

  /** Resume points held back by an event before them that waits. */
  get held(): number {
    return this.entries.length;
  }

  /** Appends a resume point (undefined: none, e.g. all but the last event of one change); returns its ticket. */
  add(checkpoint: string | undefined, done: boolean): { done: boolean; checkpoint: string | undefined } {
    const last = this.entries.at(-1);
    if (done && last?.done) {
      if (checkpoint !== undefined) last.checkpoint = checkpoint;
      return last;
    }
    const entry = { checkpoint, done };
    this.entries.push(entry);
    this.advance();
    return entry;
  }

  advance(): void {
    while (this.entries[0]?.done) {
      const e = this.entries.shift();
      if (e?.checkpoint !== undefined) this.committed = e.checkpoint;
    }
  }
}

interface Pending {
  readonly event: TaintEvent;
  readonly observedAt: Date;
  readonly ticket: { done: boolean };
  readonly progress: StreamProgress;
  attempts: number;
  notBefore: number;
}

export interface OutboxDeps {
  readonly publisher: EventPublisher;
  readonly telemetry: ForwarderTelemetry;
  readonly clock: Clock;
  readonly logger: Logger;
}

export interface OutboxOptions {
  /** Pause between publish rounds when nothing is ready to send (default 100 ms). */
  readonly flushIntervalMs?: number;
  /** Events handed to the publisher per round (default 100). */
  readonly maxEventsPerPublish?: number;
  /**
   * Intake of a stream with events of its own waiting waits while this many wait in all (default 1000, ten rounds): a
   * larger bound only keeps more of a relist in memory (docs/benchmarks-history.md, forwarder memory).
   */
  readonly maxPendingEvents?: number;
  /** How long {@link Outbox.drain} keeps trying (default 10 s). */
  readonly drainTimeoutMs?: number;
}

/** See the module comment. One instance serves every window of a forwarder; {@link Outbox.begin} starts a window. */
export class Outbox {
  private readonly d: OutboxDeps;
  private readonly opt: Required<OutboxOptions>;
  private pending: Pending[] = [];
  private progress = new Map<string, StreamProgress>();
  private baseCheckpoint: Record<string, string> = {};
  private readonly wakeIntake: Array<() => void> = [];
  /** Ends the flush loop's pause early: set while it pauses. */
  private wakeFlush: (() => void) | undefined;
  private termSignal: AbortSignal | undefined;

  constructor(deps: OutboxDeps, options: OutboxOptions = {}) {
    this.d = deps;
    // Defaults by destructuring, not a spread: they also replace an option given as undefined.
    const { flushIntervalMs = 100, maxEventsPerPublish = 100, maxPendingEvents = 1_000, drainTimeoutMs = 10_000 } =
      options;
    this.opt = { flushIntervalMs, maxEventsPerPublish, maxPendingEvents, drainTimeoutMs };
  }

  /** Starts a window from the checkpoint the Lease held: nothing pending; intake is let go when `term` aborts. */
  begin(checkpoint: Checkpoint, term: AbortSignal): void {
    this.baseCheckpoint = { ...checkpoint };
    this.progress.clear();
    this.pending = [];
    this.termSignal = term;
    term.addEventListener('abort', () => this.releaseIntake(), { once: true });
  }

  /** Where a stream resumes: the checkpoint's resourceVersion for it, if any. */
  startOf(key: string): { resumeFrom?: string } {
    const rv = this.baseCheckpoint[key];
    return rv !== undefined ? { resumeFrom: rv } : {};
  }

  /** Tracks the progress of a (re)started stream from its resume point. */
  openStream(key: string): StreamProgress {
    const progress = new StreamProgress(this.baseCheckpoint[key]);
    this.progress.set(key, progress);
    return progress;
  }

  /** A stream whose object is deleted (a removed cluster's Nodes): its resume point leaves the checkpoint. */
  forgetStream(key: string): void {
    this.progress.delete(key);
    delete this.baseCheckpoint[key];
  }

  /** The resume points of every stream, covering only events that were sent or filtered. */
  checkpoint(): Checkpoint {
    const cp: Record<string, string> = { ...this.baseCheckpoint };
    for (const [key, p] of this.progress) if (p.committed !== undefined) cp[key] = p.committed;
    return cp;
  }

  size(): number {
    return this.pending.length;
  }

  /**
   * Queues the events of one change of a stream; only the last carries the change's resume point, so the stream's
   * checkpoint passes the change once all of them are sent. Resolves once intake may go on: while `maxPendingEvents`
   * wait and some are the stream's, it waits (a bulkhead: other streams go on), until the term ends.
   */
  async enqueue(events: readonly TaintEvent[], observedAt: Date, progress: StreamProgress, checkpoint: string | undefined): Promise<void> {
    // An idle outbox sends at once, not after the flush loop's pause (a lone change: a joining Node's, an edit's);
    // what arrives while a round is being sent still goes out together in the next one.
    const idle = this.pending.length === 0;
    events.forEach((event, i) => {
      const ticket = progress.add(i === events.length - 1 ? checkpoint : undefined, false);
      this.pending.push({ event, observedAt, ticket, progress, attempts: 0, notBefore: 0 });
    });
    progress.waiting += events.length;
    if (idle && events.length > 0) this.wakeFlush?.();
    while (this.pending.length >= this.opt.maxPendingEvents && progress.waiting > 0 && !this.termSignal?.aborted) {
      // A full outbox is worth a round now: a relist fills it within one tick, and each pause of the flush loop
      // would hold intake as long (40 pauses for 40 000 objects).
      this.wakeFlush?.();
      await new Promise<void>((resolve) => this.wakeIntake.push(resolve));
    }
  }

  /** Wakes every intake waiting in {@link Outbox.enqueue}; each checks again whether it may go on. */
  private releaseIntake(): void {
    for (const wake of this.wakeIntake.splice(0)) wake();
  }

  /**
   * Publishes the due events, at most `maxEventsPerPublish`; one sent or never sendable no longer holds its stream's
   * checkpoint, any other is resent after a backoff. Returns how many were attempted.
   */
  async publishRound(): Promise<number> {
    const now = this.d.clock.now().getTime();
    const ready = this.takeInTurn(now);
    if (ready.length === 0) return 0;
    const result = await this.d.publisher.publish(ready.map((p) => p.event));
    const sentAt = this.d.clock.now().getTime();
    const sentIds = new Set(result.sent.map((ev) => ev.id));
    const unsent = new Map(result.unsent.map((u) => [u.event.id, u]));
    const finished = new Set<Pending>();
    for (const p of ready) {
      const failure = unsent.get(p.event.id);
      if (sentIds.has(p.event.id) && !failure) {
        this.d.telemetry.record(ForwarderMetric.EventsForwarded, 1);
        this.d.telemetry.record(ForwarderMetric.ForwarderLag, Math.max(0, sentAt - p.observedAt.getTime()));
        finished.add(p);
      } else {
        this.d.telemetry.record(ForwarderMetric.SendFailures, 1);
        if (failure && !failure.retryable) {
          // Resending can never succeed: logged by the publisher, counted, and no longer holding the checkpoint.
          finished.add(p);
          continue;
        }
        p.attempts++;
        p.notBefore = sentAt + backoffDelay(p.attempts, RESEND_BACKOFF, Math.random);
      }
    }
    for (const p of finished) {
      p.ticket.done = true;
      p.progress.waiting--;
      p.progress.advance();
    }
    this.pending = this.pending.filter((p) => !finished.has(p));
    if (finished.size > 0) this.releaseIntake();
    return ready.length;
  }

  /**
   * The due events of one round: the first of every stream, then the second, and so on, so that no stream waits
   * behind another's backlog. An event whose message group has an earlier one waiting for its resend is not due.
   */
  private takeInTurn(now: number): Pending[] {
    const byStream = new Map<StreamProgress, Pending[]>();
    const waitingGroups = new Set<string>();
    for (const p of this.pending) {
      const group = messageGroupIdFor(p.event.data);
      if (p.notBefore > now || waitingGroups.has(group)) waitingGroups.add(group);
      else if (byStream.has(p.progress)) byStream.get(p.progress)?.push(p);
      else byStream.set(p.progress, [p]);
    }
    const queues = [...byStream.values()];
    const ready: Pending[] = [];
    for (let i = 0; ready.length < this.opt.maxEventsPerPublish && queues.some((queue) => queue.length > i); i++) {
      ready.push(...queues.flatMap((queue) => queue[i] ?? []));
    }
    return ready.slice(0, this.opt.maxEventsPerPublish);
  }

  /**
   * Publishes round after round until `signal` aborts, pausing `flushIntervalMs` when nothing was due (less when
   * intake finds the outbox full, or brings an event to an empty one).
   */
  async flushLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let attempted = 0;
      try {
        attempted = await this.publishRound();
      } catch (err) {
        this.d.logger.error('Publishing events failed', { error: err as Error });
      }
      if (attempted > 0 || signal.aborted) continue;
      // Not AbortSignal.any: each call would leave a signal on the window's (nodejs/node#54614).
      const pause = new AbortController();
      const wake = (this.wakeFlush = () => pause.abort());
      signal.addEventListener('abort', wake, { once: true });
      await sleep(this.opt.flushIntervalMs, pause.signal);
      signal.removeEventListener('abort', wake);
      this.wakeFlush = undefined;
    }
  }

  /** After the streams stopped: keeps sending what is pending (with backoff) for at most `drainTimeoutMs`; returns what is left. */
  async drain(): Promise<number> {
    const deadline = AbortSignal.timeout(this.opt.drainTimeoutMs);
    for (const p of this.pending) p.notBefore = 0; // the last chance to send: a resend due later is due now
    while (this.pending.length > 0 && !deadline.aborted) {
      const attempted = await this.publishRound().catch(() => 0);
      if (attempted === 0) await sleep(200, deadline);
    }
    if (this.pending.length > 0) {
      this.d.logger.warn('Leaving unsent events to the next forwarder; the checkpoint stops before them', { count: this.pending.length });
    }
    return this.pending.length;
  }
}
