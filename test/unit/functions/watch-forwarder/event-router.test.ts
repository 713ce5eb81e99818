/**
 * The forwarder's event router on its own, with the real outbox and object index behind it: what a change becomes (an
 * event, or nothing, with the stream's resume point passed either way). The streams' caches the index reads are plain
 * maps that `deliver` keeps as a stream would; starting, stopping and health of the streams are cluster-streams.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { EventRouter, type Change } from '#functions/watch-forwarder/event-router.ts';
import { ObjectIndex } from '#functions/watch-forwarder/object-index.ts';
import { Outbox } from '#functions/watch-forwarder/outbox.ts';
import { eventIdFor, type ClusterRef, type TaintEvent } from '#shared/contract/cloud-event.ts';
import { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { FIELD_MANAGER } from '#shared/domain/taint.ts';
import { objectKeyOf, type MachineFacts, type MachinePoolFacts, type NodeFacts, type ScalableFacts, type WatchedFacts } from '#shared/model/views.ts';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';
import type { WatchStream } from '#shared/ports/watch-source.ts';
import { machineFacts, nodeFacts, type NodeFactsChange } from '#test/support/builders.ts';
import { manualClock } from '#test/support/manual-clock.ts';

const T0 = new Date('2026-11-22T10:00:00Z');
const wc1: ClusterRef = { mode: 'capi', namespace: 'fleet', name: 'wc1' };
const machine = machineFacts;
const node = (change: NodeFactsChange = {}): NodeFacts =>
  nodeFacts({
  resourceVersion: '40',
  taints: [{ key: 'foreign', value: 'x', effect: 'NoExecute', timeAdded: '2026-11-22T09:30:00Z' }],
  trackingAnnotation: 'upstream:NoSchedule',
  ownTrackingAnnotation: '',
  ...change,
  });
const joining = (name: string, providerID: string) => node({ name, uid: `uid-${name}`, providerID, trackingAnnotation: undefined as never, ownTrackingAnnotation: undefined as never });
const pool = (change: Partial<MachinePoolFacts> = {}): MachinePoolFacts => ({ kind: 'MachinePool', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name: 'mp1', uid: 'uid-mp1', resourceVersion: '30', specTaints: null, annotations: {}, nodeNames: ['p1'], clusterName: 'wc1', deleting: false, ...change });
const machineSet = (change: Partial<ScalableFacts> = {}): ScalableFacts => ({
  kind: 'MachineSet', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name: 'ms1', uid: 'uid-ms1', resourceVersion: '20', specTaints: null, templateAnnotations: {}, templateLabels: {}, annotations: {}, ownedByMachineDeployment: true, clusterName: 'wc1', deleting: false, ...change,
});
const change = (kind: Change['change'], facts: WatchedFacts, previous?: WatchedFacts, checkpoint?: string): Change => ({ type: 'change', change: kind, facts, ...(previous ? { previous } : {}), observedAt: T0, ...(checkpoint ? { checkpoint } : {}) });

/** A stream's cache of last states, without the stream (the index reads only this). */
function cache<T extends WatchedFacts>(): WatchStream<T> & { keep(e: Change & { facts: T }): void } {
  const known = new Map<string, T>();
  return {
    run: async () => undefined,
    latest: (key) => known.get(key),
    objects: () => known.values(),
    keep: (e) => (e.change === 'deleted' ? known.delete(objectKeyOf(e.facts)) : known.set(objectKeyOf(e.facts), e.facts), undefined),
  };
}

let stop: (() => void) | undefined;
afterEach(() => {
  stop?.();
  stop = undefined;
});

