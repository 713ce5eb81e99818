/**
 * The deployed form: the zips and the template of `npx serverless package` run by the Lambda runner (local/lambda/)
 * as Lambda runs them — containers frozen between invocations and killed at the template's timeout, the schedule
 * firing at random points of its minutes, the SQS event source mapping as declared, the management kubeconfig read
 * from the SSM endpoint through the runtime's SDK — against the control plane with the Cluster API manager and the
 * product's RBAC. Cluster API makes every Machine and Node here; the tests only write what a user writes.
 *
 * The tests share one deployment and run in order (the forwarder's rota runs through all of them): the hand-over
 * test waits for the first member's window to end, about 4.5 minutes after the first run.
 */
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { InvocationRecord, LambdaRunner, QueueMessage } from '#local/lambda/runner.ts';
import { MERGE_PATCH, createNamespace, waitFor } from '#test/support/control-plane.ts';
import { MACHINE_DEPLOYMENTS, capiControlPlane, capiKubeConfig, createMachineDeployment, createSelfHostedCluster, describeWithCapi, listObjects, MACHINES, taintText, waitForClusterConnected, waitForMachineNodes, type AvailableCapiControlPlane } from '#test/support/capi.ts';
import { CODE_FIXTURE } from '#test/support/aws-calls.ts';
import { deployedCalls, writeDeployedCalls } from '#test/support/deployed-aws-calls.ts';
import { applyFile, applyObjects, grantKubeconfigSecrets, startDeployed } from '#test/support/deployed.ts';

const ANNOTATION = 'taints.capi-taint-propagator.dev/machine';
const GATE = 'taints.capi-taint-propagator.dev/uninitialized';
const EXAMPLES_NS = 'capi-examples';
const log = (line: string): void => {
  process.stderr.write(`[deployed] ${line}\n`);
};

