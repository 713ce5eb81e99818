import { describe, expect, it } from 'vitest';
import { messageGroupIdFor, type ClusterRef } from '#shared/contract/cloud-event.ts';
import { clusterOfMachine, toTaintEvent } from '#shared/contract/events.ts';
import { clusterNameOf, isPaused, objectKeyOf, toClusterFacts, toMachineFacts, toNodeFacts, toScalableFacts, unlinkedProviderID } from '#shared/model/views.ts';

const at = new Date('2026-11-22T10:00:00.000Z');
const capi: ClusterRef = { mode: 'capi', namespace: 'fleet', name: 'wc1' };

const node = (annotations: Record<string, string> = {}) => ({
  metadata: { name: 'n1', uid: 'u-n1', resourceVersion: '7', annotations },
  spec: { taints: [{ key: 'a', effect: 'NoSchedule' }] },
});
const machine = (extra: { nodeName?: string; clusterName?: string; label?: string } = {}) => ({
  metadata: { name: 'm1', namespace: 'fleet', uid: 'u-m1', resourceVersion: '9', labels: extra.label ? { 'cluster.x-k8s.io/cluster-name': extra.label } : {} },
  spec: extra.clusterName ? { clusterName: extra.clusterName } : {},
  status: extra.nodeName ? { nodeRef: { name: extra.nodeName } } : {},
});

describe('Function: toTaintEvent()', () => {
  const cases = [
    {
      name: 'maps a Node added in a workload cluster, with its Machine from the CAPI annotations',
      facts: toNodeFacts(node({ 'cluster.x-k8s.io/machine': 'm1', 'cluster.x-k8s.io/cluster-namespace': 'fleet' })),
      change: 'added' as const,
      cluster: capi,
      want: {
        id: 'u-n1:7:added', source: '/clusters/fleet/wc1', type: 'io.github.capi-taint-propagator.node.added.v1', subject: 'nodes/n1', time: at.toISOString(),
        data: { kind: 'Node', cluster: capi, node: { name: 'n1', uid: 'u-n1', resourceVersion: '7' }, machine: { namespace: 'fleet', name: 'm1' }, observedAt: at.toISOString() },
      },
      group: 'fleet/wc1/node/n1',
    },
    {
      name: 'defaults the Machine namespace to the Cluster namespace',
      facts: toNodeFacts(node({ 'cluster.x-k8s.io/machine': 'm1' })),
      change: 'modified' as const,
      cluster: capi,
      want: { data: { machine: { namespace: 'fleet', name: 'm1' } } },
      group: 'fleet/wc1/node/n1',
    },
    {
      name: 'omits the Machine of a Node without CAPI annotations',
      facts: toNodeFacts(node()),
      change: 'deleted' as const,
      cluster: { mode: 'self' } as ClusterRef,
      want: { id: 'u-n1:7:deleted', source: '/clusters/self', data: { kind: 'Node', cluster: { mode: 'self' }, node: { name: 'n1', uid: 'u-n1', resourceVersion: '7' }, observedAt: at.toISOString() } },
      group: 'self/node/n1',
    },
    {
      name: 'maps a Machine with a Node to the Node group',
      facts: toMachineFacts(machine({ nodeName: 'n1', clusterName: 'wc1' })),
      change: 'modified' as const,
      cluster: capi,
      want: {
        id: 'u-m1:9:modified', type: 'io.github.capi-taint-propagator.machine.modified.v1', subject: 'machines/fleet/m1',
        data: { kind: 'Machine', cluster: capi, machine: { namespace: 'fleet', name: 'm1', uid: 'u-m1', resourceVersion: '9' }, nodeName: 'n1', observedAt: at.toISOString() },
      },
      group: 'fleet/wc1/node/n1',
    },
    {
      name: 'groups a Machine without a Node by the Machine',
      facts: toMachineFacts(machine({ clusterName: 'wc1' })),
      change: 'resynced' as const,
      cluster: capi,
      want: { type: 'io.github.capi-taint-propagator.machine.resynced.v1' },
      group: 'fleet/wc1/machine/fleet/m1',
    },
  ];
  it.each(cases)('$name', ({ facts, change, cluster, want, group }) => {
    // Act
    const event = toTaintEvent(facts!, change, cluster, at);
    // Assess
    expect(event).toMatchObject(want);
    expect(messageGroupIdFor(event.data)).toBe(group);
  });
});

