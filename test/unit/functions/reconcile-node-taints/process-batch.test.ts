import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import { AnsweringClusters, CallTimes, processBatch, backoffSeconds, latencyStages, SETTLE_RESERVE_MS, type BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import { CallTimeoutError, NodeNotFoundError, TransientError } from '#shared/errors.ts';
import type { ClusterRef } from '#shared/domain/cloud-event.ts';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { MemoryClusterConnections, MemoryEventRecorder, MemoryMachineStore } from '#test/support/memory-cluster.ts';
import { SqsRecordQueue } from '#shared/adapters/sqs/record-queue.ts';
import type { MachineSnapshot } from '#shared/domain/snapshots.ts';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { logger } from '#shared/observability/logger.ts';
import { metrics } from '#shared/observability/metrics.ts';
import { machineBuilder, machineTaint, nodeTaint } from '#test/support/builders.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, machineEvent, nodeEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';
import { recordMockedAwsCalls } from '#test/support/record-aws-calls.ts';

const sqsMock = mockClient(SQSClient);
// The calls this file makes are the reconcile function's (the least-privilege test evaluates them; test/support/aws-calls.ts).
recordMockedAwsCalls('reconcile-process-batch', [
  { functions: ['reconcile-node-taints'], service: 'sqs', mock: sqsMock, bindings: { [TEST_QUEUE_URL]: '{queue:QUEUE_URL}', [TEST_DLQ_URL]: '{queue:DEAD_LETTER_QUEUE_URL}' } },
]);
const inCluster = (m: MachineSnapshot): MachineSnapshot => ({ ...m, clusterName: 'wc1' });
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

  it("reconciles a batch's different Nodes at once, each Node's records in order, a cluster's first record alone", async () => {
    // Prepare: three Nodes of one cluster (two records for node-a), and one Node of another cluster.
    const { deps, machines, nodes } = setup();
    for (const n of ['a', 'b', 'c']) {
      machines.put(inCluster(machineBuilder().named(`m-${n}`).withNodeName(`node-${n}`).withSpecTaints([machineTaint('gpu', n)]).build()));
      nodes.put({ name: `node-${n}`, annotations: {}, taints: [] });
    }
    machines.put({ ...machineBuilder().named('m-d').withNodeName('node-d').withSpecTaints([machineTaint('gpu', 'd')]).build(), clusterName: 'wc2' });
    const other = (deps.clusters as MemoryClusterConnections).cluster('default/wc2');
    other.put({ name: 'node-d', annotations: {}, taints: [] });
    const steps: string[] = [];
    /** Reads in flight per cluster, and the most at once. */
    const inFlight = { wc1: 0, wc2: 0 };
    const most = { wc1: 0, wc2: 0 };
    for (const [cluster, store] of [['wc1', nodes], ['wc2', other]] as const) {
      const read = store.getNode.bind(store);
      store.getNode = async (name) => {
        steps.push(`${name} start`);
        most[cluster] = Math.max(most[cluster], ++inFlight[cluster]);
        await new Promise((r) => setTimeout(r, 20));
        inFlight[cluster]--;
        const node = await read(name);
        steps.push(`${name} end`);
        return node;
      };
    }
    const records = [
      sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'a1' }),
      sqsRecord(machineEvent('default', 'm-b', { nodeName: 'node-b' }), { messageId: 'b' }),
      sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'a2' }),
      sqsRecord(machineEvent('default', 'm-c', { nodeName: 'node-c' }), { messageId: 'c' }),
      sqsRecord(machineEvent('default', 'm-d', { nodeName: 'node-d', cluster: { mode: 'capi', namespace: 'default', name: 'wc2' } }), { messageId: 'd' }),
    ];

    // Act
    const response = await processBatch(sqsEvent(...records), context, { ...deps, settings: { ...deps.settings, specTaintsOwner: 'product' } });

    // Assess: every Node written; wc1's first record (node-a) ran alone in its cluster, beside wc2's; then node-b,
    // node-c and node-a's second record together (node-a's second only after its first).
    expect(response.batchItemFailures).toEqual([]);
    expect(inFlight).toEqual({ wc1: 0, wc2: 0 });
    for (const n of ['a', 'b', 'c']) expect(nodes.peek(`node-${n}`)?.taints.map((t) => t.value)).toEqual([n]);
    expect(other.peek('node-d')?.taints.map((t) => t.value)).toEqual(['d']);
    expect(steps.slice(0, 2).sort()).toEqual(['node-a start', 'node-d start']);
    expect(steps.indexOf('node-b start')).toBeGreaterThan(steps.indexOf('node-a end'));
    expect(most).toEqual({ wc1: 3, wc2: 1 });
    expect(steps.lastIndexOf('node-a start')).toBeGreaterThan(steps.indexOf('node-a end'));
  });

  it("lets a cluster's other records start once the probe's first Node call is answered promptly, within the probe's deadline; a failed or late answer keeps them waiting to its end", async () => {
    // Prepare: two Nodes of one cluster; node-a's write answers only when the test says so; a record has 4 s, so an
    // answer is prompt within 1 s; the deadline each record's calls get is noted.
    const { deps: base, machines, nodes } = setup();
    const deadlines: number[] = [];
    const deps: BatchDeps = { ...base, recordTimeoutMs: 4_000, withDeadline: (deadline, fn) => (deadlines.push(deadline), fn()) };
    for (const n of ['a', 'b']) {
      machines.put(inCluster(machineBuilder().named(`m-${n}`).withNodeName(`node-${n}`).withSpecTaints([machineTaint('gpu', n)]).build()));
      nodes.put({ name: `node-${n}`, annotations: {}, taints: [] });
    }
    const steps: string[] = [];
    let firstRead: 'answers' | 'fails' | 'late' = 'answers';
    let release: () => void = () => undefined;
    let released = new Promise<void>((resolve) => (release = resolve));
    const read = nodes.getNode.bind(nodes);
    const write = nodes.patchNodeTaints.bind(nodes);
    nodes.getNode = async (name) => {
      steps.push(`${name} read`);
      if (name === 'node-a' && firstRead === 'fails') throw new TransientError(`Reading Node ${name}`, 'HTTP 503');
      if (name === 'node-a' && firstRead === 'late') vi.advanceTimersByTime(1_500);
      return read(name);
    };
    nodes.patchNodeTaints = async (name, patch) => {
      steps.push(`${name} write sent`);
      if (name === 'node-a') await released;
      if (name === 'node-a' && firstRead === 'late') vi.advanceTimersByTime(1_500);
      steps.push(`${name} written`);
      return write(name, patch);
    };
    const records = (round: string) => ['a', 'b'].map((n) => sqsRecord(machineEvent('default', `m-${n}`, { nodeName: `node-${n}`, rv: round }), { messageId: `${n}${round}` }));

    // Act 1: node-a's read is answered at once, its write hangs. (The clock stands still: a loaded machine's own pauses
    // must not make the answer late.)
    vi.useFakeTimers({ toFake: ['Date'] });
    let response: Awaited<ReturnType<typeof processBatch>>;
    let whileAHangs: string[];
    try {
      const batch = processBatch(sqsEvent(...records('1')), context, deps);
      await vi.waitFor(() => expect(steps).toContain('node-b written'), { timeout: 10_000 });
      whileAHangs = [...steps];
      release();
      response = await batch;
    } finally {
      vi.useRealTimers();
    }

    // Assess 1: node-b was read and written while node-a's write was still unanswered, with node-a's deadline.
    expect([...whileAHangs].sort()).toEqual(['node-a read', 'node-a write sent', 'node-b read', 'node-b write sent', 'node-b written']);
    expect(whileAHangs[0]).toBe('node-a read');
    expect(steps.at(-1)).toBe('node-a written');
    expect(response.batchItemFailures).toEqual([]);
    // The probe's record, node-b's record (two records' time at most), then node-b's read and write: the probe's deadline.
    expect(deadlines).toHaveLength(4);
    expect(deadlines.filter((d) => d === deadlines[0])).toHaveLength(3);
    expect(deadlines[1]).toBeLessThanOrEqual((deadlines[0] ?? 0) + 4_000 + 100);

    // Act 2 and 3: node-a's read fails (no answer the product can use), then its read and write are answered late
    // (after 1.5 s each).
    const waits: string[][] = [];
    const lateDeadlines: number[] = [];
    for (const mode of ['fails', 'late'] as const) {
      steps.length = 0;
      deadlines.length = 0;
      firstRead = mode;
      released = Promise.resolve();
      nodes.put({ name: 'node-a', annotations: {}, taints: [] });
      nodes.put({ name: 'node-b', annotations: {}, taints: [] });
      vi.useFakeTimers({ toFake: ['Date'] });
      try {
        await processBatch(sqsEvent(...records(mode)), context, deps);
      } finally {
        vi.useRealTimers();
      }
      waits.push([...steps]);
      if (mode === 'late') lateDeadlines.push(...deadlines);
    }

    // Assess 2 and 3: node-b started only once node-a's record had ended (node-a was read twice: the speculative read
    // beside the Machine's, then the ordinary one).
    expect(waits[0]).toEqual(['node-a read', 'node-a read', 'node-b read', 'node-b write sent', 'node-b written']);
    expect(waits[1]?.indexOf('node-b read')).toBeGreaterThan(waits[1]?.indexOf('node-a written') ?? Infinity);
    // After the probe's end (not a prompt answer), node-b's calls get one record's time from then: past the probe's.
    const probeDeadline = lateDeadlines[0] ?? 0;
    expect(lateDeadlines.slice(2).every((d) => d >= probeDeadline + 1_500)).toBe(true);
    expect(lateDeadlines.slice(2)).toHaveLength(2);
  });

  it("reads the Machines of a cluster's other records while its probe waits for the cluster; only their Node calls wait", async () => {
    // Prepare: two Nodes of one cluster; node-a's read answers only when the test says so.
    const { deps, machines, nodes } = setup();
    for (const n of ['a', 'b']) {
      machines.put(inCluster(machineBuilder().named(`m-${n}`).withNodeName(`node-${n}`).withSpecTaints([machineTaint('gpu', n)]).build()));
      nodes.put({ name: `node-${n}`, annotations: {}, taints: [] });
    }
    const steps: string[] = [];
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const getMachine = machines.getMachine.bind(machines);
    machines.getMachine = async (namespace, name) => (steps.push(`${name} read`), getMachine(namespace, name));
    const read = nodes.getNode.bind(nodes);
    nodes.getNode = async (name) => {
      steps.push(`${name} read`);
      if (name === 'node-a') await released;
      return read(name);
    };
    const records = ['a', 'b'].map((n) => sqsRecord(machineEvent('default', `m-${n}`, { nodeName: `node-${n}` }), { messageId: n }));

    // Act
    const batch = processBatch(sqsEvent(...records), context, deps);
    await vi.waitFor(() => expect(steps).toEqual(expect.arrayContaining(['m-b read', 'node-a read'])));
    const whileAWaits = [...steps];
    release();
    const response = await batch;

    // Assess: both Machines were read while node-a's read was unanswered; node-b was read only after it.
    expect([...whileAWaits].sort()).toEqual(['m-a read', 'm-b read', 'node-a read']);
    expect(steps.indexOf('node-b read')).toBeGreaterThan(whileAWaits.length - 1);
    expect(response.batchItemFailures).toEqual([]);
  });

  it('skips the probe for a cluster that answered in this container lately, and probes it again after a call of it timed out', async () => {
    // Prepare: three Nodes of one cluster whose reads can be made to hang (a call timeout); one memory for all batches.
    const { deps, machines, nodes } = setup();
    for (const n of ['a', 'b', 'c']) {
      machines.put(inCluster(machineBuilder().named(`m-${n}`).withNodeName(`node-${n}`).withSpecTaints([machineTaint('gpu', n)]).build()));
      nodes.put({ name: `node-${n}`, annotations: {}, taints: [] });
    }
    let hanging = false;
    let inFlight = 0;
    let most = 0;
    let calls = 0;
    const read = nodes.getNode.bind(nodes);
    nodes.getNode = async (name) => {
      calls++;
      most = Math.max(most, ++inFlight);
      await new Promise((r) => setTimeout(r, 20));
      inFlight--;
      if (hanging) throw new CallTimeoutError(`Reading Node ${name}`, 'no answer within the call deadline');
      return read(name);
    };
    const answering = new AnsweringClusters();
    let round = 0;
    const batch = async () => {
      round++;
      most = 0;
      calls = 0;
      const records = ['a', 'b', 'c'].map((n) => sqsRecord(machineEvent('default', `m-${n}`, { nodeName: `node-${n}`, rv: String(10 + round) }), { messageId: `${n}${round}`, receiveCount: 2 }));
      const response = await processBatch(sqsEvent(...records), context, { ...deps, answering });
      return { most, calls, failed: response.batchItemFailures.length };
    };

    // Act
    const first = await batch(); // unknown cluster: probed
    const second = await batch(); // answered lately: all at once
    hanging = true;
    const third = await batch(); // all at once, and every read times out
    hanging = false;
    const fourth = await batch(); // forgotten: probed again

    // Assess
    expect(first).toEqual({ most: 2, calls: 3, failed: 0 });
    expect(second).toEqual({ most: 3, calls: 3, failed: 0 });
    expect(third).toEqual({ most: 3, calls: 3, failed: 3 });
    expect(fourth).toEqual({ most: 2, calls: 3, failed: 0 });
  });

  it('keeps probing a cluster none of whose records were answered, and one not heard from for longer than the window', () => {
    const answering = new AnsweringClusters(60_000);
    expect(answering.recently('default/wc1', 0)).toBe(false);
    answering.answered('default/wc1', 1_000);
    expect(answering.recently('default/wc1', 61_000)).toBe(true);
    expect(answering.recently('default/wc1', 61_001)).toBe(false);
    expect(answering.recently('default/wc2', 1_000)).toBe(false);
    answering.forget('default/wc1');
    expect(answering.recently('default/wc1', 2_000)).toBe(false);
  });

  it("reads a MachineSet once per batch for the records its template change sent, and again in the next batch", async () => {
    // Prepare: three Machines of one MachineSet whose template is ahead of them.
    const { deps, machines, nodes } = setup();
    const KEY = 'taints.capi-taint-propagator.dev/machine';
    for (const n of ['a', 'b', 'c']) {
      machines.put({ ...inCluster(machineBuilder().named(`m-${n}`).withNodeName(`node-${n}`).withAnnotation(KEY, 'p=v1:NoSchedule').build()), machineSet: 'ms1' });
      nodes.put({ name: `node-${n}`, annotations: {}, taints: [] });
    }
    const reads: string[] = [];
    const scalables = {
      get: async (kind: string, namespace: string, name: string) => {
        reads.push(`${kind} ${namespace}/${name}`);
        return { kind: 'MachineSet' as const, apiVersion: 'cluster.x-k8s.io/v1beta2', namespace, name, uid: 'uid-ms1', resourceVersion: '30', annotations: {}, templateAnnotations: { [KEY]: 'p=v2:NoSchedule' }, templateLabels: {}, specTaints: null, ownedByMachineDeployment: true, deleting: false };
      },
      patchAnnotations: async () => '1',
    };
    const batch = () => sqsEvent(...['a', 'b', 'c'].map((n) => sqsRecord(machineEvent('default', `m-${n}`, { nodeName: `node-${n}`, template: 'ms1' }), { messageId: n })));

    // Act
    const first = await processBatch(batch(), context, { ...deps, scalables });
    const afterFirst = reads.length;
    await processBatch(batch(), context, { ...deps, scalables });

    // Assess
    expect(first.batchItemFailures).toEqual([]);
    for (const n of ['a', 'b', 'c']) expect(nodes.peek(`node-${n}`)?.taints.map((t) => t.value)).toEqual(['v2']);
    expect(afterFirst).toBe(1);
    expect(reads).toEqual(['MachineSet default/ms1', 'MachineSet default/ms1']);
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

  it('times the calls of a record by kind, counting the overlapping calls of one kind once', async () => {
    // Prepare: a manual clock, and calls that end when the test says so
    let now = 0;
    const calls = new CallTimes(() => now);
    const held = () => {
      let end: () => void = () => undefined;
      const answered = new Promise<void>((resolve) => (end = resolve));
      return { answered, end };
    };
    const [nodeA, nodeB, machine, write] = [held(), held(), held(), held()];

    // Act: Node reads at 0-30 and 10-50, the Machine read at 0-20, a write from 50 still open at 65
    const readA = calls.time('readNode', () => nodeA.answered);
    const readMachine = calls.time('readMachine', () => machine.answered);
    now = 10;
    const readB = calls.time('readNode', () => nodeB.answered);
    now = 20;
    machine.end();
    await readMachine;
    now = 30;
    nodeA.end();
    await readA;
    now = 50;
    nodeB.end();
    await readB;
    const writing = calls.time('writeNode', () => write.answered);
    now = 65;
    const totals = calls.totals();
    write.end();
    await writing;

    // Assess
    expect(totals).toEqual({ readNode: 50, readMachine: 20, writeNode: 15 });
  });

  it('logs with a written change the time its record spent in the Machine read and in the Node calls', async () => {
    // Prepare: a Machine read that takes 60 ms; the clock is the real one
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').withSpecTaints([machineTaint('gpu', 'a100')]).build()));
    nodes.put({ name: 'node-a', annotations: {}, taints: [] });
    const read = machines.getMachine.bind(machines);
    machines.getMachine = async (namespace, name) => {
      await new Promise((resolve) => setTimeout(resolve, 60));
      return read(namespace, name);
    };
    const info = vi.spyOn(logger, 'info');

    // Act
    const response = await processBatch(sqsEvent(sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'r1' })), context, { ...deps, clock: { now: () => new Date() } });

    // Assess: the write's line has the stages and the calls; the Machine read is most of the reconcile stage
    expect(response.batchItemFailures).toEqual([]);
    const patched = info.mock.calls.find(([message]) => message === 'Patched Node taints');
    const latency = (patched?.[1] as { latencyMs?: Record<string, number> } | undefined)?.latencyMs ?? {};
    expect(Object.keys(latency).sort()).toEqual(['batch', 'connect', 'forwarder', 'invoke', 'queue', 'readMachine', 'readNode', 'reconcile', 'writeNode']);
    expect(latency['readMachine']).toBeGreaterThanOrEqual(55);
    expect(latency['readMachine']).toBeLessThanOrEqual(latency['reconcile'] as number);
    info.mockRestore();
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
    // Another writer changes node-b between our read and our write: a real conflict.
    nodes.beforeWrite = (name) => {
      if (name === 'node-b') {
        const current = nodes.peek('node-b')!;
        nodes.put({ ...current, taints: [...current.taints, nodeTaint('foreign')] });
        nodes.beforeWrite = undefined;
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
    const down = { nodesOf: async () => { throw new TransientError('Reading Node node-a', 'connect ECONNREFUSED'); } };
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

  it('leaves a record that failed unexpectedly to the redrive (a human looks at it), while its skipped successor is re-issued', async () => {
    // Prepare
    const { deps, machines } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').build()));
    const broken = { nodesOf: async () => { throw new TypeError('cannot read properties of undefined'); } };
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
    const down = { nodesOf: async () => { throw new TransientError('Reading Node node-a', 'HTTP 503'); } };
    const head = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'head', receiveCount: 4 });

    // Act
    const response = await processBatch(sqsEvent(head), context, { ...deps, clusters: down, reissueAtReceive: 4 });

    // Assess
    expect(response.batchItemFailures).toEqual([{ itemIdentifier: 'head' }]);
  });

  it('after a call to one workload cluster timed out, does not try that cluster again in the batch, and reconciles the other clusters', async () => {
    // Prepare: cluster wc1 hangs (every Node call ends as a call timeout), cluster wc2 answers.
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
          patchClaimedNode: async () => {
            throw new Error('not reached');
          },
        };
      },
    };
    for (const [m, n, c] of [['m-a', 'node-a', 'wc1'], ['m-b', 'node-b', 'wc2'], ['m-c', 'node-c', 'wc1']] as const) {
      machines.put({ ...machineBuilder().named(m).withNodeName(n).withSpecTaints([machineTaint('gpu')]).build(), clusterName: c });
    }
    wc2.cluster('default/wc2').put({ name: 'node-b', annotations: {}, taints: [] });
    const record = (m: string, n: string, c: string) => sqsRecord(machineEvent('default', m, { nodeName: n, cluster: { mode: 'capi', namespace: 'default', name: c } }), { messageId: m, receiveCount: 2 });

    // Act
    const response = await processBatch(sqsEvent(record('m-a', 'node-a', 'wc1'), record('m-b', 'node-b', 'wc2'), record('m-c', 'node-c', 'wc1')), context, { ...deps, clusters });

    // Assess: one call to the hanging cluster; its second record failed without a call; the other cluster's Node written.
    expect(calls).toEqual(['node-a']);
    expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['m-a', 'm-c']);
    expect(wc2.cluster('default/wc2').peek('node-b')?.taints.map((t) => t.key)).toEqual(['gpu']);
  });

  it('reads the Machine and the Node in parallel on a first receive, and the Node after the Machine on a retry', async () => {
    // Prepare: a Machine read that answers a turn later, noting how many Node reads had started by then.
    const { deps, machines, nodes } = setup();
    machines.put(inCluster(machineBuilder().named('m-a').withNodeName('node-a').build()));
    nodes.put({ name: 'node-a', annotations: {}, taints: [] });
    const nodeReadsAtMachineAnswer: number[] = [];
    const getMachine = machines.getMachine.bind(machines);
    machines.getMachine = async (ns: string, name: string) => {
      await new Promise((r) => setImmediate(r));
      nodeReadsAtMachineAnswer.push(nodes.reads);
      return getMachine(ns, name);
    };
    const first = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }), { messageId: 'first', receiveCount: 1 });
    const retried = sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a', rv: '11' }), { messageId: 'retried', receiveCount: 2 });

    // Act
    await processBatch(sqsEvent(first), context, deps);
    await processBatch(sqsEvent(retried), context, deps);

    // Assess: the first Node read had started before the Machine answered; the retry's had not.
    expect(nodeReadsAtMachineAnswer).toEqual([1, 1]);
    expect(nodes.reads).toBe(2);
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
        patchClaimedNode: async (name: string) => { throw new NodeNotFoundError(name); },
      }),
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
    const before = Date.now();

    // Act
    await processBatch(sqsEvent(sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-a' }))), shortContext, {
      ...deps,
      withDeadline: (deadline, fn) => {
        deadlines.push(deadline);
        return fn();
      },
    });

    // Assess: 20 s remaining minus the reserve for settling the records.
    expect(deadlines).toHaveLength(1);
    expect(deadlines[0]! - before).toBeGreaterThanOrEqual(20_000 - SETTLE_RESERVE_MS);
    expect(deadlines[0]! - Date.now()).toBeLessThanOrEqual(20_000 - SETTLE_RESERVE_MS);
  });
  it('bounds all the API calls of one record together by recordTimeoutMs (one call timeout), within the invocation\'s time', async () => {
    // Prepare
    const { deps, machines, nodes } = setup();
    // Two workload clusters: each record is its cluster's probe (a cluster's other records: the probe-gate test above).
    for (const [m, c] of [['m-a', 'wc1'], ['m-b', 'wc2']] as const) {
      machines.put({ ...machineBuilder().named(m).withNodeName(`node-${m}`).build(), clusterName: c });
      (c === 'wc1' ? nodes : deps.clusters instanceof MemoryClusterConnections ? deps.clusters.cluster('default/wc2') : nodes).put({ name: `node-${m}`, annotations: {}, taints: [] });
    }
    const deadlines: Array<{ deadline: number; at: number }> = [];
    const shortContext = { ...context, getRemainingTimeInMillis: () => 20_000 } as Context;

    // Act
    await processBatch(sqsEvent(sqsRecord(machineEvent('default', 'm-a', { nodeName: 'node-m-a' })), sqsRecord(machineEvent('default', 'm-b', { nodeName: 'node-m-b', cluster: { mode: 'capi', namespace: 'default', name: 'wc2' } }), { messageId: 'b' })), shortContext, {
      ...deps,
      recordTimeoutMs: 5_000,
      withDeadline: (deadline, fn) => {
        deadlines.push({ deadline, at: Date.now() });
        return fn();
      },
    });

    // Assess: each record's own 5 s from its start, not the batch's 17 s.
    expect(deadlines).toHaveLength(2);
    for (const d of deadlines) {
      expect(d.deadline - d.at).toBeLessThanOrEqual(5_000);
      expect(d.deadline - d.at).toBeGreaterThanOrEqual(4_900);
    }
  });
});

describe('Function: backoffSeconds()', () => {
  it.each([
    { name: 'first receive, no jitter', receiveCount: 1, random: 0, want: 1 },
    { name: 'first receive, full jitter', receiveCount: 1, random: 0.999, want: 2 },
    { name: 'grows with receive count', receiveCount: 4, random: 0, want: 8 },
    { name: 'is capped at the maximum', receiveCount: 20, random: 0.999, want: 60 },
  ])('$name', ({ receiveCount, random, want }) => {
    // Act
    const seconds = backoffSeconds(receiveCount, { baseSeconds: 2, maxSeconds: 60 }, () => random);

    // Assess
    expect(seconds).toBe(want);
  });
});
