/**
 * The deployable artifact, not the sources: the watch-forwarder handler bundled with the esbuild options of
 * serverless.yml (as serverless-esbuild builds it), loaded as Lambda loads it (an ES module, `handler.mjs`, a fresh
 * Node process per cold start, configuration from the environment, `context.getRemainingTimeInMillis()`), running windows of the
 * deployed form's rota against the real API server and an SQS FIFO queue on fauxqs (functions/watch-forwarder/README.md,
 * "Deployed form"), and running the shard its schedule input names. The full deployed-form tier (the packaged zips
 * under a Lambda-like runner) is test/deployed/.
 */
import { CoordinationV1Api } from '@kubernetes/client-node';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { build } from 'esbuild';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { lambdaBundleOptions, lambdaHandlerFile } from '#infra/lambda-bundle.ts';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { CHECKPOINT_ANNOTATION, MEMBERS_ANNOTATION, encodeMembers } from '#shared/adapters/kubernetes/lease.ts';
import { startLocalSqs, type LocalSqs } from '#local/sqs/local-sqs.ts';
import { adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, requireControlPlane, uniqueName } from '#test/support/control-plane.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'forwarder-bundle-'));

/**
 * The environment the bundled handler runs with, as the packaged function has it: the management cluster by its
 * kubeconfig, the local queue (as in AWS, the queue URL's host is the SQS endpoint: the SDK sends to the QueueUrl's
 * host), the test's state namespace and Lease; `extra` adds what a test varies.
 */
function forwarderEnv(sqs: LocalSqs, ns: string, lease: string, extra: Readonly<Record<string, string>>): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    NODE_PATH: resolve('node_modules'),
    KUBECONFIG: requireControlPlane().kubeconfigPath,
    MANAGEMENT_AUTH: 'kubeconfig',
    QUEUE_URL: `${sqs.endpoint}${new URL(sqs.queue.url).pathname}`,
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    AWS_REGION: sqs.region,
    STATE_NAMESPACE: ns,
    LEASE_NAME: lease,
    MACHINE_NAMESPACE: ns,
    RESYNC_INTERVAL_SECONDS: '0',
    POWERTOOLS_LOG_LEVEL: 'WARN',
    ...extra,
  };
}

