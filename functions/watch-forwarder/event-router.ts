/**
 * The forwarder's event handler, controller-runtime's predicates and map functions in one place: each change a stream
 * delivers is judged by the domain's relevance rules (README, Relevance), and what needs a reconcile becomes
 * TaintEvents in the outbox. A change that sends nothing still passes its stream's resume point.
 */
import type { TaintId } from '#shared/domain/taint.ts';
import { clusterKey, type ClusterRef } from '#shared/contract/cloud-event.ts';
import { forwardDecision, poolNodesToAnnounce, type ForwardDecision, type RelevanceOptions } from '#shared/policy/relevance.ts';
import { autoscalerEventNeeded } from '#shared/policy/autoscaler-relevance.ts';
import { mayNeedWrite } from '#shared/policy/drift.ts';
import type { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { clusterOfMachine, toClusterPauseEvents, toMachinePoolEvents, toScalableResourceEvent, toTaintEvent } from '#shared/contract/events.ts';
import { objectKeyOf } from '#shared/model/views.ts';
import type { ClusterFacts, MachineFacts, MachinePoolFacts, NodeFacts, WatchedFacts } from '#shared/model/views.ts';
import type { EventHints } from '#shared/contract/events.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import type { StreamEvent } from '#shared/ports/watch-source.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { LogKey, type logger } from '#shared/observability/logger.ts';
import type { Outbox, StreamProgress } from './outbox.ts';
import type { ObjectIndex } from './object-index.ts';

/** One change of an object, delivered by a stream. */
export type Change = Extract<StreamEvent<WatchedFacts>, { type: 'change' }>;

export interface EventRouterDeps {
  readonly mode: 'capi' | 'self';
  readonly telemetry: ForwarderTelemetry;
  readonly logger: Pick<typeof logger, 'info' | 'error'>;
  readonly outbox: Pick<Outbox, 'enqueue'>;
  readonly index: ObjectIndex;
  /** STARTUP_TAINT_KEY/EFFECT and SPEC_TAINTS_OWNER, as the reconcile function's (README, Relevance). */
  readonly startupTaint?: TaintId;
  readonly specTaintsOwner?: SpecTaintsOwner;
}

export class EventRouter {
  readonly #d: EventRouterDeps;

  constructor(deps: EventRouterDeps) {
    this.#d = deps;
  }

  /** Routes one change; `cluster` is the workload cluster of a Node stream (undefined for the management streams). */
  async route(e: Change, progress: StreamProgress, cluster: ClusterRef | undefined): Promise<void> {
    const { facts } = e;
    if (facts.kind === 'Cluster') return;
    this.#d.telemetry.record(ForwarderMetric.EventsSeen, 1);
    const deleted = e.change === 'deleted';
    const { index, mode } = this.#d;
    const gate = this.#d.startupTaint ? { startupTaint: this.#d.startupTaint } : {};
    const relevance: RelevanceOptions = { ...gate, ...(this.#d.specTaintsOwner ? { specTaintsOwner: this.#d.specTaintsOwner } : {}) };
    switch (facts.kind) {
      case 'MachinePool': {
        const previous = sameKind(e.previous, facts);
        const decision = forwardDecision(e.change, previous, facts);
        const nodes = decision.forward ? poolNodesToAnnounce(e.change, previous, facts) : [];
        const autoscaler = autoscalerEventNeeded(e.change, previous, facts, gate);
        if (nodes.length === 0 && !autoscaler) return this.#filtered(e, progress);
        const ref = clusterOfMachine(facts, mode);
        if (!ref) return this.#malformed(e, facts, progress);
        const events = toMachinePoolEvents(facts, nodes, e.change, ref, e.observedAt, decision.forward && decision.declarationRecovered ? { declarationRecovered: true } : {});
        if (autoscaler) events.push(toScalableResourceEvent(facts, e.change, ref, e.observedAt));
        return this.#d.outbox.enqueue(events, e.observedAt, progress, e.checkpoint);
      }
      case 'MachineDeployment':
      case 'MachineSet': {
        const ref = autoscalerEventNeeded(e.change, sameKind(e.previous, facts), facts, gate) ? clusterOfMachine(facts, mode) : undefined;
        if (!ref) return this.#filtered(e, progress);
        return this.#d.outbox.enqueue([toScalableResourceEvent(facts, e.change, ref, e.observedAt)], e.observedAt, progress, e.checkpoint);
      }
      case 'Machine': {
        const ref = clusterOfMachine(facts, mode);
        const links = ref ? { nodeFacts: index.nodesOf(ref), linkedNodeOf: (m: MachineFacts) => index.nodeFor(m, ref) } : {};
        // Judged against the links before this change (Cluster API confirming a link the product acted on).
        const decision = forwardDecision(e.change, e.previous, facts, { ...relevance, ...links });
        index.observeMachine(sameKind(e.previous, facts), facts, deleted, ref);
        const node = !deleted && facts.nodeName === undefined && ref ? index.nodeFor(facts, ref) : undefined;
        return this.#send(e, facts, decision, ref, progress, node ? { providerIdNode: node } : {});
      }
      case 'Node': {
        const links = cluster ? { linkedMachineOf: (n: NodeFacts) => index.machineFor(n, cluster), machineFactsOf: (m: { namespace: string; name: string }) => index.machine(m) } : {};
        const decision = forwardDecision(e.change, e.previous, facts, { ...relevance, ...links });
        if (cluster) index.observeNode(sameKind(e.previous, facts), facts, deleted, cluster);
        const machine = !deleted && cluster ? index.machineFor(facts, cluster) : undefined;
        return this.#send(e, facts, decision, cluster, progress, machine ? { providerIdMachine: machine } : {});
      }
    }
  }

  /**
   * Objects a list put into a stream's state without announcing them all: the index learns the unlinked ones, so that
   * a member that joined the rota links a Node to a Machine that got its provider ID before.
   */
  listed(items: readonly WatchedFacts[], cluster: ClusterRef | undefined): void {
    for (const facts of items) {
      if (facts.kind === 'Machine') this.#d.index.observeMachine(undefined, facts, false, clusterOfMachine(facts, this.#d.mode));
      else if (facts.kind === 'Node' && cluster) this.#d.index.observeNode(undefined, facts, false, cluster);
    }
  }

  /**
   * Announces as `resynced` each object a quiet list did not announce that may need work (README, Failure semantics:
   * Quiet lists), so a fleet in sync sends nothing. Returns how many were announced.
   */
  async judge(unannounced: readonly WatchedFacts[], cluster: ClusterRef | undefined, observedAt: Date, progress: StreamProgress): Promise<number> {
    const { index, mode, telemetry } = this.#d;
    const gate = this.#d.startupTaint ? { startupTaint: this.#d.startupTaint } : {};
    const options = { ...gate, ...(this.#d.specTaintsOwner ? { specTaintsOwner: this.#d.specTaintsOwner } : {}) };
    const ownerOf = cluster ? index.ownersIn(cluster) : undefined;
    let announced = 0;
    for (const facts of unannounced) {
      telemetry.record(ForwarderMetric.EventsSeen, 1);
      let event: TaintEvent | undefined;
      if (facts.kind === 'Node' && cluster && ownerOf && mayNeedWrite(facts, ownerOf(facts), options)) {
        const machine = index.machineFor(facts, cluster);
        event = toTaintEvent(facts, 'resynced', cluster, observedAt, machine ? { providerIdMachine: machine } : {});
      } else if ((facts.kind === 'MachineDeployment' || facts.kind === 'MachineSet' || facts.kind === 'MachinePool') && autoscalerEventNeeded('resynced', undefined, facts, gate)) {
        const ref = clusterOfMachine(facts, mode);
        if (ref) event = toScalableResourceEvent(facts, 'resynced', ref, observedAt);
      }
      if (!event) {
        telemetry.record(ForwarderMetric.EventsFiltered, 1);
        continue;
      }
      announced++;
      await this.#d.outbox.enqueue([event], observedAt, progress, undefined);
    }
    // One line per list that found work (drift healed, a first list's joining Nodes); a fleet in sync logs nothing here.
    if (announced > 0) {
      this.#d.logger.info('Announcing listed objects that may need a write', { ...(cluster ? { [LogKey.cluster]: clusterKey(cluster) } : {}), judged: unannounced.length, announced });
    }
    return announced;
  }

  /** A Cluster's `spec.paused` changed: announces all of its objects (toClusterPauseEvents; README, Pause). */
  async announcePause(facts: ClusterFacts, cluster: ClusterRef, observedAt: Date, progress: StreamProgress): Promise<void> {
    const events = toClusterPauseEvents(facts, cluster, this.#d.index.membersOf(facts, cluster), observedAt);
    this.#d.logger.info(facts.paused ? 'Announcing the objects of a paused Cluster' : 'Announcing the objects of an unpaused Cluster', {
      [LogKey.cluster]: clusterKey(cluster),
      [LogKey.resourceVersion]: facts.resourceVersion,
      events: events.length,
    });
    if (events.length > 0) await this.#d.outbox.enqueue(events, observedAt, progress, undefined);
  }

  /** A Machine's or Node's change: its one event when relevant, naming its unlinked other half (`hints`). */
  async #send(e: Change, facts: MachineFacts | NodeFacts, decision: ForwardDecision, ref: ClusterRef | undefined, progress: StreamProgress, hints: EventHints): Promise<void> {
    if (!decision.forward) return this.#filtered(e, progress, decision.filtered);
    if (!ref) return this.#malformed(e, facts, progress);
    const event = toTaintEvent(facts, e.change, ref, e.observedAt, { ...(decision.declarationRecovered ? { declarationRecovered: true } : {}), ...hints });
    await this.#d.outbox.enqueue([event], e.observedAt, progress, e.checkpoint);
  }

  #filtered(e: Change, progress: StreamProgress, reason?: Extract<ForwardDecision, { forward: false }>['filtered']): void {
    this.#d.telemetry.record(ForwarderMetric.EventsFiltered, 1);
    if (reason === 'foreign-taints') this.#d.telemetry.record(ForwarderMetric.ForeignTaintChangesFiltered, 1);
    if (reason === 'foreign-declaration') this.#d.telemetry.record(ForwarderMetric.ForeignDeclarationChangesFiltered, 1);
    progress.add(e.checkpoint, true);
  }

  /** A Machine or MachinePool that names no cluster (capi mode): counted, logged once, its resume point passed. */
  #malformed(e: Change, facts: MachineFacts | NodeFacts | MachinePoolFacts, progress: StreamProgress): void {
    this.#d.telemetry.record(ForwarderMetric.MalformedWatchEvents, 1);
    this.#d.logger.error(`Skipping ${facts.kind} without a cluster name`, { [facts.kind]: objectKeyOf(facts), [LogKey.resourceVersion]: facts.resourceVersion });
    progress.add(e.checkpoint, true);
  }
}

/** The previous state when it is of the current one's kind (always, within one stream), narrowed to its type. */
function sameKind<T extends WatchedFacts>(previous: WatchedFacts | undefined, current: T): T | undefined {
  return previous?.kind === current.kind ? (previous as T) : undefined;
}
