/**
 * The watch-forwarder's core and its one lifecycle: a window of the rota ({@link WatchForwarder.runMember}). The
 * scheduled Lambda runs one window per invocation; `npm run forwarder`, `npm start`, the tests and the benchmarks run
 * windows one after another in one process (local/forwarder-rota.ts), by default as a rota of one member. A window
 * joins the rota (or exits when enough members watch), resumes every stream from the checkpoint the Lease holds, turns
 * relevant changes into TaintEvents, publishes them in batches, stores the checkpoint of what was sent while it holds
 * the Lease, and at its end sends what is pending, releases the Lease and leaves. It also keeps the set of workload
 * clusters whose Node stream is failing (unreachable, slow or refusing our credential): each transition is logged once
 * with the cluster, and their number is sampled as the UnreachableClusters metric, while every other cluster keeps
 * converging.
 *
 * WatchForwarder composes one collaborator per job: {@link Leadership} (the rota, the Lease and the checkpoint stored
 * in it), {@link ClusterStreams} (the watch streams, relevance, per-cluster health) and {@link Outbox} (pending
 * events, sending and resending, back-pressure, checkpoint advance); it only runs them together for a window and in
 * order at its end.
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
import { ClusterStreams, type FailingCluster } from './cluster-streams.ts';

export type { FailingCluster } from './cluster-streams.ts';

type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

/** What the core needs; the handler or local runner builds these from adapters. */
export interface WatchForwarderDeps {
  readonly mode: 'capi' | 'self';
  readonly sources: WatchSources;
  readonly lease: LeaderLease;
  /** The rota's member list, on the same Lease. */
  readonly rota: ForwarderRota;
  readonly publisher: EventPublisher;
  readonly telemetry: ForwarderTelemetry;
  readonly clock: Clock;
  readonly logger?: Logger;
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
  /** How often the Lease is renewed and the checkpoint stored, and the member's entry recorded (default 5 s). */
  readonly renewIntervalMs?: number;
  /** How often a member that does not hold the Lease tries to take it (default 2 s). */
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

/** Result of one window. */
export interface ForwarderRunSummary {
  /** False when nothing was sent: enough members already watched, so the window did not join the rota. */
  readonly active: boolean;
  /** Whether the window joined the rota (when it did not: how many members it counted on). */
  readonly rota?: { readonly joined: boolean; readonly membersCounted?: number };
  /** Events still unsent at the end; the checkpoint stops before them so the next run re-reads them. */
  readonly unsent: number;
  readonly checkpoint: Checkpoint;
  /** The workload clusters whose Node stream was failing when the run ended (what its last UnreachableClusters sample counted). */
  readonly failingClusters: readonly FailingCluster[];
}

/** The forwarder. Create once; each {@link WatchForwarder.runMember} is one window and resolves after a clean hand-over. */
export class WatchForwarder {
  private readonly d: WatchForwarderDeps;
  private readonly log: Logger;
  private readonly opt: Required<Omit<WatchForwarderOptions, 'maxPendingPerStream'>> & Pick<WatchForwarderOptions, 'maxPendingPerStream'>;
  private readonly leadership: Leadership;
  private readonly supervisor: ClusterStreams;
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
      { publisher: deps.publisher, telemetry: deps.telemetry, clock: deps.clock, logger: this.log, maySend: () => this.leadership.isMember() },
      { flushIntervalMs: this.opt.flushIntervalMs, maxEventsPerPublish: this.opt.maxEventsPerPublish, maxPendingEvents: this.opt.maxPendingEvents, ...(this.opt.maxPendingPerStream !== undefined ? { maxPendingPerStream: this.opt.maxPendingPerStream } : {}), drainTimeoutMs: this.opt.drainTimeoutMs },
    );
    this.leadership = new Leadership(
      { lease: deps.lease, rota: deps.rota, logger: this.log, sentCheckpoint: () => this.outbox.checkpoint() },
      { renewIntervalMs: this.opt.renewIntervalMs, acquireRetryMs: this.opt.acquireRetryMs },
    );
    this.supervisor = new ClusterStreams(
      {
        mode: deps.mode,
        sources: deps.sources,
        telemetry: deps.telemetry,
        logger: this.log,
        outbox: this.outbox,
        ...(deps.startupTaint ? { startupTaint: deps.startupTaint } : {}),
        ...(deps.specTaintsOwner ? { specTaintsOwner: deps.specTaintsOwner } : {}),
        // Only the Lease holder announces a later relist (a member's first list is always announced).
        announcesRelists: () => this.leadership.isActive(),
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

  /**
   * Runs one window of the rota (shared/policy/forwarder-rota.ts) until `rota.until` or until `signal` aborts: exits at
   * once when enough members with time left already watch; otherwise joins, resumes every stream from the checkpoint
   * the Lease holds, sends every relevant change it sees (as do the other members: the queue keeps one copy), stores
   * the checkpoint while it holds the Lease, takes the Lease when it is released or expires, and at the end sends what
   * is pending, releases the Lease if it holds it and leaves the rota. A member killed on the way leaves its Lease to
   * expire and its entry to lapse; the others go on watching.
   */
  async runMember(signal: AbortSignal, rota: { readonly policy: RotaPolicy; readonly until: Date }): Promise<ForwarderRunSummary> {
    const term: RotaTerm = rota;
    const window = new AbortController();
    const stop = (): void => window.abort();
    signal.addEventListener('abort', stop, { once: true });
    if (signal.aborted) window.abort();
    const ends = setTimeout(stop, Math.max(0, rota.until.getTime() - this.d.clock.now().getTime()));
    try {
      const joined = await this.leadership.join(term, window.signal);
      if (!joined.joined) {
        this.log.info('Enough forwarders watch; this window exits', { membersCounted: joined.members, targetMembers: rota.policy.targetMembers });
        return { active: false, unsent: 0, checkpoint: {}, failingClusters: [], rota: { joined: false, membersCounted: joined.members } };
      }
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
      const final = await this.leadership.handOver(unsent);
      await this.leadership.leave(term);
      return { active: true, unsent, checkpoint: final, failingClusters, rota: { joined: true } };
    } finally {
      clearTimeout(ends);
      signal.removeEventListener('abort', stop);
    }
  }
}

/**
 * Runs one window of the rota ({@link WatchForwarder.runMember}) of `durationMs`, or until `signal` aborts, as the
 * scheduled Lambda does. Returns the window's summary (inactive when it did not join the rota).
 */
export async function forwardWatchEvents(
  deps: WatchForwarderDeps,
  input: { readonly durationMs: number; readonly signal?: AbortSignal; readonly rota: RotaPolicy },
  options?: WatchForwarderOptions,
): Promise<ForwarderRunSummary> {
  const until = new Date(deps.clock.now().getTime() + input.durationMs);
  return new WatchForwarder(deps, options).runMember(input.signal ?? new AbortController().signal, { policy: input.rota, until });
}
