/**
 * KubernetesPodStore against the real API server (the shared bare control plane: no kube-controller-manager). A
 * budget the disruption controller has not computed yet refuses every eviction (the API server's own check of
 * `status.observedGeneration`), which is enough to see the 429 path here; test/integration/eviction/ runs the
 * controller for the real accounting.
 */
import { expect, it } from 'vitest';
import { CoreV1Api, PolicyV1Api, type V1Pod } from '@kubernetes/client-node';
import { KubernetesPodStore } from '#shared/adapters/kubernetes/pod-store.ts';
import { MERGE_PATCH, adminKubeConfig, createNamespace, createNode, describeWithControlPlane, statusOf, uniqueName } from '#test/support/control-plane.ts';

function pod(name: string, nodeName: string, labels: Record<string, string> = {}): V1Pod {
  return {
    metadata: { name, labels, ownerReferences: [] },
    spec: { nodeName, terminationGracePeriodSeconds: 0, tolerations: [{ key: 'k', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 5 }], containers: [{ name: 'c', image: 'registry.invalid/pause:never-pulled' }] },
  };
}

describeWithControlPlane('Class: KubernetesPodStore, the pods of a Node and the Eviction API', () => {
  const kc = adminKubeConfig();
  const store = new KubernetesPodStore(kc);
  const core = kc.makeApiClient(CoreV1Api);

  it("lists exactly the Node's pods, with their tolerations, in every namespace", async () => {
    // Prepare
    const [node, otherNode] = [uniqueName('pods'), uniqueName('other')];
    await createNode(kc, node);
    await createNode(kc, otherNode);
    const [a, b] = [await createNamespace(kc, 'pods-a'), await createNamespace(kc, 'pods-b')];
    await core.createNamespacedPod({ namespace: a, body: pod('p1', node) });
    await core.createNamespacedPod({ namespace: b, body: pod('p2', node) });
    await core.createNamespacedPod({ namespace: a, body: pod('elsewhere', otherNode) });

    // Act
    const pods = await store.listPodsOnNode(node);

    // Assess
    expect(pods.map((p) => `${p.namespace}/${p.name}`).sort()).toEqual([`${a}/p1`, `${b}/p2`].sort());
    // (the API server's DefaultTolerationSeconds admission adds not-ready and unreachable tolerations beside it)
    expect(pods[0]?.tolerations).toContainEqual({ key: 'k', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 5 });
  });

  it('answers evicted (201), refused (429) under a budget and gone (404), and never deletes a refused pod', async () => {
    // Prepare
    const node = uniqueName('evict');
    await createNode(kc, node);
    const ns = await createNamespace(kc, 'evict');
    await core.createNamespacedPod({ namespace: ns, body: pod('free', node) });
    await core.createNamespacedPod({ namespace: ns, body: pod('guarded', node, { app: 'guarded' }) });
    // A running pod: a pending one may be evicted whatever its budget says (the API server's canIgnorePDB).
    await core.patchNamespacedPodStatus({ namespace: ns, name: 'guarded', body: { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }] } } }, MERGE_PATCH);
    await kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: 'guard' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'guarded' } } } } });

    // Act
    const answers = [await store.evictPod(ns, 'free'), await store.evictPod(ns, 'guarded'), await store.evictPod(ns, 'absent')];

    // Assess
    expect(answers).toEqual(['evicted', 'refused', 'gone']);
    expect((await core.readNamespacedPod({ namespace: ns, name: 'guarded' })).metadata?.deletionTimestamp).toBeUndefined();
    const free = await core.readNamespacedPod({ namespace: ns, name: 'free' }).then((p) => p.metadata?.deletionTimestamp, (e: unknown) => statusOf(e));
    expect(free === 404 || free instanceof Date).toBe(true);
  });
});
