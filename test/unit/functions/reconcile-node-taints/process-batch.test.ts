import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { KubeConfig } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { CLUSTER_CONCURRENCY, FailingClusters } from '#functions/reconcile-node-taints/cluster-guard.ts';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { processBatch, latencyStages, type BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import { SETTLE_RESERVE_MS } from '#functions/reconcile-node-taints/process-batch.ts';
import { CallTimeoutError, NodeNotFoundError, TransientError } from '#shared/errors.ts';
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { callSignal } from '#shared/adapters/kubernetes/call-deadline.ts';
import { MemoryClusterConnections, MemoryEventRecorder, MemoryMachineStore } from '#test/support/memory-cluster.ts';
import { SqsRecordQueue } from '#shared/adapters/sqs/record-queue.ts';
import type { MachineFacts } from '#shared/model/views.ts';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { ROLLOUT_ANNOTATION, ROLLOUT_MARK_LABEL } from '#shared/domain/noexecute-rollout.ts';
import { logger } from '#shared/observability/logger.ts';
import { metrics } from '#shared/observability/metrics.ts';
import { machineBuilder, machineTaint, nodeTaint } from '#test/support/builders.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, machineEvent, nodeEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';
import { recordMockedAwsCalls } from '#test/support/record-aws-calls.ts';
import { manualClock } from '#test/support/manual-clock.ts';

const sqsMock = mockClient(SQSClient);
// The calls this file makes are the reconcile function's (the least-privilege test evaluates them; test/support/aws-calls.ts).
recordMockedAwsCalls('reconcile-process-batch', [
  { functions: ['reconcile-node-taints'], service: 'sqs', mock: sqsMock, bindings: { [TEST_QUEUE_URL]: '{queue:QUEUE_URL}', [TEST_DLQ_URL]: '{queue:DEAD_LETTER_QUEUE_URL}' } },
]);
const inCluster = (m: MachineFacts): MachineFacts => ({ ...m, clusterName: 'wc1' });
/** A port method the inline fakes below do not serve. */
const notServed = async (): Promise<never> => {
  throw new Error('not served by this fake');
};
const context = { functionName: 'reconcile-node-taints', awsRequestId: 'req-1', getRemainingTimeInMillis: () => 30_000 } as unknown as Context;

function setup() {
  const machines = new MemoryMachineStore();
  const clusters = new MemoryClusterConnections();
  const recorder = new MemoryEventRecorder();
  const deps: BatchDeps = {
    machines,
    clusters,
    recorder,
    enablement: { enabledAt: async () => new Date('2020-01-01T00:00:00Z') },
    clock: { now: () => new Date('2026-11-22T10:00:01Z') },
    settings: { clusterMode: 'capi', dryRun: false, startupTaint: { key: 'node.cluster.x-k8s.io/uninitialized', effect: 'NoSchedule' }, specTaintsOwner: 'product' },
    queue: new SqsRecordQueue(new SQSClient({ region: 'eu-west-1' }), TEST_QUEUE_URL, TEST_DLQ_URL),
    parse: fromCloudEventBody,
    logger,
    metrics,
    retry: { baseSeconds: 4, maxSeconds: 300 },
    random: () => 0,
  };
  const nodes = clusters.cluster('default/wc1');
  return { deps, machines, nodes, recorder };
}

describe('Function: processBatch()', () => {
  beforeEach(() => {
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({ MessageId: 'dlq-1' });
  });

  it('writes Kubernetes Events off each record\'s path: the next record of the Node\'s group is reconciled before the first Event is written, and the batch answers once it is', async () => {
    // Prepare: the Event API answers only when the test says so.
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
    nodes.put({ name: 'node-a', annotations: {}, taints: [] });
    const steps: string[] = [];
    let answer: () => void = () => undefined;
    const answered = new Promise<void>((resolve) => (answer = resolve));
    const recorder = {
      record: async (_o: unknown, _t: string, reason: string) => {
        steps.push(`event ${reason} sent`);
        await answered;
        steps.push(`event ${reason} written`);
      },
    };
    const first = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'first' });
    const second = sqsRecord(nodeEvent('node-a', { machine: { namespace: 'default', name: 'm-a' } }), { messageId: 'second' });
    const reads = nodes.getNode.bind(nodes);
    nodes.getNode = async (name) => (steps.push('node read'), reads(name));

    // Act
    let settled = false;
    const batch = processBatch(sqsEvent(first, second), context, { ...deps, recorder }).then((r) => ((settled = true), r));
    await vi.waitFor(() => expect(steps).toContain('node read'));
    await vi.waitFor(() => expect(steps.filter((s) => s === 'node read')).toHaveLength(2));
    const beforeAnswer = { steps: [...steps], settled };
    answer();
    const response = await batch;

    // Assess: the second record read its Node while the first Event was still unanswered; the batch waited for it.
    expect(beforeAnswer).toEqual({ steps: ['node read', 'event TaintsPropagated sent', 'node read'], settled: false });
    expect(steps.at(-1)).toBe('event TaintsPropagated written');
    expect(response.batchItemFailures).toEqual([]);
  });

  it("splits a written change's time into the forwarder, the queue, the hand-over, the wait in its batch and the reconcile", () => {
    // Prepare: observed at T, sent 40 ms later, received 25 ms after that, the batch 300 ms later (a cold start), the
    // record 15 ms into the batch, written 30 ms later.
    const event = machineEvent('default', 'm-a', { nodeName: 'node-a' });
    const observed = Date.parse(event.data.observedAt);
    const record = sqsRecord(event);
    const withTimes = { ...record, attributes: { ...record.attributes, SentTimestamp: String(observed + 40), ApproximateFirstReceiveTimestamp: String(observed + 65) } };
    const without = { ...record, attributes: { ...record.attributes, SentTimestamp: '', ApproximateFirstReceiveTimestamp: 'x' } };

    // Act
    const stages = latencyStages(event, withTimes, observed + 365, observed + 380, observed + 410);
    const partial = latencyStages(event, without, observed + 365, observed + 380, observed + 410);

    // Assess
    expect(stages).toEqual({ forwarder: 40, queue: 25, invoke: 300, batch: 15, reconcile: 30 });
    expect(partial).toEqual({ batch: 15, reconcile: 30 });
  });

  it('logs an Event that could not be written, with its object and reason, and keeps the record\'s outcome', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
    nodes.put({ name: 'node-a', annotations: {}, taints: [] });
    const warn = vi.spyOn(logger, 'warn');
    const recorder = { record: async () => Promise.reject(new TransientError('Recording Event', 'connection reset')) };

    // Act
    const response = await processBatch(sqsEvent(sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'r1' })), context, { ...deps, recorder });
    const warnings = warn.mock.calls.map(([message, fields]) => [message, fields]);
    warn.mockRestore();

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(nodes.peek('node-a')?.taints.map((t) => t.key)).toEqual(['gpu']);
    expect(warnings).toContainEqual(['Recording a Kubernetes Event failed', expect.objectContaining({ involvedObject: 'Machine default/m-a', eventReason: 'TaintsPropagated' })]);
  });

  it('fails exactly the conflicting record and the rest of its group, dead-letters the malformed one, and processes the others', async () => {
    // Prepare
    const { deps, machines, nodes, recorder } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
    machines.put(inCluster(machineBuilder().named('m-b').withNodeName('node-b').withSpecTaints([machineTaint('spot')]).build()));
    nodes.put({ name: 'node-a', annotations: {}, taints: [nodeTaint('node.cluster.x-k8s.io/uninitialized')] });
    nodes.put({ name: 'node-b', annotations: {}, taints: [] });
    // Another writer changes node-b between each of our reads and our write: a conflict the in-record retry does not end.
    nodes.beforeWrite = (name) => {
      if (name === 'node-b') {
        const current = nodes.peek('node-b')!;
        nodes.put({ ...current, taints: [...current.taints.filter((t) => t.key !== 'foreign'), nodeTaint('foreign')] });
      }
    };
    const good = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'good' });
    const conflict = sqsRecord(machineEvent('default', 'm-b', { nodeName: 'node-b' }), { messageId: 'conflict', receiveCount: 3 });
    const sameGroupAfter = sqsRecord(nodeEvent('node-b', { machine: { namespace: 'default', name: 'm-b' } }), { messageId: 'after' });
    const malformed = sqsRecord({ rawBody: '{"not":"a cloudevent"', groupId: 'default/wc1/node/node-x' }, { messageId: 'malformed' });
    const gone = sqsRecord(nodeEvent('node-gone', { machine: { namespace: 'default', name: 'm-gone' } }), { messageId: 'gone' });

    // Act
    const response = await processBatch(sqsEvent(good, conflict, sameGroupAfter, malformed, gone), context, deps);

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'conflict' }, { itemIdentifier: 'after' }]);
    const visibility = sqsMock.commandCalls(ChangeMessageVisibilityCommand).map((c) => c.args[0].input);
    // receive count 3 → ceiling 4 × 2² = 16 s; jitter 0 → 8 s, for the failed record and its skipped successor.
    expect(visibility).toEqual([
      { QueueUrl: TEST_QUEUE_URL, ReceiptHandle: 'rh-conflict', VisibilityTimeout: 8 },
      { QueueUrl: TEST_QUEUE_URL, ReceiptHandle: 'rh-after', VisibilityTimeout: 8 },
    ]);
    const deadLetters = sqsMock.commandCalls(SendMessageCommand).map((c) => c.args[0].input);
    expect(deadLetters).toHaveLength(1);
    expect(deadLetters[0]).toMatchObject({ QueueUrl: TEST_DLQ_URL, MessageBody: '{"not":"a cloudevent"', MessageGroupId: 'default/wc1/node/node-x', MessageDeduplicationId: 'malformed' });
    expect(deadLetters[0]?.MessageAttributes?.failureReason?.StringValue).toMatch(/not valid JSON|JSON/i);
    expect(nodes.peek('node-a')?.taints).toEqual([nodeTaint('gpu', 'a100')]);
    expect(nodes.peek('node-a')?.annotations[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
    expect(nodes.peek('node-b')?.taints).toEqual([nodeTaint('foreign')]);
    nodes.beforeWrite = undefined;
    expect(recorder.events.map((e) => `${e.object.name} ${e.type} ${e.reason}`)).toEqual(['m-a Normal TaintsPropagated']);
  });

  it('keeps a record for retry when the dead-letter queue cannot be reached, so nothing vanishes', async () => {
    // Prepare
    const { deps } = setup();
    sqsMock.on(SendMessageCommand).rejects(new Error('connect ETIMEDOUT'));
    const malformed = sqsRecord({ rawBody: 'garbage', groupId: 'g1' }, { messageId: 'malformed' });

    // Act
    const response = await processBatch(sqsEvent(malformed), context, deps);

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'malformed' }]);
  });

  it('dead-letters a CloudEvent of an unknown type with its reason', async () => {
    // Prepare
    const { deps } = setup();
    const body = JSON.stringify({ specversion: '1.0', id: '1', source: '/x', subject: 'nodes/n1', time: '2026-11-22T10:00:00Z', type: 'com.example.other.v1', datacontenttype: 'application/json', data: {} });
    const record = sqsRecord({ rawBody: body, groupId: 'g1' }, { messageId: 'unknown-type' });

    // Act
    const response = await processBatch(sqsEvent(record), context, deps);

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    const sent = sqsMock.commandCalls(SendMessageCommand)[0]?.args[0].input;
    expect(sent?.MessageAttributes?.failureReason?.StringValue).toContain('com.example.other.v1');
  });
});

