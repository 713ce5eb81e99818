/**
 * Shards of the forwarder against the real API server (shared/policy/shards.ts, docs/fleets-and-sizing.md): each shard
 * announces only its own clusters' Machines and Nodes, and a re-shard from one shard to two loses no change. Each
 * forwarder sends to a queue URL of its own (the SQS client is mocked), so that every message is known by its sender.
 * Every workload Cluster's kubeconfig points at this same API server: the Nodes of all of them are the same objects, so
 * a Node message tells its cluster by its `source` only.
 */
import { afterEach, beforeAll, expect, it } from 'vitest';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { readFileSync } from 'node:fs';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { CHECKPOINT_ANNOTATION } from '#shared/adapters/kubernetes/lease.ts';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';
import type { ForwarderConfig } from '#shared/config/forwarder-config.ts';
import { shardLeaseName, shardOf } from '#shared/policy/shards.ts';
import { MACHINES, MERGE_PATCH, adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, requireControlPlane, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { acceptAllSends, sqsMock, startForwarder, type RunningForwarder } from './support.ts';

const queueOf = (who: string): string => `https://sqs.eu-west-1.amazonaws.com/123456789012/${who}.fifo`;
const CLUSTERS = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'clusters' } as const;
const DECLARATION = 'taints.capi-taint-propagator.dev/machine';

/** A message as sent, with the queue (that is, the forwarder) it was sent by. */
interface Sent {
  readonly by: string;
  readonly event: TaintEvent;
  readonly dedupId: string | undefined;
}

function sent(): Sent[] {
  return sqsMock.commandCalls(SendMessageBatchCommand).flatMap((c) => {
    const by = /\/([^/]+)\.fifo$/.exec(c.args[0].input.QueueUrl ?? '')?.[1] ?? '?';
    return (c.args[0].input.Entries ?? []).map((e) => ({ by, event: fromCloudEventBody(e.MessageBody ?? ''), dedupId: e.MessageDeduplicationId }));
  });
}

/** `<uid>:<resourceVersion>` of the object version a message announces (its id: `<uid>:<rv>:<change>`). */
const versionOf = (m: Sent): string => m.event.id.split(':').slice(0, 2).join(':');
const changeOf = (m: Sent): string => m.event.type.split('.').slice(-2, -1)[0] ?? '';

