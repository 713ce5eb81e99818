/**
 * The watch-forwarder's core, shared by the scheduled Lambda (one bounded window) and the
 * long-running process (`npm run forwarder`): become the one active forwarder (Lease), resume every
 * stream from the checkpoint, turn relevant changes into TaintEvents, publish them in batches,
 * checkpoint only what was sent, and hand over cleanly when stopped. It also keeps the set of workload clusters
 * whose Node stream is failing (unreachable, slow or refusing our credential): each transition is logged once with the
 * cluster, and their number is sampled as the UnreachableClusters metric, while every other cluster keeps converging.
 */
import { clusterKey, type ClusterRef } from '#shared/domain/cloud-event.ts';
import { forwardDecision, poolNodesToAnnounce } from '#shared/domain/relevance.ts';
import {
  MACHINES_STREAM,
  MACHINE_POOLS_STREAM,
  clusterOfMachine,
  nodeStreamKey,
  toMachinePoolEvents,
  toTaintEvent,
  type Checkpoint,
  type ClusterFacts,
  type MachineFacts,
  type MachinePoolFacts,
  type NodeFacts,
  type WatchedFacts,
} from '#shared/domain/watch-event.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { EventPublisher } from '#shared/ports/event-publisher.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import type { LeaderLease } from '#shared/ports/leader-lease.ts';
import type { StreamEvent, StreamHealthEvent, WatchSources, WatchStream } from '#shared/ports/watch-source.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { logger as defaultLogger, LogKey } from '#shared/observability/logger.ts';
import { Leadership } from './leadership.ts';
import { Outbox, type StreamProgress } from './outbox.ts';
import { sleep } from './sleep.ts';

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
  /** Watch intake pauses while this many events wait to be sent (default 5000). */
  readonly maxPendingEvents?: number;
  /** When stopping, how long to keep trying to send what is pending (default 10 s). */
  readonly drainTimeoutMs?: number;
  /** How often the number of failing clusters is sampled as UnreachableClusters (default 60 s; also once at the end of each run). */
  readonly healthSampleIntervalMs?: number;
}

/** A workload cluster whose Node stream is failing (see WatchForwarder.failingClusters). */
export interface FailingCluster {
  /** `<namespace>/<name>`, or `self` in `self` mode. */
  readonly cluster: string;
  /** Safe description of the first failure (no credential, no response body). */
  readonly reason: string;
  /** When its stream started failing. */
  readonly since: Date;
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
  private readonly outbox: Outbox;
  /** Workload clusters whose Node stream is failing, by stream key. */
  private failing = new Map<string, FailingCluster>();

