import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it } from 'vitest';
import { processBatch, type BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import { reconcileAutoscalerTaints } from '#functions/reconcile-node-taints/reconcile-autoscaler-taints.ts';
import { reconcileNodeTaints } from '#functions/reconcile-node-taints/reconcile-node-taints.ts';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { SqsRecordQueue } from '#shared/adapters/sqs/record-queue.ts';
import {
  AUTOSCALER_MAX_SIZE_ANNOTATION,
  AUTOSCALER_MIN_SIZE_ANNOTATION,
  AUTOSCALER_OWNED_ANNOTATION,
  AUTOSCALER_TAINTS_ANNOTATION,
  type ScalableKind,
} from '#shared/domain/autoscaler.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { PAUSED_ANNOTATION, type ClusterView } from '#shared/domain/pause.ts';
import { toScalableFacts, type ScalableFacts, type ScalableResourceFacts } from '#shared/model/views.ts';
import { toScalableResourceEvent } from '#shared/contract/events.ts';
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
  readonly objects = new Map<string, ScalableResourceFacts>();
  patches = 0;
  /** Runs once, before the next patch is applied (another writer). */
  beforePatch: (() => void) | undefined;
  put(r: ScalableResourceFacts): void {
    this.objects.set(`${r.kind}/${r.namespace}/${r.name}`, r);
  }
  async get(kind: ScalableKind, namespace: string, name: string): Promise<ScalableResourceFacts | undefined> {
    return this.objects.get(`${kind}/${namespace}/${name}`);
  }
  async patchAnnotations(r: ScalableResourceFacts, a: Readonly<Record<string, string | null>>): Promise<string> {
    const hook = this.beforePatch;
    this.beforePatch = undefined;
    hook?.(); // may arm the next one
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

function md(over: Partial<ScalableFacts> = {}): ScalableFacts {
  return {
    kind: 'MachineDeployment', apiVersion: 'cluster.x-k8s.io/v1beta2', namespace: 'ns', name: 'gpu', uid: 'u1', resourceVersion: '5', labels: {},
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

  it('retries a first conflict at once from a fresh read (no queue backoff in the creation window)', async () => {
    const store = new MemoryScalables();
    store.put(md());
    store.beforePatch = () => store.put(md({ resourceVersion: '6', templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu=h100:NoSchedule' } }));
    const { deps } = setup(store);
    const result = await processBatch(sqsEvent(sqsRecord(event(), { messageId: 'm1' })), context, deps);
    expect(result.batchItemFailures).toEqual([]);
    expect(store.objects.get('MachineDeployment/ns/gpu')?.annotations[AUTOSCALER_TAINTS_ANNOTATION]).toBe('gpu=h100:NoSchedule'); // planned from the fresh read
    expect(store.patches).toBe(1);
  });

  it('a second conflict in a row goes back to the queue (no write lost: the retry reads again and writes once)', async () => {
    const store = new MemoryScalables();
    store.put(md());
    const writer = (rv: string, value: string) => () => store.put(md({ resourceVersion: rv, templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': value } }));
    store.beforePatch = () => {
      writer('6', 'gpu=h100:NoSchedule')();
      store.beforePatch = writer('7', 'gpu=b200:NoSchedule');
    };
    const { deps } = setup(store);
    const first = await processBatch(sqsEvent(sqsRecord(event(), { messageId: 'm1' })), context, deps);
    expect(first.batchItemFailures).toEqual([{ itemIdentifier: 'm1' }]);
    expect(store.patches).toBe(0);
    await processBatch(sqsEvent(sqsRecord(event(), { messageId: 'm1', receiveCount: 2 })), context, deps);
    expect(store.objects.get('MachineDeployment/ns/gpu')?.annotations[AUTOSCALER_TAINTS_ANNOTATION]).toBe('gpu=b200:NoSchedule');
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
    const e = event() as Parameters<typeof reconcileAutoscalerTaints>[1];
    expect((await reconcileAutoscalerTaints(deps, e)).outcome).toBe('resource-gone');
    store.put(md());
    expect((await reconcileAutoscalerTaints({ ...deps, settings: { ...deps.settings, dryRun: true } }, e)).outcome).toBe('dry-run');
    expect(store.patches).toBe(0);
    await expect(reconcileAutoscalerTaints(setup().deps, e)).rejects.toThrow(/without a scalable resource store/);
  });
});

const GPU = { 'taints.capi-taint-propagator.dev/machine': 'gpu=a100:NoSchedule' };
const WRITTEN = { ...SIZE, [AUTOSCALER_TAINTS_ANNOTATION]: 'gpu=a100:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'gpu=a100:NoSchedule' };
const SPEC_TAINTS = [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule', propagation: 'Always' }];

describe('Function: reconcileAutoscalerTaints()', () => {
  const cases: ReadonlyArray<{
    name: string;
    resource: ScalableResourceFacts;
    cluster?: ClusterView;
    want: { outcome: ReconcileOutcome; annotation: string | undefined; events: string[]; clusterReads: number; reason?: RegExp };
  }> = [
    // Writes
    { name: 'writes an annotation-declared taint', resource: md({ clusterName: 'c1' }), want: { outcome: ReconcileOutcome.autoscalerPatched, annotation: 'gpu=a100:NoSchedule', events: [], clusterReads: 1 } },
    {
      name: 'writes spec.template.spec.taints too (autoscalers before 1.36.0 read only the annotation)',
      resource: md({ templateAnnotations: {}, specTaints: SPEC_TAINTS }),
      want: { outcome: ReconcileOutcome.autoscalerPatched, annotation: 'nvidia.com/gpu=present:NoSchedule', events: [], clusterReads: 0 },
    },
    {
      name: 'writes an unpaused Cluster\'s group',
      resource: md({ clusterName: 'c1' }),
      cluster: { namespace: 'ns', name: 'c1', paused: false },
      want: { outcome: ReconcileOutcome.autoscalerPatched, annotation: 'gpu=a100:NoSchedule', events: [], clusterReads: 1 },
    },
    // Pause: no write, no Event
    {
      name: 'leaves a group with the paused annotation alone (no Cluster read needed)',
      resource: md({ clusterName: 'c1', annotations: { ...SIZE, [PAUSED_ANNOTATION]: '' } }),
      want: { outcome: ReconcileOutcome.paused, annotation: undefined, events: [], clusterReads: 0, reason: /cluster.x-k8s.io\/paused annotation/ },
    },
    {
      name: 'leaves a group of a paused Cluster alone',
      resource: md({ clusterName: 'c1' }),
      cluster: { namespace: 'ns', name: 'c1', paused: true },
      want: { outcome: ReconcileOutcome.paused, annotation: undefined, events: [], clusterReads: 1, reason: /Cluster ns\/c1 has spec.paused/ },
    },
    {
      name: 'records no Warning for a foreign value while paused',
      resource: md({ clusterName: 'c1', annotations: { ...SIZE, [AUTOSCALER_TAINTS_ANNOTATION]: 'x:NoSchedule' } }),
      cluster: { namespace: 'ns', name: 'c1', paused: true },
      want: { outcome: ReconcileOutcome.paused, annotation: 'x:NoSchedule', events: [], clusterReads: 1 },
    },
    {
      name: 'does not remove its own value while paused (opted out)',
      resource: md({ clusterName: 'c1', annotations: { [AUTOSCALER_TAINTS_ANNOTATION]: 'gpu=a100:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'gpu=a100:NoSchedule', [PAUSED_ANNOTATION]: 'true' } }),
      want: { outcome: ReconcileOutcome.paused, annotation: 'gpu=a100:NoSchedule', events: [], clusterReads: 0 },
    },
    {
      name: 'in sync: unchanged without reading the Cluster, paused or not',
      resource: md({ clusterName: 'c1', annotations: WRITTEN }),
      cluster: { namespace: 'ns', name: 'c1', paused: true },
      want: { outcome: ReconcileOutcome.unchanged, annotation: 'gpu=a100:NoSchedule', events: [], clusterReads: 0, reason: /in-sync/ },
    },
    // Events
    {
      name: 'a foreign value: unchanged with a Warning',
      resource: md({ annotations: { ...SIZE, [AUTOSCALER_TAINTS_ANNOTATION]: 'x:NoSchedule' } }),
      want: { outcome: ReconcileOutcome.unchanged, annotation: 'x:NoSchedule', events: ['AutoscalerTaintsNotManaged'], clusterReads: 0 },
    },
    {
      name: 'an OnInitialization taint the autoscaler counts: written, with a Warning',
      resource: md({ templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu=a100:NoSchedule, warming:NoSchedule@OnInitialization' } }),
      want: { outcome: ReconcileOutcome.autoscalerPatched, annotation: 'gpu=a100:NoSchedule,warming:NoSchedule', events: ['AutoscalerCountsStartupTaints'], clusterReads: 0 },
    },
    {
      name: 'an OnInitialization taint with the autoscaler\'s startup prefix: written, no Warning',
      resource: md({ templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'startup-taint.cluster-autoscaler.kubernetes.io/cni:NoSchedule@OnInitialization' } }),
      want: { outcome: ReconcileOutcome.autoscalerPatched, annotation: 'startup-taint.cluster-autoscaler.kubernetes.io/cni:NoSchedule', events: [], clusterReads: 0 },
    },
    {
      name: 'the same value again (in sync): no write, no second Warning',
      resource: md({ annotations: { ...SIZE, [AUTOSCALER_TAINTS_ANNOTATION]: 'warming:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'warming:NoSchedule' }, templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'warming:NoSchedule@OnInitialization' } }),
      want: { outcome: ReconcileOutcome.unchanged, annotation: 'warming:NoSchedule', events: [], clusterReads: 0 },
    },
  ];

  it.each(cases)('$name', async ({ resource, cluster, want }) => {
    // Prepare
    const store = new MemoryScalables();
    store.put(resource);
    const { deps, recorder } = setup(store);
    const machines = deps.machines as MemoryMachineStore;
    if (cluster) machines.putCluster(cluster);
    const readsBefore = machines.reads;

    // Act
    const result = await reconcileAutoscalerTaints(deps, event() as Parameters<typeof reconcileAutoscalerTaints>[1]);

    // Assess
    expect(result.outcome).toBe(want.outcome);
    if (want.reason) expect(result.reason).toMatch(want.reason);
    const live = store.objects.get('MachineDeployment/ns/gpu');
    expect(live?.annotations[AUTOSCALER_TAINTS_ANNOTATION]).toBe(want.annotation);
    expect(store.patches).toBe(want.outcome === ReconcileOutcome.autoscalerPatched ? 1 : 0);
    if (want.outcome === ReconcileOutcome.autoscalerPatched) expect(live?.annotations[AUTOSCALER_OWNED_ANNOTATION]).toBe(want.annotation);
    expect(recorder.events.map((e) => e.reason)).toEqual(want.events);
    expect(machines.reads - readsBefore).toBe(want.clusterReads);
  });

  it('names the counted taints and the autoscaler\'s remedies in the Warning', async () => {
    // Prepare
    const store = new MemoryScalables();
    store.put(md({ templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'example.com/warming=1:NoSchedule@OnInitialization' } }));
    const { deps, recorder } = setup(store);

    // Act
    await reconcileAutoscalerTaints(deps, event() as Parameters<typeof reconcileAutoscalerTaints>[1]);

    // Assess
    expect(recorder.events).toHaveLength(1);
    expect(recorder.events[0]).toMatchObject({ type: 'Warning', object: { kind: 'MachineDeployment', name: 'gpu' } });
    expect(recorder.events[0]?.message).toMatch(/^example.com\/warming=1:NoSchedule is declared OnInitialization/);
    expect(recorder.events[0]?.message).toContain('startup-taint.cluster-autoscaler.kubernetes.io/');
    expect(recorder.events[0]?.message).toContain('--startup-taint=example.com/warming');
  });
});
