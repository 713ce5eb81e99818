import { afterAll, beforeAll, expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import type { KubeConfig, CoreV1Event } from '@kubernetes/client-node';
import { startControlPlane } from '#local/control-plane/control-plane.ts';
import type { ControlPlane } from '#local/control-plane/control-plane.ts';
import { compactEtcdAt } from '#local/control-plane/etcd-maintenance.ts';
import {
  adminKubeConfig,
  compactEtcd,
  createNamespace,
  createNode,
  describeWithControlPlane,
  kubeConfigFromFile,
  MERGE_PATCH,
  uniqueName,
  watchUntil,
} from '#test/support/control-plane.ts';

function eventBody(name: string, namespace: string): CoreV1Event {
  return {
    metadata: { name },
    involvedObject: { kind: 'Node', name: 'n1', namespace },
    reason: 'Testing',
    message: 'first',
  };
}

describeWithControlPlane('Kubernetes API: watch after etcd compaction', () => {
  let kc: KubeConfig;
  let namespace: string;
  beforeAll(async () => {
    kc = adminKubeConfig();
    namespace = await createNamespace(kc, 'watch');
  });

  // Events are the one resource kube-apiserver does not keep in its watch cache, so their watches go to etcd.
  it('answers 410 Gone to a watch from a resourceVersion that etcd compacted away', async () => {
    // Prepare
    const core = kc.makeApiClient(CoreV1Api);
    const name = uniqueName('ev');
    const oldRv = (await core.createNamespacedEvent({ namespace, body: eventBody(name, namespace) })).metadata?.resourceVersion;
    await core.patchNamespacedEvent({ namespace, name, body: { message: 'second' } }, MERGE_PATCH);
    const path = `/api/v1/namespaces/${namespace}/events`;
    const before = await watchUntil(kc, path, { resourceVersion: oldRv }, (events) => events.length >= 1);
    expect(before.events.map((e) => e.type)).toEqual(['MODIFIED']); // the old revision is still there

    // Act
    await compactEtcd();
    const after = await watchUntil(kc, path, { resourceVersion: oldRv });

    // Assess
    expect(after.gone).toBe(true);
    expect(after.timedOut).toBe(false);
  });
});

// The product watches Nodes and Machines, which the watch cache serves from memory: a compaction alone does not make
// their watches 410. With --watch-cache=false every watch goes to etcd, so it does. This starts its own control plane.
describeWithControlPlane('Kubernetes API: Node watch after etcd compaction, watch cache off', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  beforeAll(async () => {
    cp = await startControlPlane({ build: false, extraApiserverArgs: ['--watch-cache=false'], log: () => undefined });
    kc = kubeConfigFromFile(cp.kubeconfigPath);
  });
  afterAll(async () => {
    await cp?.stop();
  });

  it('answers 410 Gone to a Node watch from a resourceVersion that etcd compacted away', async () => {
    // Prepare
    const name = uniqueName('node');
    const oldRv = (await createNode(kc, name)).metadata?.resourceVersion;
    await kc.makeApiClient(CoreV1Api).patchNode({ name, body: { metadata: { labels: { step: '2' } } } }, MERGE_PATCH);

    // Act
    await compactEtcdAt(cp.etcdEndpoint);
    const after = await watchUntil(kc, '/api/v1/nodes', { resourceVersion: oldRv });

    // Assess
    expect(after.gone).toBe(true);
  });
});