  constructor(deps: WatchForwarderDeps, options: WatchForwarderOptions = {}) {
    this.d = deps;
    this.log = deps.logger ?? defaultLogger;
    this.opt = {
      renewIntervalMs: options.renewIntervalMs ?? 5_000,
      acquireRetryMs: options.acquireRetryMs ?? 2_000,
      flushIntervalMs: options.flushIntervalMs ?? 100,
      maxEventsPerPublish: options.maxEventsPerPublish ?? 100,
      maxPendingEvents: options.maxPendingEvents ?? 5_000,
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
    return [...this.failing.values()].sort((a, b) => a.cluster.localeCompare(b.cluster));
  }

  /** The resume points of every stream, covering only events that were sent or filtered. */
  checkpoint(): Checkpoint {
    return this.outbox.checkpoint();
  }

  /** Runs one leadership term until `signal` aborts (or leadership is lost), then hands over. */
  async run(signal: AbortSignal): Promise<ForwarderRunSummary> {
    const checkpoint = await this.leadership.acquire(signal);
    if (!checkpoint) return { active: false, unsent: 0, checkpoint: {}, failingClusters: [] };
    this.failing.clear();
    const term = new AbortController();
    const stop = (): void => term.abort();
    signal.addEventListener('abort', stop, { once: true });
    this.outbox.begin(checkpoint, term.signal);
    this.log.info('Forwarding watch events', { mode: this.d.mode, checkpoint });

    const streams: Promise<void>[] = [this.runStream(MACHINES_STREAM, this.d.sources.machines(this.outbox.startOf(MACHINES_STREAM)), term.signal, undefined)];
    if (this.d.sources.machinePools) {
      streams.push(this.runStream(MACHINE_POOLS_STREAM, this.d.sources.machinePools(this.outbox.startOf(MACHINE_POOLS_STREAM)), term.signal, undefined));
    }
    if (this.d.mode === 'self') {
      const self: ClusterRef = { mode: 'self' };
      streams.push(this.runStream(nodeStreamKey(self), this.d.sources.nodes(self, this.outbox.startOf(nodeStreamKey(self))), term.signal, self));
    } else {
      streams.push(this.runClusterDiscovery(term.signal));
    }
    const renewing = this.leadership.renewLoop(term);
    const flushing = this.outbox.flushLoop(term.signal);
    const sampling = this.sampleLoop(term.signal);

    await Promise.all(streams);
    term.abort();
    await Promise.all([renewing, flushing, sampling]);
    // The last sample of the run, so that every window (however short) reports how many clusters were failing at its end.
    this.sampleHealth();
    const failingClusters = this.failingClusters();
    this.failing.clear();
    this.outbox.releaseIntake();
    const unsent = await this.outbox.drain();
    const final = await this.leadership.handOver(this.opt.drainTimeoutMs, unsent);
    signal.removeEventListener('abort', stop);
    return { active: true, unsent, checkpoint: final, failingClusters };
  }

  private async runClusterDiscovery(signal: AbortSignal): Promise<void> {
    const running = new Map<string, { controller: AbortController; done: Promise<void> }>();
    const onEvent = async (e: StreamEvent<ClusterFacts>): Promise<void> => {
      if (e.type === 'failing' || e.type === 'recovered') {
        this.streamHealth('clusters', undefined, e);
        return;
      }
      if (e.type !== 'change' || !forwardDecision(e.change, e.previous, e.facts).forward) return;
      const cluster: ClusterRef = { mode: 'capi', namespace: e.facts.namespace, name: e.facts.name };
      const key = nodeStreamKey(cluster);
      const gone = e.change === 'deleted' || e.facts.deleting;
      const current = running.get(key);
      if (gone && current) {
        this.log.info('Stopping Node watch of a removed cluster', { [LogKey.cluster]: clusterKey(cluster) });
        current.controller.abort();
        running.delete(key);
        const failing = this.failing.get(key);
        if (failing) {
          // Its stream is stopped and will not recover: it leaves the set, so no removed cluster keeps the alarm on.
          this.failing.delete(key);
          this.log.info('Forgetting the failing Node watch of a removed cluster', { [LogKey.cluster]: failing.cluster, failingSince: failing.since.toISOString() });
        }
        if (e.change === 'deleted') this.outbox.forgetStream(key);
      } else if (!gone && !current) {
        this.log.info('Starting Node watch', { [LogKey.cluster]: clusterKey(cluster), resumeFrom: this.outbox.startOf(key).resumeFrom });
        const controller = new AbortController();
        signal.addEventListener('abort', () => controller.abort(), { once: true });
        const done = this.runStream(key, this.d.sources.nodes(cluster, this.outbox.startOf(key)), controller.signal, cluster);
        running.set(key, { controller, done });
      }
    };
    await this.d.sources.clusters({}).run(signal, onEvent);
    await Promise.all([...running.values()].map((r) => r.done));
  }

  private async runStream<T extends WatchedFacts>(key: string, stream: WatchStream<T>, signal: AbortSignal, cluster: ClusterRef | undefined): Promise<void> {
    const progress = this.outbox.openStream(key);
    await stream.run(signal, (e) => {
      if (e.type === 'failing' || e.type === 'recovered') {
        // A stream stopped for a removed cluster is no longer tracked, whatever its last attempt says.
        if (!signal.aborted) this.streamHealth(key, cluster, e);
        return Promise.resolve();
      }
      return this.accept(e, progress, cluster);
    });
  }

  /**
   * A stream's health changed: logged once per transition. A Node stream (the cluster is known) enters or leaves the
   * set of failing clusters; a management stream (Machines, MachinePools, Clusters) is logged only, by stream name.
   */
  private streamHealth(key: string, cluster: ClusterRef | undefined, e: StreamHealthEvent): void {
    const who = cluster ? { [LogKey.cluster]: clusterKey(cluster) } : { stream: key };
    if (e.type === 'failing') {
      if (cluster) this.failing.set(key, { cluster: clusterKey(cluster), reason: e.reason, since: e.since });
      this.log.warn(cluster ? 'Workload cluster unreachable: its Node watch is failing and retried with backoff' : 'Watch failing; retrying with backoff', {
        ...who,
        [LogKey.reason]: e.reason,
        since: e.since.toISOString(),
        ...(cluster ? { failingClusters: this.failing.size } : {}),
      });
      return;
    }
    if (cluster) this.failing.delete(key);
    this.log.info(cluster ? 'Workload cluster reachable again: its Node watch recovered' : 'Watch recovered', {
      ...who,
      since: e.since.toISOString(),
      failedForMs: Math.max(0, e.at.getTime() - e.since.getTime()),
      ...(cluster ? { failingClusters: this.failing.size } : {}),
    });
  }

  /** Records how many workload clusters are failing now (UnreachableClusters; 0 when none, so the alarm sees data). */
  private sampleHealth(): void {
    this.d.telemetry.record(ForwarderMetric.UnreachableClusters, this.failing.size);
  }

  private async sampleLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await sleep(this.opt.healthSampleIntervalMs, signal);
      if (!signal.aborted) this.sampleHealth();
    }
  }

  private async accept(e: StreamEvent<WatchedFacts>, progress: StreamProgress, cluster: ClusterRef | undefined): Promise<void> {
    if (e.type === 'failing' || e.type === 'recovered') return;
    if (e.type === 'progress') {
      progress.add(e.resourceVersion, true);
      return;
    }
    const facts = e.facts;
    if (facts.kind === 'Cluster') return;
    this.d.telemetry.record(ForwarderMetric.EventsSeen, 1);
    if (facts.kind === 'MachinePool') {
      await this.acceptPool(e as StreamEvent<MachinePoolFacts> & { type: 'change' }, facts, progress);
      return;
    }
    // Heartbeats, the echo of our own write and foreign taint noise cost no message (and so no API call).
    const decision = forwardDecision(e.change, e.previous, facts, this.d.startupTaint ? { startupTaint: this.d.startupTaint } : {});
    if (!decision.forward) {
      this.d.telemetry.record(ForwarderMetric.EventsFiltered, 1);
      if (decision.filtered === 'foreign-taints') this.d.telemetry.record(ForwarderMetric.ForeignTaintChangesFiltered, 1);
      progress.add(e.checkpoint, true);
      return;
    }
    const ref = facts.kind === 'Machine' ? clusterOfMachine(facts as MachineFacts, this.d.mode) : cluster;
    if (!ref) {
      this.d.telemetry.record(ForwarderMetric.MalformedWatchEvents, 1);
      this.log.error("Skipping Machine without a cluster name", { [LogKey.machine]: `${(facts as MachineFacts).namespace}/${facts.name}`, [LogKey.resourceVersion]: facts.resourceVersion });
      progress.add(e.checkpoint, true);
      return;
    }
    const event = toTaintEvent(facts as MachineFacts | NodeFacts, e.change, ref, e.observedAt, decision.declarationRecovered ? { declarationRecovered: true } : {});
    await this.outbox.enqueue([event], e.observedAt, progress, e.checkpoint);
  }

  /** A MachinePool change: one event per Node it concerns (none for a deletion or a change that concerns no Node). */
  private async acceptPool(e: StreamEvent<MachinePoolFacts> & { type: 'change' }, facts: MachinePoolFacts, progress: StreamProgress): Promise<void> {
    const decision = forwardDecision(e.change, e.previous, facts);
    const nodes = decision.forward ? poolNodesToAnnounce(e.change, e.previous, facts) : [];
    if (nodes.length === 0) {
      this.d.telemetry.record(ForwarderMetric.EventsFiltered, 1);
      progress.add(e.checkpoint, true);
      return;
    }
    const ref = clusterOfMachine(facts, this.d.mode);
    if (!ref) {
      this.d.telemetry.record(ForwarderMetric.MalformedWatchEvents, 1);
      this.log.error('Skipping MachinePool without a cluster name', { MachinePool: `${facts.namespace}/${facts.name}`, [LogKey.resourceVersion]: facts.resourceVersion });
      progress.add(e.checkpoint, true);
      return;
    }
    const events = toMachinePoolEvents(facts, nodes, e.change, ref, e.observedAt, decision.forward && decision.declarationRecovered ? { declarationRecovered: true } : {});
    await this.outbox.enqueue(events, e.observedAt, progress, e.checkpoint);
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
