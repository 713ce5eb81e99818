/**
 * The RBAC manifests of infra/rbac/, applied to a real API server: the forwarder and the reconcile
 * function, each running as a low-privilege identity bound only through those manifests, do their
 * whole job, and are refused anything outside it.
 */
import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { CoreV1Api, CustomObjectsApi, KubernetesObjectApi, loadAllYaml, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { readFileSync } from 'node:fs';
import { beforeAll, expect, it } from 'vitest';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { processBatch } from '#functions/reconcile-node-taints/process-batch.ts';
import { composeWatchForwarder } from '#functions/watch-forwarder/compose.ts';
import { forwardWatchEvents } from '#functions/watch-forwarder/forward-watch-events.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import { kubeconfigSecretRbac } from '#local/rbac/kubeconfig-secret-rbac.ts';
import { createForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';
import {
  MACHINES,
  MERGE_PATCH,
  adminKubeConfig,
  createMachine,
  createNamespace,
  createNode,
  describeWithControlPlane,
  kubeConfigFromFile,
  mintUser,
  statusOf,
  uniqueName,
  waitForAccess,
} from '#test/support/control-plane.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

const STATE_NAMESPACE = 'capi-taint-propagator';
const sqsMock = mockClient(SQSClient);

async function apply(kc: KubeConfig, source: string | readonly KubernetesObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const docs = typeof source === 'string' ? (loadAllYaml(readFileSync(source, 'utf8')) as KubernetesObject[]) : source;
  for (const doc of docs) {
    if (!doc?.kind) continue;
    try {
      await api.create(doc);
    } catch (error) {
      if (statusOf(error) !== 409) throw error;
    }
  }
}

async function refused(action: () => Promise<unknown>): Promise<number | undefined> {
  try {
    await action();
    return 200;
  } catch (error) {
    return statusOf(error);
  }
}

describeWithControlPlane('least privilege: infra/rbac manifests on a real API server', () => {
  let admin: KubeConfig;
  let forwarderKc: KubeConfig;
  let reconcileKc: KubeConfig;
  let ns: string;

  beforeAll(async () => {
    admin = adminKubeConfig();
    ns = await createNamespace(admin, 'rbac');
    await apply(admin, 'infra/rbac/management-cluster.yaml');
    await apply(admin, 'infra/rbac/workload-cluster.yaml');
    // What `npm run rbac:kubeconfig-secrets` prints for the one Cluster wc1 of this namespace.
    await apply(admin, kubeconfigSecretRbac([{ namespace: ns, name: 'wc1' }]) as KubernetesObject[]);
    forwarderKc = kubeConfigFromFile(await mintUser(uniqueName('forwarder'), ['capi-taint-propagator-forwarder']));
    reconcileKc = kubeConfigFromFile(await mintUser(uniqueName('reconcile'), ['capi-taint-propagator-reconcile']));
    await waitForAccess(forwarderKc, { group: 'cluster.x-k8s.io', resource: 'machines', verb: 'watch' }, true);
    await waitForAccess(reconcileKc, { resource: 'nodes', verb: 'patch' }, true);
    await waitForAccess(reconcileKc, { resource: 'secrets', verb: 'get', namespace: ns, name: 'wc1-kubeconfig' }, true);
    await waitForAccess(forwarderKc, { resource: 'secrets', verb: 'get', namespace: ns, name: 'wc1-kubeconfig' }, true);
  });

  it('lets the forwarder and the reconcile function do their whole job as their own identities', async () => {
    // Prepare
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({});
    const label = uniqueName('rbac');
    const node = uniqueName('node');
    const published: TaintEvent[] = [];
    const config = { ...loadForwarderConfig({ CLUSTER_MODE: 'self', MACHINE_NAMESPACE: ns, NODE_LABEL_SELECTOR: `rbac-test=${label}` }), stateNamespace: STATE_NAMESPACE, leaseDurationSeconds: 4, resyncIntervalSeconds: 0 };
    const deps = composeWatchForwarder({
      config,
      managementKubeConfig: forwarderKc,
      publisher: { publish: async (events) => (published.push(...events), { sent: events, unsent: [] }) },
      telemetry: createForwarderTelemetry(),
    });

    // Act: the forwarder runs a short window while the cluster changes.
    const window = forwardWatchEvents(deps, { durationMs: 6_000, rota: { targetMembers: 1, overlapMs: 1_000, staleAfterMs: 15_000 } }, { renewIntervalMs: 1_000, acquireRetryMs: 250, flushIntervalMs: 20 });
    await new Promise((r) => setTimeout(r, 1_500));
    await createNode(admin, node, { labels: { 'rbac-test': label }, taints: [{ key: 'node.cluster.x-k8s.io/uninitialized', effect: 'NoSchedule' }] });
    await createMachine(admin, ns, 'm1', { nodeName: node, specTaints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }] });
    const summary = await window;
    // … and the reconcile function handles what it forwarded.
    const workload = workloadKubeConfigs(reconcileKc);
    const batchDeps = composeReconcile({
      config: { queueUrl: TEST_QUEUE_URL, deadLetterQueueUrl: TEST_DLQ_URL, dryRun: false, specTaintsOwner: 'product', startupTaint: { key: 'node.cluster.x-k8s.io/uninitialized', effect: 'NoSchedule' }, retryBaseSeconds: 1, retryMaxSeconds: 5, stateNamespace: STATE_NAMESPACE, firstEnabledAt: undefined },
      clusterMode: 'self',
      managementKubeConfig: reconcileKc,
      workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }),
      sqs: new SQSClient({ region: 'eu-west-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }),
    });
    const response = await processBatch(sqsEvent(...published.map((e) => sqsRecord(e))), { awsRequestId: 'rbac' } as Context, batchDeps);

    // Assess
    expect(summary.active).toBe(true);
    expect(published.map((e) => e.subject)).toEqual(expect.arrayContaining([`nodes/${node}`, `machines/${ns}/m1`]));
    expect(response.batchItemFailures).toEqual([]);
    expect(sqsMock.commandCalls(SendMessageCommand)).toHaveLength(0);
    const after = await admin.makeApiClient(CoreV1Api).readNode({ name: node });
    expect(after.spec?.taints?.map((t) => `${t.key}=${t.value}:${t.effect}`)).toEqual(['gpu=a100:NoSchedule']);
    expect(after.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
    const events = await admin.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=m1' });
    expect(events.items.map((e) => e.reason)).toContain('TaintsPropagated');
  });

  it('refuses the forwarder and the reconcile function anything outside their job', async () => {
    // Prepare
    const node = uniqueName('node');
    await createNode(admin, node);
    await createMachine(admin, ns, 'm-refused', {});
    const other = await createNamespace(admin, 'unrelated');
    await admin.makeApiClient(CoreV1Api).createNamespacedSecret({ namespace: other, body: { metadata: { name: 'db-password' }, stringData: { password: 'x' } } });
    // CAPI keeps these next to the kubeconfig Secret: only the kubeconfig may be read.
    for (const name of ['wc1-kubeconfig', 'wc1-ca', 'wc1-etcd', 'wc1-sa', 'wc1-proxy', 'wc1-bootstrap-token']) {
      await admin.makeApiClient(CoreV1Api).createNamespacedSecret({ namespace: ns, body: { metadata: { name }, stringData: { value: 'x' } } });
    }
    const fwdCore = forwarderKc.makeApiClient(CoreV1Api);
    const recCore = reconcileKc.makeApiClient(CoreV1Api);

    // Act
    const outcomes = {
      forwarderDeletesNode: await refused(() => fwdCore.deleteNode({ name: node })),
      forwarderPatchesNode: await refused(() => fwdCore.patchNode({ name: node, body: { metadata: { labels: { x: 'y' } } } }, MERGE_PATCH)),
      forwarderReadsUnrelatedSecret: await refused(() => fwdCore.readNamespacedSecret({ namespace: other, name: 'db-password' })),
      forwarderListsSecrets: await refused(() => fwdCore.listNamespacedSecret({ namespace: ns })),
      reconcileDeletesNode: await refused(() => recCore.deleteNode({ name: node })),
      reconcileReadsUnrelatedSecret: await refused(() => recCore.readNamespacedSecret({ namespace: other, name: 'db-password' })),
      reconcileWritesMachine: await refused(() =>
        reconcileKc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name: 'm-refused', body: { metadata: { labels: { x: 'y' } } } }, MERGE_PATCH),
      ),
      reconcileCreatesConfigMapElsewhere: await refused(() => recCore.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'x' } } })),
      // Scale from zero (docs/autoscaler.md): the reconcile function may patch MachineDeployments, MachineSets and
      // MachinePools (404: allowed, the object does not exist), nothing else about them; the forwarder only reads them.
      ...Object.fromEntries(
        await Promise.all(
          ['machinedeployments', 'machinesets', 'machinepools'].flatMap((plural) => {
            const api = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural, namespace: ns, name: 'absent' };
            return [
              refused(() => reconcileKc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...api, body: { metadata: { annotations: { x: 'y' } } } }, MERGE_PATCH)).then((c) => [`reconcilePatches-${plural}`, c] as const),
              refused(() => reconcileKc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject(api)).then((c) => [`reconcileDeletes-${plural}`, c] as const),
              refused(() => forwarderKc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...api, body: { metadata: { annotations: { x: 'y' } } } }, MERGE_PATCH)).then((c) => [`forwarderPatches-${plural}`, c] as const),
            ];
          }),
        ),
      ),
      reconcileReadsClusterKubeconfig: await refused(() => recCore.readNamespacedSecret({ namespace: ns, name: 'wc1-kubeconfig' })),
      forwarderReadsClusterKubeconfig: await refused(() => fwdCore.readNamespacedSecret({ namespace: ns, name: 'wc1-kubeconfig' })),
      reconcileListsSecrets: await refused(() => recCore.listNamespacedSecret({ namespace: ns })),
      // Staged NoExecute rollout (docs/noexecute-rollout.md): list Nodes and pods, evict through the Eviction API
      // (404: allowed, the pod does not exist); never delete a pod. The forwarder does none of it.
      reconcileListsNodes: await refused(() => recCore.listNode({ labelSelector: 'rollout.capi-taint-propagator.dev/in-progress=true' })),
      reconcileListsPods: await refused(() => recCore.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` })),
      reconcileEvictsPod: await refused(() => recCore.createNamespacedPodEviction({ namespace: ns, name: 'absent', body: { metadata: { namespace: ns, name: 'absent' } } })),
      reconcileDeletesPod: await refused(() => recCore.deleteNamespacedPod({ namespace: ns, name: 'absent' })),
      forwarderEvictsPod: await refused(() => fwdCore.createNamespacedPodEviction({ namespace: ns, name: 'absent', body: { metadata: { namespace: ns, name: 'absent' } } })),
      forwarderListsPods: await refused(() => fwdCore.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` })),
      ...Object.fromEntries(
        await Promise.all(
          ['ca', 'etcd', 'sa', 'proxy', 'bootstrap-token'].flatMap((kind) => [
            refused(() => fwdCore.readNamespacedSecret({ namespace: ns, name: `wc1-${kind}` })).then((code) => [`forwarderReads-wc1-${kind}`, code] as const),
            refused(() => recCore.readNamespacedSecret({ namespace: ns, name: `wc1-${kind}` })).then((code) => [`reconcileReads-wc1-${kind}`, code] as const),
          ]),
        ),
      ),
    };

    // Assess
    expect(outcomes).toEqual({
      forwarderDeletesNode: 403,
      forwarderPatchesNode: 403,
      forwarderReadsUnrelatedSecret: 403,
      forwarderListsSecrets: 403,
      reconcileDeletesNode: 403,
      reconcileReadsUnrelatedSecret: 403,
      reconcileWritesMachine: 403,
      reconcileCreatesConfigMapElsewhere: 403,
      ...Object.fromEntries(['machinedeployments', 'machinesets', 'machinepools'].flatMap((p) => [[`reconcilePatches-${p}`, 404], [`reconcileDeletes-${p}`, 403], [`forwarderPatches-${p}`, 403]])),
      reconcileReadsClusterKubeconfig: 200,
      forwarderReadsClusterKubeconfig: 200,
      reconcileListsSecrets: 403,
      reconcileListsNodes: 200,
      reconcileListsPods: 200,
      reconcileEvictsPod: 404,
      reconcileDeletesPod: 403,
      forwarderEvictsPod: 403,
      forwarderListsPods: 403,
      ...Object.fromEntries(['ca', 'etcd', 'sa', 'proxy', 'bootstrap-token'].flatMap((kind) => [[`forwarderReads-wc1-${kind}`, 403], [`reconcileReads-wc1-${kind}`, 403]])),
    });
  });
});
