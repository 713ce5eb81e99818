/**
 * The forwarder's streams on their own, with the real outbox, router and index behind them (scripted at the port level,
 * test/support/scripted-watch-sources.ts): where a workload cluster's Node stream starts and what is left of it in the
 * checkpoint once its Cluster is gone, a Cluster's pause fanned out from the other streams' last state, the relists a
 * rota member lets pass, and the workload clusters whose Node stream is failing (logged once per transition, sampled
 * in UnreachableClusters). What each change becomes is event-router.test.ts.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ClusterStreams, type FailingCluster } from '#functions/watch-forwarder/cluster-streams.ts';
import { Outbox } from '#functions/watch-forwarder/outbox.ts';
import { eventIdFor, type ClusterRef, type TaintEvent } from '#shared/contract/cloud-event.ts';
import type { Checkpoint } from '#shared/contract/streams.ts';
import type { ClusterFacts, MachinePoolFacts, NodeFacts, ScalableFacts } from '#shared/model/views.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { ScriptedSources, until } from '#test/support/scripted-watch-sources.ts';
import { machineFacts, nodeFacts, type NodeFactsChange } from '#test/support/builders.ts';
import { manualClock } from '#test/support/manual-clock.ts';

interface Logged {
  readonly level: 'info' | 'warn' | 'error' | 'debug';
  readonly message: string;
  readonly attrs: Record<string, unknown>;
}

const T0 = new Date('2026-11-22T10:00:00Z');
const wc1: ClusterRef = { mode: 'capi', namespace: 'fleet', name: 'wc1' };
const wc2: ClusterRef = { mode: 'capi', namespace: 'fleet', name: 'wc2' };
const machine = machineFacts;
const cluster = (change: Partial<ClusterFacts> = {}): ClusterFacts => ({ kind: 'Cluster', namespace: 'fleet', name: 'wc1', uid: 'uid-wc1', resourceVersion: '1', paused: false, deleting: false, ...change });
const clusterFacts = (name: string, change: Partial<ClusterFacts> = {}): ClusterFacts => cluster({ name, uid: `uid-${name}`, ...change });

let stop: (() => Promise<FailingCluster[]>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

function setup(mode: 'capi' | 'self', settings: { checkpoint?: Checkpoint; healthSampleIntervalMs?: number; announcesRelists?: () => boolean; ownersWaitMs?: number } = {}) {
  const sources = new ScriptedSources();
  const sent: string[] = [];
  const published: TaintEvent[] = [];
  const counts: Record<string, number> = {};
  const samples: number[] = [];
  const logged: Logged[] = [];
  const log = (level: Logged['level']) => (message: string, attrs: Record<string, unknown> = {}) => void logged.push({ level, message, attrs });
  const logger = { info: log('info'), warn: log('warn'), error: log('error'), debug: log('debug') } as never;
  const telemetry = {
    record: (metric: string, value: number) => {
      counts[metric] = (counts[metric] ?? 0) + value;
      if (metric === ForwarderMetric.UnreachableClusters) samples.push(value);
    },
  };
  const outbox = new Outbox(
    { publisher: { publish: async (events) => (sent.push(...events.map((e) => e.id)), published.push(...events), { sent: events, unsent: [] }) }, telemetry, clock: manualClock(T0.getTime()), logger },
    { flushIntervalMs: 5, maxEventsPerPublish: 100, maxPendingEvents: 100, drainTimeoutMs: 100 },
  );
  const streams = new ClusterStreams(
    { mode, sources, telemetry, logger, outbox, announcesRelists: settings.announcesRelists ?? (() => true) },
    { healthSampleIntervalMs: settings.healthSampleIntervalMs ?? 60_000, ...(settings.ownersWaitMs !== undefined ? { ownersWaitMs: settings.ownersWaitMs } : {}) },
  );
  const term = new AbortController();
  outbox.begin(settings.checkpoint ?? {}, term.signal);
  const done = Promise.all([streams.supervise(term.signal), streams.sampleLoop(term.signal)]);
  /** Ends the term as the forwarder does: streams stopped, then the term's last sample. */
  const end = async (): Promise<FailingCluster[]> => {
    stop = undefined;
    term.abort();
    await done;
    return streams.endTerm();
  };
  stop = end;
  const transitions = () => logged.filter((l) => /unreachable|reachable again|Forgetting|Watch failing|Watch recovered/.test(l.message));
  return { sources, outbox, streams, sent, published, counts, samples, transitions, logged, end };
}

