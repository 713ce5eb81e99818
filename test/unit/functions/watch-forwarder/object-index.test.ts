/**
 * The forwarder's object index on its own: the provider-ID links between unlinked Machines and Nodes (per workload
 * cluster, either half first, kept between Cluster API's two writes of a link), and the look-ups into the streams'
 * last state (a Machine, a cluster's Node, a Cluster's members for its pause).
 */
import { describe, expect, it } from 'vitest';
import { ObjectIndex } from '#functions/watch-forwarder/object-index.ts';
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import { objectKeyOf, type ClusterFacts, type MachineFacts, type MachinePoolFacts, type NodeFacts, type ScalableFacts, type WatchedFacts } from '#shared/model/views.ts';
import type { WatchStream } from '#shared/ports/watch-source.ts';
import { nodeFacts, type NodeFactsChange } from '#test/support/builders.ts';

const wc1: ClusterRef = { mode: 'capi', namespace: 'fleet', name: 'wc1' };
const wc2: ClusterRef = { mode: 'capi', namespace: 'fleet', name: 'wc2' };
const machine = (name: string, change: Partial<MachineFacts> = {}): MachineFacts => ({
  kind: 'Machine', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name, uid: `uid-${name}`, resourceVersion: '1', specTaints: null, annotations: {}, clusterName: 'wc1', deleting: false, ...change,
});
const node = (name: string, change: NodeFactsChange = {}): NodeFacts => nodeFacts({ name, ...change });
const cluster: ClusterFacts = { kind: 'Cluster', namespace: 'fleet', name: 'wc1', uid: 'uid-wc1', resourceVersion: '1', paused: false, deleting: false };

/** A stream holding `items` as its last state. */
function holding<T extends WatchedFacts>(...items: T[]): WatchStream<T> {
  const known = new Map(items.map((i) => [objectKeyOf(i), i]));
  return { run: async () => undefined, latest: (key) => known.get(key), objects: () => known.values() };
}

