/**
 * The watch-forwarder's core and its one lifecycle, a window of the rota ({@link WatchForwarder.runMember}), in every
 * form (README, Trigger). One collaborator per job: {@link Leadership} (rota, Lease, stored checkpoint),
 * {@link ClusterStreams} (streams, relevance, cluster health) and {@link Outbox} (sends, resends, back-pressure,
 * checkpoint advance); WatchForwarder only runs them together for a window and in order at its end.
 */
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { EventPublisher } from '#shared/ports/event-publisher.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import type { RotaPolicy } from '#shared/policy/forwarder-rota.ts';
import type { ForwarderRota, LeaderLease } from '#shared/ports/leader-lease.ts';
import type { WatchSources } from '#shared/ports/watch-source.ts';
import { logger as defaultLogger } from '#shared/observability/logger.ts';
import { Leadership, type LeadershipOptions, type RotaTerm } from './leadership.ts';
import { Outbox, type OutboxOptions } from './outbox.ts';
import { ClusterStreams, type ClusterStreamsOptions, type FailingCluster } from './cluster-streams.ts';
import type { EventRouterDeps } from './event-router.ts';

type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

/** What the core needs; compose.ts builds these from adapters. */
export interface WatchForwarderDeps extends Pick<EventRouterDeps, 'mode' | 'startupTaint' | 'specTaintsOwner'> {
  readonly sources: WatchSources;
  readonly lease: LeaderLease & ForwarderRota;
  readonly publisher: EventPublisher;
  readonly telemetry: ForwarderTelemetry;
  readonly clock: Clock;
  readonly logger?: Logger;
}

/** The forwarder's timing, each with its collaborator's default (tests shorten them). */
export type WatchForwarderOptions = LeadershipOptions & OutboxOptions & ClusterStreamsOptions;

/** Result of one window. */
export interface ForwarderRunSummary {
  /** False when nothing was sent: enough members already watched, so the window did not join the rota. */
  readonly active: boolean;
  /** Whether the window joined the rota (when it did not: how many members it counted on). */
  readonly rota: { readonly joined: boolean; readonly membersCounted?: number };
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
  private readonly leadership: Leadership;
  private readonly supervisor: ClusterStreams;
  private readonly outbox: Outbox;

  constructor(deps: WatchForwarderDeps, options: WatchForwarderOptions = {}) {
    this.d = deps;
    this.log = deps.logger ?? defaultLogger;
    this.outbox = new Outbox({ ...deps, logger: this.log }, options);
    const sentCheckpoint = (): Checkpoint => this.outbox.checkpoint();
    this.leadership = new Leadership({ lease: deps.lease, logger: this.log, sentCheckpoint }, options);
    const announcesRelists = (): boolean => this.leadership.isActive();
    this.supervisor = new ClusterStreams({ ...deps, logger: this.log, outbox: this.outbox, announcesRelists }, options);
  }

  /** True while this forwarder holds the Lease. */
  isActive(): boolean {
    return this.leadership.isActive();
  }

  /**
   * The workload clusters whose Node stream is failing now (sorted by cluster), from its first failed attempt until it
   * recovers, its Cluster goes, or the window ends (a cluster still failing is reported again by the next window).
   */
  failingClusters(): FailingCluster[] {
    return this.supervisor.failingClusters();
  }

  /** The resume points of every stream, covering only events that were sent or filtered. */
  checkpoint(): Checkpoint {
    return this.outbox.checkpoint();
  }

  /** Runs one window of the rota (README, Deployed form) until `term.until` or until `signal` aborts. */
  async runMember(signal: AbortSignal, term: RotaTerm): Promise<ForwarderRunSummary> {
    const window = new AbortController();
    const stop = (): void => window.abort();
    signal.addEventListener('abort', stop, { once: true });
    if (signal.aborted) window.abort();
    const ends = setTimeout(stop, Math.max(0, term.until.getTime() - this.d.clock.now().getTime()));
    try {
      const joined = await this.leadership.join(term, window.signal);
      if (!joined.joined) {
        const { targetMembers } = term.policy;
        this.log.info('Enough forwarders watch; this window exits', { membersCounted: joined.members, targetMembers });
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
      const unsent = await this.outbox.drain();
      const final = await this.leadership.leave(term, unsent);
      return { active: true, unsent, checkpoint: final, failingClusters, rota: { joined: true } };
    } finally {
      clearTimeout(ends);
      signal.removeEventListener('abort', stop);
    }
  }
}

/** Runs one window of `durationMs` (or until `signal` aborts) of a new WatchForwarder, as the scheduled Lambda does. */
export async function forwardWatchEvents(
  deps: WatchForwarderDeps,
  input: { readonly durationMs: number; readonly signal?: AbortSignal; readonly rota: RotaPolicy },
  options?: WatchForwarderOptions,
): Promise<ForwarderRunSummary> {
  const until = new Date(deps.clock.now().getTime() + input.durationMs);
  return new WatchForwarder(deps, options).runMember(input.signal ?? new AbortController().signal, { policy: input.rota, until });
}