describe('Class: ClusterStreams', () => {
  it('starts a Cluster\'s Node stream from its resume point, and drops that resume point when the Cluster is deleted', async () => {
    // Prepare
    const { sources, outbox } = setup('capi', { checkpoint: { machines: '3', 'nodes/fleet/wc1': '5' } });
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf({ mode: 'capi', namespace: 'fleet', name: 'wc1' });

    // Act
    await sources.clusterStream.emit({ type: 'change', change: 'deleted', facts: cluster({ resourceVersion: '2' }), observedAt: T0 });
    await until(() => nodes.stopped);

    // Assess
    expect(sources.nodeStarts.get('nodes/fleet/wc1')).toEqual({ resumeFrom: '5', quietLists: true });
    expect(outbox.checkpoint()).toEqual({ machines: '3' });
  });

  it('drops the resume point of a Cluster deleted after it began to be deleted (its stream already stopped then)', async () => {
    // Prepare
    const { sources, outbox } = setup('capi', { checkpoint: { machines: '3', 'nodes/fleet/wc1': '5' } });
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
    const pool: MachinePoolFacts = { kind: 'MachinePool', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name: 'mp1', uid: 'uid-mp1', resourceVersion: '30', specTaints: null, annotations: {}, nodeNames: ['p1', 'p2'], clusterName: 'wc1', deleting: false };
    const scalable = (kind: ScalableFacts['kind'], name: string): ScalableFacts => ({
      kind, apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name, uid: `uid-${name}`, resourceVersion: '20', specTaints: null, templateAnnotations: {}, templateLabels: {}, annotations: {}, ownedByMachineDeployment: kind === 'MachineSet', clusterName: 'wc1', deleting: false,
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

  it("lets a stream's later relists pass unannounced while announcesRelists says so; its first list is always announced", async () => {
    // Prepare: a rota member that does not hold the Lease, until it does.
    let holder = false;
    const { sources, outbox, published, counts } = setup('self', { announcesRelists: () => holder });

    // Act: the first list (m1), its resume point, a relist (m2), its resume point; then, holding the Lease, a relist (m3).
    await sources.machineStream.emit({ type: 'change', change: 'resynced', facts: machine(), observedAt: T0 });
    await sources.machineStream.emit({ type: 'progress', resourceVersion: '11' });
    await sources.machineStream.emit({ type: 'change', change: 'resynced', facts: machine({ name: 'm2', uid: 'uid-m2', resourceVersion: '12' }), observedAt: T0 });
    await sources.machineStream.emit({ type: 'progress', resourceVersion: '12' });
    holder = true;
    await sources.machineStream.emit({ type: 'change', change: 'resynced', facts: machine({ name: 'm3', uid: 'uid-m3', resourceVersion: '13' }), observedAt: T0, checkpoint: '13' });
    for (let i = 0; i < 2; i++) await outbox.publishRound();

    // Assess
    expect(published.map((e) => e.subject)).toEqual(['machines/fleet/m1', 'machines/fleet/m3']);
    expect(counts).toMatchObject({ EventsSeen: 3, EventsFiltered: 1 });
    expect(outbox.checkpoint()).toEqual({ machines: '13' });
  });

  // Quiet lists: what a list does not announce is judged (EventRouter.judge, #shared/policy/drift.ts).

  it("announces, of a quiet list's unannounced objects, only the Nodes and scalable resources that may need a write", async () => {
    // Prepare: wc1 with m1 (Node n1, in sync), m2 (Node n2, an Always taint removed), m5 (Node n5, paused), and the pool
    // mp1 (Nodes p1 in sync, p2 drifted); n9 has no owner. md1 is in sync, md2's autoscaler annotation must be written.
    const { sources, outbox, published, counts, logged } = setup('capi');
    const gpu = { 'taints.capi-taint-propagator.dev/machine': 'gpu:NoSchedule' };
    const owned = (name: string, over: NodeFactsChange = {}): NodeFacts => nodeFacts({ name, resourceVersion: '40', taints: [{ key: 'gpu', effect: 'NoSchedule' }], ownTrackingAnnotation: 'gpu:NoSchedule', ...over });
    const machines = [
      machine({ specTaints: null, annotations: gpu }),
      machine({ name: 'm2', uid: 'uid-m2', nodeName: 'n2', specTaints: null, annotations: gpu }),
      machine({ name: 'm5', uid: 'uid-m5', nodeName: 'n5', specTaints: null, annotations: { ...gpu, 'cluster.x-k8s.io/paused': '' } }),
    ];
    const pool: MachinePoolFacts = { kind: 'MachinePool', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name: 'mp1', uid: 'uid-mp1', resourceVersion: '30', specTaints: null, annotations: gpu, nodeNames: ['p1', 'p2'], clusterName: 'wc1', deleting: false };
    const md = (name: string, autoscaler: Record<string, string>): ScalableFacts => ({
      kind: 'MachineDeployment', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name, uid: `uid-${name}`, resourceVersion: '20', annotations: autoscaler, specTaints: null, templateAnnotations: gpu, templateLabels: {}, ownedByMachineDeployment: false, clusterName: 'wc1', deleting: false,
    });
    const size = { 'cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size': '0', 'cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size': '3' };

    // Act: every stream's first quiet list.
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf(wc1);
    await sources.machineStream.emit({ type: 'listed', items: machines, unannounced: machines, observedAt: T0 });
    await sources.machinePoolStream.emit({ type: 'listed', items: [pool], unannounced: [pool], observedAt: T0 });
    const mds = [md('md1', {}), md('md2', size)];
    await sources.machineDeploymentStream.emit({ type: 'listed', items: mds, unannounced: mds, observedAt: T0 });
    const listed = [
      owned('n1', { machineAnnotation: 'm1', clusterNamespaceAnnotation: 'fleet' }),
      owned('n2', { machineAnnotation: 'm2', clusterNamespaceAnnotation: 'fleet', taints: [] }),
      owned('n5', { machineAnnotation: 'm5', clusterNamespaceAnnotation: 'fleet', taints: [] }),
      owned('p1'),
      owned('p2', { taints: [] }),
      owned('n9', { taints: [] }),
    ];
    await nodes.emit({ type: 'listed', items: listed, unannounced: listed, observedAt: T0 });
    await nodes.emit({ type: 'progress', resourceVersion: '41' });
    for (let i = 0; i < 2; i++) await outbox.publishRound();

    // Assess: n2, p2 and md2, as resynced; each judged object seen, the rest filtered.
    expect(published.map((e) => `${e.type.split('.').at(-2)} ${e.subject}`).sort()).toEqual(['resynced machinedeployments/fleet/md2', 'resynced nodes/n2', 'resynced nodes/p2']);
    expect(counts).toMatchObject({ EventsSeen: 12, EventsFiltered: 9 });
    expect(outbox.checkpoint()).toMatchObject({ 'nodes/fleet/wc1': '41' });
    // One line per list that announced something (none for the Machines' and the pools').
    expect(logged.filter((l) => l.message === 'Announcing listed objects that may need a write').map((l) => l.attrs)).toEqual([{ judged: 2, announced: 1 }, { cluster: 'fleet/wc1', judged: 6, announced: 2 }]);
  });

  it('waits for the Machine stream to hold its collection before judging a Node stream\'s quiet list', async () => {
    // Prepare: the Machine stream still listing; n1 in sync with m1.
    const { sources, outbox, published } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf(wc1);
    sources.machineStream.synced = false;
    const n1 = nodeFacts({ resourceVersion: '40', taints: [{ key: 'gpu', effect: 'NoSchedule' }], ownTrackingAnnotation: 'gpu:NoSchedule', machineAnnotation: 'm1', clusterNamespaceAnnotation: 'fleet' });
    const m1 = machine({ specTaints: null, annotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu:NoSchedule' } });

    // Act: the Node list comes first and waits; the Machine list, then its resume point, lets it go on.
    const listing = nodes.emit({ type: 'listed', items: [n1], unannounced: [n1], observedAt: T0 });
    await sources.machineStream.emit({ type: 'listed', items: [m1], unannounced: [m1], observedAt: T0 });
    sources.machineStream.synced = true;
    await sources.machineStream.emit({ type: 'progress', resourceVersion: '12' });
    await listing;
    await outbox.publishRound();

    // Assess: judged against m1, in sync: nothing sent (judged without it, n1, tracked by the product, would have been).
    expect(published).toEqual([]);
  });

  it('judges a Node whose owner the management streams do not hold yet by what it carries, and leaves a paused Cluster\'s Nodes alone', async () => {
    // Prepare: the Machine stream still listing (a Node list waits 20 ms for it here); then listed, with wc1 paused.
    const { sources, outbox, published } = setup('capi', { ownersWaitMs: 20 });
    await sources.clusterStream.emit({ type: 'change', change: 'resynced', facts: cluster(), observedAt: T0 });
    const nodes = await sources.nodesOf(wc1);
    sources.machineStream.synced = false;
    const drifted = nodeFacts({ resourceVersion: '40', ownTrackingAnnotation: 'gpu:NoSchedule', machineAnnotation: 'm1', clusterNamespaceAnnotation: 'fleet' });
    const bare = nodeFacts({ name: 'b1', resourceVersion: '40' });

    // Act
    await nodes.emit({ type: 'listed', items: [drifted, bare], unannounced: [drifted, bare], observedAt: T0 });
    await nodes.emit({ type: 'progress', resourceVersion: '41' });
    await outbox.publishRound();
    const whileListing = published.map((e) => e.subject);
    published.length = 0;
    sources.machineStream.synced = true;
    await sources.machineStream.emit({ type: 'listed', items: [machine({ specTaints: null, annotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu:NoSchedule' } })], observedAt: T0 });
    await sources.clusterStream.emit({ type: 'change', change: 'modified', previous: cluster(), facts: cluster({ resourceVersion: '2', paused: true }), observedAt: T0 });
    await outbox.publishRound();
    published.length = 0;
    await nodes.emit({ type: 'listed', items: [drifted], unannounced: [drifted], observedAt: T0 });
    await outbox.publishRound();

    // Assess: while listing, the Node of a Machine (conservatively), not the bare one; paused, nothing.
    expect(whileListing).toEqual(['nodes/n1']);
    expect(published).toEqual([]);
  });

  it("judges a stream's later quiet lists only while announcesRelists says so; its first list always", async () => {
    // Prepare: a rota member that does not hold the Lease, until it does; n1 drifted from m1 (its own tracked taint removed).
    let holder = false;
    const { sources, outbox, published } = setup('self', { announcesRelists: () => holder });
    await sources.machineStream.emit({ type: 'listed', items: [machine({ specTaints: null, annotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu:NoSchedule' } })], observedAt: T0 });
    const nodes = await sources.nodesOf({ mode: 'self' });
    const n1 = nodeFacts({ resourceVersion: '40', ownTrackingAnnotation: 'gpu:NoSchedule', machineAnnotation: 'm1', clusterNamespaceAnnotation: 'fleet' });

    // Act: the first list, its resume point, a resync; then, holding the Lease, a resync.
    await nodes.emit({ type: 'listed', items: [n1], unannounced: [n1], observedAt: T0 });
    await nodes.emit({ type: 'progress', resourceVersion: '41' });
    await outbox.publishRound();
    const first = published.map((e) => e.id);
    await nodes.emit({ type: 'listed', items: [{ ...n1, resourceVersion: '42' }], unannounced: [{ ...n1, resourceVersion: '42' }], observedAt: T0 });
    await outbox.publishRound();
    const asMember = published.length;
    holder = true;
    await nodes.emit({ type: 'listed', items: [{ ...n1, resourceVersion: '43' }], unannounced: [{ ...n1, resourceVersion: '43' }], observedAt: T0 });
    await outbox.publishRound();

    // Assess
    expect(first).toEqual([eventIdFor('uid-n1', '40', 'resynced')]);
    expect(asMember).toBe(1);
    expect(published.map((e) => e.id)).toEqual([eventIdFor('uid-n1', '40', 'resynced'), eventIdFor('uid-n1', '43', 'resynced')]);
  });

  // The workload clusters whose Node stream is failing.

  it('adds a cluster at its stream\'s first failure, logs it once with the reason and since, and removes it when the stream recovers', async () => {
    // Prepare
    const { sources, streams, transitions } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc1'), observedAt: T0 });
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc2'), observedAt: T0 });
    const [s1, s2] = [await sources.nodesOf(wc1), await sources.nodesOf(wc2)];
    const since = new Date('2026-11-22T10:00:05Z');

    // Act: wc1 fails (its stream tells once per run of failures); wc2 keeps working.
    await s1.emit({ type: 'failing', reason: 'listing /api/v1/nodes failed: connect ECONNREFUSED 127.0.0.1:6443', since });
    const whileFailing = streams.failingClusters();
    await s2.emit({ type: 'progress', resourceVersion: '7' });
    await s1.emit({ type: 'recovered', since, at: new Date('2026-11-22T10:00:35Z') });

    // Assess
    expect(whileFailing).toEqual([{ cluster: 'fleet/wc1', reason: 'listing /api/v1/nodes failed: connect ECONNREFUSED 127.0.0.1:6443', since }]);
    expect(streams.failingClusters()).toEqual([]);
    expect(transitions().map((l) => [l.level, l.message, l.attrs])).toEqual([
      [
        'warn',
        'Workload cluster unreachable: its Node watch is failing and retried with backoff',
        { cluster: 'fleet/wc1', reason: 'listing /api/v1/nodes failed: connect ECONNREFUSED 127.0.0.1:6443', since: '2026-11-22T10:00:05.000Z', failingClusters: 1 },
      ],
      ['info', 'Workload cluster reachable again: its Node watch recovered', { cluster: 'fleet/wc1', since: '2026-11-22T10:00:05.000Z', failedForMs: 30_000, failingClusters: 0 }],
    ]);
  });

  it('counts every failing cluster once in UnreachableClusters, sampled periodically', async () => {
    // Prepare
    const { sources, samples } = setup('capi', { healthSampleIntervalMs: 10 });
    for (const name of ['wc1', 'wc2']) await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts(name), observedAt: T0 });
    const [s1, s2] = [await sources.nodesOf(wc1), await sources.nodesOf(wc2)];

    // Act
    await s1.emit({ type: 'failing', reason: 'HTTP 503', since: T0 });
    await s2.emit({ type: 'failing', reason: 'watching /api/v1/nodes failed: not connected within 30000 ms', since: T0 });
    await until(() => samples.includes(2));
    await s2.emit({ type: 'recovered', since: T0, at: T0 });
    await until(() => samples.at(-1) === 1);

    // Assess: 2 while both failed, then 1; a cluster failing for many samples is never counted twice.
    expect(Math.max(...samples)).toBe(2);
    expect(samples.at(-1)).toBe(1);
  });

  it('records the number of failing clusters once more as the term ends (the sample of a Lambda window), returns them, and starts the next term empty', async () => {
    // Prepare: no periodic sample within the test (one a minute).
    const { sources, streams, samples, end } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc1'), observedAt: T0 });
    await (await sources.nodesOf(wc1)).emit({ type: 'failing', reason: 'HTTP 503', since: T0 });

    // Act
    const failing = await end();

    // Assess
    expect(samples).toEqual([1]);
    expect(failing.map((f) => f.cluster)).toEqual(['fleet/wc1']);
    expect(streams.failingClusters()).toEqual([]);
  });

  it('forgets a failing cluster when its Cluster is deleted, and ignores what its stopped stream says afterwards', async () => {
    // Prepare
    const { sources, streams, transitions, samples, end } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc1'), observedAt: T0 });
    const s1 = await sources.nodesOf(wc1);
    await s1.emit({ type: 'failing', reason: 'HTTP 401: Unauthorized', since: T0 });

    // Act
    await sources.clusterStream.emit({ type: 'change', change: 'deleted', facts: clusterFacts('wc1', { resourceVersion: '2' }), observedAt: T0 });
    await until(() => s1.stopped);
    await s1.emit({ type: 'failing', reason: 'a late report of the stopped stream', since: T0 });
    const after = streams.failingClusters();
    await end();

    // Assess
    expect(after).toEqual([]);
    expect(samples.at(-1)).toBe(0);
    expect(transitions().map((l) => [l.message, l.attrs['cluster']])).toEqual([
      ['Workload cluster unreachable: its Node watch is failing and retried with backoff', 'fleet/wc1'],
      ['Forgetting the failing Node watch of a removed cluster', 'fleet/wc1'],
    ]);
  });

  it('also forgets a failing cluster whose Cluster is being deleted (its Node watch stops)', async () => {
    // Prepare
    const { sources, streams } = setup('capi');
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc1'), observedAt: T0 });
    await (await sources.nodesOf(wc1)).emit({ type: 'failing', reason: 'HTTP 503', since: T0 });

    // Act
    await sources.clusterStream.emit({ type: 'change', change: 'modified', facts: clusterFacts('wc1', { resourceVersion: '2', deleting: true }), previous: clusterFacts('wc1'), observedAt: T0 });

    // Assess
    expect(streams.failingClusters()).toEqual([]);
  });

  it('logs a failing management stream by its name without counting it as a workload cluster', async () => {
    // Prepare
    const { sources, streams, transitions } = setup('capi');

    // Act
    await sources.machineStream.emit({ type: 'failing', reason: 'listing /apis/cluster.x-k8s.io/v1beta2/machines failed: HTTP 503', since: T0 });
    await sources.machineStream.emit({ type: 'recovered', since: T0, at: T0 });

    // Assess
    expect(streams.failingClusters()).toEqual([]);
    expect(transitions().map((l) => [l.level, l.message, l.attrs['stream']])).toEqual([
      ['warn', 'Watch failing; retrying with backoff', 'machines'],
      ['info', 'Watch recovered', 'machines'],
    ]);
  });

  it('tracks the one cluster of self mode as `self`', async () => {
    // Prepare
    const { sources, streams } = setup('self');
    const nodes = await sources.nodesOf({ mode: 'self' });

    // Act
    await nodes.emit({ type: 'failing', reason: 'HTTP 403: Forbidden', since: T0 });

    // Assess
    expect(streams.failingClusters()).toEqual([{ cluster: 'self', reason: 'HTTP 403: Forbidden', since: T0 }]);
  });
});
