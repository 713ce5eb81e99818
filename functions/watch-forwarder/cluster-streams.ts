/**
 * The forwarder's informers: runs the management streams and, per workload cluster, a Node stream (in `capi` mode
 * started and stopped with its Cluster), each from its resume point in the outbox, and hands their changes to the
 * EventRouter. It keeps the set of workload clusters whose Node stream is failing (UnreachableClusters).
 */
import { clusterKey, type ClusterRef } from '#shared/contract/cloud-event.ts';
import { forwardDecision, pausedChanged } from '#shared/policy/relevance.ts';
import { MACHINES_STREAM, MACHINE_POOLS_STREAM, MACHINE_DEPLOYMENTS_STREAM, MACHINE_SETS_STREAM, CLUSTERS_STREAM, nodeStreamKey } from '#shared/contract/streams.ts';
import type { ClusterFacts, WatchedFacts } from '#shared/model/views.ts';
import type { StreamEvent, StreamHealthEvent, WatchSources, WatchStream } from '#shared/ports/watch-source.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { LogKey, type logger } from '#shared/observability/logger.ts';
import { sleep } from '#shared/sleep.ts';
import type { Outbox } from './outbox.ts';
import { EventRouter, type EventRouterDeps } from './event-router.ts';
import { ObjectIndex } from './object-index.ts';

/** A workload cluster whose Node stream is failing (see WatchForwarder.failingClusters). */
export interface FailingCluster {
  /** `<namespace>/<name>`, or `self` in `self` mode. */
  readonly cluster: string;
  /** Safe description of the first failure (no credential, no response body). */
  readonly reason: string;
  readonly since: Date;
}

export interface ClusterStreamsDeps extends Omit<EventRouterDeps, 'index'> {
  readonly sources: WatchSources;
  readonly logger: Pick<typeof logger, 'info' | 'warn' | 'error' | 'debug'>;
  readonly outbox: Pick<Outbox, 'startOf' | 'openStream' | 'forgetStream' | 'enqueue'>;
  /**
   * Whether later relists (resync, 410 Gone) are announced now: only by the Lease holder, or every member's resync
   * would reconcile every object once per member (README, Hand-over). First lists always are.
   */
  readonly announcesRelists: () => boolean;
}

export interface ClusterStreamsOptions {
  /** How often the number of failing clusters is sampled as UnreachableClusters (default 60 s). */
  readonly healthSampleIntervalMs?: number;
  /** How long a Node stream's quiet list waits for the Machine and MachinePool streams' collections (default 30 s). */
  readonly ownersWaitMs?: number;
}

/** See the module comment. One instance serves every term of a forwarder. */
export class ClusterStreams {
  readonly #d: ClusterStreamsDeps;
  readonly #opt: ClusterStreamsOptions;
  readonly #index = new ObjectIndex();
  readonly #router: EventRouter;
  readonly #failing = new Map<string, FailingCluster>();
  readonly #waitingForOwners: Array<() => void> = [];

  constructor(deps: ClusterStreamsDeps, options: ClusterStreamsOptions = {}) {
    this.#d = deps;
    this.#opt = options;
    this.#router = new EventRouter({ ...deps, index: this.#index });
  }