describe('Function: toMachineFacts() / toNodeFacts() / toClusterFacts()', () => {
  it('rejects objects without name, uid or resourceVersion', () => {
    expect(toNodeFacts({ metadata: { name: 'n1', uid: 'u' } })).toBeUndefined();
    expect(toNodeFacts('garbage')).toBeUndefined();
    expect(toMachineFacts({ metadata: { name: 'm', uid: 'u', resourceVersion: '1' } })).toBeUndefined(); // no namespace
    expect(toClusterFacts({ metadata: { name: 'c', namespace: 'ns', uid: 'u', resourceVersion: '1', deletionTimestamp: 'x' } })).toMatchObject({ deleting: true });
  });

  it("reads a Cluster's spec.paused (only true pauses) and the paused annotation of the other objects (any value)", () => {
    const cluster = (spec: unknown) => toClusterFacts({ metadata: { name: 'c', namespace: 'ns', uid: 'u', resourceVersion: '1' }, spec });
    expect([cluster({ paused: true }), cluster({ paused: 'true' }), cluster({}), cluster(undefined)].map((c) => c?.paused)).toEqual([true, false, false, false]);
    const paused = toMachineFacts({ metadata: { name: 'm', namespace: 'ns', uid: 'u', resourceVersion: '1', annotations: { 'cluster.x-k8s.io/paused': '' } } });
    expect([paused, toMachineFacts(machine())].map((m) => m && isPaused(m))).toEqual([true, false]);
  });

  it("keeps of a Node's labels and annotations only the documented keys, its provider ID and creation time", () => {
    const facts = toNodeFacts({
      metadata: {
        name: 'n1', uid: 'u-n1', resourceVersion: '7', creationTimestamp: '2026-11-22T09:00:00Z',
        labels: { role: 'gpu', 'rollout.capi-taint-propagator.dev/in-progress': 'true' },
        annotations: { 'cluster.x-k8s.io/machine': 'm1', 'taints.capi-taint-propagator.dev/applied': '', 'rollout.capi-taint-propagator.dev/in-progress': '{}', 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' },
      },
      spec: { providerID: 'aws:///eu-west-1a/i-0abc', podCIDR: '10.0.0.0/24' },
    });
    expect(facts).toMatchObject({
      creationTimestamp: '2026-11-22T09:00:00Z',
      labels: { 'rollout.capi-taint-propagator.dev/in-progress': 'true' },
      annotations: { 'cluster.x-k8s.io/machine': 'm1', 'taints.capi-taint-propagator.dev/applied': '', 'rollout.capi-taint-propagator.dev/in-progress': '{}' },
      taints: [],
      providerID: 'aws:///eu-west-1a/i-0abc',
    });
    expect(Object.keys(facts!.annotations)).toHaveLength(3);
    // Linked by Cluster API: the reconcile still compares the provider ID; the forwarder links by it no more.
    expect(unlinkedProviderID(facts!)).toBeUndefined();
    expect(unlinkedProviderID({ ...facts!, annotations: {} })).toBe('aws:///eu-west-1a/i-0abc');
  });

  it("reads a Node's spec.taints once: unset or null as none, anything that is not a list of taints as unreadable", () => {
    const taints = (v: unknown) => toNodeFacts({ ...node(), spec: { taints: v } })?.taints;
    expect(taints(undefined)).toEqual([]);
    expect(taints(null)).toEqual([]);
    expect(taints([{ key: 'a', value: '', effect: 'NoExecute', timeAdded: '2026-01-01T00:00:00Z', extra: 1 }])).toEqual([{ key: 'a', effect: 'NoExecute', timeAdded: '2026-01-01T00:00:00Z' }]);
    expect(taints([{ key: 'a', value: 'v', effect: 'NoExecute', timeAdded: new Date('2026-01-01T00:00:00.000Z') }])).toEqual([{ key: 'a', value: 'v', effect: 'NoExecute', timeAdded: '2026-01-01T00:00:00Z' }]);
    expect([taints('not a list'), taints([{ effect: 'NoSchedule' }]), taints([{ key: 1, effect: 'NoSchedule' }]), taints([7]), taints([{ key: 'a', effect: 'NoSchedule' }, 'text'])]).toEqual([undefined, undefined, undefined, undefined, undefined]);
  });

  it('keys namespaced objects by namespace/name and Nodes by name', () => {
    expect(objectKeyOf(toMachineFacts(machine())!)).toBe('fleet/m1');
    expect(objectKeyOf(toNodeFacts(node())!)).toBe('n1');
  });
});

describe('Function: clusterOfMachine()', () => {
  it('uses spec.clusterName, then the cluster-name label, and self in self mode', () => {
    expect(clusterOfMachine(toMachineFacts(machine({ clusterName: 'wc1', label: 'other' }))!, 'capi')).toEqual(capi);
    expect(clusterOfMachine(toMachineFacts(machine({ label: 'wc1' }))!, 'capi')).toEqual(capi);
    expect(clusterOfMachine(toMachineFacts(machine())!, 'capi')).toBeUndefined();
    expect(clusterOfMachine(toMachineFacts(machine())!, 'self')).toEqual({ mode: 'self' });
  });
});

describe('Function: clusterNameOf()', () => {
  const meta = { name: 'md', namespace: 'ns', uid: 'u', resourceVersion: '3' };
  it.each([
    { name: 'takes the Cluster from spec.clusterName', obj: { metadata: { ...meta, labels: { 'cluster.x-k8s.io/cluster-name': 'label' } }, spec: { clusterName: 'spec' } }, want: 'spec' },
    { name: 'falls back to the cluster-name label', obj: { metadata: { ...meta, labels: { 'cluster.x-k8s.io/cluster-name': 'label' } }, spec: {} }, want: 'label' },
    { name: 'has none without either', obj: { metadata: meta }, want: undefined },
  ])('$name', ({ obj, want }) => {
    // Act
    const view = toScalableFacts('MachineDeployment', obj);

    // Assess
    expect(view && clusterNameOf(view)).toBe(want);
  });
});
