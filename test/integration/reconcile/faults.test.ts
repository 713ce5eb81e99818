/**
 * Faults around one reconcile, against the real API server: a Node deleted between the read and the
 * write (a real 404 on the PATCH), and an API server that stops answering (a fault-injecting proxy that
 * holds every connection open and silent). Neither may dead-letter a record or time the batch out.
 */
import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { afterEach, beforeAll, beforeEach, expect, it, vi } from 'vitest';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { processBatch, type BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import type { ReconcileConfig } from '#shared/config/reconcile-config.ts';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { metrics } from '#shared/observability/metrics.ts';
import { adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, requireControlPlane, statusOf, uniqueName } from '#test/support/control-plane.ts';
import { FaultProxy } from '#test/support/fault-proxy.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, machineEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

const sqsMock = mockClient(SQSClient);
const FOREIGN = { key: 'foreign.example.com/keep', value: 'x', effect: 'NoExecute' };

function contextWith(remainingMs: number): Context {
  const end = Date.now() + remainingMs;
  return { functionName: 'reconcile-node-taints', awsRequestId: 'faults', getRemainingTimeInMillis: () => Math.max(0, end - Date.now()) } as unknown as Context;
}

function deps(kc: KubeConfig, overrides: Partial<ReconcileConfig> = {}): BatchDeps {
  const workload = workloadKubeConfigs(kc);
  return composeReconcile({
    config: {
      queueUrl: TEST_QUEUE_URL,
      deadLetterQueueUrl: TEST_DLQ_URL,
      dryRun: false,
      startupTaint: undefined,
      retryBaseSeconds: 1,
      retryMaxSeconds: 30,
      stateNamespace: 'default',
      firstEnabledAt: new Date('2000-01-01T00:00:00Z'),
      maxReceiveCount: 5,
      specTaintsOwner: 'product',
      ...overrides,
    },
    clusterMode: 'self',
    managementKubeConfig: kc,
    workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }),
    sqs: new SQSClient({ region: 'eu-west-1' }),
  });
}

/** Outcomes counted during `fn` (the `Outcome` dimension of each single metric). */
async function outcomesOf(fn: () => Promise<unknown>): Promise<string[]> {
  const outcomes: string[] = [];
  const single = vi.spyOn(metrics, 'singleMetric').mockImplementation(
    () => ({ addDimension: (_n: string, v: string) => void outcomes.push(v), addMetric: () => undefined }) as unknown as ReturnType<typeof metrics.singleMetric>,
  );
  try {
    await fn();
  } finally {
    single.mockRestore();
  }
  return outcomes;
}

