/**
 * The reconcile function's batch with one hostile workload cluster and one healthy one (the real test API server,
 * through its `<cluster>-kubeconfig` Secret): issue "One bad workload cluster cannot hurt the others", item 6. The
 * hostile cluster's Secret names a loopback HTTPS server (its CA in the kubeconfig, so TLS succeeds) that answers the
 * Node GET with 64 MiB, with an answer that never ends, or with one that drips a byte every 100 ms; or answers the
 * GET just inside the call timeout and then drips the PATCH; or answers every call at once with a 200 that is no Node
 * (an empty body with `Connection: close`, or an empty NodeList: issue 48), or with a Node whose `spec.taints` is not a
 * list of taints (then nothing is planned, nor patched, from it). Each time: the hostile record fails as transient (made
 * visible again, nothing dead-lettered), the healthy cluster's Node is patched, and the whole batch takes at most one
 * call timeout (2 s here) more than the healthy record needs. At most CLUSTER_CONCURRENCY records of the hostile cluster
 * reach it at once; a record that starts after its failure is not tried.
 */
import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { CLUSTER_CONCURRENCY } from '#functions/reconcile-node-taints/cluster-guard.ts';
import { processBatch } from '#functions/reconcile-node-taints/process-batch.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { createServerPki } from '#local/control-plane/pki.ts';
import {
  adminKubeConfig,
  createClusterWithKubeconfig,
  createMachine,
  createNamespace,
  createNode,
  describeWithControlPlane,
  requireControlPlane,
  uniqueName,
} from '#test/support/control-plane.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, machineEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

const CALL_TIMEOUT_MS = 2_000;
/** What the healthy record and the batch's own work may take on a loaded 2-core machine, beyond the hostile time. */
const MARGIN_MS = 1_200;
const MiB = 1024 * 1024;
const sqsMock = mockClient(SQSClient);

type Behaviour = 'huge' | 'endless' | 'dripping' | 'slow-get-dripping-patch' | 'prompt-get-dripping-patch' | 'empty-close' | 'node-list' | 'bad-taints';

