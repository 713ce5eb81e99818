/**
 * The reconcile function against a real kube-apiserver + etcd with the CAPI CRDs: real reads,
 * real resourceVersion preconditions, real 409s, real Events.
 */
import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { readFileSync } from 'node:fs';
import { beforeAll, beforeEach, expect, it } from 'vitest';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { processBatch, type BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import { OWN_TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';
import type { ReconcileConfig } from '#shared/config/reconcile-config.ts';
import { MERGE_PATCH, adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, requireControlPlane, uniqueName } from '#test/support/control-plane.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, machineEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

const sqsMock = mockClient(SQSClient);
const context = { functionName: 'reconcile-node-taints', awsRequestId: 'it' } as unknown as Context;

function config(overrides: Partial<ReconcileConfig> = {}): ReconcileConfig {
  return {
    queueUrl: TEST_QUEUE_URL,
    deadLetterQueueUrl: TEST_DLQ_URL,
    dryRun: false,
    // A bare API server: no CAPI controller propagates spec.taints or removes its startup taint, the product does.
    specTaintsOwner: 'product',
    startupTaint: { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' },
    retryBaseSeconds: 1,
    retryMaxSeconds: 10,
    stateNamespace: 'default',
    firstEnabledAt: new Date('2000-01-01T00:00:00Z'),
    ...overrides,
  };
}

function deps(kc: KubeConfig, overrides: Partial<ReconcileConfig> = {}, clusterMode: 'capi' | 'self' = 'self'): BatchDeps {
  const workload = workloadKubeConfigs(kc);
  return composeReconcile({
    config: config(overrides),
    clusterMode,
    managementKubeConfig: kc,
    workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }),
    sqs: new SQSClient({ region: 'eu-west-1' }),
  });
}

async function readNode(kc: KubeConfig, name: string) {
  return kc.makeApiClient(CoreV1Api).readNode({ name });
}

async function eventsOn(kc: KubeConfig, namespace: string, machine: string) {
  const list = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${machine}` });
  return list.items.map((e) => ({ type: e.type, reason: e.reason, message: e.message ?? '' }));
}

describeWithControlPlane('reconcile-node-taints against a real API server', () => {
  let kc: KubeConfig;
  let ns: string;

  beforeAll(async () => {
    requireControlPlane();
    kc = adminKubeConfig();
  });

  beforeEach(async () => {
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({});
    ns = await createNamespace(kc, 'reconcile');
  });

  it('brings a Node to its Machine declaration in one write and records a Normal Event', async () => {
    // Prepare
    const node = uniqueName('node');
    await createNode(kc, node, { taints: [{ key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' }, { key: 'foreign', value: 'x', effect: 'NoExecute' }] });
    await createMachine(kc, ns, 'm1', {
      nodeName: node,
      specTaints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }, { key: 'boot', effect: 'PreferNoSchedule', propagation: 'OnInitialization' }],
      annotations: { 'taints.capi-taint-propagator.dev/class': 'pool=edge:NoSchedule' },
    });
    const rvBefore = (await readNode(kc, node)).metadata?.resourceVersion;

    // Act
    const response = await processBatch(sqsEvent(sqsRecord(machineEvent(ns, 'm1', { nodeName: node, cluster: { mode: 'self' } }))), context, deps(kc));

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    const after = await readNode(kc, node);
    expect(after.spec?.taints?.map((t) => `${t.key}=${t.value ?? ''}:${t.effect}`)).toEqual(['foreign=x:NoExecute', 'gpu=a100:NoSchedule', 'boot=:PreferNoSchedule', 'pool=edge:NoSchedule']);
    expect(after.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule,pool:NoSchedule');
    expect(Number(after.metadata?.resourceVersion)).toBeGreaterThan(Number(rvBefore));
    const events = await eventsOn(kc, ns, 'm1');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'Normal', reason: 'TaintsPropagated' });
  });

  it.each([
    { writes: 1, firstFailures: [] as string[] },
    { writes: 2, firstFailures: ['try-1'] },
  ])('gets a real 409 when another writer changes the Node between read and write ($writes times): re-reads once in the record, then the queue retries; the other change is kept', async ({ writes, firstFailures }) => {
    // Prepare
    const node = uniqueName('node');
    await createNode(kc, node);
    await createMachine(kc, ns, 'm1', { nodeName: node, specTaints: [{ key: 'gpu', effect: 'NoSchedule' }] });
    const batchDeps = deps(kc);
    const real = batchDeps.clusters;
    let interfered = 0;
    const racing: BatchDeps = {
      ...batchDeps,
      clusters: {
        async nodesOf(cluster: ClusterRef) {
          const store = await real.nodesOf(cluster);
          return {
            getNode: (name: string) => store.getNode(name),
            async patchNodeTaints(name, patch) {
              if (interfered < writes) {
                interfered++;
                // The foreign writer: adds its own taint and a label, with its own read-modify-write.
                const current = await readNode(kc, name);
                await kc.makeApiClient(CoreV1Api).patchNode(
                  { name, body: { metadata: { labels: { 'other-writer': String(interfered) } }, spec: { taints: [...(current.spec?.taints ?? []).filter((t) => t.key !== 'other'), { key: 'other', effect: 'NoSchedule' }] } } },
                  MERGE_PATCH,
                );
              }
              return store.patchNodeTaints(name, patch);
            },
            listNodes: (selector) => store.listNodes(selector),
          };
        },
        podsOf: (cluster) => real.podsOf(cluster),
      },
    };
    const event = machineEvent(ns, 'm1', { nodeName: node, cluster: { mode: 'self' } });

    // Act
    const first = await processBatch(sqsEvent(sqsRecord(event, { messageId: 'try-1' })), context, racing);
    const second = await processBatch(sqsEvent(sqsRecord(event, { messageId: 'try-1', receiveCount: 2 })), context, racing);

    // Assess
    expect(first.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(firstFailures);
    if (firstFailures.length > 0) expect(sqsMock.commandCalls(ChangeMessageVisibilityCommand)[0]?.args[0].input).toMatchObject({ ReceiptHandle: 'rh-try-1' });
    expect(second.batchItemFailures).toEqual([]);
    const after = await readNode(kc, node);
    expect(after.spec?.taints?.map((t) => `${t.key}:${t.effect}`)).toEqual(['other:NoSchedule', 'gpu:NoSchedule']);
    expect(after.metadata?.labels?.['other-writer']).toBe(String(writes));
  });

  it('does not touch a Node whose Machine declares invalid taints, and records a Warning Event', async () => {
    // Prepare
    const node = uniqueName('node');
    await createNode(kc, node, { taints: [{ key: 'gpu', value: 'old', effect: 'NoSchedule' }], annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' } });
    await createMachine(kc, ns, 'm1', { nodeName: node, annotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu=new:NoSchedule, node.kubernetes.io/not-yours:NoSchedule' } });
    const rvBefore = (await readNode(kc, node)).metadata?.resourceVersion;

    // Act
    const response = await processBatch(sqsEvent(sqsRecord(machineEvent(ns, 'm1', { nodeName: node, cluster: { mode: 'self' } }))), context, deps(kc));

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    const after = await readNode(kc, node);
    expect(after.metadata?.resourceVersion).toBe(rvBefore);
    expect(after.spec?.taints?.map((t) => `${t.key}=${t.value}`)).toEqual(['gpu=old']);
    const events = await eventsOn(kc, ns, 'm1');
    expect(events).toMatchObject([{ type: 'Warning', reason: 'InvalidTaintDeclaration' }]);
    expect(events[0]?.message).toContain('metadata.annotations[taints.capi-taint-propagator.dev/machine][1].key: Invalid value: "node.kubernetes.io/not-yours": taint key must not have the prefix node.kubernetes.io/');
  });

  it('in dry-run mode writes nothing', async () => {
    // Prepare
    const node = uniqueName('node');
    await createNode(kc, node);
    await createMachine(kc, ns, 'm1', { nodeName: node, specTaints: [{ key: 'gpu', effect: 'NoSchedule' }] });
    const rvBefore = (await readNode(kc, node)).metadata?.resourceVersion;

    // Act
    const response = await processBatch(sqsEvent(sqsRecord(machineEvent(ns, 'm1', { nodeName: node, cluster: { mode: 'self' } }))), context, deps(kc, { dryRun: true }));

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect((await readNode(kc, node)).metadata?.resourceVersion).toBe(rvBefore);
    expect(await eventsOn(kc, ns, 'm1')).toEqual([]);
  });

  it('adopts Nodes created before the first enablement without OnInitialization taints, and initializes newer ones', async () => {
    // Prepare: the first enablement is recorded in a ConfigMap of the state namespace on first use.
    const old = uniqueName('old');
    await createNode(kc, old);
    await new Promise((r) => setTimeout(r, 1100)); // creationTimestamp has one-second resolution
    const stateDeps = deps(kc, { firstEnabledAt: undefined, stateNamespace: ns });
    const enabledAt = await stateDeps.enablement.enabledAt();
    await new Promise((r) => setTimeout(r, 1100));
    const fresh = uniqueName('new');
    await createNode(kc, fresh);
    const taints = [{ key: 'gpu', effect: 'NoSchedule' as const }, { key: 'boot', effect: 'NoSchedule' as const, propagation: 'OnInitialization' as const }];
    await createMachine(kc, ns, 'm-old', { nodeName: old, specTaints: taints });
    await createMachine(kc, ns, 'm-new', { nodeName: fresh, specTaints: taints });

    // Act
    await processBatch(
      sqsEvent(
        sqsRecord(machineEvent(ns, 'm-old', { nodeName: old, cluster: { mode: 'self' } })),
        sqsRecord(machineEvent(ns, 'm-new', { nodeName: fresh, cluster: { mode: 'self' } })),
      ),
      context,
      stateDeps,
    );

    // Assess
    const cm = await kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace: ns, name: 'capi-taint-propagator-state' });
    expect(new Date(cm.data?.enabledAt ?? '').getTime()).toBe(Math.floor(enabledAt.getTime() / 1000) * 1000);
    expect((await readNode(kc, old)).spec?.taints?.map((t) => t.key)).toEqual(['gpu']);
    expect((await readNode(kc, fresh)).spec?.taints?.map((t) => t.key)).toEqual(['gpu', 'boot']);
  });

  it('reaches a workload cluster through its CAPI kubeconfig Secret', async () => {
    // Prepare: the "workload cluster" is this same API server, reached through a Secret as CAPI stores it.
    const node = uniqueName('node');
    await createNode(kc, node);
    await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
      namespace: ns,
      body: {
        metadata: { name: 'wc1-kubeconfig', labels: { 'cluster.x-k8s.io/cluster-name': 'wc1' } },
        type: 'cluster.x-k8s.io/secret',
        data: { value: Buffer.from(readFileSync(requireControlPlane().kubeconfigPath)).toString('base64') },
      },
    });
    await createMachine(kc, ns, 'm1', { nodeName: node, clusterName: 'wc1', specTaints: [{ key: 'gpu', effect: 'NoSchedule' }] });

    // Act
    const response = await processBatch(sqsEvent(sqsRecord(machineEvent(ns, 'm1', { nodeName: node }))), context, deps(kc, {}, 'capi'));

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect((await readNode(kc, node)).spec?.taints?.map((t) => t.key)).toEqual(['gpu']);
  });
});
