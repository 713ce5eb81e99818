/**
 * The whole pipeline in this process — watch-forwarder → SQS FIFO queue (in-process fauxqs over HTTP) → processBatch (the
 * Lambda handler's body, driven as Lambda's event source would) → Node — against the real local
 * control plane. Expected Node states are upstream's (upstream-capi.md §3.3), written out by hand.
 */
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { CHECKPOINT_ANNOTATION } from '#shared/adapters/kubernetes/lease.ts';
import { shardOf } from '#shared/policy/shards.ts';
import { readFileSync } from 'node:fs';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { World } from './support.ts';
import { HAMMER_TAINT_KEY, expectNode, interleavedKubeConfig, joinNode, restartWorld, setAnnotations, setSpecTaints, startForeignWriter, startWorld, writeAwsCalls } from './support.ts';
import { MACHINES, MERGE_PATCH, adminKubeConfig, createMachine, describeWithControlPlane, requireControlPlane, setMachineNodeRef, uniqueName, waitFor } from '#test/support/control-plane.ts';

const CLASS = 'taints.capi-taint-propagator.dev/class';
const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const FOREIGN = { key: 'foreign.example.com/kubelet', value: 'x', effect: 'NoExecute' };
const FOREIGN_S = 'foreign.example.com/kubelet=x:NoExecute';