describeWithControlPlane('Forwarder shards against the real API server', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;
  const running: RunningForwarder[] = [];

  beforeAll(() => {
    kc = adminKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((r) => r.stop()));
  });

  /** A workload Cluster whose name hashes to `shard` of 2 (its kubeconfig Secret points at this API server). */
  async function clusterOfShard(ns: string, shard: number): Promise<string> {
    let name = uniqueName('wc');
    while (shardOf(`${ns}/${name}`, 2) !== shard) name = uniqueName('wc');
    await custom.createNamespacedCustomObject({
      ...CLUSTERS,
      namespace: ns,
      body: { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name, namespace: ns }, spec: { controlPlaneEndpoint: { host: '127.0.0.1', port: 6443 } } },
    });
    await core.createNamespacedSecret({
      namespace: ns,
      body: {
        metadata: { name: `${name}-kubeconfig`, labels: { 'cluster.x-k8s.io/cluster-name': name } },
        type: 'cluster.x-k8s.io/secret',
        data: { value: readFileSync(requireControlPlane().kubeconfigPath).toString('base64') },
      },
    });
    return name;
  }

  /**
   * A namespace with two workload Clusters, `a` of shard 0 and `b` of shard 1 (of two), each with one Machine linked to
   * a Node of its own (labelled for this test).
   */
  async function fleet(): Promise<{ ns: string; lease: string; selector: string; a: string; b: string; machineA: string; machineB: string; nodes: string[] }> {
    acceptAllSends();
    const ns = await createNamespace(kc, 'shards');
    const label = uniqueName('sel');
    const [a, b] = [await clusterOfShard(ns, 0), await clusterOfShard(ns, 1)];
    const [machineA, machineB, nodeA, nodeB] = [uniqueName('ma'), uniqueName('mb'), uniqueName('node'), uniqueName('node')];
    await createNode(kc, nodeA, { labels: { 'shard-test': label }, annotations: { 'cluster.x-k8s.io/machine': machineA } });
    await createNode(kc, nodeB, { labels: { 'shard-test': label }, annotations: { 'cluster.x-k8s.io/machine': machineB } });
    await createMachine(kc, ns, machineA, { clusterName: a, nodeName: nodeA });
    await createMachine(kc, ns, machineB, { clusterName: b, nodeName: nodeB });
    return { ns, lease: uniqueName('lease'), selector: `shard-test=${label}`, a, b, machineA, machineB, nodes: [nodeA, nodeB] };
  }

  function start(f: { ns: string; lease: string; selector: string }, who: string, sharding: Pick<ForwarderConfig, 'shards' | 'shard'>): RunningForwarder {
    const r = startForwarder(kc, {
      clusterMode: 'capi',
      stateNamespace: f.ns,
      leaseName: f.lease,
      machineNamespace: f.ns,
      nodeLabelSelector: f.selector,
      forwarderId: uniqueName(who),
      queueUrl: queueOf(who),
      ...sharding,
      shardPinned: true,
    });
    running.push(r);
    return r;
  }

  async function synced(r: RunningForwarder, keys: readonly string[]): Promise<void> {
    await waitFor(() => keys.every((k) => r.forwarder.checkpoint()[k] !== undefined), { timeoutMs: 20_000, description: `streams ${keys.join(', ')} listed` });
  }

  /** A relevant change of a Machine (its declaration annotation); returns the new resourceVersion. */
  async function declare(ns: string, machine: string, value: string): Promise<string> {
    const patched = (await custom.patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name: machine, body: { metadata: { annotations: { [DECLARATION]: value } } } }, MERGE_PATCH)) as { metadata: { resourceVersion: string } };
    return patched.metadata.resourceVersion;
  }

  /** The forwarder has handled (sent, filtered or dropped as another shard's) every Machine change up to `rv`. */
  async function machinesPast(r: RunningForwarder, rv: string): Promise<void> {
    await waitFor(() => BigInt(r.forwarder.checkpoint()['machines'] ?? '0') >= BigInt(rv), { timeoutMs: 20_000, description: `machines handled up to ${rv}` });
  }

  it("lets each of two shards announce only its own clusters' Machines and Nodes", async () => {
    // Prepare
    const f = await fleet();
    const s0 = start(f, 's0', { shards: 2, shard: 0 });
    const s1 = start(f, 's1', { shards: 2, shard: 1 });
    await synced(s0, ['machines', `nodes/${f.ns}/${f.a}`]);
    await synced(s1, ['machines', `nodes/${f.ns}/${f.b}`]);

    // Act: a change of each Machine, after both shards listed
    await declare(f.ns, f.machineA, 'a:NoSchedule');
    const last = await declare(f.ns, f.machineB, 'b:NoSchedule');
    // Both shards handled every Machine change up to the last one (their own sent, the other's dropped).
    await machinesPast(s0, last);
    await machinesPast(s1, last);

    // Assess: per shard, the Machines and the Nodes' clusters it announced
    const announced = (by: string) => {
      const mine = sent().filter((m) => m.by === by);
      return {
        machines: [...new Set(mine.filter((m) => m.event.subject.startsWith('machines/')).map((m) => `${changeOf(m)} ${m.event.subject}`))].sort(),
        nodeSources: [...new Set(mine.filter((m) => m.event.subject.startsWith('nodes/') && f.nodes.includes(m.event.subject.slice('nodes/'.length))).map((m) => m.event.source))],
      };
    };
    expect(announced('s0')).toEqual({ machines: [`modified machines/${f.ns}/${f.machineA}`, `resynced machines/${f.ns}/${f.machineA}`], nodeSources: [`/clusters/${f.ns}/${f.a}`] });
    expect(announced('s1')).toEqual({ machines: [`modified machines/${f.ns}/${f.machineB}`, `resynced machines/${f.ns}/${f.machineB}`], nodeSources: [`/clusters/${f.ns}/${f.b}`] });
    // Each watches the Nodes of its own cluster only, each under a Lease of its own.
    expect(Object.keys(s0.forwarder.checkpoint()).filter((k) => k.startsWith('nodes/'))).toEqual([`nodes/${f.ns}/${f.a}`]);
    expect(Object.keys(s1.forwarder.checkpoint()).filter((k) => k.startsWith('nodes/'))).toEqual([`nodes/${f.ns}/${f.b}`]);
    await waitFor(() => s0.forwarder.isActive() && s1.forwarder.isActive(), { description: 'both shards hold their Lease' });
    const leases = await kc.makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: f.ns });
    expect(leases.items.map((l) => l.metadata?.name).sort()).toEqual([shardLeaseName(f.lease, 0, 2), shardLeaseName(f.lease, 1, 2)]);
  });

  it('re-shards from one shard to two without losing a change: what changed while none watched reaches the queue, each change with one deduplication id', async () => {
    // Prepare: the one-shard forwarder (the plain Lease), then a change it forwards
    const f = await fleet();
    const old = start(f, 'old', { shards: 1, shard: 0 });
    await synced(old, ['machines', `nodes/${f.ns}/${f.a}`, `nodes/${f.ns}/${f.b}`]);
    const before = [await declare(f.ns, f.machineA, 'before:NoSchedule'), await declare(f.ns, f.machineB, 'before:NoSchedule')];
    await machinesPast(old, before[1] ?? '');
    await old.stop(); // its window ends: it sends what is pending and stores its checkpoint on the plain Lease
    running.splice(running.indexOf(old), 1);

    // Act: changes while no forwarder watches, then the two shards (new Leases: no checkpoint, a fresh list each),
    // then changes they watch
    const between = [await declare(f.ns, f.machineA, 'between:NoSchedule'), await declare(f.ns, f.machineB, 'between:NoSchedule')];
    const s0 = start(f, 's0', { shards: 2, shard: 0 });
    const s1 = start(f, 's1', { shards: 2, shard: 1 });
    await synced(s0, ['machines', `nodes/${f.ns}/${f.a}`]);
    await synced(s1, ['machines', `nodes/${f.ns}/${f.b}`]);
    const after = [await declare(f.ns, f.machineA, 'after:NoSchedule'), await declare(f.ns, f.machineB, 'after:NoSchedule')];
    await machinesPast(s0, after[1] ?? '');
    await machinesPast(s1, after[1] ?? '');

    // Assess: every version of each Machine reached the queue — before by the old shard, between and after by the
    // Machine's own new shard only
    const messages = sent();
    const machine = (name: string) => messages.filter((m) => m.event.subject === `machines/${f.ns}/${name}`);
    const byRv = (name: string) => Object.fromEntries(machine(name).map((m) => [m.event.id.split(':')[1], `${m.by} ${changeOf(m)}`]));
    expect(byRv(f.machineA)).toMatchObject({ [before[0] ?? '']: 'old modified', [between[0] ?? '']: 's0 resynced', [after[0] ?? '']: 's0 modified' });
    expect(byRv(f.machineB)).toMatchObject({ [before[1] ?? '']: 'old modified', [between[1] ?? '']: 's1 resynced', [after[1] ?? '']: 's1 modified' });
    expect(machine(f.machineA).filter((m) => m.by === 's1')).toEqual([]);
    expect(machine(f.machineB).filter((m) => m.by === 's0')).toEqual([]);
    // Each object version went out under one deduplication id, whoever sent it (a copy is one the queue drops).
    const ids = new Map<string, Set<string | undefined>>();
    for (const m of messages) ids.set(`${m.event.source} ${versionOf(m)}`, (ids.get(`${m.event.source} ${versionOf(m)}`) ?? new Set()).add(m.dedupId));
    expect([...ids.entries()].filter(([, dedup]) => dedup.size > 1)).toEqual([]);
    // The old Lease keeps the old shard's checkpoint (the new shards never wrote it); each new shard stored its own.
    const leases = kc.makeApiClient(CoordinationV1Api);
    const checkpoint = async (name: string) => JSON.parse((await leases.readNamespacedLease({ name, namespace: f.ns })).metadata?.annotations?.[CHECKPOINT_ANNOTATION] ?? '{}') as Record<string, string>;
    expect(BigInt((await checkpoint(f.lease))['machines'] ?? '0')).toBeLessThan(BigInt(between[0] ?? '0'));
    await waitFor(async () => BigInt((await checkpoint(shardLeaseName(f.lease, 0, 2)))['machines'] ?? '0') >= BigInt(after[1] ?? ''), { timeoutMs: 15_000, description: "shard 0's checkpoint on its Lease" });
    await waitFor(async () => BigInt((await checkpoint(shardLeaseName(f.lease, 1, 2)))['machines'] ?? '0') >= BigInt(after[1] ?? ''), { timeoutMs: 15_000, description: "shard 1's checkpoint on its Lease" });
  });
});
