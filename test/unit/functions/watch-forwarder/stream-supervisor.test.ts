/**
 * The forwarder's stream supervision on its own, with the real outbox behind it: what a change becomes (an event, or
 * nothing, with the stream's resume point passed either way) and where a workload cluster's Node stream starts and
 * what is left of it in the checkpoint once the Cluster is gone. Streams are scripted at the port level
 * (test/support/scripted-watch-sources.ts); the per-cluster health tracking is covered by cluster-health.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Outbox } from '#functions/watch-forwarder/outbox.ts';
import { StreamSupervisor } from '#functions/watch-forwarder/stream-supervisor.ts';
import { eventIdFor, type TaintEvent } from '#shared/contract/cloud-event.ts';
import { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { FIELD_MANAGER } from '#shared/domain/taint.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { ClusterFacts, MachineFacts, MachinePoolFacts, NodeFacts, ScalableFacts } from '#shared/model/views.ts';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';
import { ScriptedSources, until } from '#test/support/scripted-watch-sources.ts';
import { manualClock } from '#test/support/manual-clock.ts';

const T0 = new Date('2026-11-22T10:00:00Z');
const machine = (change: Partial<MachineFacts> = {}): MachineFacts => ({
  kind: 'Machine',
  namespace: 'fleet',
  name: 'm1',
  uid: 'uid-m1',
  resourceVersion: '11',
  specTaints: [{ key: 'gpu', effect: 'NoSchedule' }],
  declarations: {},
  nodeName: 'n1',
  clusterName: 'wc1',
  paused: false,
  deleting: false,
  ...change,
});
const cluster = (change: Partial<ClusterFacts> = {}): ClusterFacts => ({ kind: 'Cluster', namespace: 'fleet', name: 'wc1', uid: 'uid-wc1', resourceVersion: '1', paused: false, deleting: false, ...change });

let stop: (() => Promise<void>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

function setup(mode: 'capi' | 'self', checkpoint: Checkpoint = {}, settings: { specTaintsOwner?: SpecTaintsOwner } = {}) {
  const sources = new ScriptedSources();
  const sent: string[] = [];
  const published: TaintEvent[] = [];
  const counts: Record<string, number> = {};
  const errors: string[] = [];
  const logger = { info: () => undefined, warn: () => undefined, error: (message: string) => void errors.push(message), debug: () => undefined } as never;
  const telemetry = { record: (metric: string, value: number) => void (counts[metric] = (counts[metric] ?? 0) + value) };
  const outbox = new Outbox(
    { publisher: { publish: async (events) => (sent.push(...events.map((e) => e.id)), published.push(...events), { sent: events, unsent: [] }) }, telemetry, clock: manualClock(T0.getTime()), logger, maySend: () => true },
    { flushIntervalMs: 5, maxEventsPerPublish: 100, maxPendingEvents: 100, drainTimeoutMs: 100 },
  );
  const supervisor = new StreamSupervisor({ mode, sources, telemetry, logger, outbox, ...settings }, { healthSampleIntervalMs: 60_000 });
  const term = new AbortController();
  outbox.begin(checkpoint, term.signal);
  const done = supervisor.supervise(term.signal);
  stop = async () => {
    term.abort();
    await done;
  };
  return { sources, outbox, sent, published, counts, errors };
}

const node = (change: Partial<NodeFacts> = {}): NodeFacts => ({
  kind: 'Node',
  name: 'n1',
  uid: 'uid-n1',
  resourceVersion: '40',
  taints: [{ key: 'foreign', value: 'x', effect: 'NoExecute', timeAdded: '2026-11-22T09:30:00Z' }],
  trackingAnnotation: 'upstream:NoSchedule',
  ownTrackingAnnotation: '',
  ...change,
});

describe('Class: StreamSupervisor', () => {
  it("names the objects only: no event carries a Node's state, whether or not the forwarder has seen the Node", async () => {
    // Prepare
    const { sources, outbox, published } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf({ mode: 'capi', namespace: 'fleet', name: 'wc1' });

    // Act
    await nodes.emit({ type: 'change', change: 'added', facts: node(), observedAt: T0, checkpoint: '40' });
    await sources.machineStream.emit({ type: 'change', change: 'modified', previous: machine(), facts: machine({ resourceVersion: '12', specTaints: [] }), observedAt: T0, checkpoint: '12' });
    await outbox.publishRound();

    // Assess: the reconcile function reads the Node itself.
    expect(published.map((e) => [e.data.kind, 'nodeState' in e.data])).toEqual([
      ['Node', false],
      ['Machine', false],
    ]);
  });

  it("names a joining Node's Machine by provider ID (either arrives first), and stops once Cluster API has linked them", async () => {
    // Prepare
    const { sources, outbox, published } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf({ mode: 'capi', namespace: 'fleet', name: 'wc1' });
    const joining = (name: string, providerID: string) => node({ name, uid: `uid-${name}`, providerID, trackingAnnotation: undefined as never, ownTrackingAnnotation: undefined as never });

    // Act: m1 has its provider ID before its Node joins (the usual order); n2 joins before m2 gets its provider ID.
    await sources.machineStream.emit({ type: 'change', change: 'added', facts: machine({ nodeName: undefined as never, providerID: 'p1' }), observedAt: T0, checkpoint: '11' });
    await nodes.emit({ type: 'change', change: 'added', facts: joining('n1', 'p1'), observedAt: T0, checkpoint: '40' });
    await nodes.emit({ type: 'change', change: 'added', facts: joining('n2', 'p2'), observedAt: T0, checkpoint: '41' });
    await sources.machineStream.emit({ type: 'change', change: 'added', facts: machine({ name: 'm2', uid: 'uid-m2', nodeName: undefined as never, providerID: 'p2' }), observedAt: T0, checkpoint: '12' });
    // A Node of another provider ID, and n1 once Cluster API annotated it (the facts then keep no provider ID).
    await nodes.emit({ type: 'change', change: 'added', facts: joining('n3', 'p-other'), observedAt: T0, checkpoint: '42' });
    await nodes.emit({ type: 'change', change: 'modified', previous: joining('n1', 'p1'), facts: node({ name: 'n1', resourceVersion: '43', machineAnnotation: 'm1', trackingAnnotation: undefined as never, ownTrackingAnnotation: undefined as never }), observedAt: T0, checkpoint: '43' });
    for (let i = 0; i < 4; i++) await outbox.publishRound();

    // Assess
    const link = (e: TaintEvent) => (e.data.kind === 'Node' ? `${e.data.node.name}→${e.data.machine?.name ?? '-'}` : e.data.kind === 'Machine' ? `${e.data.machine.name}→${e.data.nodeName ?? '-'}` : '');
    // (m1's addition names no Node the forwarder knows: filtered, its reconcile could only end no-node; n2's and n3's
    // additions name no Machine: filtered, their reconciles could only end machine-gone; m2's provider ID then names n2.)
    expect(published.map(link).sort()).toEqual(['m2→n2', 'n1→m1', 'n1→m1'].sort());
  });

  it('links a joining Node to a Machine that a resume at the checkpoint listed without announcing it (a member that joined the rota)', async () => {
    // Prepare
    const { sources, outbox, published } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf({ mode: 'capi', namespace: 'fleet', name: 'wc1' });
    const unlinked = machine({ nodeName: undefined as never, providerID: 'p1' });
    const joining = (name: string, providerID: string) => node({ name, uid: `uid-${name}`, providerID, trackingAnnotation: undefined as never, ownTrackingAnnotation: undefined as never });

    // Act: the Machine stream resumed with m1 unchanged since the checkpoint (listed, not announced); n1 joins with
    // m1's provider ID, n2 with one nobody has.
    await sources.machineStream.emit({ type: 'listed', items: [unlinked] });
    await nodes.emit({ type: 'change', change: 'added', facts: joining('n1', 'p1'), observedAt: T0, checkpoint: '40' });
    await nodes.emit({ type: 'change', change: 'added', facts: joining('n2', 'p2'), observedAt: T0, checkpoint: '41' });
    for (let i = 0; i < 2; i++) await outbox.publishRound();

    // Assess: n1's addition names m1; n2's is not sent (nothing names it yet); the listing itself sends nothing.
    expect(published.map((e) => (e.data.kind === 'Node' ? `${e.data.node.name}→${e.data.machine?.name ?? '-'}` : e.data.kind))).toEqual(['n1→m1']);
  });

  it("sends nothing for Cluster API confirming a link the product acted on (the Node's Machine annotation, the Machine's nodeRef), and a Machine change between the two still names its Node", async () => {
    // Prepare
    const { sources, outbox, published, counts } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf({ mode: 'capi', namespace: 'fleet', name: 'wc1' });
    const joining = node({ providerID: 'p1', trackingAnnotation: undefined as never, ownTrackingAnnotation: undefined as never });
    const initialized = { ...joining, resourceVersion: '41', ownTrackingAnnotation: '', writers: { ownTrackingAnnotation: FIELD_MANAGER } };
    const { providerID: _dropped, ...linkedFacts } = initialized;
    const linked: NodeFacts = { ...linkedFacts, resourceVersion: '42', machineAnnotation: 'm1', clusterNameAnnotation: 'wc1', clusterNamespaceAnnotation: 'fleet' };
    const unlinked = machine({ nodeName: undefined as never, providerID: 'p1' });
    const declared = { ...unlinked, resourceVersion: '12', declarations: { 'taints.capi-taint-propagator.dev/machine': 'a:NoSchedule' } };
    const { providerID: _gone, ...withNodeRef } = { ...declared, resourceVersion: '13', nodeName: 'n1' };
    const marker = { ...withNodeRef, resourceVersion: '14', declarations: { 'taints.capi-taint-propagator.dev/machine': 'b:NoSchedule' } };

    // Act: the Machine is created with its provider ID (no Node known: filtered), its Node joins and the product initializes it;
    // Cluster API annotates the Node; the Machine's declaration changes before Cluster API writes its nodeRef; then
    // the nodeRef; then a marker change.
    await sources.machineStream.emit({ type: 'change', change: 'added', facts: unlinked, observedAt: T0, checkpoint: '11' });
    await nodes.emit({ type: 'change', change: 'added', facts: joining, observedAt: T0, checkpoint: '40' });
    await nodes.emit({ type: 'change', change: 'modified', previous: joining, facts: initialized, observedAt: T0, checkpoint: '41' });
    await nodes.emit({ type: 'change', change: 'modified', previous: initialized, facts: linked, observedAt: T0, checkpoint: '42' });
    await sources.machineStream.emit({ type: 'change', change: 'modified', previous: unlinked, facts: declared, observedAt: T0, checkpoint: '12' });
    await sources.machineStream.emit({ type: 'change', change: 'modified', previous: declared, facts: withNodeRef, observedAt: T0, checkpoint: '13' });
    await sources.machineStream.emit({ type: 'change', change: 'modified', previous: withNodeRef, facts: marker, observedAt: T0, checkpoint: '14' });
    for (let i = 0; i < 4; i++) await outbox.publishRound();

    // Assess: the Node's addition, the declaration change (naming the Node) and the marker; nothing for the rest.
    const link = (e: TaintEvent) => (e.data.kind === 'Node' ? `${e.data.node.name}→${e.data.machine?.name ?? '-'}` : e.data.kind === 'Machine' ? `${e.data.machine.name}@${e.data.machine.resourceVersion}→${e.data.nodeName ?? '-'}` : '');
    expect(published.map(link).sort()).toEqual(['n1→m1', 'm1@12→n1', 'm1@14→n1'].sort());
    expect(counts['EventsFiltered']).toBe(4);
  });

  it("sends nothing for a value change of Cluster API's own spec.taints on a Node it initialized, judged from the Node stream's last state; with SPEC_TAINTS_OWNER=product it sends it", async () => {
    for (const owner of [SpecTaintsOwner.upstream, SpecTaintsOwner.product]) {
      // Prepare: a Node both initialized (Cluster API tracks upstream:NoSchedule, the product nothing)
      const { sources, outbox, published, counts } = setup('capi', {}, { specTaintsOwner: owner });
      await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
      const nodes = await sources.nodesOf({ mode: 'capi', namespace: 'fleet', name: 'wc1' });
      await nodes.emit({ type: 'change', change: 'added', facts: node(), observedAt: T0, checkpoint: '40' });
      const upstream = (value: string) => machine({ specTaints: [{ key: 'upstream', value, effect: 'NoSchedule', propagation: 'Always' }] });

      // Act
      await sources.machineStream.emit({ type: 'change', change: 'modified', previous: upstream('a'), facts: { ...upstream('b'), resourceVersion: '12' }, observedAt: T0, checkpoint: '12' });
      await outbox.publishRound();

      // Assess: the Node's announcement, and the Machine's change only when the product owns spec.taints
      expect(published.map((e) => e.data.kind)).toEqual(owner === SpecTaintsOwner.upstream ? ['Node'] : ['Node', 'Machine']);
      expect(counts.ForeignDeclarationChangesFiltered ?? 0).toBe(owner === SpecTaintsOwner.upstream ? 1 : 0);
      expect(outbox.checkpoint()).toMatchObject({ machines: '12' });
      await stop?.();
      stop = undefined;
    }
  });

  it('turns a relevant Machine change into one event and passes a heartbeat without one; the checkpoint follows once the event is sent', async () => {
    // Prepare
    const { sources, outbox, sent, counts } = setup('self');

    // Act
    await sources.machineStream.emit({ type: 'change', change: 'added', facts: machine(), observedAt: T0, checkpoint: '11' });
    await sources.machineStream.emit({ type: 'change', change: 'modified', facts: machine({ resourceVersion: '12' }), previous: machine(), observedAt: T0, checkpoint: '12' });
    const beforeSending = outbox.checkpoint();
    await outbox.publishRound();

    // Assess
    expect(beforeSending).toEqual({});
    expect(sent).toEqual([eventIdFor('uid-m1', '11', 'added')]);
    expect(outbox.checkpoint()).toEqual({ machines: '12' });
    expect(counts).toMatchObject({ EventsSeen: 2, EventsFiltered: 1, EventsForwarded: 1 });
  });

  it('in capi mode skips a Machine without a cluster name: counted as malformed and logged, no event, its resume point passed', async () => {
    // Prepare
    const { sources, outbox, sent, counts, errors } = setup('capi');
    const orphan = machine({ clusterName: undefined, clusterNameLabel: undefined }) as MachineFacts;

    // Act
    await sources.machineStream.emit({ type: 'change', change: 'added', facts: orphan, observedAt: T0, checkpoint: '11' });

    // Assess
    expect(outbox.size()).toBe(0);
    expect(sent).toEqual([]);
    expect(outbox.checkpoint()).toEqual({ machines: '11' });
    expect(counts).toMatchObject({ MalformedWatchEvents: 1 });
    expect(errors).toEqual(['Skipping Machine without a cluster name']);
  });

  it('starts a Cluster\'s Node stream from its resume point, and drops that resume point when the Cluster is deleted', async () => {
    // Prepare
    const { sources, outbox } = setup('capi', { machines: '3', 'nodes/fleet/wc1': '5' });
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf({ mode: 'capi', namespace: 'fleet', name: 'wc1' });

    // Act
    await sources.clusterStream.emit({ type: 'change', change: 'deleted', facts: cluster({ resourceVersion: '2' }), observedAt: T0 });
    await until(() => nodes.stopped);

    // Assess
    expect(sources.nodeStarts.get('nodes/fleet/wc1')).toEqual({ resumeFrom: '5' });
    expect(outbox.checkpoint()).toEqual({ machines: '3' });
  });

  it('drops the resume point of a Cluster deleted after it began to be deleted (its stream already stopped then)', async () => {
    // Prepare
    const { sources, outbox } = setup('capi', { machines: '3', 'nodes/fleet/wc1': '5' });
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf({ mode: 'capi', namespace: 'fleet', name: 'wc1' });
    await sources.clusterStream.emit({ type: 'change', change: 'modified', previous: cluster(), facts: cluster({ resourceVersion: '2', deleting: true }), observedAt: T0 });
    await until(() => nodes.stopped);

    // Act
    await sources.clusterStream.emit({ type: 'change', change: 'deleted', facts: cluster({ resourceVersion: '3', deleting: true }), observedAt: T0 });

    // Assess
    await until(() => !('nodes/fleet/wc1' in outbox.checkpoint()));
    expect(outbox.checkpoint()).toEqual({ machines: '3' });
  });

  it("sends no Machine event for a change of a MachineSet's template: the Node follows Cluster API's copy onto the Machine", async () => {
    // Prepare
    const KEY = DECLARATION_ANNOTATIONS[2];
    const { sources, outbox, published, counts } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const machineSet = (declarations: Record<string, string>, resourceVersion: string): ScalableFacts => ({
      kind: 'MachineSet', namespace: 'fleet', name: 'ms1', uid: 'uid-ms1', resourceVersion, specTaints: null, declarations, autoscaler: {}, ownedByMachineDeployment: true, clusterName: 'wc1', paused: false, deleting: false,
    });
    const member = machine({ specTaints: null, declarations: { [KEY]: 'p=v1:NoSchedule' } });

    // Act: the template changes; then Cluster API copies it onto the Machine.
    await sources.machineSetStream.emit({ type: 'change', change: 'modified', previous: machineSet({ [KEY]: 'p=v1:NoSchedule' }, '20'), facts: machineSet({ [KEY]: 'p=v2:NoSchedule' }, '21'), observedAt: T0, checkpoint: '21' });
    await sources.machineStream.emit({ type: 'change', change: 'modified', previous: member, facts: { ...member, resourceVersion: '12', declarations: { [KEY]: 'p=v2:NoSchedule' } }, observedAt: T0, checkpoint: '12' });
    await outbox.publishRound();

    // Assess
    expect(published.map((e) => (e.data.kind === 'Machine' ? `${e.data.machine.name}@${e.data.machine.resourceVersion}` : e.data.kind))).toEqual(['m1@12']);
    expect(counts.EventsFiltered).toBe(1);
  });
  it("announces every Node and scalable resource of a Cluster whose spec.paused flips, either way, with ids of the Cluster's version; nothing for its other changes", async () => {
    // Prepare: wc1 has m1 (Node n1), m2 (no Node yet), a deleting m4, the pool mp1 (Nodes p1, p2), md1 and ms1; m3 is wc2's.
    const { sources, outbox, published, sent } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    await sources.nodesOf({ mode: 'capi', namespace: 'fleet', name: 'wc1' });
    const machines = [
      machine(),
      machine({ name: 'm2', uid: 'uid-m2', nodeName: undefined as never }),
      machine({ name: 'm3', uid: 'uid-m3', nodeName: 'n3', clusterName: 'wc2' }),
      machine({ name: 'm4', uid: 'uid-m4', nodeName: 'n4', deleting: true }),
    ];
    for (const m of machines) await sources.machineStream.emit({ type: 'change', change: 'resynced', facts: m, observedAt: T0 });
    const pool: MachinePoolFacts = { kind: 'MachinePool', namespace: 'fleet', name: 'mp1', uid: 'uid-mp1', resourceVersion: '30', specTaints: null, declarations: {}, nodeNames: ['p1', 'p2'], clusterName: 'wc1', paused: false, deleting: false };
    const scalable = (kind: ScalableFacts['kind'], name: string): ScalableFacts => ({
      kind, namespace: 'fleet', name, uid: `uid-${name}`, resourceVersion: '20', specTaints: null, declarations: {}, autoscaler: {}, ownedByMachineDeployment: kind === 'MachineSet', clusterName: 'wc1', paused: false, deleting: false,
    });
    await sources.machinePoolStream.emit({ type: 'change', change: 'resynced', facts: pool, observedAt: T0 });
    await sources.machineDeploymentStream.emit({ type: 'change', change: 'resynced', facts: scalable('MachineDeployment', 'md1'), observedAt: T0 });
    await sources.machineSetStream.emit({ type: 'change', change: 'resynced', facts: scalable('MachineSet', 'ms1'), observedAt: T0 });
    for (let i = 0; i < 3; i++) await outbox.publishRound();
    published.length = 0;
    sent.length = 0;
    const announced = () => published.map((e) => `${e.data.kind}:${e.subject}${'nodeName' in e.data ? `→${e.data.nodeName}` : ''}`).sort();

    // Act: paused, a label-only change while paused, then unpaused.
    await sources.clusterStream.emit({ type: 'change', change: 'modified', previous: cluster(), facts: cluster({ resourceVersion: '2', paused: true }), observedAt: T0 });
    await sources.clusterStream.emit({ type: 'change', change: 'modified', previous: cluster({ resourceVersion: '2', paused: true }), facts: cluster({ resourceVersion: '3', paused: true }), observedAt: T0 });
    await outbox.publishRound();
    const onPause = announced();
    const pauseIds = [...sent];
    published.length = 0;
    await sources.clusterStream.emit({ type: 'change', change: 'modified', previous: cluster({ resourceVersion: '3', paused: true }), facts: cluster({ resourceVersion: '4' }), observedAt: T0 });
    await outbox.publishRound();

    // Assess
    const all = [
      'Machine:machines/fleet/m1→n1',
      'MachinePool:machinepools/fleet/mp1→p1',
      'MachinePool:machinepools/fleet/mp1→p2',
      'ScalableResource:machinedeployments/fleet/md1',
      'ScalableResource:machinepools/fleet/mp1',
      'ScalableResource:machinesets/fleet/ms1',
    ];
    expect(onPause).toEqual(all);
    expect(announced()).toEqual(all);
    expect(pauseIds.every((id) => id.startsWith(`${eventIdFor('uid-wc1', '2', 'modified')}:`))).toBe(true);
    expect(new Set(sent).size).toBe(2 * all.length);
    expect(outbox.checkpoint()).not.toHaveProperty('clusters');
  });

  it("self mode: a Cluster's spec.paused flip announces the Nodes of its own Machines only (a self-hosted cluster's Machines belong to Clusters too)", async () => {
    // Prepare: m1 is wc1's, m3 is wc2's; Machines and Nodes live in one cluster.
    const { sources, outbox, published } = setup('self');
    for (const m of [machine(), machine({ name: 'm3', uid: 'uid-m3', nodeName: 'n3', clusterName: 'wc2' })]) {
      await sources.machineStream.emit({ type: 'change', change: 'resynced', facts: m, observedAt: T0 });
    }
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    for (let i = 0; i < 3; i++) await outbox.publishRound();
    published.length = 0;

    // Act: wc1 paused.
    await sources.clusterStream.emit({ type: 'change', change: 'modified', previous: cluster(), facts: cluster({ resourceVersion: '2', paused: true }), observedAt: T0 });
    await outbox.publishRound();

    // Assess: m1's Node, in the self cluster; nothing for wc2's Machine.
    expect(published.map((e) => [e.data.kind, e.subject, e.data.cluster])).toEqual([['Machine', 'machines/fleet/m1', { mode: 'self' }]]);
  });
});
