/**
 * The NoExecutePreview Event of the reconcile (issue 51, docs/noexecute-preview.md) against Kubernetes' own
 * taint-eviction controller (kube-controller-manager, `startControlPlane({ controllerManager: true })`): the counts the
 * Event gives for an applied NoExecute taint are what the controller then does, and a `@Preview` declaration changes
 * no Node and evicts nothing. No kubelet: pods are bound to their Node directly (`spec.nodeName`) with
 * `terminationGracePeriodSeconds: 0`. This file starts its own control plane (the shared one deletes no pod).
 */
import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { CoreV1Api, type KubeConfig, type V1Pod, type V1Toleration } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findBinaries } from '#local/control-plane/assets.ts';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { processBatch } from '#functions/reconcile-node-taints/process-batch.ts';
import { NOEXECUTE_PREVIEW } from '#functions/reconcile-node-taints/noexecute-preview.ts';
import { readStatusViews } from '#local/cluster-status.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { controlPlane, createMachine, createNamespace, createNode, kubeConfigFromFile, MERGE_PATCH, livePod, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, machineEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

// As in noexecute-eviction.test.ts: skipped on a developer machine whose binary cache predates kube-controller-manager;
// CI builds it, so there a missing binary fails the start.
const found = findBinaries();
const runnable = controlPlane().available && ((found.available && found.value.kubeControllerManager !== undefined) || process.env['CI'] === 'true');

const sqsMock = mockClient(SQSClient);
const context = { functionName: 'reconcile-node-taints', awsRequestId: 'it' } as unknown as Context;
const MACHINE_ANNOTATION = 'taints.capi-taint-propagator.dev/machine';
const KEY = 'example.com/maintenance';

function podBody(name: string, nodeName: string, tolerations: V1Toleration[]): V1Pod {
  return { metadata: { name }, spec: { nodeName, terminationGracePeriodSeconds: 0, tolerations, containers: [{ name: 'c', image: 'registry.invalid/pause:never-pulled' }] } };
}

