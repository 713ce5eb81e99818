import { afterEach, beforeAll, expect, it } from 'vitest';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { CHECKPOINT_ANNOTATION } from '#shared/adapters/kubernetes/lease.ts';
import { eventIdFor } from '#shared/contract/cloud-event.ts';
import {
  MACHINES,
  MERGE_PATCH,
  adminKubeConfig,
  createMachine,
  createNamespace,
  createNode,
  describeWithControlPlane,
  requireControlPlane,
  setMachineNodeRef,
  uniqueName,
  waitFor,
} from '#test/support/control-plane.ts';
import type { ForwarderConfig } from '#shared/config/forwarder-config.ts';
import { acceptAllSends, sentMessages, startForwarder, summary, type RunningForwarder } from './support.ts';

describeWithControlPlane('Watch-forwarder against the real API server', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  const running: RunningForwarder[] = [];

  beforeAll(() => {
    kc = adminKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((r) => r.stop()));
  });

  async function setup(mode: 'self' | 'capi' = 'self'): Promise<{ ns: string; selector: string; label: Record<string, string>; lease: string }> {
    acceptAllSends();
    const ns = await createNamespace(kc, 'fwd');
    const value = uniqueName('sel');
    return { ns, selector: `fwd-test=${value}`, label: { 'fwd-test': value }, lease: uniqueName(`lease-${mode}`) };
  }

  function start(s: { ns: string; selector: string; lease: string }, more: Partial<ForwarderConfig> = {}): RunningForwarder {
    const r = startForwarder(kc, { clusterMode: 'self', stateNamespace: s.ns, leaseName: s.lease, machineNamespace: s.ns, nodeLabelSelector: s.selector, forwarderId: uniqueName('fwd'), ...more });
    running.push(r);
    return r;
  }

  async function synced(r: RunningForwarder, keys: readonly string[]): Promise<void> {
    await waitFor(() => keys.every((k) => r.forwarder.checkpoint()[k] !== undefined), { timeoutMs: 15_000, description: `streams ${keys.join(', ')} listed` });
  }

  const heartbeat = (name: string, at: string): Promise<unknown> =>
    core.patchNodeStatus({ name, body: { status: { conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'ok', lastHeartbeatTime: at, lastTransitionTime: '2026-01-01T00:00:00Z' }] } } }, MERGE_PATCH);

  it('forwards creations, relevant updates and deletions of Machines and Nodes as exactly the expected CloudEvents, and drops heartbeats', async () => {
    // Prepare
    const s = await setup();
    const fwd = start(s);
    await synced(fwd, ['machines', 'nodes/self']);
    const nodeName = uniqueName('node');
    const machineName = uniqueName('m');
    const subjects = [`nodes/${nodeName}`, `machines/${s.ns}/${machineName}`];

    // Act
    const node = await createNode(kc, nodeName, { labels: s.label, annotations: { 'cluster.x-k8s.io/machine': machineName, 'cluster.x-k8s.io/cluster-namespace': s.ns } });
    await createMachine(kc, s.ns, machineName, { nodeName });
    await waitFor(() => sentMessages().length >= 2, { description: 'two events' });
    const filteredBefore = fwd.telemetry.counts().EventsFiltered;
    await heartbeat(nodeName, '2026-01-01T00:01:00Z');
    await heartbeat(nodeName, '2026-01-01T00:02:00Z');
    await waitFor(() => fwd.telemetry.counts().EventsFiltered >= filteredBefore + 2, { description: 'heartbeats filtered' });
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      { ...MACHINES, namespace: s.ns, name: machineName, body: { spec: { taints: [{ key: 'gpu', value: 'a', effect: 'NoSchedule', propagation: 'Always' }] } } },
      MERGE_PATCH,
    );
    await core.patchNode({ name: nodeName, body: { spec: { taints: [{ key: 'gpu', value: 'a', effect: 'NoSchedule' }] } } }, MERGE_PATCH);
    await kc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ ...MACHINES, namespace: s.ns, name: machineName });
    await core.deleteNode({ name: nodeName });
    await waitFor(() => sentMessages().length >= 6, { description: 'six events' });
    await new Promise((r) => setTimeout(r, 500)); // nothing more may follow

    // Assess: Machines and Nodes are two watch streams, so only the order per object is defined (and it
    // is what the FIFO groups preserve).
    const sent = sentMessages();
    expect(summary(sent, [subjects[0] as string])).toEqual([
      `added nodes/${nodeName}`,
      `modified nodes/${nodeName}`, // taints
      `deleted nodes/${nodeName}`,
    ]);
    // The Machine's creation names no Node (no nodeRef yet, no Node with its provider ID): its reconcile could only
    // end no-node, so it is filtered; the nodeRef that follows is forwarded.
    expect(summary(sent, [subjects[1] as string])).toEqual([
      `modified machines/${s.ns}/${machineName}`, // status.nodeRef set
      `modified machines/${s.ns}/${machineName}`, // spec.taints
      `deleted machines/${s.ns}/${machineName}`,
    ]);
    const added = sent.find((m) => m.event.subject === `nodes/${nodeName}`);
    expect(added?.event.id).toBe(eventIdFor(node.metadata?.uid ?? '', node.metadata?.resourceVersion ?? '', 'added'));
    expect(added?.dedupId).toBe(added?.event.id);
    expect(added?.event.data).toMatchObject({ kind: 'Node', cluster: { mode: 'self' }, machine: { namespace: s.ns, name: machineName } });
    // One Node, one group.
    expect(sent.map((m) => `${m.event.subject} ${m.event.type.split('.').at(-2)} → ${m.groupId}`).sort()).toEqual(
      [
        `machines/${s.ns}/${machineName} modified → self/node/${nodeName}`,
        `machines/${s.ns}/${machineName} modified → self/node/${nodeName}`,
        `machines/${s.ns}/${machineName} deleted → self/node/${nodeName}`,
        `nodes/${nodeName} added → self/node/${nodeName}`,
        `nodes/${nodeName} modified → self/node/${nodeName}`,
        `nodes/${nodeName} deleted → self/node/${nodeName}`,
      ].sort(),
    );
    expect(new Set(sent.map((m) => m.dedupId)).size).toBe(sent.length);
    const counts = fwd.telemetry.counts();
    expect(counts.EventsForwarded).toBe(6);
    expect(counts.EventsFiltered).toBeGreaterThanOrEqual(3); // the two heartbeats and the Machine's creation
    expect(counts.SendFailures).toBe(0);
    expect(counts.MalformedWatchEvents).toBe(0);
  });

  it('forwards, after a restart from its Lease checkpoint, exactly the changes made while it was stopped', async () => {
    // Prepare
    const s = await setup();
    const [n1, n2, n3] = [uniqueName('node'), uniqueName('node'), uniqueName('node')];
    const first = start(s);
    await synced(first, ['machines', 'nodes/self']);
    await createNode(kc, n1, { labels: s.label });
    await createNode(kc, n2, { labels: s.label });
    await waitFor(() => sentMessages().length >= 2, { description: 'two added events' });
    const summaryOfFirst = await first.stop();
    running.splice(running.indexOf(first), 1);
    const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: s.lease, namespace: s.ns });
    expect(JSON.parse(lease.metadata?.annotations?.[CHECKPOINT_ANNOTATION] ?? '{}')).toEqual(summaryOfFirst.checkpoint);
    expect(lease.spec?.holderIdentity ?? '').toBe('');

    // Act: changes while no forwarder runs
    await core.patchNode({ name: n1, body: { spec: { taints: [{ key: 'k', effect: 'NoSchedule' }] } } }, MERGE_PATCH);
    await heartbeat(n2, '2026-01-01T00:03:00Z');
    await createNode(kc, n3, { labels: s.label });
    const second = start(s);
    await waitFor(() => sentMessages().length >= 4, { timeoutMs: 15_000, description: 'two more events' });
    await new Promise((r) => setTimeout(r, 1_000));

    // Assess
    expect(summary(sentMessages(), [`nodes/${n1}`, `nodes/${n2}`, `nodes/${n3}`])).toEqual([`added nodes/${n1}`, `added nodes/${n2}`, `modified nodes/${n1}`, `added nodes/${n3}`]);
    expect(second.telemetry.counts().Relists).toBe(0);
    expect(second.telemetry.counts().EventsFiltered).toBeGreaterThanOrEqual(1); // n2's heartbeat, replayed and dropped
  });

  it('lets exactly one of two forwarders started together be active, and the other take over when it stops', async () => {
    // Prepare
    const s = await setup();
    const a = start(s);
    const b = start(s);
    await waitFor(() => a.forwarder.isActive() || b.forwarder.isActive(), { description: 'a leader' });
    await new Promise((r) => setTimeout(r, 2_000));
    expect([a.forwarder.isActive(), b.forwarder.isActive()].filter(Boolean)).toHaveLength(1);
    const [leader, follower] = a.forwarder.isActive() ? [a, b] : [b, a];
    await synced(leader, ['machines', 'nodes/self']);

    // Act
    const n1 = uniqueName('node');
    await createNode(kc, n1, { labels: s.label });
    await waitFor(() => sentMessages().length >= 1);
    await new Promise((r) => setTimeout(r, 500));
    await leader.stop();
    running.splice(running.indexOf(leader), 1);
    await waitFor(() => follower.forwarder.isActive(), { timeoutMs: 10_000, description: 'the follower to take over' });
    await synced(follower, ['machines', 'nodes/self']);
    const n2 = uniqueName('node');
    await createNode(kc, n2, { labels: s.label });
    await waitFor(() => sentMessages().length >= 2);
    await new Promise((r) => setTimeout(r, 500));

    // Assess
    expect(summary(sentMessages(), [`nodes/${n1}`, `nodes/${n2}`])).toEqual([`added nodes/${n1}`, `added nodes/${n2}`]);
    expect(follower.telemetry.counts().EventsForwarded).toBe(1);
  });

  const CLUSTERS = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'clusters' } as const;

  /** A Cluster whose kubeconfig Secret points at this same API server; returns its name. */
  async function workloadCluster(ns: string): Promise<string> {
    const clusterName = uniqueName('wc');
    await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      ...CLUSTERS, namespace: ns,
      body: { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: clusterName, namespace: ns }, spec: { controlPlaneEndpoint: { host: '127.0.0.1', port: 6443 } } },
    });
    await core.createNamespacedSecret({
      namespace: ns,
      body: {
        metadata: { name: `${clusterName}-kubeconfig`, labels: { 'cluster.x-k8s.io/cluster-name': clusterName } },
        type: 'cluster.x-k8s.io/secret',
        data: { value: readFileSync(requireControlPlane().kubeconfigPath).toString('base64') },
      },
    });
    return clusterName;
  }

  it('in capi mode watches the Nodes of a workload Cluster through its kubeconfig Secret', async () => {
    // Prepare: a Cluster whose kubeconfig Secret points at this same API server
    const s = await setup('capi');
    const clusterName = await workloadCluster(s.ns);
    const fwd = start(s, { clusterMode: 'capi' });
    const nodeKey = `nodes/${s.ns}/${clusterName}`;
    await synced(fwd, ['machines', nodeKey]);
    const nodeName = uniqueName('node');
    const machineName = uniqueName('m');

    // Act
    await createNode(kc, nodeName, { labels: s.label, annotations: { 'cluster.x-k8s.io/machine': machineName } });
    await createMachine(kc, s.ns, machineName, { clusterName });
    await setMachineNodeRef(kc, s.ns, machineName, nodeName);
    await waitFor(() => sentMessages().length >= 2, { description: 'two events' });

    // Assess
    const sent = sentMessages();
    const cluster = { mode: 'capi', namespace: s.ns, name: clusterName };
    // The Node and Machine streams interleave freely: assert the order per object only.
    expect(summary(sent, [`nodes/${nodeName}`])).toEqual([`added nodes/${nodeName}`]);
    // The Machine's creation names no Node yet (its reconcile could only end no-node): filtered; its nodeRef is forwarded.
    expect(summary(sent, [`machines/${s.ns}/${machineName}`])).toEqual([`modified machines/${s.ns}/${machineName}`]);
    expect(fwd.telemetry.counts().EventsFiltered).toBeGreaterThanOrEqual(1);
    const nodeAdded = sent.find((m) => m.event.subject === `nodes/${nodeName}`);
    const machineMessages = sent.filter((m) => m.event.subject === `machines/${s.ns}/${machineName}`);
    expect(nodeAdded?.event).toMatchObject({ source: `/clusters/${s.ns}/${clusterName}`, data: { cluster, machine: { namespace: s.ns, name: machineName } } });
    expect(nodeAdded?.groupId).toBe(`${s.ns}/${clusterName}/node/${nodeName}`);
    expect(machineMessages[0]?.groupId).toBe(`${s.ns}/${clusterName}/node/${nodeName}`);
  });

  it("in capi mode announces a Cluster's Machines when its spec.paused flips, either way, with ids of the Cluster's version", async () => {
    // Prepare: a Cluster with one Machine linked to its Node, converged (its events sent).
    const s = await setup('capi');
    const clusterName = await workloadCluster(s.ns);
    const fwd = start(s, { clusterMode: 'capi' });
    await synced(fwd, ['machines', `nodes/${s.ns}/${clusterName}`]);
    const nodeName = uniqueName('node');
    const machineName = uniqueName('m');
    await createNode(kc, nodeName, { labels: s.label, annotations: { 'cluster.x-k8s.io/machine': machineName } });
    await createMachine(kc, s.ns, machineName, { clusterName });
    await setMachineNodeRef(kc, s.ns, machineName, nodeName);
    await waitFor(() => sentMessages().length >= 2, { description: 'the Node and the nodeRef' });
    const custom = kc.makeApiClient(CustomObjectsApi);
    const setPaused = async (paused: boolean): Promise<string> => {
      const cluster = (await custom.patchNamespacedCustomObject({ ...CLUSTERS, namespace: s.ns, name: clusterName, body: { spec: { paused } } }, MERGE_PATCH)) as { metadata: { uid: string; resourceVersion: string } };
      return eventIdFor(cluster.metadata.uid, cluster.metadata.resourceVersion, 'modified');
    };

    // Act
    const paused = await setPaused(true);
    await waitFor(() => sentMessages().length >= 3, { description: "the pause's event" });
    const unpaused = await setPaused(false);
    await waitFor(() => sentMessages().length >= 4, { description: "the unpause's event" });

    // Assess: one Machine event each, naming the Node, in the Node's group.
    const announced = sentMessages().slice(2);
    expect(announced.map((m) => [m.event.subject, m.event.id.split(':').slice(0, 3).join(':'), m.groupId])).toEqual([
      [`machines/${s.ns}/${machineName}`, paused, `${s.ns}/${clusterName}/node/${nodeName}`],
      [`machines/${s.ns}/${machineName}`, unpaused, `${s.ns}/${clusterName}/node/${nodeName}`],
    ]);
    expect(announced.map((m) => (m.event.data as { nodeName?: string }).nodeName)).toEqual([nodeName, nodeName]);
  });

  it('forwards a MachinePool as one event per affected Node: every member when added or re-declared, the joining Nodes on a scale-up, nothing for status-only changes or a Node leaving', async () => {
    // Prepare: a MachinePool as Cluster API stores it (no controller here: the test writes status.nodeRefs).
    const s = await setup();
    const fwd = start(s);
    await synced(fwd, ['machines', 'machinepools', 'nodes/self']);
    const custom = kc.makeApiClient(CustomObjectsApi);
    const pool = uniqueName('mp');
    const MACHINE_POOLS = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'machinepools' };
    const setStatus = (status: Record<string, unknown>) => custom.patchNamespacedCustomObjectStatus({ ...MACHINE_POOLS, namespace: s.ns, name: pool, body: { status } }, MERGE_PATCH);
    const setDeclaration = (value: string) => custom.patchNamespacedCustomObject({ ...MACHINE_POOLS, namespace: s.ns, name: pool, body: { metadata: { annotations: { 'taints.capi-taint-propagator.dev/machine': value } } } }, MERGE_PATCH);
    const refs = (...names: string[]) => names.map((name) => ({ apiVersion: 'v1', kind: 'Node', name, uid: `uid-${name}` }));
    const poolMessages = () => sentMessages().filter((m) => m.event.subject === `machinepools/${s.ns}/${pool}`);
    const seen = () => poolMessages().map((m) => `${m.event.type.split('.').slice(-2, -1)[0]} ${(m.event.data as { nodeName: string }).nodeName}`);

    // Act
    await custom.createNamespacedCustomObject({
      ...MACHINE_POOLS,
      namespace: s.ns,
      body: {
        apiVersion: 'cluster.x-k8s.io/v1beta2',
        kind: 'MachinePool',
        metadata: { name: pool, namespace: s.ns, annotations: { 'taints.capi-taint-propagator.dev/machine': 'a:NoSchedule' } },
        spec: { clusterName: 'c1', replicas: 2, template: { spec: { clusterName: 'c1', bootstrap: { dataSecretName: 'boot' }, infrastructureRef: { apiGroup: 'infrastructure.example.com', kind: 'X', name: 'x' } } } },
      },
    });
    await setStatus({ nodeRefs: refs('p-a', 'p-b') }); // both join
    await waitFor(() => seen().length >= 2, { description: 'the two members' });
    await setStatus({ nodeRefs: refs('p-a', 'p-b'), replicas: 2 }); // status only: nothing
    await setStatus({ nodeRefs: refs('p-a', 'p-b', 'p-c'), replicas: 3 }); // scale-up: p-c only
    await setStatus({ nodeRefs: refs('p-a', 'p-c'), replicas: 2 }); // p-b leaves: nothing
    await setDeclaration('a:NoSchedule, b:NoExecute'); // every member (marker: the last change)
    await waitFor(() => seen().length >= 5, { description: 'the joining Node and the re-declared members' });

    // Assess
    expect(seen()).toEqual(['modified p-a', 'modified p-b', 'modified p-c', 'modified p-a', 'modified p-c']);
    const last = poolMessages().slice(-2);
    expect(last.map((m) => m.groupId)).toEqual(['self/node/p-a', 'self/node/p-c']);
    expect(new Set(poolMessages().map((m) => m.dedupId)).size).toBe(5);
    expect(last.every((m) => m.event.data.kind === 'MachinePool' && m.event.data.cluster.mode === 'self')).toBe(true);
  });
});