describe('Class: ObjectIndex', () => {
  // Each case: a sequence of observations, then what nodeFor(m1) and machineFor(n1) answer in wc1.
  const cases: ReadonlyArray<{ name: string; act: (index: ObjectIndex) => void; want: { node: string | undefined; machine: string | undefined } }> = [
    // basic links
    {
      name: 'links an unlinked Machine and Node by provider ID, Machine first',
      act: (i) => (i.observeMachine(undefined, machine('m1', { providerID: 'p1' }), false, wc1), i.observeNode(undefined, node('n1', { providerID: 'p1' }), false, wc1)),
      want: { node: 'n1', machine: 'm1' },
    },
    {
      name: 'links them Node first',
      act: (i) => (i.observeNode(undefined, node('n1', { providerID: 'p1' }), false, wc1), i.observeMachine(undefined, machine('m1', { providerID: 'p1' }), false, wc1)),
      want: { node: 'n1', machine: 'm1' },
    },
    {
      name: 'links nothing across workload clusters',
      act: (i) => (i.observeMachine(undefined, machine('m1', { providerID: 'p1' }), false, wc1), i.observeNode(undefined, node('n1', { providerID: 'p1' }), false, wc2)),
      want: { node: undefined, machine: 'm1' },
    },
    {
      name: 'ignores a Machine whose cluster is unknown',
      act: (i) => (i.observeMachine(undefined, machine('m1', { providerID: 'p1' }), false, undefined), i.observeNode(undefined, node('n1', { providerID: 'p1' }), false, wc1)),
      want: { node: 'n1', machine: undefined },
    },
    // removals
    {
      name: 'drops a deleted Node and a Machine being deleted',
      act: (i) => {
        i.observeMachine(undefined, machine('m1', { providerID: 'p1' }), false, wc1);
        i.observeMachine(machine('m1', { providerID: 'p1' }), machine('m1', { providerID: 'p1', deleting: true }), false, wc1);
        i.observeNode(undefined, node('n1', { providerID: 'p1' }), false, wc1);
        i.observeNode(node('n1', { providerID: 'p1' }), node('n1', { providerID: 'p1' }), true, wc1);
      },
      want: { node: undefined, machine: undefined },
    },
    // between Cluster API's two writes of a link
    {
      name: "keeps the Machine's Node once Cluster API annotated the Node, until the Machine's nodeRef",
      act: (i) => {
        i.observeNode(undefined, node('n1', { providerID: 'p1' }), false, wc1);
        i.observeNode(node('n1', { providerID: 'p1' }), node('n1', { machineAnnotation: 'm1', clusterNamespaceAnnotation: 'fleet' }), false, wc1);
      },
      want: { node: 'n1', machine: undefined },
    },
    {
      name: "forgets the annotated Node once the Machine has its nodeRef",
      act: (i) => {
        i.observeNode(undefined, node('n1', { providerID: 'p1' }), false, wc1);
        i.observeNode(node('n1', { providerID: 'p1' }), node('n1', { machineAnnotation: 'm1', clusterNamespaceAnnotation: 'fleet' }), false, wc1);
        i.observeMachine(machine('m1'), machine('m1', { nodeName: 'n1' }), false, wc1);
      },
      want: { node: undefined, machine: undefined },
    },
    {
      name: "forgets a workload cluster's Nodes when its Node stream stops",
      act: (i) => {
        const stream = holding<NodeFacts>();
        i.watchNodes(wc1, stream);
        i.observeMachine(undefined, machine('m1', { providerID: 'p1' }), false, wc1);
        i.observeNode(undefined, node('n1', { providerID: 'p1' }), false, wc1);
        i.unwatchNodes(wc1, stream);
      },
      want: { node: undefined, machine: 'm1' },
    },
  ];

  it.each(cases)('$name', ({ act, want }) => {
    // Prepare
    const index = new ObjectIndex();

    // Act
    act(index);

    // Assess
    expect(index.nodeFor(machine('m1', { providerID: 'p1' }), wc1)).toBe(want.node);
    expect(index.machineFor(node('n1', { providerID: 'p1' }), wc1)?.name).toBe(want.machine);
  });

  it("reads a Machine and a cluster's Node from the streams' last state, and nothing once that Node stream stopped", () => {
    // Prepare
    const index = new ObjectIndex();
    const nodes = holding(node('n1'));
    index.watchManagement({ machines: holding(machine('m1')), scalables: [] });
    index.watchNodes(wc1, nodes);

    // Act
    const before = [index.machine({ namespace: 'fleet', name: 'm1' })?.name, index.nodesOf(wc1)('n1')?.name, index.nodesOf(wc2)('n1')];
    index.unwatchNodes(wc1, nodes);

    // Assess
    expect(before).toEqual(['m1', 'n1', undefined]);
    expect(index.nodesOf(wc1)('n1')).toBeUndefined();
  });

  it("names a Cluster's members: its own objects not being deleted, each Machine with its Node (nodeRef, else the provider-ID link)", () => {
    // Prepare
    const index = new ObjectIndex();
    const pool: MachinePoolFacts = { kind: 'MachinePool', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: { 'cluster.x-k8s.io/cluster-name': 'wc1' }, namespace: 'fleet', name: 'mp1', uid: 'uid-mp1', resourceVersion: '1', specTaints: null, annotations: {}, nodeNames: ['p1'], deleting: false };
    const set: ScalableFacts = { kind: 'MachineSet', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name: 'ms1', uid: 'uid-ms1', resourceVersion: '1', specTaints: null, templateAnnotations: {}, templateLabels: {}, annotations: {}, ownedByMachineDeployment: false, clusterName: 'wc1', deleting: false };
    const machines = [
      machine('m1', { nodeName: 'n1' }),
      machine('m2', { providerID: 'p2' }),
      machine('m3'),
      machine('m4', { nodeName: 'n4', deleting: true }),
      machine('m5', { nodeName: 'n5', clusterName: 'wc2' }),
      machine('m6', { nodeName: 'n6', namespace: 'other' }),
    ];
    index.watchManagement({ machines: holding(...machines), machinePools: holding(pool), scalables: [holding(set), holding({ ...set, name: 'ms2', clusterName: 'wc2' })] });
    index.observeNode(undefined, node('n2', { providerID: 'p2' }), false, wc1);

    // Act
    const members = index.membersOf(cluster, wc1);

    // Assess
    expect(members.machines.map(({ machine: m, nodeName }) => `${m.name}→${nodeName}`)).toEqual(['m1→n1', 'm2→n2']);
    expect(members.machinePools.map((p) => p.name)).toEqual(['mp1']);
    expect(members.scalables.map((s) => s.name)).toEqual(['ms1']);
  });
});

