/**
 * The echo of the reconcile function's own Node write is not forwarded (it would only reconcile to
 * `unchanged`), while anyone else's write to the same fields is.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { KubernetesNodeStore } from '#shared/adapters/kubernetes/node-store.ts';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { MERGE_PATCH, adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { acceptAllSends, sentMessages, startForwarder, type RunningForwarder } from './support.ts';

describeWithControlPlane('Watch-forwarder and the reconcile function’s own writes', () => {
  let kc: KubeConfig;
  const running: RunningForwarder[] = [];

  beforeAll(() => {
    kc = adminKubeConfig();
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((r) => r.stop()));
  });

  it('does not forward the echo of our write nor foreign taint noise, and forwards a foreign write of a tracked taint', async () => {
    // Prepare
    acceptAllSends();
    const ns = await createNamespace(kc, 'echo');
    const label = uniqueName('echo');
    const node = uniqueName('node');
    // Its Machine (linked as Cluster API links them) declares the taint the Node lacks: the first list (quiet: only what
    // may need a write) announces the Node.
    const machine = uniqueName('m');
    await createNode(kc, node, { labels: { 'echo-test': label }, annotations: { 'cluster.x-k8s.io/machine': machine, 'cluster.x-k8s.io/cluster-namespace': ns } });
    await createMachine(kc, ns, machine, { nodeName: node, annotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu=a:NoSchedule' } });
    const fwd = startForwarder(kc, { clusterMode: 'self', stateNamespace: ns, leaseName: uniqueName('lease'), machineNamespace: ns, nodeLabelSelector: `echo-test=${label}`, forwarderId: uniqueName('fwd') });
    running.push(fwd);
    await waitFor(() => sentMessages().some((m) => m.event.subject === `nodes/${node}`), { timeoutMs: 15_000, description: 'initial announcement' });
    const store = new KubernetesNodeStore(kc);
    const current = await store.getNode(node);
    const forNode = () => sentMessages().filter((m) => m.event.subject === `nodes/${node}`);
    const core = kc.makeApiClient(CoreV1Api);

    // Act: the reconcile function's write (same adapter, same field manager) …
    const ours = await store.patchNodeTaints(node, { resourceVersion: current!.resourceVersion, taints: [{ key: 'gpu', value: 'a', effect: 'NoSchedule' }], annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' } });
    // … then another writer adds a taint of its own, leaving the tracked one alone (noise, like node-lifecycle taints) …
    const noise = await core.patchNode({ name: node, body: { spec: { taints: [...(ours.taints ?? []), { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' }] } } }, MERGE_PATCH);
    // … then changes the tracked taint's value (the marker: this one must be forwarded, and after the others).
    const marker = await core.patchNode({ name: node, body: { spec: { taints: (noise.spec?.taints ?? []).map((t) => (t.key === 'gpu' ? { ...t, value: 'b' } : t)) } } }, MERGE_PATCH);
    await waitFor(() => forNode().length >= 2, { timeoutMs: 15_000, description: 'the foreign write of the tracked taint forwarded' });

    // Assess: the initial announcement and the marker; nothing for our own write nor for the noise before it.
    expect(forNode().map((m) => m.event.type.split('.').at(-2))).toEqual(['resynced', 'modified']);
    expect(forNode()[1]?.event.data).toMatchObject({ node: { resourceVersion: marker.metadata?.resourceVersion } });
    expect(fwd.telemetry.counts().EventsFiltered).toBeGreaterThanOrEqual(2);
    expect(fwd.telemetry.counts().ForeignTaintChangesFiltered).toBe(1);
  });
});