describeWithControlPlane('The bundled watch-forwarder handler (the Lambda artifact) in the rota', () => {
  let sqs: LocalSqs;
  beforeAll(async () => {
    sqs = await startLocalSqs({ queueName: `${uniqueName('fwd-bundle')}.fifo`, deadLetterQueueName: `${uniqueName('fwd-bundle-dlq')}.fifo` });
  });
  afterAll(async () => {
    await sqs?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('joins an empty rota, announces, hands over and leaves; a run that finds two members with time left exits without watching', { timeout: 120_000 }, async () => {
    // Prepare: bundle exactly as serverless-esbuild does with serverless.yml's custom.esbuild.
    const options = lambdaBundleOptions(resolve('.'));
    const file = lambdaHandlerFile(options);
    await build({ ...options, entryPoints: ['functions/watch-forwarder/handler.ts'], outfile: join(dir, file), logLevel: 'silent' });
    // The runtime provides the AWS SDK, which the handler loads with import() (ES resolution ignores NODE_PATH):
    // a node_modules next to the bundle stands in for the runtime's copy.
    if (!existsSync(join(dir, 'node_modules'))) symlinkSync(resolve('node_modules'), join(dir, 'node_modules'), 'dir');
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'fwd-bundle');
    const lease = uniqueName('lease');
    const selector = uniqueName('sel');
    // Its Machine (linked as Cluster API links them) declares a taint the Node lacks: the first list (quiet: only what
    // may need a write) announces the Node.
    const machine = uniqueName('m');
    const node = await createNode(kc, uniqueName('node'), { labels: { 'bundle-test': selector }, annotations: { 'cluster.x-k8s.io/machine': machine, 'cluster.x-k8s.io/cluster-namespace': ns } });
    await createMachine(kc, ns, machine, { nodeName: node.metadata?.name ?? '', annotations: { 'taints.capi-taint-propagator.dev/machine': 'example.com/declared:NoSchedule' } });
    // 19 s left: the handler keeps 15 s back, so the window lasts 4 s.
    writeFileSync(
      join(dir, 'invoke.mjs'),
      `const { handler } = await import('./${file}');
       handler({ 'detail-type': 'Scheduled Event', source: 'aws.events' }, { awsRequestId: 'bundle-test', functionName: 'watch-forwarder', getRemainingTimeInMillis: () => 19000 })
         .then((r) => process.stdout.write('RESULT ' + JSON.stringify(r) + '\\n'), (e) => { console.error(e); process.exit(1); });`,
    );
    const coldStart = () =>
      run(process.execPath, ['--enable-source-maps', join(dir, 'invoke.mjs')], {
        cwd: dir,
        env: forwarderEnv(sqs, ns, lease, { CLUSTER_MODE: 'self', NODE_LABEL_SELECTOR: `bundle-test=${selector}` }),
        timeout: 60_000,
      });
    const result = (stdout: string): Record<string, unknown> => JSON.parse(/^RESULT (.*)$/m.exec(stdout)?.[1] ?? 'null') as Record<string, unknown>;
    const readLease = () => kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: lease, namespace: ns });

    // Act: a first run (no Lease yet), then two live members with time left recorded, then a second run.
    const first = result((await coldStart()).stdout);
    const afterFirst = await readLease();
    const received = await sqs.client.send(new ReceiveMessageCommand({ QueueUrl: sqs.queue.url, MaxNumberOfMessages: 10 }));
    const now = Date.now();
    const live = [
      { id: 'fwd-x', until: new Date(now + 600_000), seenAt: new Date(now) },
      { id: 'fwd-y', until: new Date(now + 300_000), seenAt: new Date(now) },
    ];
    const patched = await kc.makeApiClient(CoordinationV1Api).patchNamespacedLease(
      { name: lease, namespace: ns, body: [{ op: 'add', path: '/metadata/annotations/capi-taint-propagator.dev~1members', value: encodeMembers(live) }] },
    );
    const second = result((await coldStart()).stdout);
    const afterSecond = await readLease();

    // Assess: the first run joined, held the Lease, announced the Node, stored its checkpoint at the release, left.
    expect(first).toMatchObject({ active: true, unsent: 0, rota: { joined: true } });
    expect((received.Messages ?? []).map((m) => fromCloudEventBody(m.Body ?? '').id)).toEqual([`${node.metadata?.uid}:${node.metadata?.resourceVersion}:resynced`]);
    expect(afterFirst.spec?.holderIdentity ?? '').toBe('');
    expect(Object.keys(JSON.parse(afterFirst.metadata?.annotations?.[CHECKPOINT_ANNOTATION] ?? '{}'))).toEqual(expect.arrayContaining(['machines', 'nodes/self']));
    expect(afterFirst.metadata?.annotations?.[MEMBERS_ANNOTATION]).toBe('{}');
    // The second run counted the two members and exited: nothing written, the Lease not taken.
    expect(second).toMatchObject({ active: false, rota: { joined: false, membersCounted: 2 } });
    expect(afterSecond.metadata?.resourceVersion).toBe(patched.metadata?.resourceVersion);
    expect(afterSecond.metadata?.annotations?.[MEMBERS_ANNOTATION]).toBe(encodeMembers(live));
    expect(afterSecond.spec?.holderIdentity ?? '').toBe('');
  });

  it("runs the shard its schedule's input names, on that shard's Lease; refuses a shard beyond FORWARDER_SHARDS", { timeout: 120_000 }, async () => {
    // Prepare: the same bundle; capi mode with two shards (no Cluster: the window watches the management kinds only).
    const options = lambdaBundleOptions(resolve('.'));
    const file = lambdaHandlerFile(options);
    await build({ ...options, entryPoints: ['functions/watch-forwarder/handler.ts'], outfile: join(dir, file), logLevel: 'silent' });
    if (!existsSync(join(dir, 'node_modules'))) symlinkSync(resolve('node_modules'), join(dir, 'node_modules'), 'dir');
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'fwd-bundle-shard');
    const lease = uniqueName('lease');
    const invoke = (event: unknown) => {
      writeFileSync(
        join(dir, 'invoke-shard.mjs'),
        `const { handler } = await import('./${file}');
         handler(${JSON.stringify(event)}, { awsRequestId: 'bundle-test', functionName: 'watch-forwarder', getRemainingTimeInMillis: () => 17000 })
           .then((r) => process.stdout.write('RESULT ' + JSON.stringify(r) + '\\n'), (e) => { process.stdout.write('ERROR ' + e.message + '\\n'); process.exit(1); });`,
      );
      return run(process.execPath, [join(dir, 'invoke-shard.mjs')], {
        cwd: dir,
        env: forwarderEnv(sqs, ns, lease, { CLUSTER_MODE: 'capi', FORWARDER_SHARDS: '2' }),
        timeout: 60_000,
      }).then(
        ({ stdout }) => stdout,
        (e: { stdout?: string }) => e.stdout ?? '',
      );
    };

    // Act
    const ran = await invoke({ shard: 1 });
    const refused = await invoke({ shard: 2 });

    // Assess: the window ran shard 1's rota on `<lease>-1-of-2` only; shard 2 of 2 was refused before any watch.
    expect(/^RESULT (.*)$/m.exec(ran)?.[1]).toBeDefined();
    expect(JSON.parse(/^RESULT (.*)$/m.exec(ran)?.[1] ?? 'null')).toMatchObject({ active: true, rota: { joined: true } });
    const leases = await kc.makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: ns });
    expect(leases.items.map((l) => l.metadata?.name)).toEqual([`${lease}-1-of-2`]);
    expect(refused).toMatch(/^ERROR Invalid configuration event\.shard: must be an integer from 0 to 1 \(FORWARDER_SHARDS is 2\), got 2$/m);
  });
});