describeWithControlPlane('reconcile-node-taints under faults of the API server', () => {
  let kc: KubeConfig;
  let ns: string;
  let proxy: FaultProxy | undefined;

  beforeAll(() => {
    kc = adminKubeConfig();
  });

  beforeEach(async () => {
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({ MessageId: 'reissued' });
    ns = await createNamespace(kc, 'faults');
  });

  afterEach(async () => {
    await proxy?.close();
    proxy = undefined;
  });

  it('reports node-gone, not a dead letter, when the Node is deleted between the read and the write (a real 404 on the PATCH)', async () => {
    // Prepare
    const node = uniqueName('node');
    await createNode(kc, node, { taints: [FOREIGN] });
    await createMachine(kc, ns, 'm1', { nodeName: node, specTaints: [{ key: 'gpu', effect: 'NoSchedule' }] });
    const real = deps(kc);
    const core = kc.makeApiClient(CoreV1Api);
    let deleted = false;
    // The real store, with the Node deleted by someone else right after our read.
    const racing: BatchDeps = {
      ...real,
      clusters: {
        nodesOf: async (cluster) => {
          const store = await real.clusters.nodesOf(cluster);
          return {
            getNode: async (name) => {
              const read = await store.getNode(name);
              await core.deleteNode({ name });
              deleted = true;
              return read;
            },
            patchNodeTaints: (name, patch) => store.patchNodeTaints(name, patch),
            listNodes: (selector) => store.listNodes(selector),
          };
        },
        podsOf: (cluster) => real.clusters.podsOf(cluster),
      },
    };
    const record = sqsRecord(machineEvent(ns, 'm1', { nodeName: node }), { messageId: 'r1' });

    // Act
    let response: Awaited<ReturnType<typeof processBatch>> | undefined;
    const outcomes = await outcomesOf(async () => {
      response = await processBatch(sqsEvent(record), contextWith(30_000), racing);
    });

    // Assess
    expect(deleted).toBe(true);
    const gone = await core.readNode({ name: node }).then(() => 200, (e: unknown) => statusOf(e));
    expect(gone).toBe(404);
    expect(outcomes).toEqual(['node-gone']);
    expect(response?.batchItemFailures).toEqual([]);
    expect(sqsMock.commandCalls(SendMessageCommand)).toEqual([]);
  });

  it('turns API calls that hang into transient failures of their records within the invocation, then converges once the API server answers again', async () => {
    // Prepare: three Machines whose Nodes are reached through a proxy that will stop answering.
    const { server } = requireControlPlane();
    proxy = await FaultProxy.start(server);
    const viaProxy = proxy.kubeConfig(kc);
    const nodes: string[] = [];
    for (const m of ['m1', 'm2', 'm3']) {
      const node = uniqueName('node');
      nodes.push(node);
      await createNode(kc, node, { taints: [FOREIGN] });
      await createMachine(kc, ns, m, { nodeName: node, specTaints: [{ key: 'gpu', value: m, effect: 'NoSchedule' }] });
    }
    const batch = sqsEvent(...['m1', 'm2', 'm3'].map((m, i) => sqsRecord(machineEvent(ns, m, { nodeName: nodes[i] }), { messageId: m })));
    const hung = deps(viaProxy, { apiTimeoutSeconds: 2 });
    proxy.hang();

    // Act: a 30 s invocation; the 2 s call timeout and the remaining time bound every call.
    const started = Date.now();
    const failed = await processBatch(batch, contextWith(30_000), hung);
    const failedAfterMs = Date.now() - started;
    proxy.restore();
    const healed = await processBatch(batch, contextWith(30_000), hung);

    // Assess: each record failed as transient (its own group, so all three were attempted), well before the invocation's end.
    expect(failed.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['m1', 'm2', 'm3']);
    expect(failedAfterMs).toBeLessThan(3 * 2_000 + 2_000);
    const backoffs = sqsMock.commandCalls(ChangeMessageVisibilityCommand).map((c) => c.args[0].input.ReceiptHandle).sort();
    expect(backoffs).toEqual(['rh-m1', 'rh-m2', 'rh-m3']);
    expect(sqsMock.commandCalls(SendMessageCommand)).toEqual([]);
    expect(healed.batchItemFailures).toEqual([]);
    const core = kc.makeApiClient(CoreV1Api);
    for (const [i, node] of nodes.entries()) {
      const n = await core.readNode({ name: node });
      expect((n.spec?.taints ?? []).map((t) => `${t.key}=${t.value ?? ''}:${t.effect}`).sort()).toEqual([`foreign.example.com/keep=x:NoExecute`, `gpu=m${i + 1}:NoSchedule`]);
      expect(n.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
    }
  });

  it('stops calling once the invocation has no time left: the remaining records fail fast as transient, the batch ends in time', async () => {
    // Prepare
    const { server } = requireControlPlane();
    proxy = await FaultProxy.start(server);
    const node = uniqueName('node');
    await createNode(kc, node, { taints: [FOREIGN] });
    await createMachine(kc, ns, 'm1', { nodeName: node, specTaints: [{ key: 'gpu', effect: 'NoSchedule' }] });
    const records = Array.from({ length: 6 }, (_, i) => sqsRecord(machineEvent(ns, 'm1', { nodeName: node }), { messageId: `r${i}` }));
    const hung = deps(proxy.kubeConfig(kc), { apiTimeoutSeconds: 10 });
    proxy.hang();

    // Act: 3 s past the settle reserve leaves 3 s for six records that would each wait 10 s.
    const started = Date.now();
    const response = await processBatch(sqsEvent(...records), contextWith(6_000), hung);
    const tookMs = Date.now() - started;

    // Assess: the head failed at the deadline, the rest of its group was skipped; nothing outlived the invocation.
    expect(tookMs).toBeLessThan(6_000);
    expect(response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r5']);
    expect(sqsMock.commandCalls(SendMessageCommand)).toEqual([]);
  });
});