describeWithControlPlane('the reconcile function with a hostile and a healthy workload cluster in one batch', () => {
  let admin: KubeConfig;
  let ns: string;
  let dir: string;
  let hostile: Server;
  let hostileUrl: string;
  let caData: string;
  const timers = new Set<NodeJS.Timeout>();
  const requests: string[] = [];
  const healthy = uniqueName('healthy');

  beforeAll(async () => {
    admin = adminKubeConfig();
    ns = await createNamespace(admin, 'hostile-answers');
    dir = mkdtempSync(join(tmpdir(), 'ctp-hostile-answers-'));
    const pki = await createServerPki(join(dir, 'pki'));
    caData = readFileSync(pki.ca.certPath).toString('base64');
    // The behaviour is the bearer token of the hostile Secret.
    hostile = createServer({ cert: readFileSync(pki.serving.certPath), key: readFileSync(pki.serving.keyPath) }, (req, res) => {
      const behaviour = (req.headers.authorization ?? '').replace('Bearer ', '') as Behaviour;
      requests.push(`${behaviour} ${req.method} ${(req.url ?? '').split('?')[0]?.split('/').at(-1) ?? ''}`);
      req.resume();
      const pump = (chunk: Buffer): void => {
        const more = (): void => {
          while (!res.destroyed && res.write(chunk));
          if (!res.destroyed) res.once('drain', more);
        };
        more();
      };
      const drip = (): void => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write('{');
        const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : res.write(' ')), 100);
        timers.add(timer);
      };
      if (behaviour === 'huge') {
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': 64 * MiB });
        pump(Buffer.alloc(MiB, 0x20));
      } else if (behaviour === 'endless') {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        pump(Buffer.alloc(256 * 1024, 0x20));
      } else if (behaviour === 'dripping') {
        drip();
      } else if (behaviour === 'empty-close') {
        res.writeHead(200, { 'Content-Type': 'application/json', Connection: 'close' }).end();
      } else if (behaviour === 'node-list') {
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: '1000' }, items: [] }));
      } else if (behaviour === 'bad-taints') {
        const name = (req.url ?? '').split('?')[0]?.split('/').at(-1) ?? '';
        res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ kind: 'Node', apiVersion: 'v1', metadata: { name, uid: 'u1', resourceVersion: '7' }, spec: { taints: [{ key: 1, effect: 'NoSchedule' }, 'text'] } }));
      } else if (req.method === 'GET') {
        // Just inside the call timeout (or at once): a Node without taints, so the record goes on to patch it.
        const name = (req.url ?? '').split('?')[0]?.split('/').at(-1) ?? '';
        const timer = setTimeout(() => {
          res.writeHead(200, { 'Content-Type': 'application/json' }).end(JSON.stringify({ kind: 'Node', apiVersion: 'v1', metadata: { name, uid: 'u1', resourceVersion: '7' }, spec: {} }));
        }, behaviour === 'prompt-get-dripping-patch' ? 0 : CALL_TIMEOUT_MS - 300);
        timers.add(timer);
      } else {
        drip();
      }
    });
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    hostileUrl = `https://127.0.0.1:${(hostile.address() as AddressInfo).port}`;
    await createClusterWithKubeconfig(admin, ns, healthy, readFileSync(requireControlPlane().kubeconfigPath, 'utf8'));
  });

  afterAll(async () => {
    for (const t of timers) clearInterval(t);
    hostile?.closeAllConnections();
    await new Promise<void>((resolve) => (hostile ? hostile.close(() => resolve()) : resolve()));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function deps(): ReturnType<typeof composeReconcile> {
    const workload = workloadKubeConfigs(admin);
    return composeReconcile({
      config: {
        queueUrl: TEST_QUEUE_URL,
        deadLetterQueueUrl: TEST_DLQ_URL,
        dryRun: false,
        specTaintsOwner: 'product',
        startupTaint: undefined,
        retryBaseSeconds: 1,
        retryMaxSeconds: 5,
        stateNamespace: ns,
        firstEnabledAt: new Date('2020-01-01T00:00:00Z'),
        apiTimeoutSeconds: CALL_TIMEOUT_MS / 1000,
      },
      clusterMode: 'capi',
      managementKubeConfig: admin,
      workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }),
      sqs: new SQSClient({ region: 'eu-west-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }),
    });
  }

  /** A hostile cluster whose Secret names the hostile server with `behaviour` as its token. */
  async function hostileCluster(behaviour: Behaviour): Promise<string> {
    const name = uniqueName(behaviour.slice(0, 12));
    await createClusterWithKubeconfig(admin, ns, name, JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: hostileUrl, 'certificate-authority-data': caData } }],
      users: [{ name: 'u', user: { token: behaviour } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }));
    return name;
  }

  /** A Machine of `cluster` with one spec taint, for Node `node`, and its record. */
  async function record(cluster: string, node: string, messageId: string): Promise<ReturnType<typeof sqsRecord>> {
    const machine = uniqueName('m');
    await createMachine(admin, ns, machine, { clusterName: cluster, nodeName: node, specTaints: [{ key: 'gpu', effect: 'NoSchedule' }] });
    return sqsRecord(machineEvent(ns, machine, { nodeName: node, cluster: { mode: 'capi', namespace: ns, name: cluster } }), { messageId });
  }

  // The hostile cluster's records run at most CLUSTER_CONCURRENCY at once (cluster-guard.ts); the third starts only
  // after one of the first two failed, and then fails without a request (the breaker, and the cluster's backoff).
  it.each<{ behaviour: Behaviour; hitsTheDeadline: boolean }>([
    { behaviour: 'huge', hitsTheDeadline: false },
    { behaviour: 'endless', hitsTheDeadline: false },
    { behaviour: 'dripping', hitsTheDeadline: true },
    { behaviour: 'slow-get-dripping-patch', hitsTheDeadline: true },
    { behaviour: 'prompt-get-dripping-patch', hitsTheDeadline: true },
    { behaviour: 'empty-close', hitsTheDeadline: false },
    { behaviour: 'node-list', hitsTheDeadline: false },
    { behaviour: 'bad-taints', hitsTheDeadline: false },
  ])('$behaviour: the hostile records fail as transient, the healthy Node is patched, the batch takes at most one call timeout more', async ({ behaviour, hitsTheDeadline }) => {
    // Prepare: three records of the hostile cluster first, then the healthy cluster's.
    const bad = await hostileCluster(behaviour);
    const node = uniqueName('node');
    await createNode(admin, node);
    const records = [await record(bad, 'n-bad-1', 'bad-1'), await record(bad, 'n-bad-2', 'bad-2'), await record(bad, 'n-bad-3', 'bad-3'), await record(healthy, node, 'healthy')];
    const processing = deps();
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({});
    requests.length = 0;

    // Act
    const started = Date.now();
    const response = await processBatch(sqsEvent(...records), { awsRequestId: behaviour, getRemainingTimeInMillis: () => 60_000 } as unknown as Context, processing);
    const elapsed = Date.now() - started;

    // Assess: transient (made visible again, nothing dead-lettered), the healthy record applied.
    expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['bad-1', 'bad-2', 'bad-3']);
    expect(sqsMock.commandCalls(ChangeMessageVisibilityCommand).map((c) => c.args[0].input.ReceiptHandle).sort()).toEqual(['rh-bad-1', 'rh-bad-2', 'rh-bad-3']);
    expect(sqsMock.commandCalls(SendMessageCommand).filter((c) => c.args[0].input.QueueUrl === TEST_DLQ_URL)).toEqual([]);
    expect((await admin.makeApiClient(CoreV1Api).readNode({ name: node })).spec?.taints?.map((t) => t.key)).toEqual(['gpu']);
    // Only the records that started before the cluster failed reached it (at most CLUSTER_CONCURRENCY of them, each
    // within its one call timeout); the third record failed at once, without a request.
    expect(requests.length).toBeGreaterThanOrEqual(1);
    expect(requests.every((r) => r.startsWith(`${behaviour} `)), requests.join(', ')).toBe(true);
    expect(new Set(requests.map((r) => r.split(' ').at(-1))).size, requests.join(', ')).toBeLessThanOrEqual(CLUSTER_CONCURRENCY);
    expect(requests.filter((r) => r.endsWith(' n-bad-3')), requests.join(', ')).toEqual([]);
    // Taints it cannot read: no write is planned from them (the patch carries the complete list).
    if (behaviour === 'bad-taints') expect(requests.filter((r) => r.includes(' PATCH ')), requests.join(', ')).toEqual([]);
    // At most one call timeout for the hostile cluster, whatever it does.
    expect(elapsed).toBeLessThan(CALL_TIMEOUT_MS + MARGIN_MS);
    if (hitsTheDeadline) expect(elapsed).toBeGreaterThanOrEqual(CALL_TIMEOUT_MS - 50);
  });
});
