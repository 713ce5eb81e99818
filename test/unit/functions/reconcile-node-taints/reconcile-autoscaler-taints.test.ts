import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { processBatch, type BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import { reconcileNodeTaints } from '#functions/reconcile-node-taints/reconcile-node-taints.ts';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { SqsRecordQueue } from '#shared/adapters/sqs/record-queue.ts';
import {
  AUTOSCALER_MAX_SIZE_ANNOTATION,
  AUTOSCALER_MIN_SIZE_ANNOTATION,
  AUTOSCALER_OWNED_ANNOTATION,
  AUTOSCALER_TAINTS_ANNOTATION,
  type ScalableKind,
  type ScalableResourceSnapshot,
} from '#shared/domain/autoscaler.ts';
import { toScalableFacts, toScalableResourceEvent } from '#shared/domain/watch-event.ts';
import { PatchConflictError } from '#shared/errors.ts';
import { logger } from '#shared/observability/logger.ts';
import { metrics } from '#shared/observability/metrics.ts';
import type { ScalableResourceStore } from '#shared/ports/scalable-resource-store.ts';
import { MemoryClusterConnections, MemoryEventRecorder, MemoryMachineStore } from '#test/support/memory-cluster.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

const sqsMock = mockClient(SQSClient);
const context = { functionName: 'reconcile-node-taints', awsRequestId: 'req-1', getRemainingTimeInMillis: () => 30_000 } as unknown as Context;
const SIZE = { [AUTOSCALER_MIN_SIZE_ANNOTATION]: '0', [AUTOSCALER_MAX_SIZE_ANNOTATION]: '3' };

/** An in-memory ScalableResourceStore with the API server's resourceVersion precondition. */
class MemoryScalables implements ScalableResourceStore {
  readonly objects = new Map<string, ScalableResourceSnapshot>();
  patches = 0;
  /** Runs before the next patch is applied (another writer). */
  beforePatch: (() => void) | undefined;
  put(r: ScalableResourceSnapshot): void {
    this.objects.set(`${r.kind}/${r.namespace}/${r.name}`, r);
  }
  async get(kind: ScalableKind, namespace: string, name: string): Promise<ScalableResourceSnapshot | undefined> {
    return this.objects.get(`${kind}/${namespace}/${name}`);
  }
  async patchAnnotations(r: ScalableResourceSnapshot, a: Readonly<Record<string, string | null>>): Promise<string> {
    this.beforePatch?.();
    this.beforePatch = undefined;
    const key = `${r.kind}/${r.namespace}/${r.name}`;
    const live = this.objects.get(key);
    if (!live || live.resourceVersion !== r.resourceVersion) throw new PatchConflictError({ nodeName: key, object: key, resourceVersion: r.resourceVersion });
    const annotations: Record<string, string> = { ...live.annotations };
    for (const [k, v] of Object.entries(a)) if (v === null) delete annotations[k]; else annotations[k] = v;
    const resourceVersion = String(Number(live.resourceVersion) + 1);
    this.objects.set(key, { ...live, annotations, resourceVersion });
    this.patches++;
    return resourceVersion;
  }
}

function md(over: Partial<ScalableResourceSnapshot> = {}): ScalableResourceSnapshot {
  return {
    kind: 'MachineDeployment', apiVersion: 'cluster.x-k8s.io/v1beta2', namespace: 'ns', name: 'gpu', uid: 'u1', resourceVersion: '5',
    annotations: SIZE, templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu=a100:NoSchedule' }, templateLabels: {},
    specTaints: undefined, ownedByMachineDeployment: false, deleting: false, ...over,
  };
}

function setup(scalables?: ScalableResourceStore) {
  const recorder = new MemoryEventRecorder();
  const deps: BatchDeps = {
    machines: new MemoryMachineStore(),
    clusters: new MemoryClusterConnections(),
    recorder,
    enablement: { enabledAt: async () => new Date('2020-01-01T00:00:00Z') },
    clock: { now: () => new Date('2026-11-22T10:00:01Z') },
    settings: { clusterMode: 'self', dryRun: false, startupTaint: undefined },
    ...(scalables ? { scalables } : {}),
    queue: new SqsRecordQueue(new SQSClient({ region: 'eu-west-1' }), TEST_QUEUE_URL, TEST_DLQ_URL),
    parse: fromCloudEventBody,
    logger,
    metrics,
    retry: { baseSeconds: 4, maxSeconds: 300 },
    random: () => 0,
  };
  return { deps, recorder };
}

const event = () => {
  const facts = toScalableFacts('MachineDeployment', { metadata: { name: 'gpu', namespace: 'ns', uid: 'u1', resourceVersion: '5' } });
  if (!facts) throw new Error('facts');
  return toScalableResourceEvent(facts, 'modified', { mode: 'self' }, new Date('2026-11-22T10:00:00Z'));
};

describe('Scale from zero through processBatch()', () => {
  beforeEach(() => {
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({ MessageId: 'dlq-1' });
  });

  it('writes the annotation and its record once; the same event again writes nothing', async () => {
    const store = new MemoryScalables();
    store.put(md());
    const { deps } = setup(store);
    expect((await processBatch(sqsEvent(sqsRecord(event())), context, deps)).batchItemFailures).toEqual([]);
    expect(store.objects.get('MachineDeployment/ns/gpu')?.annotations).toEqual({ ...SIZE, [AUTOSCALER_TAINTS_ANNOTATION]: 'gpu=a100:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'gpu=a100:NoSchedule' });
    await processBatch(sqsEvent(sqsRecord(event())), context, deps);
    expect(store.patches).toBe(1);
  });

  it('a conflict goes back to the queue (no write lost: the retry reads again and writes once)', async () => {
    const store = new MemoryScalables();
    store.put(md());
    store.beforePatch = () => store.put(md({ resourceVersion: '6', templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu=h100:NoSchedule' } }));
    const { deps } = setup(store);
    const first = await processBatch(sqsEvent(sqsRecord(event(), { messageId: 'm1' })), context, deps);
    expect(first.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(store.patches).toBe(0);
    await processBatch(sqsEvent(sqsRecord(event(), { messageId: 'm1', receiveCount: 2 })), context, deps);
    expect(store.objects.get('MachineDeployment/ns/gpu')?.annotations[AUTOSCALER_TAINTS_ANNOTATION]).toBe('gpu=h100:NoSchedule');
    expect(store.patches).toBe(1);
  });

  it('leaves a foreign value alone with a Warning Event; a gone resource, dry run and a missing store write nothing', async () => {
    const store = new MemoryScalables();
    store.put(md({ annotations: { ...SIZE, [AUTOSCALER_TAINTS_ANNOTATION]: 'x:NoSchedule' } }));
    const { deps, recorder } = setup(store);
    await processBatch(sqsEvent(sqsRecord(event())), context, deps);
    expect(store.patches).toBe(0);
    expect(recorder.events.map((e) => [e.object.kind, e.type, e.reason])).toEqual([['MachineDeployment', 'Warning', 'AutoscalerTaintsNotManaged']]);

    store.objects.clear();
    const gone = await reconcileNodeTaints(deps, event()).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(Error); // reconcileNodeTaints takes Node events only
    const { reconcileAutoscalerTaints } = await import('#functions/reconcile-node-taints/reconcile-autoscaler-taints.ts');
    const e = event() as Parameters<typeof reconcileAutoscalerTaints>[1];
    expect((await reconcileAutoscalerTaints(deps, e)).outcome).toBe('resource-gone');
    store.put(md());
    expect((await reconcileAutoscalerTaints({ ...deps, settings: { ...deps.settings, dryRun: true } }, e)).outcome).toBe('dry-run');
    expect(store.patches).toBe(0);
    await expect(reconcileAutoscalerTaints(setup().deps, e)).rejects.toThrow(/without a scalable resource store/);
  });
});