  /** The workload clusters whose Node stream is failing now, sorted by cluster (see WatchForwarder.failingClusters). */
  failingClusters(): FailingCluster[] {
    return [...this.#failing.values()].sort((a, b) => a.cluster.localeCompare(b.cluster));
  }

  /** Runs every stream of a term until `signal` aborts (each run starts with no failing cluster). */
  async supervise(signal: AbortSignal): Promise<void> {
    this.#failing.clear();
    const { sources, outbox } = this.#d;
    // Every stream but the Clusters' lists quietly: what it does not announce is judged (EventRouter.judge).
    const start = (key: string) => ({ ...outbox.startOf(key), quietLists: true });
    const machines = sources.machines(start(MACHINES_STREAM));
    const machinePools = sources.machinePools?.(start(MACHINE_POOLS_STREAM));
    const deployments = sources.machineDeployments?.(start(MACHINE_DEPLOYMENTS_STREAM));
    const sets = sources.machineSets?.(start(MACHINE_SETS_STREAM));
    this.#index.watchManagement({ machines, machinePools, scalables: [deployments, sets].filter((s) => s !== undefined) });
    const management: [string, WatchStream<WatchedFacts> | undefined][] = [[MACHINES_STREAM, machines], [MACHINE_POOLS_STREAM, machinePools], [MACHINE_DEPLOYMENTS_STREAM, deployments], [MACHINE_SETS_STREAM, sets]];
    const streams = management.flatMap(([key, stream]) => (stream ? [this.#runStream(key, stream, signal, undefined)] : []));
    if (this.#d.mode === 'self') streams.push(this.#runNodes({ mode: 'self' }, signal));
    await Promise.all([...streams, this.#runClusters(signal)]);
  }

  /** Samples UnreachableClusters (0 when none, so the alarm sees data) every `healthSampleIntervalMs` until `signal` aborts. */
  async sampleLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await sleep(this.#opt.healthSampleIntervalMs ?? 60_000, signal);
      if (!signal.aborted) this.#d.telemetry.record(ForwarderMetric.UnreachableClusters, this.#failing.size);
    }
  }

  /** Ends a term once its streams stopped: the run's last UnreachableClusters sample; returns those clusters. */
  endTerm(): FailingCluster[] {
    this.#d.telemetry.record(ForwarderMetric.UnreachableClusters, this.#failing.size);
    const failingClusters = this.failingClusters();
    this.#failing.clear();
    return failingClusters;
  }

  /**
   * The Cluster stream: in `capi` mode each Cluster's Node stream, and in either mode (a `self` cluster's Machines
   * belong to Clusters too) a Cluster's pause or unpause, whose events have no resume point of their own.
   */
  async #runClusters(signal: AbortSignal): Promise<void> {
    const running = new Map<string, { controller: AbortController; done: Promise<void> }>();
    const pauses = this.#d.outbox.openStream(CLUSTERS_STREAM);
    const onEvent = async (e: StreamEvent<ClusterFacts>): Promise<void> => {
      if (e.type === 'failing' || e.type === 'recovered') return this.#streamHealth(CLUSTERS_STREAM, undefined, e);
      if (e.type !== 'change') return;
      const gone = e.change === 'deleted' || e.facts.deleting;
      const cluster: ClusterRef = this.#d.mode === 'self' ? { mode: 'self' } : { mode: 'capi', namespace: e.facts.namespace, name: e.facts.name };
      if (this.#d.mode === 'capi') {
        if (!forwardDecision(e.change, e.previous, e.facts).forward) return;
        const key = nodeStreamKey(cluster);
        const current = running.get(key);
        if (gone && current) {
          this.#d.logger.info('Stopping Node watch of a removed cluster', { [LogKey.cluster]: clusterKey(cluster) });
          current.controller.abort();
          running.delete(key);
          const failing = this.#failing.get(key);
          if (failing) {
            // Its stream is stopped and will not recover: it leaves the set, so no removed cluster keeps the alarm on.
            this.#failing.delete(key);
            this.#d.logger.info('Forgetting the failing Node watch of a removed cluster', { [LogKey.cluster]: failing.cluster, failingSince: failing.since.toISOString() });
          }
        } else if (!gone && !current) {
          this.#d.logger.info('Starting Node watch', { [LogKey.cluster]: clusterKey(cluster), resumeFrom: this.#d.outbox.startOf(key).resumeFrom });
          const controller = new AbortController();
          signal.addEventListener('abort', () => controller.abort(), { once: true });
          running.set(key, { controller, done: this.#runNodes(cluster, controller.signal) });
        }
        // A deleted Cluster's resume point goes, whether its stream stopped now or already when the Cluster began to be
        // deleted (the usual path, with finalizers): a Cluster made again under that name starts from a fresh list.
        if (e.change === 'deleted') this.#d.outbox.forgetStream(key);
      }
      if (!gone && pausedChanged(e.change, e.previous, e.facts)) await this.#router.announcePause(e.facts, cluster, e.observedAt, pauses);
    };
    const clusters = this.#d.sources.clusters({});
    this.#index.watchClusters(clusters);
    await clusters.run(signal, onEvent);
    await Promise.all([...running.values()].map((r) => r.done));
  }

  /** A workload cluster's Node stream, readable by the index while it runs. */
  async #runNodes(cluster: ClusterRef, signal: AbortSignal): Promise<void> {
    const key = nodeStreamKey(cluster);
    const stream = this.#d.sources.nodes(cluster, { ...this.#d.outbox.startOf(key), quietLists: true });
    this.#index.watchNodes(cluster, stream);
    try {
      await this.#runStream(key, stream, signal, cluster);
    } finally {
      this.#index.unwatchNodes(cluster, stream);
    }
  }

  async #runStream<T extends WatchedFacts>(key: string, stream: WatchStream<T>, signal: AbortSignal, cluster: ClusterRef | undefined): Promise<void> {
    const progress = this.#d.outbox.openStream(key);
    /** Set once the stream's first list is behind it (its first resume point): later relists are its own. */
    let listed = false;
    await stream.run(signal, async (e) => {
      // A management stream's progress (its list behind it) or failure (a collection not served holds nothing) may
      // complete the collections that the Node streams' lists wait for.
      const mayHold = e.type !== 'listed' && e.type !== 'change';
      if (!cluster && mayHold && this.#waitingForOwners.length > 0 && this.#index.managementSynced()) {
        for (const release of this.#waitingForOwners.splice(0)) release();
      }
      // A stream stopped for a removed cluster is no longer tracked, whatever its last attempt says.
      if (e.type === 'failing' || e.type === 'recovered') {
        return signal.aborted ? undefined : this.#streamHealth(key, cluster, e);
      }
      if (e.type === 'listed') {
        this.#router.listed(e.items, cluster);
        // A quiet list's other objects: judged at the stream's first list by every member, later only by the holder.
        if (e.unannounced && (!listed || this.#d.announcesRelists())) {
          if (cluster) await this.#ownersHeld(signal);
          await this.#router.judge(e.unannounced, cluster, e.observedAt ?? new Date(), progress);
        }
        return;
      }
      if (e.type === 'progress') {
        listed = true;
        progress.add(e.resourceVersion, true);
      } else if (e.change === 'resynced' && listed && !this.#d.announcesRelists()) {
        this.#d.telemetry.record(ForwarderMetric.EventsSeen, 1);
        this.#d.telemetry.record(ForwarderMetric.EventsFiltered, 1);
        progress.add(e.checkpoint, true);
      } else {
        if (e.checkpoint !== undefined) listed = true;
        await this.#router.route(e, progress, cluster);
      }
    });
  }

  /**
   * Resolves once the Machine and MachinePool streams hold their collections (at most `ownersWaitMs`), so that a Node
   * stream's quiet list racing theirs judges its Nodes against their owners rather than conservatively. Its watch
   * waits meanwhile and then starts from its list's resourceVersion: nothing is missed.
   */
  async #ownersHeld(signal: AbortSignal): Promise<void> {
    if (this.#index.managementSynced() || signal.aborted) return;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const timer = setTimeout(release, this.#opt.ownersWaitMs ?? 30_000);
    signal.addEventListener('abort', release, { once: true });
    this.#waitingForOwners.push(release);
    await held;
    clearTimeout(timer);
    signal.removeEventListener('abort', release);
  }

  /** A stream's health changed: logged once; a Node stream also enters or leaves the set of failing clusters. */
  #streamHealth(key: string, cluster: ClusterRef | undefined, e: StreamHealthEvent): void {
    const who = cluster ? { [LogKey.cluster]: clusterKey(cluster) } : { stream: key };
    const failingClusters = () => (cluster ? { failingClusters: this.#failing.size } : {});
    if (e.type === 'failing') {
      if (cluster) this.#failing.set(key, { cluster: clusterKey(cluster), reason: e.reason, since: e.since });
      this.#d.logger.warn(cluster ? 'Workload cluster unreachable: its Node watch is failing and retried with backoff' : 'Watch failing; retrying with backoff', {
        ...who,
        [LogKey.reason]: e.reason,
        since: e.since.toISOString(),
        ...failingClusters(),
      });
      return;
    }
    if (cluster) this.#failing.delete(key);
    this.#d.logger.info(cluster ? 'Workload cluster reachable again: its Node watch recovered' : 'Watch recovered', {
      ...who,
      since: e.since.toISOString(),
      failedForMs: Math.max(0, e.at.getTime() - e.since.getTime()),
      ...failingClusters(),
    });
  }
}