describeWithControlPlane('e2e: the whole pipeline in-process', () => {
  let kc: KubeConfig;
  let world: World | undefined;

  beforeAll(() => {
    requireControlPlane();
    kc = adminKubeConfig();
  });

  afterEach(async () => {
    await world?.pipeline.stop();
    world = undefined;
  });

  // Every AWS call the pipelines made is one the code fixture lists (the least-privilege test evaluates the fixture,
  // and these recordings when given AWS_CALL_RECORDINGS); the functions' own sends and the event source's polls were seen.
  afterAll(async () => {
    const { calls, unlisted } = await writeAwsCalls('e2e-pipeline');
    expect(unlisted).toEqual([]);
    expect(calls.map((c) => `${c.function} ${c.action}`)).toEqual(
      expect.arrayContaining(['watch-forwarder sqs:SendMessage', 'reconcile-node-taints sqs:ReceiveMessage', 'reconcile-node-taints sqs:DeleteMessage']),
    );
  });

  /**
   * The declaration edits of the issue, each followed by upstream's exact result. `m` declares through
   * spec.taints and the class annotation; every step waits for the Node to converge.
   */
  async function runEditSequence(w: World, machine: string, node: string, foreignKey?: string): Promise<void> {
    const converge = (taints: string[], tracking: string) => expectNode(kc, node, { taints, tracking }, foreignKey ? { foreignKey } : {});
    // Joined: gate removed, Always tracked, OnInitialization applied once, foreign kept.
    await converge([FOREIGN_S, 'a=1:NoSchedule', 'b=1:PreferNoSchedule', 'c=1:NoExecute'], 'a:NoSchedule,c:NoExecute');
    // Value change of an Always taint: corrected in place.
    await setSpecTaints(kc, w.ns, machine, [{ key: 'a', value: '2', effect: 'NoSchedule' }, { key: 'b', value: '1', effect: 'PreferNoSchedule', propagation: 'OnInitialization' }]);
    await converge([FOREIGN_S, 'a=2:NoSchedule', 'b=1:PreferNoSchedule', 'c=1:NoExecute'], 'a:NoSchedule,c:NoExecute');
    // Always → OnInitialization (with a value change): ownership dropped, the taint stays with its value.
    await setSpecTaints(kc, w.ns, machine, [{ key: 'a', value: '3', effect: 'NoSchedule', propagation: 'OnInitialization' }, { key: 'b', value: '1', effect: 'PreferNoSchedule', propagation: 'OnInitialization' }]);
    await converge([FOREIGN_S, 'a=2:NoSchedule', 'b=1:PreferNoSchedule', 'c=1:NoExecute'], 'c:NoExecute');
    // OnInitialization → Always (with a value change): ensured and tracked.
    await setSpecTaints(kc, w.ns, machine, [{ key: 'a', value: '3', effect: 'NoSchedule', propagation: 'OnInitialization' }, { key: 'b', value: '2', effect: 'PreferNoSchedule' }]);
    await converge([FOREIGN_S, 'a=2:NoSchedule', 'b=2:PreferNoSchedule', 'c=1:NoExecute'], 'b:PreferNoSchedule,c:NoExecute');
    // Removal of an Always declaration (the whole annotation): removed from the Node.
    await setAnnotations(kc, w.ns, machine, { [CLASS]: null });
    await converge([FOREIGN_S, 'a=2:NoSchedule', 'b=2:PreferNoSchedule'], 'b:PreferNoSchedule');
    // Effect change: new key:effect added, the old tracked one removed.
    await setSpecTaints(kc, w.ns, machine, [{ key: 'a', value: '3', effect: 'NoSchedule', propagation: 'OnInitialization' }, { key: 'b', value: '2', effect: 'NoExecute' }]);
    await converge([FOREIGN_S, 'a=2:NoSchedule', 'b=2:NoExecute'], 'b:NoExecute');
  }

  /** Bodies and reasons of the messages in the dead-letter queue (left in place). */
  async function deadLetters(w: World): Promise<string[]> {
    const out = await w.pipeline.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: w.pipeline.deadLetterQueue.url, MaxNumberOfMessages: 10, VisibilityTimeout: 0, MessageAttributeNames: ['All'] }),
    );
    return (out.Messages ?? []).map((m) => `${m.MessageAttributes?.['failureReason']?.StringValue ?? '(redriven)'}: ${m.Body ?? ''}`);
  }

  async function machineWithNode(w: World, prefix: string): Promise<{ machine: string; node: string }> {
    const node = await joinNode(w, prefix, [FOREIGN]);
    const machine = uniqueName(prefix);
    await createMachine(kc, w.ns, machine, {
      specTaints: [{ key: 'a', value: '1', effect: 'NoSchedule' }, { key: 'b', value: '1', effect: 'PreferNoSchedule', propagation: 'OnInitialization' }],
      annotations: { [CLASS]: 'c=1:NoExecute' },
    });
    await setMachineNodeRef(kc, w.ns, machine, node);
    return { machine, node };
  }

  it('converges Nodes of new Machines, then follows every kind of declaration edit exactly as upstream', async () => {
    // Prepare
    world = await startWorld(kc);
    const { machine, node } = await machineWithNode(world, 'edits');

    // Act + Assess (each step)
    await runEditSequence(world, machine, node);

    // Assess
    const c = world.pipeline.counters();
    expect(c.writes, JSON.stringify(c)).toBeGreaterThanOrEqual(5);
    expect(await deadLetters(world), JSON.stringify(c)).toEqual([]);
  });

  it('says so when a declaration is valid again: a Warning for the broken edit, a Normal DeclarationValid after the fix', async () => {
    // Prepare
    world = await startWorld(kc);
    const { machine, node } = await machineWithNode(world, 'recover');
    await expectNode(kc, node, { taints: [FOREIGN_S, 'a=1:NoSchedule', 'b=1:PreferNoSchedule', 'c=1:NoExecute'], tracking: 'a:NoSchedule,c:NoExecute' });
    const core = kc.makeApiClient(CoreV1Api);
    const eventsOfMachine = async (): Promise<string[]> =>
      (await core.listNamespacedEvent({ namespace: (world as World).ns, fieldSelector: `involvedObject.name=${machine}` })).items
        .sort((a, b) => String(a.metadata?.creationTimestamp).localeCompare(String(b.metadata?.creationTimestamp)) || String(a.metadata?.resourceVersion).localeCompare(String(b.metadata?.resourceVersion)))
        .map((e) => `${e.type} ${e.reason}: ${e.message}`);

    // Act: a typo in the effect, then its fix with a new value.
    await setAnnotations(kc, world.ns, machine, { [MACHINE]: 'd=1:NoSchedul' });
    await waitFor(async () => (await eventsOfMachine()).some((e) => e.startsWith('Warning InvalidTaintDeclaration')), { timeoutMs: 30_000, description: 'the Warning Event' });
    await setAnnotations(kc, world.ns, machine, { [MACHINE]: 'd=1:NoSchedule' });

    // Assess: the Node got the fixed taint, and the Events say what happened, in order.
    await expectNode(kc, node, { taints: [FOREIGN_S, 'a=1:NoSchedule', 'b=1:PreferNoSchedule', 'c=1:NoExecute', 'd=1:NoSchedule'], tracking: 'a:NoSchedule,c:NoExecute,d:NoSchedule' });
    const events = await waitFor(async () => {
      const all = await eventsOfMachine();
      return all.some((e) => e.startsWith('Normal DeclarationValid')) ? all : undefined;
    }, { timeoutMs: 30_000, description: 'the DeclarationValid Event' });
    const reasons = events.map((e) => e.split(':')[0]);
    expect(reasons.indexOf('Warning InvalidTaintDeclaration')).toBeGreaterThanOrEqual(0);
    expect(reasons.indexOf('Normal DeclarationValid')).toBeGreaterThan(reasons.indexOf('Warning InvalidTaintDeclaration'));
    expect(events.find((e) => e.startsWith('Warning'))).toContain('Unsupported value: "NoSchedul"');
    expect(events.find((e) => e.startsWith('Normal DeclarationValid'))).toContain(`Taint declaration is valid again; Node ${node}: added d=1:NoSchedule`);
  });

  it('converges every change while a foreign writer hammers the same Nodes, keeps its taints, and retries conflicts through the queue', async () => {
    // Prepare: besides its free-running writes, the writer writes each Node once right before each of the product's
    // PATCHes of it until two resourceVersion-guarded merge patches have been preceded so: the API server answers both
    // 409, whatever the timing; the record reads and plans again after the first, and goes back to the queue after the
    // second (a conflict the queue retries).
    const nodes = new Set<string>();
    const preceded = new Map<string, number>();
    const forced = new Set<string>();
    let nudger: ReturnType<typeof startForeignWriter> | undefined;
    world = await startWorld(kc, {
      kubeconfig: interleavedKubeConfig(kc, async (node, contentType) => {
        if (!nudger || !nodes.has(node) || forced.has(node)) return;
        await nudger.nudge(node);
        if (contentType !== 'application/merge-patch+json') return;
        preceded.set(node, (preceded.get(node) ?? 0) + 1);
        if ((preceded.get(node) ?? 0) >= 2) forced.add(node);
      }),
    });
    const pairs = [await machineWithNode(world, 'hammer-a'), await machineWithNode(world, 'hammer-b')];
    for (const p of pairs) nodes.add(p.node);
    const writer = startForeignWriter(kc, pairs.map((p) => p.node));
    nudger = writer;

    // Act
    try {
      await Promise.all(pairs.map((p) => runEditSequence(world as World, p.machine, p.node, HAMMER_TAINT_KEY)));
      // The writer went on through the whole sequence; it stops once it has written at least 50 times (a faster
      // pipeline may finish the sequence before that), so the Nodes must also hold up to its later writes.
      await waitFor(() => writer.written() > 50, { timeoutMs: 30_000, intervalMs: 20, description: 'the foreign writer to have written more than 50 times' });
    } finally {
      await writer.stop();
    }

    // Assess: after the writer stopped, each Node has exactly upstream's result plus the writer's own taint.
    for (const p of pairs) {
      await expectNode(kc, p.node, { taints: [FOREIGN_S, 'a=2:NoSchedule', 'b=2:NoExecute', ...writer.taintOf(p.node)], tracking: 'b:NoExecute' });
    }
    const c = world.pipeline.counters();
    expect([...forced].sort()).toEqual(pairs.map((p) => p.node).sort());
    expect(c.conflicts).toBeGreaterThanOrEqual(2);
    expect(c.reconciles.conflict).toBe(c.conflicts);
    expect(await deadLetters(world), JSON.stringify(c)).toEqual([]);
  });

  it('dead-letters a malformed message with its reason, and the rest of its group still flows', async () => {
    // Prepare
    world = await startWorld(kc);
    const node = await joinNode(world, 'dlq');
    const machine = uniqueName('dlq');
    await createMachine(kc, world.ns, machine, { specTaints: [{ key: 'x', value: '1', effect: 'NoSchedule' }], nodeName: node });
    await expectNode(kc, node, { taints: ['x=1:NoSchedule'], tracking: 'x:NoSchedule' });
    const group = `self/node/${node}`;

    // Act: a malformed message at the head of the Node's group, then a real change behind it.
    await world.pipeline.sqs.send(
      new SendMessageCommand({ QueueUrl: world.pipeline.queue.url, MessageBody: '{"not":"a CloudEvent"}', MessageGroupId: group, MessageDeduplicationId: uniqueName('bad') }),
    );
    await setSpecTaints(kc, world.ns, machine, [{ key: 'x', value: '2', effect: 'NoSchedule' }]);

    // Assess: reconcile is level-triggered, so a message ahead of the malformed one may already have written x=2;
    // the dead letter is then still on its way.
    await expectNode(kc, node, { taints: ['x=2:NoSchedule'], tracking: 'x:NoSchedule' });
    await waitFor(async () => (await world?.pipeline.localSqs.depth(world.pipeline.deadLetterQueue))?.visible === 1, { timeoutMs: 30_000, description: 'the dead letter' });
    const dead = await world.pipeline.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: world.pipeline.deadLetterQueue.url, MaxNumberOfMessages: 10, MessageAttributeNames: ['All'], MessageSystemAttributeNames: ['MessageGroupId'] }),
    );
    expect(dead.Messages).toHaveLength(1);
    expect(dead.Messages?.[0]?.Body).toBe('{"not":"a CloudEvent"}');
    expect(dead.Messages?.[0]?.Attributes?.MessageGroupId).toBe(group);
    expect(dead.Messages?.[0]?.MessageAttributes?.['failureReason']?.StringValue).toMatch(/\S/);
    expect(world.pipeline.counters().deadLettered).toBe(1);
    expect(world.pipeline.counters().reconciles['dead-lettered']).toBe(1);
    // The live totals read the queues with GetQueueAttributes: the dead letter (now in flight) counts in the DLQ depth.
    expect((await world.pipeline.freshCounters()).deadLetterQueueDepth).toBe(1);
  });

  it('loses no change when the forwarder is restarted mid-run', async () => {
    // Prepare
    world = await startWorld(kc);
    const { machine, node } = await machineWithNode(world, 'restart');
    await expectNode(kc, node, { taints: [FOREIGN_S, 'a=1:NoSchedule', 'b=1:PreferNoSchedule', 'c=1:NoExecute'], tracking: 'a:NoSchedule,c:NoExecute' });

    // Act: stop the forwarder (hand-over), change things while nobody watches, start a new one.
    await world.pipeline.stopForwarder();
    await setSpecTaints(kc, world.ns, machine, [{ key: 'a', value: '9', effect: 'NoSchedule' }]);
    const late = await joinNode(world, 'restart-late');
    const lateMachine = uniqueName('restart-late');
    await createMachine(kc, world.ns, lateMachine, { annotations: { [MACHINE]: 'late=yes:NoSchedule, boot:PreferNoSchedule@OnInitialization' }, nodeName: late });
    await new Promise((r) => setTimeout(r, 500));
    const forwardedBefore = world.pipeline.counters().eventsForwarded;
    world.pipeline.startForwarder();
    await world.pipeline.waitForForwarder(20_000);

    // Assess
    await expectNode(kc, node, { taints: [FOREIGN_S, 'a=9:NoSchedule', 'b=1:PreferNoSchedule', 'c=1:NoExecute'], tracking: 'a:NoSchedule,c:NoExecute' });
    await expectNode(kc, late, { taints: ['late=yes:NoSchedule', 'boot=:PreferNoSchedule'], tracking: 'late:NoSchedule' });
    expect(world.pipeline.counters().eventsForwarded).toBeGreaterThan(forwardedBefore);
  });

  it("announces again, in a new pipeline, a change that was queued but died with the previous pipeline's in-memory queue", async () => {
    // Prepare: a converged Node; then the reconcile side stops, so what the forwarder queues now is never applied.
    world = await startWorld(kc);
    const { machine, node } = await machineWithNode(world, 'requeue');
    await expectNode(kc, node, { taints: [FOREIGN_S, 'a=1:NoSchedule', 'b=1:PreferNoSchedule', 'c=1:NoExecute'], tracking: 'a:NoSchedule,c:NoExecute' });
    await world.pipeline.eventSource.stop();
    const forwardedBefore = world.pipeline.counters().eventsForwarded;
    await setSpecTaints(kc, world.ns, machine, [{ key: 'a', value: '9', effect: 'NoSchedule' }]);
    const queued = world;
    await waitFor(() => queued.pipeline.counters().eventsForwarded > forwardedBefore, { timeoutMs: 10_000, description: 'the edit to be queued' });

    // Act: the pipeline stops (its forwarder hands over with a checkpoint past the edit; its queue goes, with the
    // edit's message), and another starts with a queue of its own.
    await world.pipeline.stop();
    const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: `forwarder-${world.run}`, namespace: world.ns });
    const stored = JSON.parse(lease.metadata?.annotations?.[CHECKPOINT_ANNOTATION] ?? '{}') as Record<string, string>;
    const edited = (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ ...MACHINES, namespace: world.ns, name: machine })) as { metadata: { resourceVersion: string } };
    world = await restartWorld(world);

    // Assess: the checkpoint had passed the edit, and the edit was applied all the same.
    expect(BigInt(stored['machines'] ?? '0')).toBeGreaterThanOrEqual(BigInt(edited.metadata.resourceVersion));
    await expectNode(kc, node, { taints: [FOREIGN_S, 'a=9:NoSchedule', 'b=1:PreferNoSchedule', 'c=1:NoExecute'], tracking: 'a:NoSchedule,c:NoExecute' });
  });

  describe('capi mode', () => {
    it('reaches the workload cluster through the <cluster>-kubeconfig Secret and converges its Nodes', async () => {
      // Prepare: the "workload cluster" is the same API server, reached through its kubeconfig Secret.
      const cluster = uniqueName('wc');
      world = await startWorld(kc, { mode: 'capi' });
      const core = kc.makeApiClient(CoreV1Api);
      await core.createNamespacedSecret({
        namespace: world.ns,
        body: {
          metadata: { name: `${cluster}-kubeconfig`, labels: { 'cluster.x-k8s.io/cluster-name': cluster } },
          type: 'cluster.x-k8s.io/secret',
          data: { value: readFileSync(requireControlPlane().kubeconfigPath).toString('base64') },
        },
      });
      await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        group: 'cluster.x-k8s.io',
        version: 'v1beta2',
        plural: 'clusters',
        namespace: world.ns,
        body: { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name: cluster, namespace: world.ns }, spec: { paused: false } },
      });
      const node = await joinNode(world, 'capi', [FOREIGN]);
      const machine = uniqueName('capi');

      // Act
      await createMachine(kc, world.ns, machine, { clusterName: cluster, specTaints: [{ key: 'role', value: 'db', effect: 'NoSchedule' }], nodeName: node });

      // Assess
      await expectNode(kc, node, { taints: [FOREIGN_S, 'role=db:NoSchedule'], tracking: 'role:NoSchedule' });
      // A Node-side change (someone removes the managed taint) is seen through the workload watch and repaired.
      await core.patchNode({ name: node, body: { spec: { taints: [FOREIGN] } } }, MERGE_PATCH);
      await expectNode(kc, node, { taints: [FOREIGN_S, 'role=db:NoSchedule'], tracking: 'role:NoSchedule' });
    });

    it('runs every shard of FORWARDER_SHARDS in one pipeline, each on its own Lease, and converges the Nodes of clusters of both', async () => {
      // Prepare: two shards; a workload Cluster of each (both are this API server, reached through their Secrets).
      const w = await startWorld(kc, { mode: 'capi', shards: 2 });
      world = w;
      const core = kc.makeApiClient(CoreV1Api);
      const clusterOf = async (shard: number): Promise<string> => {
        let name = uniqueName('wc');
        while (shardOf(`${w.ns}/${name}`, 2) !== shard) name = uniqueName('wc');
        await core.createNamespacedSecret({
          namespace: w.ns,
          body: { metadata: { name: `${name}-kubeconfig`, labels: { 'cluster.x-k8s.io/cluster-name': name } }, type: 'cluster.x-k8s.io/secret', data: { value: readFileSync(requireControlPlane().kubeconfigPath).toString('base64') } },
        });
        await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
          group: 'cluster.x-k8s.io',
          version: 'v1beta2',
          plural: 'clusters',
          namespace: w.ns,
          body: { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name, namespace: w.ns }, spec: { paused: false } },
        });
        return name;
      };
      const clusters = [await clusterOf(0), await clusterOf(1)];
      await w.pipeline.waitForForwarder();
      const nodes = [await joinNode(w, 'shard0'), await joinNode(w, 'shard1')];

      // Act: a Machine of each cluster declares a taint on its Node
      for (const [i, cluster] of clusters.entries()) {
        await createMachine(kc, w.ns, uniqueName(`m${i}`), { clusterName: cluster, specTaints: [{ key: 'shard', value: String(i), effect: 'NoSchedule' }], nodeName: nodes[i] ?? '' });
      }

      // Assess: both Nodes converge; each shard holds a Lease of its own.
      await expectNode(kc, nodes[0] ?? '', { taints: ['shard=0:NoSchedule'], tracking: 'shard:NoSchedule' });
      await expectNode(kc, nodes[1] ?? '', { taints: ['shard=1:NoSchedule'], tracking: 'shard:NoSchedule' });
      const leases = await kc.makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: w.ns });
      expect(leases.items.map((l) => l.metadata?.name).sort()).toEqual([`forwarder-${w.run}-0-of-2`, `forwarder-${w.run}-1-of-2`]);
    });
  });
});