function setup(mode: 'capi' | 'self', settings: { specTaintsOwner?: SpecTaintsOwner } = {}) {
  const sent: string[] = [];
  const published: TaintEvent[] = [];
  const counts: Record<string, number> = {};
  const errors: string[] = [];
  const logger = { info: () => undefined, warn: () => undefined, error: (message: string) => void errors.push(message), debug: () => undefined } as never;
  const telemetry = { record: (metric: string, value: number) => void (counts[metric] = (counts[metric] ?? 0) + value) };
  const outbox = new Outbox(
    { publisher: { publish: async (events) => (sent.push(...events.map((e) => e.id)), published.push(...events), { sent: events, unsent: [] }) }, telemetry, clock: manualClock(T0.getTime()), logger },
    { flushIntervalMs: 5, maxEventsPerPublish: 100, maxPendingEvents: 100, drainTimeoutMs: 100 },
  );
  const term = new AbortController();
  outbox.begin({}, term.signal);
  stop = () => term.abort();
  const index = new ObjectIndex();
  const machines = cache<MachineFacts>();
  const nodes = cache<NodeFacts>();
  index.watchManagement({ machines, scalables: [] });
  const nodeCluster: ClusterRef = mode === 'self' ? { mode: 'self' } : wc1;
  index.watchNodes(nodeCluster, nodes);
  const router = new EventRouter({ mode, telemetry, logger, outbox, index, ...settings });
  const progress = { machines: outbox.openStream('machines'), nodes: outbox.openStream('nodes'), others: outbox.openStream('others') };
  /** Hands one change to the router as its stream would: its cache first, then the change. */
  const deliver = async (e: Change): Promise<void> => {
    const { facts } = e;
    if (facts.kind === 'Machine') machines.keep({ ...e, facts });
    if (facts.kind === 'Node') nodes.keep({ ...e, facts });
    await router.route(e, facts.kind === 'Machine' ? progress.machines : facts.kind === 'Node' ? progress.nodes : progress.others, facts.kind === 'Node' ? nodeCluster : undefined);
  };
  const publish = async (rounds = 1) => {
    for (let i = 0; i < rounds; i++) await outbox.publishRound();
  };
  return { router, outbox, deliver, publish, sent, published, counts, errors };
}

const link = (e: TaintEvent) => (e.data.kind === 'Node' ? `${e.data.node.name}→${e.data.machine?.name ?? '-'}` : e.data.kind === 'Machine' ? `${e.data.machine.name}@${e.data.machine.resourceVersion}→${e.data.nodeName ?? '-'}` : e.data.kind);