describe('Class: ObjectIndex, the owners of a cluster\'s Nodes (ownersIn)', () => {
  const pool: MachinePoolFacts = { kind: 'MachinePool', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name: 'mp1', uid: 'uid-mp1', resourceVersion: '1', specTaints: null, annotations: {}, nodeNames: ['p1'], clusterName: 'wc1', deleting: false };
  const owned = (owner: ReturnType<ReturnType<ObjectIndex['ownersIn']>>) => (owner.kind === 'known' ? `${owner.owner.kind} ${owner.owner.name}${owner.clusterPaused ? ' (Cluster paused)' : ''}` : owner.kind);

  it('finds the pool listing the Node, else the Machine its annotation names, its provider ID links, or its nodeRef names', () => {
    // Prepare: wc1 has m1 (annotated on n1), m2 (nodeRef n2), m3 (unlinked, provider ID p3), the pool mp1 (p1); m9 is wc2's (nodeRef n9).
    const index = new ObjectIndex();
    const machines = [machine('m1', { nodeName: 'n1' }), machine('m2', { nodeName: 'n2' }), machine('m3', { providerID: 'p3' }), machine('m9', { nodeName: 'n9', clusterName: 'wc2' })];
    index.watchManagement({ machines: holding(...machines), machinePools: holding(pool), scalables: [] });
    index.watchClusters(holding(cluster));
    index.observeMachine(undefined, machines[2] as MachineFacts, false, wc1);

    // Act
    const ownerOf = index.ownersIn(wc1);
    const found = [
      node('n1', { machineAnnotation: 'm1', clusterNamespaceAnnotation: 'fleet' }),
      node('n2'),
      node('n3', { providerID: 'p3' }),
      node('p1', { machineAnnotation: 'pool-machine', clusterNamespaceAnnotation: 'fleet' }),
      node('n9'),
      node('gone', { machineAnnotation: 'gone' }),
    ].map((n) => owned(ownerOf(n)));

    // Assess
    expect(found).toEqual(['Machine m1', 'Machine m2', 'Machine m3', 'MachinePool mp1', 'none', 'none']);
  });

  it("says whether the owner's Cluster is paused, and that owners are unknown until the Machine and MachinePool streams hold their collections", () => {
    // Prepare
    const index = new ObjectIndex();
    const machines = { ...holding(machine('m1', { nodeName: 'n1' })), hasSynced: () => false };
    const pools = { ...holding(pool), hasSynced: () => true };
    index.watchManagement({ machines, machinePools: pools, scalables: [] });
    index.watchClusters(holding({ ...cluster, paused: true }));
    const n1 = node('n1', { machineAnnotation: 'm1', clusterNamespaceAnnotation: 'fleet' });

    // Act
    const before = [index.managementSynced(), owned(index.ownersIn(wc1)(n1))];
    machines.hasSynced = () => true;
    const after = [index.managementSynced(), owned(index.ownersIn(wc1)(n1)), owned(index.ownersIn({ mode: 'self' })(node('p1')))];

    // Assess
    expect(before).toEqual([false, 'unknown']);
    expect(after).toEqual([true, 'Machine m1 (Cluster paused)', 'MachinePool mp1 (Cluster paused)']);
    expect(owned(new ObjectIndex().ownersIn(wc1)(n1))).toBe('unknown');
  });
});