describe('Function: processBatch() at the edges of retry', () => {
  beforeEach(() => {
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({ MessageId: 'new-1' });
  });

  function sentTo(url: string) {
    return sqsMock.commandCalls(SendMessageCommand).map((c) => c.args[0].input).filter((i) => i.QueueUrl === url);
  }

  it('re-issues a record failing for transient reasons one receive before the redrive, and a record skipped behind it, instead of letting them reach the DLQ', async () => {
    // Prepare: the workload cluster's API server is down.
    const { deps, machines } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
    const down = {
      nodesOf: async () => {
        throw new TransientError('Reading Node node-a', 'connect ECONNREFUSED');
      },
      podsOf: notServed,
    };
    const batchDeps: BatchDeps = { ...deps, clusters: down, reissueAtReceive: 4 };
    const early = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'early', receiveCount: 3 });
    const head = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'head', receiveCount: 4 });
    const skipped = sqsRecord(nodeEvent('node-a', { machine: { namespace: 'default', name: 'm-a' } }), { messageId: 'skipped', receiveCount: 4 });

    // Act
    const first = await processBatch(sqsEvent(early), context, batchDeps);
    const second = await processBatch(sqsEvent(head, skipped), context, batchDeps);

    // Assess: below the threshold the record waits in the queue; at it, both records go back as fresh messages.
    expect(first.batchItemFailures).toEqual([{ itemIdentifier: 'early' }]);
    expect(second.batchItemFailures).toEqual([]);
    const reissued = sentTo(TEST_QUEUE_URL);
    expect(reissued.map((i) => i.MessageDeduplicationId)).toEqual(['reissue:head', 'reissue:skipped']);
    expect(reissued.map((i) => i.MessageBody)).toEqual([head.body, skipped.body]);
    expect(reissued.every((i) => i.MessageGroupId === head.attributes.MessageGroupId)).toBe(true);
    expect(sentTo(TEST_DLQ_URL)).toEqual([]);
    // Only the record that stays gets its backoff: a re-issued record is never made visible again (another poller
    // could receive it before its deletion and charge it one more receive, up to the redrive).
    const visibilityChanged = sqsMock.commandCalls(ChangeMessageVisibilityCommand).map((c) => c.args[0].input.ReceiptHandle);
    expect(visibilityChanged).toEqual([early.receiptHandle]);
  });

  it('sends a staged NoExecute rollout step back through the queue after its delay, reported as its outcome, not as a failure', async () => {
    // Prepare: a group opted in with a bound of 1 declares a NoExecute taint its Node lacks
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').withAnnotation('taints.capi-taint-propagator.dev/machine', 'maint:NoExecute').withAnnotation(ROLLOUT_ANNOTATION, '1').build()));
    nodes.put({ name: 'node-a', annotations: {}, taints: [] });
    const error = vi.spyOn(logger, 'error');
    const counted = vi.spyOn(metrics, 'addMetric');
    const record = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'r1' });

    // Act
    const response = await processBatch(sqsEvent(record), context, { ...deps, settings: { ...deps.settings, rollout: { claimedSeconds: 0, waitSeconds: 7, evictingSeconds: 2, refusedSeconds: 9, stuckAfterSeconds: 60 } } });
    const nodeWrites = counted.mock.calls.filter(([name]) => name === 'NodeWrites').map(([, , value]) => value);
    counted.mockRestore();

    // Assess: the claim is written, the record comes back at once (visibility 0), nothing is logged as an error
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'r1' }]);
    expect(sqsMock.commandCalls(ChangeMessageVisibilityCommand).map((c) => [c.args[0].input.ReceiptHandle, c.args[0].input.VisibilityTimeout])).toEqual([[record.receiptHandle, 0]]);
    expect(nodes.peek('node-a')?.labels[ROLLOUT_MARK_LABEL]).toBe('true');
    expect(nodes.peek('node-a')?.taints).toEqual([]);
    expect(nodeWrites).toEqual([1]); // the claim's write counts as a Node write
    expect(error).not.toHaveBeenCalled();
    error.mockRestore();
  });

  it('leaves a record that failed unexpectedly to the redrive (a human looks at it), while its skipped successor is re-issued', async () => {
    // Prepare
    const { deps, machines } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').build()));
    const broken = {
      nodesOf: async () => {
        throw new TypeError('cannot read properties of undefined');
      },
      podsOf: notServed,
    };
    const batchDeps: BatchDeps = { ...deps, clusters: broken, reissueAtReceive: 4 };
    const head = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'head', receiveCount: 9 });
    const skipped = sqsRecord(nodeEvent('node-a', { machine: { namespace: 'default', name: 'm-a' } }), { messageId: 'skipped', receiveCount: 4 });

    // Act
    const response = await processBatch(sqsEvent(head, skipped), context, batchDeps);

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'head' }]);
    expect(sentTo(TEST_QUEUE_URL).map((i) => i.MessageDeduplicationId)).toEqual(['reissue:skipped']);
  });

  it('keeps a due record as a batch item failure when the re-issue cannot be sent, so it is never lost', async () => {
    // Prepare
    const { deps, machines } = setup();
    sqsMock.on(SendMessageCommand).rejects(new Error('connect ETIMEDOUT'));
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').build()));
    const down = {
      nodesOf: async () => {
        throw new TransientError('Reading Node node-a', 'HTTP 503');
      },
      podsOf: notServed,
    };
    const head = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'head', receiveCount: 4 });

    // Act
    const response = await processBatch(sqsEvent(head), context, { ...deps, clusters: down, reissueAtReceive: 4 });

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'head' }]);
  });

  it('after a call to one workload cluster timed out, does not try that cluster again in the batch, and reconciles the other clusters', async () => {
    // Prepare: cluster wc1 hangs (every Node call ends as a call timeout), cluster wc2 answers; four Nodes of wc1.
    const { deps, machines } = setup();
    const wc2 = new MemoryClusterConnections();
    const calls: string[] = [];
    const clusters = {
      nodesOf: async (c: ClusterRef) => {
        if (c.mode === 'capi' && c.name === 'wc2') return wc2.nodesOf({ mode: 'capi', namespace: 'default', name: 'wc2' });
        return {
          getNode: async (name: string) => {
            calls.push(name);
            throw new CallTimeoutError(`Reading Node ${name}`, 'no answer within the call deadline');
          },
          patchNodeTaints: async () => {
            throw new Error('not reached');
          },
          listNodes: notServed,
        };
      },
      podsOf: notServed,
    };
    const pairs = [['m-a', 'node-a', 'wc1'], ['m-b', 'node-b', 'wc2'], ['m-c', 'node-c', 'wc1'], ['m-d', 'node-d', 'wc1'], ['m-e', 'node-e', 'wc1']] as const;
    for (const [m, n, c] of pairs) machines.put({ ...machineBuilder().named(m).withNodeName(n).withSpecTaints([machineTaint('gpu')]).build(), clusterName: c });
    wc2.cluster('default/wc2').put({ name: 'node-b', annotations: {}, taints: [] });
    const record = (m: string, n: string, c: string) => sqsRecord(machineEvent('default', m, { nodeName: n, cluster: { mode: 'capi', namespace: 'default', name: c } }), { messageId: m, receiveCount: 2 });

    // Act
    const response = await processBatch(sqsEvent(...pairs.map(([m, n, c]) => record(m, n, c))), context, { ...deps, clusters });

    // Assess: the hanging cluster got the calls of at most CLUSTER_CONCURRENCY records at once; the records that
    // started after the timeout failed without a call; the other cluster's Node was written.
    expect(calls).toHaveLength(CLUSTER_CONCURRENCY);
    expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['m-a', 'm-c', 'm-d', 'm-e']);
    expect(wc2.cluster('default/wc2').peek('node-b')?.taints.map((t) => t.key)).toEqual(['gpu']);
  });

  it('reports node-gone, not a failure, when the Node is deleted between the read and the write (404 on the PATCH)', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').withSpecTaints([machineTaint('gpu')]).build()));
    nodes.put({ name: 'node-a', annotations: {}, taints: [] });
    const deletedBeforeWrite = {
      nodesOf: async () => ({
        getNode: (name: string) => nodes.getNode(name),
        patchNodeTaints: async (name: string) => { throw new NodeNotFoundError(name); },
        listNodes: notServed,
      }),
      podsOf: notServed,
    };
    const outcomes: string[] = [];
    const single = vi.spyOn(metrics, 'singleMetric').mockImplementation(() => ({ addDimension: (_n: string, v: string) => { outcomes.push(v); }, addMetric: () => undefined }) as unknown as ReturnType<typeof metrics.singleMetric>);
    const record = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'r1' });

    // Act
    const response = await processBatch(sqsEvent(record), context, { ...deps, clusters: deletedBeforeWrite });
    single.mockRestore();

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(outcomes).toEqual(['node-gone']);
    expect(sqsMock.commandCalls(SendMessageCommand)).toEqual([]);
  });

  it('reports a Machine that names no Cluster once, to the dead-letter queue with the reason, instead of retrying it as transient', async () => {
    // Prepare
    const { deps, machines } = setup();
    machines.put(machineBuilder().named('m-lost').withNodeName('node-l').withSpecTaints([machineTaint('gpu')]).build());
    const record = sqsRecord(machineEvent('default', 'm-lost', { nodeName: 'node-l' }), { messageId: 'lost' });

    // Act
    const response = await processBatch(sqsEvent(record), context, deps);

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(sqsMock.commandCalls(ChangeMessageVisibilityCommand)).toEqual([]);
    const dead = sentTo(TEST_DLQ_URL);
    expect(dead).toHaveLength(1);
    expect(dead[0]?.MessageAttributes?.failureReason?.StringValue).toBe('Machine default/m-lost names no Cluster (spec.clusterName or the cluster-name label)');
  });

  it('bounds the API calls of every record by the invocation\'s remaining time', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').build()));
    nodes.put({ name: 'node-a', annotations: {}, taints: [] });
    const deadlines: number[] = [];
    const shortContext = { ...context, getRemainingTimeInMillis: () => 20_000 } as Context;
    const before = deps.clock.now().getTime();

    // Act
    await processBatch(sqsEvent(sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }))), shortContext, {
      ...deps,
      withDeadline: (deadline, fn) => {
        deadlines.push(deadline);
        return fn();
      },
    });

    // Assess: 20 s remaining minus the reserve for settling the records.
    expect(deadlines).toEqual([before + 20_000 - SETTLE_RESERVE_MS]);
  });

  it('bounds the API calls of one record together by API_TIMEOUT_SECONDS, within the invocation\'s time', async () => {
    // Prepare: the real composition, a 5 s call timeout; a clock that only the test moves.
    vi.useFakeTimers({ toFake: ['Date'] });
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'm', server: 'https://127.0.0.1:1' }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'c', cluster: 'm', user: 'u' }],
      currentContext: 'c',
    });
    const { withDeadline } = composeReconcile({
      config: {
        queueUrl: TEST_QUEUE_URL,
        deadLetterQueueUrl: TEST_DLQ_URL,
        dryRun: false,
        startupTaint: undefined,
        retryBaseSeconds: 1,
        retryMaxSeconds: 30,
        stateNamespace: 'default',
        firstEnabledAt: undefined,
        specTaintsOwner: 'upstream',
        apiTimeoutSeconds: 5,
      },
      clusterMode: 'capi',
      managementKubeConfig: kc,
      workloadKubeConfig: async () => kc,
      sqs: new SQSClient({ region: 'eu-west-1' }),
      logger,
      metrics,
    });
    const aborted = (afterMs: number) => () => {
      vi.setSystemTime(Date.now() + afterMs);
      return Promise.resolve(callSignal().aborted);
    };

    try {
      // Act: a call 4.9 s, and one 5.1 s, into a record whose batch still has 17 s.
      const early = await withDeadline!(Date.now() + 17_000, aborted(4_900));
      const late = await withDeadline!(Date.now() + 17_000, aborted(5_100));
      const batchOver = await withDeadline!(Date.now() + 1_000, aborted(1_100));

      // Assess: the record's calls end 5 s after its start, or with the batch's deadline when that comes first.
      expect([early, late, batchOver]).toEqual([false, true, true]);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('Function: processBatch(), clusters that fail or crowd', () => {
  beforeEach(() => {
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({ MessageId: 'new-1' });
  });

  it('runs at most CLUSTER_CONCURRENCY records of one cluster at once, and every Node still converges', async () => {
    // Prepare: six Nodes of one cluster, each in its own message group; Node reads take a few turns of the event loop.
    const { deps, machines, nodes } = setup();
    const names = ['a', 'b', 'c', 'd', 'e', 'f'];
    for (const n of names) {
      machines.put(inCluster(machineBuilder().named(`m-${n}`).withNodeName(`node-${n}`).withSpecTaints([machineTaint('gpu', n)]).build()));
      nodes.put({ name: `node-${n}`, annotations: {}, taints: [] });
    }
    let inFlight = 0;
    let most = 0;
    const read = nodes.getNode.bind(nodes);
    nodes.getNode = async (name) => {
      most = Math.max(most, ++inFlight);
      for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
      inFlight--;
      return read(name);
    };

    // Act
    const response = await processBatch(sqsEvent(...names.map((n) => sqsRecord(machineEvent('default', `m-${n}`, { nodeName: `node-${n}` }), { messageId: n }))), context, deps);

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect(most).toBe(CLUSTER_CONCURRENCY);
    for (const n of names) expect(nodes.peek(`node-${n}`)?.taints.map((t) => t.value)).toEqual([n]);
  });

  it('does not call a failing cluster again until its backoff has passed (1 s, then longer), across batches; its records fail at once meanwhile', async () => {
    // Prepare: the cluster answers 503 until it is told to recover; one container (one FailingClusters) for every batch.
    const { deps, machines, nodes } = setup();
    const clock = manualClock(Date.parse('2026-11-22T10:00:01Z'));
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').withSpecTaints([machineTaint('gpu')]).build()));
    nodes.put({ name: 'node-a', annotations: {}, taints: [] });
    let requests = 0;
    let down = true;
    const read = nodes.getNode.bind(nodes);
    nodes.getNode = async (name) => {
      requests++;
      if (down) throw new TransientError(`Reading Node ${name}`, 'HTTP 503');
      return read(name);
    };
    const container: BatchDeps = { ...deps, clock, failingClusters: new FailingClusters(clock) };
    const batch = async (id: string) => (await processBatch(sqsEvent(sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: id })), context, container)).batchItemFailures.map((f) => f.itemIdentifier);
    const steps: Array<{ at: number; failed: string[]; requests: number }> = [];
    const step = async (advanceMs: number, id: string) => {
      clock.advance(advanceMs);
      steps.push({ at: clock.now().getTime() - Date.parse('2026-11-22T10:00:01Z'), failed: await batch(id), requests });
    };

    // Act
    await step(0, 'r0'); // the first failure: backoff 1 s
    await step(500, 'r1'); // within it: no request
    await step(600, 'r2'); // past it: one request, fails again: backoff 2 s
    await step(1_500, 'r3'); // within the second backoff: no request
    down = false;
    await step(600, 'r4'); // past it: the cluster answers; the Node is written

    // Assess
    expect(steps).toEqual([
      { at: 0, failed: ['r0'], requests: 1 },
      { at: 500, failed: ['r1'], requests: 1 },
      { at: 1_100, failed: ['r2'], requests: 2 },
      { at: 2_600, failed: ['r3'], requests: 2 },
      { at: 3_200, failed: [], requests: 3 },
    ]);
    expect(nodes.peek('node-a')?.taints.map((t) => t.key)).toEqual(['gpu']);
  });

  it('lets one call try a failing cluster once its backoff has passed, and forgets the failures when it answers', () => {
    // Prepare
    const clock = manualClock();
    const failing = new FailingClusters(clock);
    failing.failed('default/wc1');

    // Act / Assess
    expect(failing.refusal('default/wc1')).toMatch(/next one goes in 1000 ms/);
    clock.advance(1_000);
    expect(failing.refusal('default/wc1')).toBeUndefined();
    expect(failing.admit('default/wc1')).toBeUndefined();
    expect(failing.admit('default/wc1')).toMatch(/trying the cluster again/);
    failing.answered('default/wc1');
    expect(failing.refusal('default/wc1')).toBeUndefined();
  });
});
