import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import { compactEtcdAt } from '#local/control-plane/etcd-maintenance.ts';
import { MERGE_PATCH, createNamespace, createNode, describeWithControlPlane, kubeConfigFromFile, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { acceptAllSends, sentMessages, startForwarder, summary, type RunningForwarder } from './support.ts';

// Nodes and Machines are served from the apiserver's watch cache, where a compaction alone causes no 410.
// This suite starts its own control plane with --watch-cache=false, so that watches and exact lists reach etcd.
describeWithControlPlane('Watch-forwarder after etcd compaction (410 Gone)', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let core: CoreV1Api;
  const running: RunningForwarder[] = [];

  beforeAll(async () => {
    cp = await startControlPlane({ build: false, extraApiserverArgs: ['--watch-cache=false'], log: () => undefined });
    kc = kubeConfigFromFile(cp.kubeconfigPath);
    core = kc.makeApiClient(CoreV1Api);
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((r) => r.stop()));
  });
  afterAll(async () => {
    await cp?.stop();
  });

  async function setup(): Promise<{ ns: string; selector: string; label: Record<string, string>; lease: string }> {
    acceptAllSends();
    const ns = await createNamespace(kc, 'fwd');
    const value = uniqueName('sel');
    return { ns, selector: `fwd-test=${value}`, label: { 'fwd-test': value }, lease: uniqueName('lease') };
  }

  function start(s: { ns: string; selector: string; lease: string }): RunningForwarder {
    const r = startForwarder(
      kc,
      { clusterMode: 'self', stateNamespace: s.ns, leaseName: s.lease, machineNamespace: s.ns, nodeLabelSelector: s.selector, forwarderId: uniqueName('fwd') },
      { watchTimeoutSeconds: 1 }, // the server ends each watch after 1-2 s, so the forwarder re-watches often
    );
    running.push(r);
    return r;
  }

  const synced = (r: RunningForwarder): Promise<unknown> =>
    waitFor(() => r.forwarder.checkpoint()['nodes/self'] !== undefined && r.forwarder.checkpoint()['machines'] !== undefined, { timeoutMs: 15_000 });

  it('relists after a 410 during the run and sends nothing when nothing relevant changed', async () => {
    // Prepare
    const s = await setup();
    const fwd = start(s);
    await synced(fwd);
    const [n1, n2] = [uniqueName('node'), uniqueName('node')];
    await createNode(kc, n1, { labels: s.label });
    await createNode(kc, n2, { labels: s.label });
    await waitFor(() => sentMessages().length >= 2);

    // Act: move etcd on (a Node the forwarder does not watch) and compact away the watch's resourceVersion
    await createNode(kc, uniqueName('other'));
    await compactEtcdAt(cp.etcdEndpoint);
    await waitFor(() => fwd.telemetry.counts().Relists >= 1, { timeoutMs: 20_000, description: 'a relist after 410' });
    await core.patchNode({ name: n1, body: { spec: { taints: [{ key: 'after', effect: 'NoSchedule' }] } } }, MERGE_PATCH);
    await waitFor(() => sentMessages().length >= 3, { description: 'the change after the relist' });
    // A marker edit, later on the same stream: once it is sent, anything the relist would re-announce was sent before it.
    await core.patchNode({ name: n2, body: { spec: { taints: [{ key: 'marker', effect: 'NoSchedule' }] } } }, MERGE_PATCH);
    await waitFor(() => summary(sentMessages(), [`nodes/${n2}`]).length >= 2, { description: 'the marker edit' });

    // Assess: the change once (a watch modification, or announced by the Node relist when the relist of another stream
    // came first and the change landed before the Node stream's own relist), the unchanged Nodes never again.
    const got = summary(sentMessages(), [`nodes/${n1}`, `nodes/${n2}`]);
    expect(got.slice(0, 2)).toEqual([`added nodes/${n1}`, `added nodes/${n2}`]);
    expect(got.slice(2)).toHaveLength(2);
    expect([`modified nodes/${n1}`, `resynced nodes/${n1}`]).toContain(got[2]);
    expect([`modified nodes/${n2}`, `resynced nodes/${n2}`]).toContain(got[3]);
  });

  it('resumes from a compacted checkpoint with a relist that re-announces only the objects changed while it was away', async () => {
    // Prepare
    const s = await setup();
    const [n1, n2, n3] = [uniqueName('node'), uniqueName('node'), uniqueName('node')];
    const first = start(s);
    await synced(first);
    await createNode(kc, n1, { labels: s.label });
    await createNode(kc, n2, { labels: s.label });
    await waitFor(() => sentMessages().length >= 2);
    await first.stop();
    running.splice(running.indexOf(first), 1);

    // Act: changes while away, then the history is compacted
    await core.patchNode({ name: n1, body: { spec: { taints: [{ key: 'away', effect: 'NoSchedule' }] } } }, MERGE_PATCH);
    await createNode(kc, n3, { labels: s.label });
    await compactEtcdAt(cp.etcdEndpoint);
    const second = start(s);
    await waitFor(() => sentMessages().length >= 4, { timeoutMs: 20_000, description: 'the changes made while away' });
    await new Promise((r) => setTimeout(r, 1_000));

    // Assess
    const got = summary(sentMessages(), [`nodes/${n1}`, `nodes/${n2}`, `nodes/${n3}`]);
    expect(got.slice(0, 2)).toEqual([`added nodes/${n1}`, `added nodes/${n2}`]);
    expect(got.slice(2).sort()).toEqual([`resynced nodes/${n1}`, `resynced nodes/${n3}`].sort()); // a list is in name order; n2 stays quiet
    expect(second.telemetry.counts().Relists).toBeGreaterThanOrEqual(1);
  });
});