describe('Class: EventRouter', () => {
  it("names the objects only: no event carries a Node's state, whether or not the forwarder has seen the Node", async () => {
    // Prepare
    const { deliver, publish, published } = setup('capi');

    // Act
    await deliver(change('added', node(), undefined, '40'));
    await deliver(change('modified', machine({ resourceVersion: '12', specTaints: [] }), machine(), '12'));
    await publish();

    // Assess: the reconcile function reads the Node itself.
    expect(published.map((e) => [e.data.kind, 'nodeState' in e.data])).toEqual([
      ['Node', false],
      ['Machine', false],
    ]);
  });

  it("names a joining Node's Machine by provider ID (either arrives first), and stops once Cluster API has linked them", async () => {
    // Prepare
    const { deliver, publish, published } = setup('capi');

    // Act: m1 has its provider ID before its Node joins (the usual order); n2 joins before m2 gets its provider ID.
    await deliver(change('added', machine({ nodeName: undefined as never, providerID: 'p1' }), undefined, '11'));
    await deliver(change('added', joining('n1', 'p1'), undefined, '40'));
    await deliver(change('added', joining('n2', 'p2'), undefined, '41'));
    await deliver(change('added', machine({ name: 'm2', uid: 'uid-m2', nodeName: undefined as never, providerID: 'p2' }), undefined, '12'));
    // A Node of another provider ID, and n1 once Cluster API annotated it (the facts then keep no provider ID).
    await deliver(change('added', joining('n3', 'p-other'), undefined, '42'));
    await deliver(change('modified', node({ name: 'n1', resourceVersion: '43', machineAnnotation: 'm1', trackingAnnotation: undefined as never, ownTrackingAnnotation: undefined as never }), joining('n1', 'p1'), '43'));
    await publish(4);

    // Assess: m1's addition names no Node the forwarder knows: filtered, its reconcile could only end no-node; n2's and
    // n3's additions name no Machine: filtered, their reconciles could only end machine-gone; m2's provider ID then names n2.
    expect(published.map(link).sort()).toEqual(['m2@11→n2', 'n1→m1', 'n1→m1'].sort());
  });

  it('links a joining Node to a Machine that a resume at the checkpoint listed without announcing it (a member that joined the rota)', async () => {
    // Prepare
    const { router, deliver, publish, published } = setup('capi');

    // Act: m1 unchanged since the checkpoint (listed, not announced); n1 joins with m1's provider ID, n2 with one nobody has.
    router.listed([machine({ nodeName: undefined as never, providerID: 'p1' })], undefined);
    await deliver(change('added', joining('n1', 'p1'), undefined, '40'));
    await deliver(change('added', joining('n2', 'p2'), undefined, '41'));
    await publish(2);

    // Assess: n1's addition names m1; n2's is not sent (nothing names it yet); the listing itself sends nothing.
    expect(published.map(link)).toEqual(['n1→m1']);
  });

  it("sends nothing for Cluster API confirming a link the product acted on (the Node's Machine annotation, the Machine's nodeRef), and a Machine change between the two still names its Node", async () => {
    // Prepare
    const { deliver, publish, published, counts } = setup('capi');
    const joiner = node({ providerID: 'p1', trackingAnnotation: undefined as never, ownTrackingAnnotation: undefined as never });
    const initialized = nodeFacts({ ...joiner, resourceVersion: '41', ownTrackingAnnotation: '', writers: { ownTrackingAnnotation: FIELD_MANAGER } });
    const { providerID: _dropped, ...linkedFacts } = initialized;
    const linked = nodeFacts({ ...linkedFacts, resourceVersion: '42', machineAnnotation: 'm1', clusterNameAnnotation: 'wc1', clusterNamespaceAnnotation: 'fleet' });
    const unlinked = machine({ nodeName: undefined as never, providerID: 'p1' });
    const declared = { ...unlinked, resourceVersion: '12', annotations: { 'taints.capi-taint-propagator.dev/machine': 'a:NoSchedule' } };
    const { providerID: _gone, ...withNodeRef } = { ...declared, resourceVersion: '13', nodeName: 'n1' };
    const marker = { ...withNodeRef, resourceVersion: '14', annotations: { 'taints.capi-taint-propagator.dev/machine': 'b:NoSchedule' } };

    // Act: the Machine is created with its provider ID (no Node known: filtered), its Node joins and the product initializes it;
    // Cluster API annotates the Node; the Machine's declaration changes before Cluster API writes its nodeRef; then
    // the nodeRef; then a marker change.
    await deliver(change('added', unlinked, undefined, '11'));
    await deliver(change('added', joiner, undefined, '40'));
    await deliver(change('modified', initialized, joiner, '41'));
    await deliver(change('modified', linked, initialized, '42'));
    await deliver(change('modified', declared, unlinked, '12'));
    await deliver(change('modified', withNodeRef, declared, '13'));
    await deliver(change('modified', marker, withNodeRef, '14'));
    await publish(4);

    // Assess: the Node's addition, the declaration change (naming the Node) and the marker; nothing for the rest.
    expect(published.map(link).sort()).toEqual(['n1→m1', 'm1@12→n1', 'm1@14→n1'].sort());
    expect(counts['EventsFiltered']).toBe(4);
  });

  it.each([SpecTaintsOwner.upstream, SpecTaintsOwner.product])(
    "sends nothing for a value change of Cluster API's own spec.taints on a Node it initialized, judged from the Node stream's last state, unless SPEC_TAINTS_OWNER=product (%s)",
    async (owner) => {
      // Prepare: a Node both initialized (Cluster API tracks upstream:NoSchedule, the product nothing)
      const { deliver, publish, outbox, published, counts } = setup('capi', { specTaintsOwner: owner });
      await deliver(change('added', node(), undefined, '40'));
      const upstream = (value: string) => machine({ specTaints: [{ key: 'upstream', value, effect: 'NoSchedule', propagation: 'Always' }] });

      // Act
      await deliver(change('modified', { ...upstream('b'), resourceVersion: '12' }, upstream('a'), '12'));
      await publish();

      // Assess: the Node's announcement, and the Machine's change only when the product owns spec.taints
      expect(published.map((e) => e.data.kind)).toEqual(owner === SpecTaintsOwner.upstream ? ['Node'] : ['Node', 'Machine']);
      expect(counts.ForeignDeclarationChangesFiltered ?? 0).toBe(owner === SpecTaintsOwner.upstream ? 1 : 0);
      expect(outbox.checkpoint()).toMatchObject({ machines: '12' });
    },
  );

  it('turns a relevant Machine change into one event and passes a heartbeat without one; the checkpoint follows once the event is sent', async () => {
    // Prepare
    const { deliver, publish, outbox, sent, counts } = setup('self');

    // Act
    await deliver(change('added', machine(), undefined, '11'));
    await deliver(change('modified', machine({ resourceVersion: '12' }), machine(), '12'));
    const beforeSending = outbox.checkpoint();
    await publish();

    // Assess
    expect(beforeSending).toEqual({});
    expect(sent).toEqual([eventIdFor('uid-m1', '11', 'added')]);
    expect(outbox.checkpoint()).toEqual({ machines: '12' });
    expect(counts).toMatchObject({ EventsSeen: 2, EventsFiltered: 1, EventsForwarded: 1 });
  });

  it.each([
    { name: 'a Machine', facts: machine({ clusterName: undefined, labels: {} }), stream: 'machines', error: 'Skipping Machine without a cluster name' },
    { name: 'a MachinePool', facts: pool({ clusterName: undefined, labels: {} }), stream: 'others', error: 'Skipping MachinePool without a cluster name' },
  ])('in capi mode skips $name without a cluster name: counted as malformed and logged, no event, its resume point passed', async ({ facts, stream, error }) => {
    // Prepare
    const { deliver, publish, outbox, sent, counts, errors } = setup('capi');

    // Act
    await deliver(change('added', facts, undefined, '11'));
    const pending = outbox.size();
    await publish();

    // Assess
    expect(pending).toBe(0);
    expect(sent).toEqual([]);
    expect(outbox.checkpoint()).toEqual({ [stream]: '11' });
    expect(counts).toMatchObject({ MalformedWatchEvents: 1 });
    expect(errors).toEqual([error]);
  });

  it("sends no Machine event for a change of a MachineSet's template: the Node follows Cluster API's copy onto the Machine", async () => {
    // Prepare
    const KEY = DECLARATION_ANNOTATIONS[2];
    const { deliver, publish, published, counts } = setup('capi');
    const member = machine({ specTaints: null, annotations: { [KEY]: 'p=v1:NoSchedule' } });

    // Act: the template changes; then Cluster API copies it onto the Machine.
    await deliver(change('modified', machineSet({ resourceVersion: '21', annotations: { [KEY]: 'p=v2:NoSchedule' } }), machineSet({ annotations: { [KEY]: 'p=v1:NoSchedule' } }), '21'));
    await deliver(change('modified', { ...member, resourceVersion: '12', annotations: { [KEY]: 'p=v2:NoSchedule' } }, member, '12'));
    await publish();

    // Assess
    expect(published.map(link)).toEqual(['m1@12→n1']);
    expect(counts.EventsFiltered).toBe(1);
  });

  it('announces each Node a MachinePool change concerns, and the pool itself when its pause flips; nothing for a change that concerns no Node', async () => {
    // Prepare
    const { deliver, publish, published, counts } = setup('capi');

    // Act: p2 joins the pool (p1 was announced before), a heartbeat, then the pool is paused.
    await deliver(change('modified', pool({ resourceVersion: '31', nodeNames: ['p1', 'p2'] }), pool(), '31'));
    await deliver(change('modified', pool({ resourceVersion: '32', nodeNames: ['p1', 'p2'] }), pool({ resourceVersion: '31', nodeNames: ['p1', 'p2'] }), '32'));
    await deliver(change('modified', pool({ resourceVersion: '33', nodeNames: ['p1', 'p2'], annotations: { 'cluster.x-k8s.io/paused': '' } }), pool({ resourceVersion: '32', nodeNames: ['p1', 'p2'] }), '33'));
    await publish();

    // Assess
    expect(published.map((e) => `${e.data.kind}@${e.id.split(':')[1]}${'nodeName' in e.data ? `→${e.data.nodeName}` : ''}`)).toEqual([
      'MachinePool@31→p2',
      'MachinePool@33→p1',
      'MachinePool@33→p2',
      'ScalableResource@33',
    ]);
    expect(counts).toMatchObject({ EventsSeen: 3, EventsFiltered: 1 });
  });

  it("sends a MachineSet's ScalableResource event when its pause flips, nothing for a change the autoscaler annotation does not need, and nothing for a Cluster", async () => {
    // Prepare
    const { deliver, publish, outbox, published, counts } = setup('capi');

    // Act
    await deliver(change('modified', machineSet({ resourceVersion: '21' }), machineSet(), '21'));
    await deliver(change('modified', machineSet({ resourceVersion: '22', annotations: { 'cluster.x-k8s.io/paused': '' } }), machineSet({ resourceVersion: '21' }), '22'));
    await deliver(change('added', { kind: 'Cluster', namespace: 'fleet', name: 'wc1', uid: 'uid-wc1', resourceVersion: '1', paused: false, deleting: false }, undefined, '5'));
    await publish();

    // Assess
    expect(published.map((e) => `${e.data.kind}:${e.subject}`)).toEqual(['ScalableResource:machinesets/fleet/ms1']);
    expect(counts).toMatchObject({ EventsSeen: 2, EventsFiltered: 1 });
    expect(outbox.checkpoint()).toEqual({ others: '22' });
  });
});