describeWithCapi('The packaged functions, run as Lambda runs them', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let runner: LambdaRunner;
  const invocations: InvocationRecord[] = [];
  const messages: QueueMessage[] = [];
  /** Our own namespace, Cluster and MachineDeployment (1 replica) for the fault tests. */
  let ns: string;
  let md: string;
  let node: string;

  /** Taints of a Node as `key=value:effect`. */
  const taintsOf = async (name: string): Promise<string[]> => ((await core.readNode({ name })).spec?.taints ?? []).map(taintText);
  const setDeclaration = async (namespace: string, deployment: string, value: string): Promise<void> => {
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      { ...MACHINE_DEPLOYMENTS, namespace, name: deployment, body: { spec: { template: { metadata: { annotations: { [ANNOTATION]: value } } } } } },
      MERGE_PATCH,
    );
  };
  /** Waits until the Node carries `want` (and not the other values of its key); returns ms since `since`. */
  const landed = async (name: string, want: string, since: number, timeoutMs = 150_000): Promise<number> => {
    const key = want.slice(0, want.indexOf('='));
    await waitFor(
      async () => {
        const taints = await taintsOf(name);
        return taints.includes(want) && taints.filter((t) => t.startsWith(`${key}=`)).length === 1;
      },
      { timeoutMs, intervalMs: 100, description: `Node ${name} to carry ${want}` },
    );
    return Date.now() - since;
  };
  const forwarderRuns = (): InvocationRecord[] => invocations.filter((r) => r.functionKey === 'watchForwarder');
  const joined = (r: InvocationRecord): boolean => r.result.ok && (r.result.value as { rota?: { joined?: boolean } } | null)?.rota?.joined === true;

  beforeAll(async () => {
    kc = capiKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    const cp = capiControlPlane() as AvailableCapiControlPlane;
    ({ runner } = await startDeployed(kc, cp, { onInvocation: (r) => invocations.push(r), onQueueMessage: (m) => messages.push(m) }));
    runner.startTriggers();
    // The first event of the schedule now (a new rule's first minute may fire at once): a cold start joins the rota.
    void runner.fireSchedule('watchForwarder');
    ns = await createNamespace(kc, 'deployed');
    // As an operator would: the kubeconfig-Secret RBAC of a Cluster before the Cluster.
    await grantKubeconfigSecrets(kc, [{ namespace: ns, name: 'faults' }]);
    const cluster = await createSelfHostedCluster(kc, ns, 'faults', 90_000);
    md = await createMachineDeployment(kc, ns, { cluster, replicas: 1, annotations: { [ANNOTATION]: 'h=v0:NoSchedule' }, startupTaints: [{ key: GATE, effect: 'NoSchedule' }] });
    const [pair] = await waitForMachineNodes(kc, ns, md, 1, 120_000);
    node = pair?.node.metadata?.name ?? '';
    await landed(node, 'h=v0:NoSchedule', Date.now());
  }, 300_000);

  afterAll(async () => {
    await runner?.stop();
    // Every AWS call the functions made (the runner's call log) is one the code fixture lists, so the least-privilege
    // test, which evaluates the fixture against the packaged template's policies, covered it; the file is its input
    // with AWS_CALL_RECORDINGS.
    if (runner) {
      const functions = ['watchForwarder', 'reconcileNodeTaints'].map((key) => {
        const pool = runner.fn(key);
        return {
          functionName: pool.fn.functionName,
          name: pool.fn.functionName.endsWith('-watch-forwarder') ? 'watch-forwarder' : 'reconcile-node-taints',
          env: pool.env,
          eventSourceQueues: pool.fn.sqsEventSources.map((m) => runner.template.queues.get(m.queueLogicalId)?.queueName ?? ''),
        };
      });
      const calls = deployedCalls(runner.callLog.records(), functions);
      const { file, unlisted } = await writeDeployedCalls('deployed-form', calls, CODE_FIXTURE);
      log(`${calls.length} distinct AWS calls written to ${file}`);
      expect(unlisted.map((c) => `${c.function} ${c.action} ${c.resource} ${JSON.stringify(c.context ?? {})}`)).toEqual([]);
      expect(calls.map((c) => `${c.function} ${c.action}`)).toEqual(
        expect.arrayContaining(['watch-forwarder sqs:SendMessage', 'watch-forwarder ssm:GetParameter', 'reconcile-node-taints ssm:GetParameter', 'reconcile-node-taints sqs:ReceiveMessage', 'reconcile-node-taints logs:PutLogEvents']),
      );
    }
    const f = runner?.fn('watchForwarder').stats();
    const r = runner?.fn('reconcileNodeTaints').stats();
    if (f && r) log(`forwarder ${JSON.stringify(f)}; reconcile ${JSON.stringify(r)}`);
    for (const x of invocations.filter((i) => !i.result.ok)) log(`failed ${x.functionKey} invocation (${x.trigger}, ${x.durationMs} ms): ${JSON.stringify(x.result)}`);
  });

  it('reads every setting from the packaged template and the kubeconfig from SSM through the runtime SDK', async () => {
    const forwarder = runner.fn('watchForwarder').fn;
    const reconcile = runner.fn('reconcileNodeTaints').fn;
    expect(forwarder.runtime).toBe('nodejs22.x');
    expect(forwarder.schedules.map((s) => s.expression)).toEqual(['rate(1 minute)']);
    expect(reconcile.sqsEventSources).toEqual([expect.objectContaining({ queueLogicalId: 'EventQueue', batchSize: 10, reportBatchItemFailures: true })]);
    expect(runner.template.queues.get('EventQueue')?.visibilityTimeoutSeconds).toBe(30);
    const calls = runner.callLog.records();
    for (const role of ['forwarder', 'reconcile']) {
      expect(calls).toContainEqual(expect.objectContaining({ action: 'ssm:GetParameter', status: 200, caller: 'function', principalArn: `arn:aws:iam::111122223333:role/capi-taint-propagator-example-ssm-${role}` }));
    }
    expect(calls).toContainEqual(expect.objectContaining({ action: 'sqs:SendMessageBatch', status: 200, resource: 'arn:aws:sqs:eu-west-1:111122223333:capi-taint-propagator-example-ssm-events.fifo' }));
    expect(runner.fn('watchForwarder').stats().coldStarts).toBeGreaterThanOrEqual(1);
    // Frozen between invocations: once its invocation has returned (the Node's write is not the end of it: the Event,
    // the batch response and a rota member's duplicate may still run), an idle container of the reconcile function is
    // stopped (SIGSTOP); and every idle one is.
    const reconcilePool = runner.fn('reconcileNodeTaints');
    const idle = await waitFor(() => {
      const now = reconcilePool.containers().filter((c) => !reconcilePool.busy().includes(c));
      return now.length > 0 ? now : undefined;
    }, 30_000);
    expect(idle.every((c) => c.frozen)).toBe(true);
  });

  it("lands the walkthrough's declarations (local/examples)", async () => {
    await applyObjects(kc, [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: EXAMPLES_NS } }]);
    await grantKubeconfigSecrets(kc, [
      { namespace: EXAMPLES_NS, name: 'annotated' },
      { namespace: EXAMPLES_NS, name: 'topology' },
    ]);
    await applyFile(kc, 'local/examples/cluster-annotations.yaml');
    await waitForClusterConnected(kc, EXAMPLES_NS, 'annotated', 90_000);
    const pairs = await waitForMachineNodes(kc, EXAMPLES_NS, 'edge', 2, 120_000);
    for (const p of pairs) {
      const name = p.node.metadata?.name ?? '';
      await landed(name, 'pool=edge:NoSchedule', Date.now());
      await landed(name, 'zone=eu-1a:PreferNoSchedule', Date.now());
      expect((await taintsOf(name)).some((t) => t.startsWith(`${GATE}=`))).toBe(false);
    }
    const patchedAt = Date.now();
    await setDeclaration(EXAMPLES_NS, 'edge', 'pool=edge-2:NoSchedule');
    for (const p of pairs) log(`walkthrough patch reached ${p.node.metadata?.name} after ${await landed(p.node.metadata?.name ?? '', 'pool=edge-2:NoSchedule', patchedAt)} ms`);

    await applyFile(kc, 'local/examples/clusterclass.yaml');
    await applyFile(kc, 'local/examples/cluster-topology.yaml');
    await waitForClusterConnected(kc, EXAMPLES_NS, 'topology', 90_000);
    const machines = await waitFor(
      async () => {
        const items = await listObjects(kc, MACHINES, EXAMPLES_NS, 'cluster.x-k8s.io/cluster-name=topology');
        return items.length === 2 && items.every((m) => (m.status?.['nodeRef'] as { name?: string } | undefined)?.name) ? items : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 200, description: 'two topology Machines with Nodes' },
    );
    for (const m of machines) {
      const name = (m.status?.['nodeRef'] as { name: string }).name;
      await landed(name, 'nvidia.com/gpu=a100:NoSchedule', Date.now());
      expect((await taintsOf(name)).filter((t) => t.startsWith('example.com/spot='))).toEqual([]);
    }
  });

  it('loses nothing when a reconcile container is killed in the middle of a batch: the batch comes back after the visibility timeout', async () => {
    const pool = runner.fn('reconcileNodeTaints');
    const group = `node/${node}`;
    const before = runner.eventSourceCounters()['reconcileNodeTaints']?.failedInvocations ?? 0;
    // The next batch that carries this Node's group: its container is killed as soon as the handler has it.
    const killed = (async () => {
      for (;;) {
        const d = await pool.nextDispatch();
        const records = (d.event as SQSEvent).Records ?? [];
        if (records.some((r) => (r.attributes.MessageGroupId ?? '').endsWith(group))) {
          d.container.kill();
          return d.requestId;
        }
      }
    })();
    const editedAt = Date.now();
    await setDeclaration(ns, md, 'h=v1:NoSchedule');
    const requestId = await killed;
    const ms = await landed(node, 'h=v1:NoSchedule', editedAt, 120_000);
    const record = pool.records.find((r) => r.requestId === requestId);
    expect(record?.result).toMatchObject({ ok: false, errorType: 'Runtime.ExitError' });
    expect(runner.eventSourceCounters()['reconcileNodeTaints']?.failedInvocations).toBeGreaterThan(before);
    log(`killed reconcile batch: the change landed ${ms} ms after the edit (visibility timeout ${runner.template.queues.get('EventQueue')?.visibilityTimeoutSeconds} s)`);
  });

  it('converges when a foreign writer hammers the Node: conflicts go back through the queue', async () => {
    const since = runner.callLog.records().length;
    const retriedThroughQueue = (): boolean =>
      runner.callLog.records().slice(since).some((c) => c.action === 'sqs:ChangeMessageVisibility' && c.caller === 'function' && c.functionName.endsWith('reconcile-node-taints'));
    // A foreign writer: three loops patching a label of the Node as fast as the API server answers, so that the
    // Node's resourceVersion moves between a reconcile's read and its write (a 409 for the write's precondition).
    let stopped = false;
    let writes = 0;
    const loops = [0, 1, 2].map(async (loop) => {
      for (let round = 0; !stopped; round++) {
        await core.patchNode({ name: node, body: { metadata: { labels: { 'other.example.com/round': `${loop}-${round}` } } } }, MERGE_PATCH);
        writes++;
      }
    });
    let last = 1;
    try {
      // Edits go on (300 ms apart, at most 100) until a reconcile lost a race to the writer and its record went back
      // to the queue with a backoff (ChangeMessageVisibility by the reconcile function): the positive signal.
      for (let i = 2; i <= 101 && !retriedThroughQueue(); i++) {
        await setDeclaration(ns, md, `h=v${i}:NoSchedule`);
        last = i;
        await new Promise((r) => setTimeout(r, 300));
      }
      await waitFor(retriedThroughQueue, { timeoutMs: 60_000, description: `a conflict retried through the queue (ChangeMessageVisibility by the reconcile function; ${writes} foreign writes)` });
    } finally {
      stopped = true;
      await Promise.all(loops);
    }
    // After the writer stopped: the last declaration, the writer's label kept.
    await landed(node, `h=v${last}:NoSchedule`, Date.now(), 120_000);
    const after = await core.readNode({ name: node });
    expect((after.spec?.taints ?? []).map(taintText).filter((t) => t.startsWith('h='))).toEqual([`h=v${last}:NoSchedule`]);
    expect(after.metadata?.labels?.['other.example.com/round']).toMatch(/^\d-\d+$/);
    log(`conflicts: ${last - 1} edits and ${writes} foreign writes until a record went back through the queue`);
  });

  it('lands a change made while a rota member hands over (window ends), latency measured', async () => {
    // Wait for the end of a member's window (a joined run that returns), then edit at once.
    const seen = forwarderRuns().filter(joined).length;
    await waitFor(() => forwarderRuns().filter(joined).length > seen, { timeoutMs: 420_000, intervalMs: 20, description: 'a rota member to end its window' });
    const editedAt = Date.now();
    await setDeclaration(ns, md, 'h=v100:NoSchedule');
    const ms = await landed(node, 'h=v100:NoSchedule', editedAt, 120_000);
    // Positive signal: the change's queue message was sent (by a live member) after the edit.
    const machine = (await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/deployment-name=${md}`))[0]?.metadata.name ?? '';
    const sent = messages.filter((m) => m.at >= editedAt && m.body.includes(machine));
    expect(sent.length).toBeGreaterThan(0);
    log(`hand-over: edit → queue message ${(sent[0]?.at ?? 0) - editedAt} ms, edit → Node ${ms} ms; forwarder runs so far ${forwarderRuns().length} (${forwarderRuns().filter(joined).length} joined windows ended)`);
  }, 480_000);

  it('loses nothing when every forwarder container is killed in the middle of its window', async () => {
    const pool = runner.fn('watchForwarder');
    await waitFor(() => pool.busy().length > 0, { timeoutMs: 120_000, intervalMs: 50, description: 'a forwarder window running' });
    const killedAt = Date.now();
    pool.killAll();
    await setDeclaration(ns, md, 'h=v101:NoSchedule');
    const ms = await landed(node, 'h=v101:NoSchedule', killedAt, 200_000);
    // Positive signals: every container that ran is gone (their invocations failed as killed), a container started
    // after the kill announced the change.
    expect(forwarderRuns().some((r) => r.startedAt < killedAt && !r.result.ok && r.result.errorType === 'Runtime.ExitError')).toBe(true);
    expect(pool.containers().some((c) => c.startedAt >= killedAt)).toBe(true);
    const machine = (await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/deployment-name=${md}`))[0]?.metadata.name ?? '';
    expect(messages.some((m) => m.at >= killedAt && m.body.includes(machine))).toBe(true);
    log(`forwarder killed mid-window: the change made right after landed in ${ms} ms (next scheduled run)`);
  }, 240_000);
});