describe.skipIf(!runnable)('NoExecutePreview Event next to the real taint-eviction controller', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let namespace: string;
  let batchDeps: ReturnType<typeof composeReconcile>;

  beforeAll(async () => {
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({});
    cp = await startControlPlane({ build: false, controllerManager: true, log: () => undefined });
    kc = kubeConfigFromFile(cp.kubeconfigPath);
    core = kc.makeApiClient(CoreV1Api);
    namespace = await createNamespace(kc, 'nepreview');
    const workload = workloadKubeConfigs(kc);
    batchDeps = composeReconcile({
      config: {
        queueUrl: TEST_QUEUE_URL,
        deadLetterQueueUrl: TEST_DLQ_URL,
        dryRun: false,
        specTaintsOwner: 'product',
        startupTaint: undefined,
        retryBaseSeconds: 1,
        retryMaxSeconds: 10,
        stateNamespace: 'default',
        firstEnabledAt: new Date('2000-01-01T00:00:00Z'),
      },
      clusterMode: 'self',
      managementKubeConfig: kc,
      workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }),
      sqs: new SQSClient({ region: 'eu-west-1' }),
    });
  });
  afterAll(async () => {
    await cp?.stop();
  });

  const live = (name: string): Promise<V1Pod | undefined> => livePod(core, namespace, name);
  const previewEvents = async (machine: string): Promise<{ type?: string; message: string }[]> =>
    (await core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${machine}` })).items
      .filter((e) => e.reason === NOEXECUTE_PREVIEW)
      .map((e) => ({ type: e.type, message: e.message ?? '' }));
  /** What `npm run status` says of one Machine's Node (its NoExecute preview and state). */
  const status = async (machine: string) => (await readStatusViews({ kubeConfig: kc, mode: 'self', machineNamespace: namespace, machineName: machine, specTaintsOwner: 'product' }))[0]?.status;
  const reconcile = (machine: string, node: string) => processBatch(sqsEvent(sqsRecord(machineEvent(namespace, machine, { nodeName: node, cluster: { mode: 'self' } }))), context, batchDeps);

  it('says before the write which pods go now, later and stay, and the controller then does exactly that', async () => {
    // Prepare
    const node = uniqueName('apply');
    await createNode(kc, node, { annotations: { [OWN_TRACKING_ANNOTATION]: '' } });
    const pods: Record<string, V1Toleration[]> = {
      plain: [],
      'for-1s': [{ key: KEY, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 1 }],
      'for-1h': [{ key: KEY, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 3600 }],
      wildcard: [{ operator: 'Exists' }],
    };
    for (const [name, tolerations] of Object.entries(pods)) await core.createNamespacedPod({ namespace, body: podBody(`${node}-${name}`, node, tolerations) });
    await createMachine(kc, namespace, 'applies', { nodeName: node, annotations: { [MACHINE_ANNOTATION]: `${KEY}=yes:NoExecute` } });
    const shown = await status('applies');
    expect(shown?.state).toBe('out-of-sync');
    expect(shown?.noExecutePreview?.counts).toEqual({ now: 1, later: 2, laterSeconds: [1, 3600], kept: 1 });

    // Act
    const response = await reconcile('applies', node);

    // Assess: the Event, then the controller. The 1 s pod's deletion comes after the controller handled the Node
    // update for every pod of the Node, so the pods still there then are kept, not merely not yet reached.
    expect(response.batchItemFailures).toEqual([]);
    expect(await previewEvents('applies')).toEqual([{ type: 'Normal', message: `Node ${node}: ${KEY}=yes:NoExecute would evict 1 pod now, 2 after 1-3600 s, keeps 1` }]);
    expect((await core.readNode({ name: node })).spec?.taints?.map((t) => `${t.key}=${t.value}:${t.effect}`)).toEqual([`${KEY}=yes:NoExecute`]);
    await waitFor(async () => (await live(`${node}-plain`)) === undefined, { timeoutMs: 30_000, description: 'the untolerating pod to be evicted' });
    await waitFor(async () => (await live(`${node}-for-1s`)) === undefined, { timeoutMs: 30_000, description: 'the tolerationSeconds: 1 pod to be evicted' });
    const kept = await Promise.all([`${node}-for-1h`, `${node}-wildcard`].map(live));
    expect(kept.map((p) => p?.metadata?.name)).toEqual([`${node}-for-1h`, `${node}-wildcard`]);
  });

  it('leaves the Node as it is for @Preview, evicts nothing, and records the preview once', async () => {
    // Prepare
    const node = uniqueName('preview');
    await createNode(kc, node, { annotations: { [OWN_TRACKING_ANNOTATION]: '' } });
    await core.createNamespacedPod({ namespace, body: podBody(`${node}-plain`, node, []) });
    await core.createNamespacedPod({ namespace, body: podBody(`${node}-wildcard`, node, [{ operator: 'Exists' }]) });
    await createMachine(kc, namespace, 'previews', { nodeName: node, annotations: { [MACHINE_ANNOTATION]: `${KEY}=yes:NoExecute@Preview` } });
    const before = await core.readNode({ name: node });
    const shown = await status('previews');
    expect(shown?.state).toBe('in-sync');
    expect(shown?.noExecutePreview).toMatchObject({ taints: [{ taint: { key: KEY, value: 'yes', effect: 'NoExecute' }, previewOnly: true }], counts: { now: 1, later: 0, laterSeconds: [], kept: 1 } });

    // Act: two reconciles of the same declaration
    const first = await reconcile('previews', node);
    const second = await reconcile('previews', node);

    // Assess
    expect([...first.batchItemFailures, ...second.batchItemFailures]).toEqual([]);
    expect(await previewEvents('previews')).toEqual([{ type: 'Normal', message: `Node ${node}: ${KEY}=yes:NoExecute@Preview (preview only, not applied) would evict 1 pod now, keeps 1` }]);
    const after = await core.readNode({ name: node });
    expect(after.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    expect(after.spec?.taints ?? []).toEqual([]);
    // The later marker: a Node tainted by hand afterwards loses its untolerating pod, so the controller is running and
    // has handled what came before; the previewed Node's untolerating pod is still there.
    const marker = uniqueName('marker');
    await createNode(kc, marker);
    await core.createNamespacedPod({ namespace, body: podBody(`${marker}-plain`, marker, []) });
    await core.patchNode({ name: marker, body: { spec: { taints: [{ key: KEY, value: 'yes', effect: 'NoExecute' }] } } }, MERGE_PATCH);
    await waitFor(async () => (await live(`${marker}-plain`)) === undefined, { timeoutMs: 30_000, description: 'the marker Node\'s pod to be evicted' });
    expect((await live(`${node}-plain`))?.metadata?.name).toBe(`${node}-plain`);
  });
});
