/**
 * The forwarder's stream supervision: runs the Machines, MachinePools, MachineDeployments and MachineSets streams and,
 * per workload cluster, a Node stream (in `capi` mode started and stopped as Clusters appear and go; in `self` mode the
 * one cluster's). It turns each change into TaintEvents by the domain's relevance rules (and a Cluster's pause or
 * unpause into events for its objects) and hands them to the outbox, and keeps the set of
 * workload clusters whose Node stream is failing: each transition is logged once with the cluster, and their number
 * is sampled as the UnreachableClusters metric, while every other cluster keeps converging.
 */
import type { TaintId } from '#shared/domain/taint.ts';
import { clusterKey, type ClusterRef } from '#shared/contract/cloud-event.ts';
import { forwardDecision, pausedChanged, poolNodesToAnnounce, type RelevanceOptions } from '#shared/policy/relevance.ts';
import { autoscalerEventNeeded } from '#shared/policy/autoscaler-relevance.ts';
import type { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { MACHINES_STREAM, MACHINE_POOLS_STREAM, MACHINE_DEPLOYMENTS_STREAM, MACHINE_SETS_STREAM, CLUSTERS_STREAM, nodeStreamKey } from '#shared/contract/streams.ts';
import { clusterOfMachine, toClusterPauseEvents, toMachinePoolEvents, toScalableResourceEvent, toTaintEvent } from '#shared/contract/events.ts';
import type { ClusterFacts, MachineFacts, MachinePoolFacts, NodeFacts, ScalableFacts, WatchedFacts } from '#shared/model/views.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import type { StreamEvent, StreamHealthEvent, WatchSources, WatchStream } from '#shared/ports/watch-source.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { LogKey, type logger as defaultLogger } from '#shared/observability/logger.ts';
import type { Outbox, StreamProgress } from './outbox.ts';
import { ProviderIdLinks } from './provider-id-links.ts';
import { sleep } from '#shared/sleep.ts';

type Logger = Pick<typeof defaultLogger, 'info' | 'warn' | 'error' | 'debug'>;

/** A workload cluster whose Node stream is failing (see WatchForwarder.failingClusters). */
export interface FailingCluster {
  /** `<namespace>/<name>`, or `self` in `self` mode. */
  readonly cluster: string;
  /** Safe description of the first failure (no credential, no response body). */
  readonly reason: string;
  /** When its stream started failing. */
  readonly since: Date;
}

export interface StreamSupervisorDeps {
  readonly mode: 'capi' | 'self';
  readonly sources: WatchSources;
  readonly telemetry: ForwarderTelemetry;
  readonly logger: Logger;
  /** Where each stream resumes, where its progress is kept, and where the events go. */
  readonly outbox: Pick<Outbox, 'startOf' | 'openStream' | 'forgetStream' | 'enqueue'>;
  /** The startup gate (see WatchForwarderDeps.startupTaint). */
  readonly startupTaint?: TaintId;
  /**
   * Whether the `resynced` announcements of a stream's later relists (periodic resync, a watch expired with 410 Gone)
   * are sent now; absent: always. In the deployed form only the Lease holder sends them: the other members watch the
   * same objects, so what such a relist finds was announced as it happened, and a periodic resync by every member
   * (each on its own timer, often more than the queue's 5-minute deduplication apart) would reconcile every object
   * once per member. The announcements of a stream's first list (from the checkpoint, or everything) always go.
   */
  readonly announcesRelists?: () => boolean;
  /** Who propagates `spec.taints` (see WatchForwarderDeps.specTaintsOwner). */
  readonly specTaintsOwner?: SpecTaintsOwner;
}

export interface StreamSupervisorOptions {
  /** How often the number of failing clusters is sampled as UnreachableClusters. */
  readonly healthSampleIntervalMs: number;
}

/** See the module comment. One instance serves every term of a forwarder. */
export class StreamSupervisor {
  private readonly d: StreamSupervisorDeps;
  private readonly log: Logger;
  private readonly opt: StreamSupervisorOptions;
  /** Workload clusters whose Node stream is failing, by stream key. */
  private failing = new Map<string, FailingCluster>();
  /** The running Node streams, by stream key: relevance judges a Machine change with its Node's last state from there. */
  private nodeStreams = new Map<string, WatchStream<WatchedFacts>>();
  /** The management streams of the running term (their last state of each object): a Cluster's pause names its objects. */
  private machineStream: WatchStream<MachineFacts> | undefined;
  private machinePoolStream: WatchStream<MachinePoolFacts> | undefined;
  private scalableStreams: WatchStream<ScalableFacts>[] = [];
  /** Unlinked Machines and Nodes by provider ID: a joining Node's event names its Machine (provider-id-links.ts). */
  private readonly links = new ProviderIdLinks();

  constructor(deps: StreamSupervisorDeps, options: StreamSupervisorOptions) {
    this.d = deps;
    this.log = deps.logger;
    this.opt = options;
  }

  /** The workload clusters whose Node stream is failing now, sorted by cluster (see WatchForwarder.failingClusters). */
  failingClusters(): FailingCluster[] {
    return [...this.failing.values()].sort((a, b) => a.cluster.localeCompare(b.cluster));
  }

  /** Runs every stream of a term until `signal` aborts (each run starts with no failing cluster). */
  async supervise(signal: AbortSignal): Promise<void> {
    this.failing.clear();
    const { sources, outbox } = this.d;
    this.machineStream = sources.machines(outbox.startOf(MACHINES_STREAM));
    this.machinePoolStream = sources.machinePools?.(outbox.startOf(MACHINE_POOLS_STREAM));
    const deployments = sources.machineDeployments?.(outbox.startOf(MACHINE_DEPLOYMENTS_STREAM));
    const sets = sources.machineSets?.(outbox.startOf(MACHINE_SETS_STREAM));
    this.scalableStreams = [deployments, sets].filter((s) => s !== undefined);
    const streams: Promise<void>[] = [this.runStream(MACHINES_STREAM, this.machineStream, signal, undefined)];
    if (this.machinePoolStream) streams.push(this.runStream(MACHINE_POOLS_STREAM, this.machinePoolStream, signal, undefined));
    if (deployments) streams.push(this.runStream(MACHINE_DEPLOYMENTS_STREAM, deployments, signal, undefined));
    if (sets) streams.push(this.runStream(MACHINE_SETS_STREAM, sets, signal, undefined));
    if (this.d.mode === 'self') {
      const self: ClusterRef = { mode: 'self' };
      streams.push(this.runStream(nodeStreamKey(self), this.d.sources.nodes(self, this.d.outbox.startOf(nodeStreamKey(self))), signal, self));
      streams.push(this.runClusterPauses(signal));
    } else {
      streams.push(this.runClusterDiscovery(signal));
    }
    await Promise.all(streams);
  }

  /** Samples UnreachableClusters every `healthSampleIntervalMs` until `signal` aborts. */
  async sampleLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      await sleep(this.opt.healthSampleIntervalMs, signal);
      if (!signal.aborted) this.sampleHealth();
    }
  }

  /**
   * Ends a term once its streams stopped: the last UnreachableClusters sample of the run, so that every window (however
   * short) reports how many clusters were failing at its end. Returns those clusters; the set is then empty.
   */
  endTerm(): FailingCluster[] {
    this.sampleHealth();
    const failingClusters = this.failingClusters();
    this.failing.clear();
    return failingClusters;
  }

  private async runClusterDiscovery(signal: AbortSignal): Promise<void> {
    const running = new Map<string, { controller: AbortController; done: Promise<void> }>();
    // A pause's events have no resume point of their own (the Cluster stream always starts from a fresh list).
    const pauses = this.d.outbox.openStream(CLUSTERS_STREAM);
    const onEvent = async (e: StreamEvent<ClusterFacts>): Promise<void> => {
      if (e.type === 'failing' || e.type === 'recovered') {
        this.streamHealth(CLUSTERS_STREAM, undefined, e);
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
      } else if (!gone && !current) {
        this.log.info('Starting Node watch', { [LogKey.cluster]: clusterKey(cluster), resumeFrom: this.d.outbox.startOf(key).resumeFrom });
        const controller = new AbortController();
        signal.addEventListener('abort', () => controller.abort(), { once: true });
        const done = this.runStream(key, this.d.sources.nodes(cluster, this.d.outbox.startOf(key)), controller.signal, cluster);
        running.set(key, { controller, done });
      }
      // A deleted Cluster's resume point goes, whether its stream stopped now or already when the Cluster began to be
      // deleted (the usual path, with finalizers): a Cluster made again under that name starts from a fresh list.
      if (e.change === 'deleted') this.d.outbox.forgetStream(key);
      if (!gone && pausedChanged(e.change, e.previous, e.facts)) await this.announcePause(e.facts, cluster, e.observedAt, pauses);
    };
    await this.d.sources.clusters({}).run(signal, onEvent);
    await Promise.all([...running.values()].map((r) => r.done));
  }

  /**
   * Self mode: the Nodes are the management cluster's own, so the Clusters are watched for their pause alone (a
   * self-hosted cluster's Machines belong to a Cluster too, whose `spec.paused` the reconcile honours).
   */
  private async runClusterPauses(signal: AbortSignal): Promise<void> {
    const pauses = this.d.outbox.openStream(CLUSTERS_STREAM);
    await this.d.sources.clusters({}).run(signal, async (e) => {
      if (e.type === 'failing' || e.type === 'recovered') this.streamHealth(CLUSTERS_STREAM, undefined, e);
      else if (e.type === 'change' && e.change !== 'deleted' && !e.facts.deleting && pausedChanged(e.change, e.previous, e.facts)) {
        await this.announcePause(e.facts, { mode: 'self' }, e.observedAt, pauses);
      }
    });
  }

  /**
   * A Cluster's `spec.paused` changed: every Node of its Machines and MachinePools, and each of its MachineDeployments,
   * MachineSets and MachinePools, is announced (toClusterPauseEvents), from the management streams' last state. Once
   * unpaused, what changed meanwhile converges with no other change; when paused, the reconcile answers `paused`.
   */
  private async announcePause(facts: ClusterFacts, cluster: ClusterRef, observedAt: Date, progress: StreamProgress): Promise<void> {
    // The objects that name this Cluster (`spec.clusterName`, else the cluster-name label), in either mode.
    const ofCluster = (o: MachineFacts | MachinePoolFacts | ScalableFacts): boolean =>
      !o.deleting && o.namespace === facts.namespace && (o.clusterName ?? (o.clusterNameLabel || undefined)) === facts.name;
    const machines = [...(this.machineStream?.objects() ?? [])].filter(ofCluster).flatMap((machine) => {
      const nodeName = machine.nodeName ?? this.links.nodeFor(machine, cluster);
      return nodeName === undefined ? [] : [{ machine, nodeName }];
    });
    const machinePools = [...(this.machinePoolStream?.objects() ?? [])].filter(ofCluster);
    const scalables = this.scalableStreams.flatMap((s) => [...s.objects()]).filter(ofCluster);
    const events = toClusterPauseEvents(facts, cluster, { machines, machinePools, scalables }, observedAt);
    this.log.info(facts.paused ? 'Announcing the objects of a paused Cluster' : 'Announcing the objects of an unpaused Cluster', {
      [LogKey.cluster]: clusterKey(cluster),
      [LogKey.resourceVersion]: facts.resourceVersion,
      events: events.length,
    });
    if (events.length > 0) await this.d.outbox.enqueue(events, observedAt, progress, undefined);
  }

  private async runStream<T extends WatchedFacts>(key: string, stream: WatchStream<T>, signal: AbortSignal, cluster: ClusterRef | undefined): Promise<void> {
    const progress = this.d.outbox.openStream(key);
    if (cluster) this.nodeStreams.set(key, stream);
    /** Set once the stream's first list is behind it (its first resume point): later relists are its own. */
    let listed = false;
    try {
      await stream.run(signal, (e) => {
        if (e.type === 'failing' || e.type === 'recovered') {
          // A stream stopped for a removed cluster is no longer tracked, whatever its last attempt says.
          if (!signal.aborted) this.streamHealth(key, cluster, e);
          return Promise.resolve();
        }
        if (e.type === 'listed') {
          this.indexListed(e.items, cluster);
          return Promise.resolve();
        }
        if (e.type === 'change' && e.change === 'resynced' && listed && this.d.announcesRelists && !this.d.announcesRelists()) {
          this.d.telemetry.record(ForwarderMetric.EventsSeen, 1);
          this.d.telemetry.record(ForwarderMetric.EventsFiltered, 1);
          progress.add(e.checkpoint, true);
          return Promise.resolve();
        }
        if (e.type === 'progress' || (e.type === 'change' && e.checkpoint !== undefined)) listed = true;
        return this.accept(e, progress, cluster);
      });
    } finally {
      if (this.nodeStreams.get(key) === stream) this.nodeStreams.delete(key);
      if (cluster) this.links.forgetCluster(cluster);
    }
  }

  /**
   * Objects a list put into a stream's state without announcing them all (a resume at the checkpoint, a relist that
   * announces what changed): the provider-ID index learns the unlinked ones, so that a member that joined the rota (or a
   * restarted forwarder) links a Node to a Machine that got its provider ID before.
   */
  private indexListed(items: readonly WatchedFacts[], cluster: ClusterRef | undefined): void {
    for (const facts of items) {
      if (facts.kind === 'Machine') this.links.observeMachine(undefined, facts, false, clusterOfMachine(facts, this.d.mode));
      else if (facts.kind === 'Node' && cluster) this.links.observeNode(undefined, facts, false, cluster);
    }
  }

  /** The last state the Machine stream holds of a Machine (undefined when not seen). */
  private machineFacts(ref: { readonly namespace: string; readonly name: string }): MachineFacts | undefined {
    return this.machineStream?.latest?.(`${ref.namespace}/${ref.name}`);
  }

  /** The last state the Node stream of `cluster` holds of a Node, by name (undefined when no such stream runs). */
  private nodeFactsIn(cluster: ClusterRef): (name: string) => NodeFacts | undefined {
    const stream = this.nodeStreams.get(nodeStreamKey(cluster));
    return (name) => {
      const facts = stream?.latest?.(name);
      return facts?.kind === 'Node' ? facts : undefined;
    };
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

  private async accept(e: Exclude<StreamEvent<WatchedFacts>, StreamHealthEvent | { type: 'listed' }>, progress: StreamProgress, cluster: ClusterRef | undefined): Promise<void> {
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
    if (facts.kind === 'MachineDeployment' || facts.kind === 'MachineSet') {
      await this.acceptScalable(e as StreamEvent<ScalableFacts> & { type: 'change' }, facts, progress);
      return;
    }
    // Heartbeats, the echo of our own write, foreign taint noise and changes of upstream's own spec.taints that cannot
    // change the product's decision cost no message (and so no API call).
    const ref = facts.kind === 'Machine' ? clusterOfMachine(facts as MachineFacts, this.d.mode) : cluster;
    const deleted = e.change === 'deleted';
    const relevance: RelevanceOptions = {
      ...(this.d.startupTaint ? { startupTaint: this.d.startupTaint } : {}),
      ...(this.d.specTaintsOwner ? { specTaintsOwner: this.d.specTaintsOwner } : {}),
      ...(facts.kind === 'Machine' && ref ? { nodeFacts: this.nodeFactsIn(ref), linkedNodeOf: (m: MachineFacts) => this.links.nodeFor(m, ref) } : {}),
      ...(facts.kind === 'Node' && ref ? { linkedMachineOf: (n: NodeFacts) => this.links.machineFor(n, ref), machineFactsOf: (m: { namespace: string; name: string }) => this.machineFacts(m) } : {}),
    };
    // Judged against the links as they were before this change (Cluster API confirming a link the product acted on).
    const decision = forwardDecision(e.change, e.previous, facts, relevance);
    if (facts.kind === 'Machine') this.links.observeMachine(e.previous?.kind === 'Machine' ? e.previous : undefined, facts, deleted, ref);
    else if (facts.kind === 'Node' && cluster) this.links.observeNode(e.previous?.kind === 'Node' ? e.previous : undefined, facts, deleted, cluster);
    if (!decision.forward) {
      this.d.telemetry.record(ForwarderMetric.EventsFiltered, 1);
      if (decision.filtered === 'foreign-taints') this.d.telemetry.record(ForwarderMetric.ForeignTaintChangesFiltered, 1);
      if (decision.filtered === 'foreign-declaration') this.d.telemetry.record(ForwarderMetric.ForeignDeclarationChangesFiltered, 1);
      progress.add(e.checkpoint, true);
      return;
    }
    if (!ref) {
      this.d.telemetry.record(ForwarderMetric.MalformedWatchEvents, 1);
      this.log.error("Skipping Machine without a cluster name", { [LogKey.machine]: `${(facts as MachineFacts).namespace}/${facts.name}`, [LogKey.resourceVersion]: facts.resourceVersion });
      progress.add(e.checkpoint, true);
      return;
    }
    const hints = {
      ...(decision.declarationRecovered ? { declarationRecovered: true } : {}),
      ...this.providerIdHint(facts as MachineFacts | NodeFacts, ref, deleted),
    };
    const event = toTaintEvent(facts as MachineFacts | NodeFacts, e.change, ref, e.observedAt, hints);
    await this.d.outbox.enqueue([event], e.observedAt, progress, e.checkpoint);
  }

  /** An unlinked Machine's or Node's other half, matched by provider ID (none for a deletion). */
  private providerIdHint(facts: MachineFacts | NodeFacts, ref: ClusterRef, deleted: boolean): { providerIdMachine?: { namespace: string; name: string }; providerIdNode?: string } {
    if (deleted) return {};
    if (facts.kind === 'Machine') {
      const node = facts.nodeName === undefined ? this.links.nodeFor(facts, ref) : undefined;
      return node ? { providerIdNode: node } : {};
    }
    const machine = facts.machineAnnotation === undefined ? this.links.machineFor(facts, ref) : undefined;
    return machine ? { providerIdMachine: machine } : {};
  }

  /** The autoscaler options (the startup gate, refused as a declaration). */
  private autoscalerOptions(): { startupTaint?: TaintId } {
    return this.d.startupTaint ? { startupTaint: this.d.startupTaint } : {};
  }

  /** A MachineDeployment or MachineSet change: one ScalableResource event when its autoscaler annotation needs a reconcile. */
  private async acceptScalable(e: StreamEvent<ScalableFacts> & { type: 'change' }, facts: ScalableFacts, progress: StreamProgress): Promise<void> {
    const ref = autoscalerEventNeeded(e.change, e.previous, facts, this.autoscalerOptions()) ? clusterOfMachine(facts, this.d.mode) : undefined;
    if (!ref) {
      this.d.telemetry.record(ForwarderMetric.EventsFiltered, 1);
      progress.add(e.checkpoint, true);
      return;
    }
    await this.d.outbox.enqueue([toScalableResourceEvent(facts, e.change, ref, e.observedAt)], e.observedAt, progress, e.checkpoint);
  }

  /**
   * A MachinePool change: one event per Node it concerns (none for a deletion or a change that concerns no Node), and a
   * ScalableResource event when its autoscaler annotation needs a reconcile.
   */
  private async acceptPool(e: StreamEvent<MachinePoolFacts> & { type: 'change' }, facts: MachinePoolFacts, progress: StreamProgress): Promise<void> {
    const decision = forwardDecision(e.change, e.previous, facts);
    const nodes = decision.forward ? poolNodesToAnnounce(e.change, e.previous, facts) : [];
    const autoscaler = autoscalerEventNeeded(e.change, e.previous, facts, this.autoscalerOptions());
    if (nodes.length === 0 && !autoscaler) {
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
    if (autoscaler) events.push(toScalableResourceEvent(facts, e.change, ref, e.observedAt));
    await this.d.outbox.enqueue(events, e.observedAt, progress, e.checkpoint);
  }
}
