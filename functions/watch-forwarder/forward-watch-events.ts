/**
 * The watch-forwarder's core, shared by the scheduled Lambda (one window of the rota of overlapping windows,
 * {@link WatchForwarder.runMember}) and the long-running process (`npm run forwarder`, {@link WatchForwarder.run}):
 * become the one active forwarder (Lease) or a member of the rota, resume every stream from the checkpoint, turn
 * relevant changes into TaintEvents, publish them in batches, checkpoint (the Lease holder only) what was sent, and
 * hand over cleanly when stopped. It also keeps the set of workload clusters
 * whose Node stream is failing (unreachable, slow or refusing our credential): each transition is logged once with the
 * cluster, and their number is sampled as the UnreachableClusters metric, while every other cluster keeps converging.
 *
 * WatchForwarder composes one collaborator per job: {@link Leadership} (the Lease and the checkpoint stored in it),
 * {@link StreamSupervisor} (the watch streams, relevance, per-cluster health) and {@link Outbox} (pending events,
 * sending, back-pressure, checkpoint advance); it only runs them together for a term and in order at its end.
 */
import type { TaintId } from '#shared/domain/taint.ts';
import type { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { EventPublisher } from '#shared/ports/event-publisher.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import type { RotaPolicy } from '#shared/policy/forwarder-rota.ts';
import type { ForwarderRota, LeaderLease } from '#shared/ports/leader-lease.ts';
import type { WatchSources } from '#shared/ports/watch-source.ts';
import { logger as defaultLogger } from '#shared/observability/logger.ts';
import { Leadership, type RotaTerm } from './leadership.ts';
import { Outbox } from './outbox.ts';
import { StreamSupervisor, type FailingCluster } from './stream-supervisor.ts';

export type { FailingCluster } from './stream-supervisor.ts';

type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

/** What the core needs; the handler or local runner builds these from adapters. */
export interface WatchForwarderDeps {
  readonly mode: 'capi' | 'self';
  readonly sources: WatchSources;
  readonly lease: LeaderLease;
  /** The rota's member list, on the same Lease (the deployed form: {@link WatchForwarder.runMember}). */
  readonly rota?: ForwarderRota;
  readonly publisher: EventPublisher;
  readonly telemetry: ForwarderTelemetry;
  readonly clock: Clock;
  readonly logger?: Logger;
  /**
   * Given only when the queue is not durable (the in-memory queue of a local run): true when it holds
   * no message, visible or in flight. The checkpoint stored in the Lease then advances only to a point
   * after which the queue was seen empty, i.e. everything sent before it was applied (or dead-lettered),
   * so a restart after a kill re-announces every change that might have died with the queue.
   */
  readonly queueDrained?: () => Promise<boolean>;
  /**
   * The startup gate the reconcile function removes (STARTUP_TAINT_KEY/EFFECT): a foreign write that adds or removes
   * it is forwarded, never taken for noise. Undefined when the gate is off.
   */
  readonly startupTaint?: TaintId;
  /**
   * Who propagates `Machine.spec.taints` (SPEC_TAINTS_OWNER, as the reconcile function's; default upstream Cluster API):
   * with upstream, a Machine change of `spec.taints` that cannot change the product's decision is not forwarded.
   */
  readonly specTaintsOwner?: SpecTaintsOwner;
}

export interface WatchForwarderOptions {
  /** How often the Lease is renewed and the checkpoint stored (default 5 s). */
  readonly renewIntervalMs?: number;
  /** How often a waiting forwarder retries the Lease (default 2 s). */
  readonly acquireRetryMs?: number;
  /** Pause between publish rounds when the queue of events is empty (default 100 ms). */
  readonly flushIntervalMs?: number;
  /** Events handed to the publisher per round (default 100). */
  readonly maxEventsPerPublish?: number;
  /**
   * Watch intake pauses while this many events wait to be sent (default 1000, ten publish rounds). A relist announces
   * every object at once; a larger bound only keeps more of them in memory while the same sends go out (docs/benchmarks-history.md,
   * forwarder memory).
   */
  readonly maxPendingEvents?: number;
  /**
   * Intake of one stream pauses while this many of its own events wait (default `maxPendingEvents`); while the outbox
   * is full, a stream with nothing of its own waiting still gets its next change in (outbox.ts: bulkheads).
   */
  readonly maxPendingPerStream?: number;
  /** When stopping, how long to keep trying to send what is pending (default 10 s). */
  readonly drainTimeoutMs?: number;
  /** How often the number of failing clusters is sampled as UnreachableClusters (default 60 s; also once at the end of each run). */
  readonly healthSampleIntervalMs?: number;
}

/** Result of one run. */
export interface ForwarderRunSummary {
  /**
   * False when nothing was sent: another forwarder held the Lease for the whole run, or (deployed form) enough members
   * already watched, so the window did not join the rota.
   */
  readonly active: boolean;
  /** Deployed form only: whether the window joined the rota (when it did not: how many members it counted on). */
  readonly rota?: { readonly joined: boolean; readonly membersCounted?: number };
  /** Events still unsent at the end; the checkpoint stops before them so the next run re-reads them. */
  readonly unsent: number;
  readonly checkpoint: Checkpoint;
  /** The workload clusters whose Node stream was failing when the run ended (what its last UnreachableClusters sample counted). */
  readonly failingClusters: readonly FailingCluster[];
}

/**
 * The forwarder. Create once; each `run(signal)` is one leadership term (a Lambda window or the
 * lifetime of the process) and resolves after a clean hand-over.
 */
export class WatchForwarder {
  private readonly d: WatchForwarderDeps;
  private readonly log: Logger;
  private readonly opt: Required<Omit<WatchForwarderOptions, 'maxPendingPerStream'>> & Pick<WatchForwarderOptions, 'maxPendingPerStream'>;
  private readonly leadership: Leadership;
  private readonly supervisor: StreamSupervisor;
  private readonly outbox: Outbox;

  constructor(deps: WatchForwarderDeps, options: WatchForwarderOptions = {}) {
    this.d = deps;
    this.log = deps.logger ?? defaultLogger;
    this.opt = {
      renewIntervalMs: options.renewIntervalMs ?? 5_000,
      acquireRetryMs: options.acquireRetryMs ?? 2_000,
      flushIntervalMs: options.flushIntervalMs ?? 100,
      maxEventsPerPublish: options.maxEventsPerPublish ?? 100,
      maxPendingEvents: options.maxPendingEvents ?? 1_000,
      ...(options.maxPendingPerStream !== undefined ? { maxPendingPerStream: options.maxPendingPerStream } : {}),
      drainTimeoutMs: options.drainTimeoutMs ?? 10_000,
      healthSampleIntervalMs: options.healthSampleIntervalMs ?? 60_000,
    };
    this.outbox = new Outbox(
      { publisher: deps.publisher, telemetry: deps.telemetry, clock: deps.clock, logger: this.log, maySend: () => this.leadership.isActive() || this.leadership.isMember() },
      { flushIntervalMs: this.opt.flushIntervalMs, maxEventsPerPublish: this.opt.maxEventsPerPublish, maxPendingEvents: this.opt.maxPendingEvents, ...(this.opt.maxPendingPerStream !== undefined ? { maxPendingPerStream: this.opt.maxPendingPerStream } : {}), drainTimeoutMs: this.opt.drainTimeoutMs },
    );
    this.leadership = new Leadership(
      {
        lease: deps.lease,
        logger: this.log,
        sentCheckpoint: () => this.outbox.checkpoint(),
        ...(deps.queueDrained ? { queueDrained: deps.queueDrained } : {}),
        ...(deps.rota ? { rota: deps.rota } : {}),
      },
      { renewIntervalMs: this.opt.renewIntervalMs, acquireRetryMs: this.opt.acquireRetryMs },
    );
    this.supervisor = new StreamSupervisor(
      {
        mode: deps.mode,
        sources: deps.sources,
        telemetry: deps.telemetry,
        logger: this.log,
        outbox: this.outbox,
        ...(deps.startupTaint ? { startupTaint: deps.startupTaint } : {}),
        ...(deps.specTaintsOwner ? { specTaintsOwner: deps.specTaintsOwner } : {}),
        // Outside the rota (one active forwarder) every relist is announced; in it, only the Lease holder's.
        announcesRelists: () => !this.leadership.isMember() || this.leadership.isActive(),
      },
      { healthSampleIntervalMs: this.opt.healthSampleIntervalMs },
    );
  }

  /** True while this forwarder holds the Lease. */
  isActive(): boolean {
    return this.leadership.isActive();
  }

  /**
   * The workload clusters whose Node stream is failing now (sorted by cluster). A cluster enters at its stream's first
   * failed attempt and leaves when the stream recovers, when the Cluster is deleted (or being deleted), and when the
   * run ends (each run starts with an empty set: in the Lambda form, a cluster still failing is reported again in the
   * next window).
   */
  failingClusters(): FailingCluster[] {
    return this.supervisor.failingClusters();
  }

  /** The resume points of every stream, covering only events that were sent or filtered. */
  checkpoint(): Checkpoint {
    return this.outbox.checkpoint();
  }

  /** Runs one leadership term until `signal` aborts (or leadership is lost), then hands over. */
  async run(signal: AbortSignal): Promise<ForwarderRunSummary> {
    const checkpoint = await this.leadership.acquire(signal);
    if (!checkpoint) return { active: false, unsent: 0, checkpoint: {}, failingClusters: [] };
    const term = new AbortController();
    const stop = (): void => term.abort();
    signal.addEventListener('abort', stop, { once: true });
    this.outbox.begin(checkpoint, term.signal);
    this.log.info('Forwarding watch events', { mode: this.d.mode, checkpoint });

    const streams = this.supervisor.supervise(term.signal);
    const renewing = this.leadership.renewLoop(term);
    const flushing = this.outbox.flushLoop(term.signal);
    const sampling = this.supervisor.sampleLoop(term.signal);

    await streams;
    term.abort();
    await Promise.all([renewing, flushing, sampling]);
    const failingClusters = this.supervisor.endTerm();
    this.outbox.releaseIntake();
    const unsent = await this.outbox.drain();
    const final = await this.leadership.handOver(this.opt.drainTimeoutMs, unsent);
    signal.removeEventListener('abort', stop);
    return { active: true, unsent, checkpoint: final, failingClusters };
  }

  /**
   * Runs one window of the deployed form's rota (shared/policy/forwarder-rota.ts) until `signal` aborts: exits at once
   * when enough members with time left already watch; otherwise joins, resumes every stream from the checkpoint the
   * Lease holds, sends every relevant change it sees (as do the other members: the queue keeps one copy), stores the
   * checkpoint while it holds the Lease, takes the Lease when it is released or expires, and at the end sends what is
   * pending, releases the Lease if it holds it and leaves the rota. A member killed on the way leaves its Lease to
   * expire and its entry to lapse; the others go on watching.
   */
  async runMember(signal: AbortSignal, rota: { readonly policy: RotaPolicy; readonly until: Date }): Promise<ForwarderRunSummary> {
    const term: RotaTerm = rota;
    const joined = await this.leadership.join(term, signal);
    if (!joined.joined) {
      this.log.info('Enough forwarders watch; this window exits', { membersCounted: joined.members, targetMembers: rota.policy.targetMembers });
      return { active: false, unsent: 0, checkpoint: {}, failingClusters: [], rota: { joined: false, membersCounted: joined.members } };
    }
    const window = new AbortController();
    const stop = (): void => window.abort();
    signal.addEventListener('abort', stop, { once: true });
    if (signal.aborted) window.abort();
    this.outbox.begin(joined.checkpoint, window.signal);
    this.log.info('Forwarding watch events as a member of the rota', { mode: this.d.mode, checkpoint: joined.checkpoint, holdsLease: this.leadership.isActive() });

    const streams = this.supervisor.supervise(window.signal);
    const membership = this.leadership.memberLoop(term, window.signal);
    const flushing = this.outbox.flushLoop(window.signal);
    const sampling = this.supervisor.sampleLoop(window.signal);

    await streams;
    window.abort();
    await Promise.all([membership, flushing, sampling]);
    const failingClusters = this.supervisor.endTerm();
    this.outbox.releaseIntake();
    const unsent = await this.outbox.drain();
    const final = await this.leadership.handOver(this.opt.drainTimeoutMs, unsent);
    await this.leadership.leave(term);
    signal.removeEventListener('abort', stop);
    return { active: true, unsent, checkpoint: final, failingClusters, rota: { joined: true } };
  }
}

/**
 * Runs one bounded window until `durationMs` elapses or `signal` aborts. With `rota` (the deployed form), a window of
 * the rota ({@link WatchForwarder.runMember}); without it, one leadership term ({@link WatchForwarder.run}).
 * Returns the run summary (inactive when the window did not join the rota, or another forwarder held the Lease throughout).
 */
export async function forwardWatchEvents(
  deps: WatchForwarderDeps,
  input: { readonly durationMs: number; readonly signal?: AbortSignal; readonly rota?: RotaPolicy },
  options?: WatchForwarderOptions,
): Promise<ForwarderRunSummary> {
  const controller = new AbortController();
  const until = new Date(deps.clock.now().getTime() + input.durationMs);
  const timer = setTimeout(() => controller.abort(), input.durationMs);
  input.signal?.addEventListener('abort', () => controller.abort(), { once: true });
  if (input.signal?.aborted) controller.abort();
  try {
    const forwarder = new WatchForwarder(deps, options);
    return await (input.rota ? forwarder.runMember(controller.signal, { policy: input.rota, until }) : forwarder.run(controller.signal));
  } finally {
    clearTimeout(timer);
  }
}
