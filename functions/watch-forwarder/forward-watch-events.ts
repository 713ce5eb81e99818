/**
 * The watch-forwarder's core, shared by the scheduled Lambda (one bounded window) and the
 * long-running process (`npm run forwarder`): become the one active forwarder (Lease), resume every
 * stream from the checkpoint, turn relevant changes into TaintEvents, publish them in batches,
 * checkpoint only what was sent, and hand over cleanly when stopped. It also keeps the set of workload clusters
 * whose Node stream is failing (unreachable, slow or refusing our credential): each transition is logged once with the
 * cluster, and their number is sampled as the UnreachableClusters metric, while every other cluster keeps converging.
 *
 * WatchForwarder composes one collaborator per job: {@link Leadership} (the Lease and the checkpoint stored in it),
 * {@link StreamSupervisor} (the watch streams, relevance, per-cluster health) and {@link Outbox} (pending events,
 * sending, back-pressure, checkpoint advance); it only runs them together for a term and in order at its end.
 */
import type { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import type { Checkpoint } from '#shared/domain/watch-event.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { EventPublisher } from '#shared/ports/event-publisher.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import type { LeaderLease } from '#shared/ports/leader-lease.ts';
import type { WatchSources } from '#shared/ports/watch-source.ts';
import { logger as defaultLogger } from '#shared/observability/logger.ts';
import { Leadership } from './leadership.ts';
import { Outbox } from './outbox.ts';
import { StreamSupervisor, type FailingCluster } from './stream-supervisor.ts';

export type { FailingCluster } from './stream-supervisor.ts';

type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

/** What the core needs; the handler or local runner builds these from adapters. */
export interface WatchForwarderDeps {
  readonly mode: 'capi' | 'self';
  readonly sources: WatchSources;
  readonly lease: LeaderLease;
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
  readonly startupTaint?: { readonly key: string; readonly effect: string };
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
   * every object at once; a larger bound only keeps more of them in memory while the same sends go out (BENCHMARKS.md,
   * forwarder memory).
   */
  readonly maxPendingEvents?: number;
  /** When stopping, how long to keep trying to send what is pending (default 10 s). */
  readonly drainTimeoutMs?: number;
  /** How often the number of failing clusters is sampled as UnreachableClusters (default 60 s; also once at the end of each run). */
  readonly healthSampleIntervalMs?: number;
}

/** Result of one run. */
export interface ForwarderRunSummary {
  /** False when another forwarder held the Lease for the whole run (nothing was sent). */
  readonly active: boolean;
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
  private readonly opt: Required<WatchForwarderOptions>;
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
      drainTimeoutMs: options.drainTimeoutMs ?? 10_000,
      healthSampleIntervalMs: options.healthSampleIntervalMs ?? 60_000,
    };
    this.outbox = new Outbox(
      { publisher: deps.publisher, telemetry: deps.telemetry, clock: deps.clock, logger: this.log, isLeading: () => this.leadership.isActive() },
      { flushIntervalMs: this.opt.flushIntervalMs, maxEventsPerPublish: this.opt.maxEventsPerPublish, maxPendingEvents: this.opt.maxPendingEvents, drainTimeoutMs: this.opt.drainTimeoutMs },
    );
    this.leadership = new Leadership(
      { lease: deps.lease, logger: this.log, sentCheckpoint: () => this.outbox.checkpoint(), ...(deps.queueDrained ? { queueDrained: deps.queueDrained } : {}) },
      { renewIntervalMs: this.opt.renewIntervalMs, acquireRetryMs: this.opt.acquireRetryMs },
    );
    this.supervisor = new StreamSupervisor(
      { mode: deps.mode, sources: deps.sources, telemetry: deps.telemetry, logger: this.log, outbox: this.outbox, ...(deps.startupTaint ? { startupTaint: deps.startupTaint } : {}), ...(deps.specTaintsOwner ? { specTaintsOwner: deps.specTaintsOwner } : {}) },
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
}

/**
 * Runs one bounded window: the forwarder's run until `durationMs` elapses or `signal` aborts.
 * Returns the run summary (inactive when another forwarder held the Lease throughout).
 */
export async function forwardWatchEvents(
  deps: WatchForwarderDeps,
  input: { readonly durationMs: number; readonly signal?: AbortSignal },
  options?: WatchForwarderOptions,
): Promise<ForwarderRunSummary> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), input.durationMs);
  input.signal?.addEventListener('abort', () => controller.abort(), { once: true });
  try {
    return await new WatchForwarder(deps, options).run(controller.signal);
  } finally {
    clearTimeout(timer);
  }
}
