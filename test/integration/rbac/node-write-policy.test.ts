/**
 * infra/rbac/workload-cluster.yaml's ValidatingAdmissionPolicy on a real API server (1.34), with the reconcile identity
 * (a client certificate in group capi-taint-propagator-reconcile, bound only through that file): it may change a Node's
 * spec.taints and the two tracking annotations, and nothing else — even though RBAC lets it patch Nodes.
 */
import { CoreV1Api, KubernetesObjectApi, loadAllYaml, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { beforeAll, expect, it } from 'vitest';
import { kubeCall, type ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { KubernetesNodeStore } from '#shared/adapters/kubernetes/node-store.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import {
  MERGE_PATCH,
  adminKubeConfig,
  createNamespace,
  createNode,
  requireControlPlane,
  describeWithControlPlane,
  kubeConfigFromFile,
  mintUser,
  statusOf,
  uniqueName,
  waitFor,
  waitForAccess,
} from '#test/support/control-plane.ts';

const PRODUCT_ANNOTATION = OWN_TRACKING_ANNOTATION;

/** A merge patch of a Node with the credentials the product got from a kubeconfig Secret (the product's own client). */
function patchNodeVia(kc: ClusterEndpoint, node: string, body: unknown): Promise<unknown> {
  return kubeCall(kc, { method: 'PATCH', path: `/api/v1/nodes/${node}`, contentType: 'application/merge-patch+json', body });
}

async function outcome(action: () => Promise<unknown>): Promise<number | undefined> {
  try {
    await action();
    return 200;
  } catch (error) {
    return statusOf(error);
  }
}

const ROLLOUT_MARK = 'rollout.capi-taint-propagator.dev/in-progress';

describeWithControlPlane('ValidatingAdmissionPolicy: the reconcile identity may change only taints and tracking annotations', () => {
  let admin: KubeConfig;
  let reconcile: CoreV1Api;

  beforeAll(async () => {
    admin = adminKubeConfig();
    const api = KubernetesObjectApi.makeApiClient(admin);
    for (const doc of loadAllYaml(readFileSync('infra/rbac/workload-cluster.yaml', 'utf8')) as KubernetesObject[]) {
      if (!doc?.kind) continue;
      await api.create(doc).catch((error: unknown) => {
        if (statusOf(error) !== 409) throw error;
      });
    }
    const kc = kubeConfigFromFile(await mintUser(uniqueName('reconcile'), ['capi-taint-propagator-reconcile']));
    reconcile = kc.makeApiClient(CoreV1Api);
    await waitForAccess(kc, { resource: 'nodes', verb: 'patch' }, true);
    // The policy is picked up asynchronously: wait until a label change on a probe Node is denied by it.
    const probe = uniqueName('probe');
    await createNode(admin, probe);
    await waitFor(async () => (await outcome(() => reconcile.patchNode({ name: probe, body: { metadata: { labels: { probe: String(Date.now()) } } } }, MERGE_PATCH))) === 403, {
      timeoutMs: 30_000,
      description: 'the policy to deny a label change',
    });
  });

  it('allows taints and the two tracking annotations; denies labels, other annotations and other fields', async () => {
    // Prepare
    const node = uniqueName('node');
    await createNode(admin, node, { labels: { pool: 'a' }, annotations: { 'example.com/other': 'x' } });
    const patch = (body: object) => outcome(() => reconcile.patchNode({ name: node, body }, MERGE_PATCH));

    // Act
    const outcomes = {
      taints: await patch({ spec: { taints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }] } }),
      taintsAndUpstreamTracking: await patch({ metadata: { annotations: { [TRACKING_ANNOTATION]: 'gpu:NoSchedule' } }, spec: { taints: [{ key: 'gpu', effect: 'NoSchedule' }] } }),
      productTracking: await patch({ metadata: { annotations: { [PRODUCT_ANNOTATION]: 'gpu:NoSchedule' } } }),
      removeTracking: await patch({ metadata: { annotations: { [TRACKING_ANNOTATION]: null } } }),
      addLabel: await patch({ metadata: { labels: { evil: 'true' } } }),
      changeLabel: await patch({ metadata: { labels: { pool: 'b' } } }),
      removeLabel: await patch({ metadata: { labels: { pool: null } } }),
      addOtherAnnotation: await patch({ metadata: { annotations: { 'example.com/new': 'y' } } }),
      changeOtherAnnotation: await patch({ metadata: { annotations: { 'example.com/other': 'z' } } }),
      removeOtherAnnotation: await patch({ metadata: { annotations: { 'example.com/other': null } } }),
      taintsWithALabel: await patch({ metadata: { labels: { evil: 'true' } }, spec: { taints: [] } }),
      unschedulable: await patch({ spec: { unschedulable: true } }),
      providerID: await patch({ spec: { providerID: 'aws:///evil' } }),
      podCIDR: await patch({ spec: { podCIDR: '10.9.0.0/24', podCIDRs: ['10.9.0.0/24'] } }),
      finalizers: await patch({ metadata: { finalizers: ['example.com/block'] } }),
      // The staged NoExecute rollout's mark (docs/noexecute-rollout.md): its label and annotation, set then removed.
      rolloutMark: await patch({ metadata: { labels: { [ROLLOUT_MARK]: 'true' }, annotations: { [ROLLOUT_MARK]: '{"group":"g","taints":[]}' } } }),
      rolloutMarkRemoved: await patch({ metadata: { labels: { [ROLLOUT_MARK]: null }, annotations: { [ROLLOUT_MARK]: null } } }),
      rolloutMarkWithAnotherLabel: await patch({ metadata: { labels: { [ROLLOUT_MARK]: 'true', evil: 'true' } } }),
    };
    const after = await admin.makeApiClient(CoreV1Api).readNode({ name: node });
    const adminLabel = await outcome(() => admin.makeApiClient(CoreV1Api).patchNode({ name: node, body: { metadata: { labels: { admin: 'ok' } } } }, MERGE_PATCH));

    // Assess
    expect(outcomes).toEqual({
      taints: 200,
      taintsAndUpstreamTracking: 200,
      productTracking: 200,
      removeTracking: 200,
      addLabel: 403,
      changeLabel: 403,
      removeLabel: 403,
      addOtherAnnotation: 403,
      changeOtherAnnotation: 403,
      removeOtherAnnotation: 403,
      taintsWithALabel: 403,
      unschedulable: 403,
      providerID: 403,
      podCIDR: 403,
      finalizers: 403,
      rolloutMark: 200,
      rolloutMarkRemoved: 200,
      rolloutMarkWithAnotherLabel: 403,
    });
    expect(after.metadata?.labels).toEqual({ pool: 'a' });
    expect(after.metadata?.annotations).toEqual({ 'example.com/other': 'x', [PRODUCT_ANNOTATION]: 'gpu:NoSchedule' });
    expect(after.spec?.taints?.map((t) => t.key)).toEqual(['gpu']);
    expect(after.spec?.unschedulable).toBeUndefined();
    expect(adminLabel).toBe(200); // the policy binds the reconcile identity only
  });

  it("lets the product's own write through: the reconcile NodeStore's patch (taints, tracking annotation, resourceVersion)", async () => {
    // Prepare
    const node = uniqueName('node');
    const created = await createNode(admin, node, { labels: { pool: 'a' } });
    const store = new KubernetesNodeStore(kubeConfigFromFile(await mintUser(uniqueName('reconcile'), ['capi-taint-propagator-reconcile'])));

    // Act
    const written = await store.patchNodeTaints(node, {
      resourceVersion: created.metadata?.resourceVersion ?? '',
      taints: [{ key: 'gpu', effect: 'NoSchedule' }],
      annotations: { [TRACKING_ANNOTATION]: 'gpu:NoSchedule' },
    });

    // Assess
    expect(written.taints?.map((t) => t.key)).toEqual(['gpu']);
    expect(written.annotations[TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
    expect((await admin.makeApiClient(CoreV1Api).readNode({ name: node })).metadata?.labels).toEqual({ pool: 'a' });
  });

  it('a dedicated <cluster>-taint-propagator-kubeconfig is used instead of CAPI\'s admin kubeconfig, and the policy holds it', async () => {
    // Prepare: CAPI's admin kubeconfig and, next to it, a dedicated credential in the reconcile group.
    const ns = await createNamespace(admin, 'dedicated');
    const node = uniqueName('node');
    await createNode(admin, node, { labels: { pool: 'a' } });
    const dedicated = readFileSync(await mintUser(uniqueName('wc1-taint-propagator'), ['capi-taint-propagator-reconcile']));
    const core = admin.makeApiClient(CoreV1Api);
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'wc1-kubeconfig' }, data: { value: readFileSync(requireControlPlane().kubeconfigPath).toString('base64') } } });
    const workload = workloadKubeConfigs(admin);
    const viaCapiSecret = await workload.get({ mode: 'capi', namespace: ns, name: 'wc1' });
    const adminLabel = await outcome(() => patchNodeVia(viaCapiSecret, node, { metadata: { labels: { capi: 'admin' } } }));
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'wc1-taint-propagator-kubeconfig' }, data: { value: dedicated.toString('base64') } } });

    // Act
    const viaDedicated = await workload.get({ mode: 'capi', namespace: ns, name: 'wc1' });
    const dedicatedLabel = await outcome(() => patchNodeVia(viaDedicated, node, { metadata: { labels: { dedicated: 'x' } } }));
    const dedicatedTaints = await outcome(() => patchNodeVia(viaDedicated, node, { spec: { taints: [{ key: 'gpu', effect: 'NoSchedule' }] } }));
    const dedicatedDelete = await outcome(() => kubeCall(viaDedicated, { method: 'DELETE', path: `/api/v1/nodes/${node}` }));

    // Assess: CAPI's admin credential could change anything; the dedicated one only what the product needs.
    expect({ adminLabel, dedicatedLabel, dedicatedTaints, dedicatedDelete }).toEqual({ adminLabel: 200, dedicatedLabel: 403, dedicatedTaints: 200, dedicatedDelete: 403 });
  });
});
