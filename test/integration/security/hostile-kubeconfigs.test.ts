/**
 * Hostile `<cluster>-kubeconfig` Secrets against the real API server, the forwarder and the reconcile function wired as
 * in production. Every Secret points at a local HTTPS listener that would complete a TLS handshake (its CA is in the
 * kubeconfig, or in the file a hostile field names) and records every connection, header and client certificate. The
 * hostile features would run `/bin/sh` to create a marker file, or read a file whose content is a planted token.
 * Positive signals end each run: a Warning Event on every hostile Cluster and the good cluster's Node event forwarded
 * (forwarder), the good cluster's Node patched (reconcile). Then: no marker, no connection to the listener, nothing
 * planted anywhere, and the other cluster kept working.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { TLSSocket } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { processBatch } from '#functions/reconcile-node-taints/process-batch.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { createClientCert, createServerPki } from '#local/control-plane/pki.ts';
import { acceptAllSends, sentMessages, sqsMock, startForwarder } from '#test/integration/forwarder/support.ts';
import {
  adminKubeConfig,
  createClusterWithKubeconfig,
  createMachine,
  createNamespace,
  createNode,
  describeWithControlPlane,
  requireControlPlane,
  uniqueName,
  waitFor,
} from '#test/support/control-plane.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, machineEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

const PLANTED_TOKEN = `planted-file-token-${Date.now()}`;

interface Listener {
  server: Server;
  url: string;
  connections: number;
  requests: Array<{ headers: Record<string, unknown>; peerCertificate: boolean }>;
}

describeWithControlPlane('hostile kubeconfig Secrets on a real API server', () => {
  let admin: KubeConfig;
  let ns: string;
  let dir: string;
  let marker: string;
  let listener: Listener;
  let caData: string;
  const hostile: Record<string, { user?: Record<string, unknown>; cluster?: Record<string, unknown>; refused: string }> = {};
  const good = uniqueName('good');

  beforeAll(async () => {
    admin = adminKubeConfig();
    ns = await createNamespace(admin, 'hostile');
    dir = mkdtempSync(join(tmpdir(), 'ctp-hostile-'));
    marker = join(dir, 'marker');
    const pki = await createServerPki(join(dir, 'pki'));
    const client = await createClientCert({ dir: join(dir, 'pki'), caCertPath: pki.ca.certPath, caKeyPath: pki.ca.keyPath, name: 'planted-client', groups: [] });
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, PLANTED_TOKEN);
    caData = readFileSync(pki.ca.certPath).toString('base64');

    // The listener a hostile kubeconfig names as its server: it would accept a handshake and record everything.
    const server = createServer({ cert: readFileSync(pki.serving.certPath), key: readFileSync(pki.serving.keyPath), requestCert: true, rejectUnauthorized: false });
    listener = { server, url: '', connections: 0, requests: [] };
    server.on('connection', () => listener.connections++);
    server.on('request', (req, res) => {
      listener.requests.push({ headers: req.headers, peerCertificate: Object.keys((req.socket as TLSSocket).getPeerCertificate() ?? {}).length > 0 });
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"kind":"NodeList","metadata":{"resourceVersion":"1"},"items":[]}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    listener.url = `https://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

    const sh = (what: string): Record<string, unknown> => ({ command: '/bin/sh', args: ['-c', `echo ${what} > ${marker}`], apiVersion: 'client.authentication.k8s.io/v1' });
    Object.assign(hostile, {
      [uniqueName('exec')]: { user: { exec: sh('exec') }, refused: 'users[0].user.exec (exec plugin)' },
      [uniqueName('ap-exec')]: { user: { 'auth-provider': { name: 'exec', config: { exec: sh('auth-provider-exec') } } }, refused: 'users[0].user.auth-provider (auth provider)' },
      [uniqueName('gcp')]: {
        user: { 'auth-provider': { name: 'gcp', config: { 'cmd-path': '/bin/sh', 'cmd-args': `-c "echo gcp > ${marker}"`, 'token-key': '{.token}' } } },
        refused: 'users[0].user.auth-provider (auth provider)',
      },
      [uniqueName('ap-tokenfile')]: { user: { 'auth-provider': { name: 'file', config: { tokenFile } } }, refused: 'users[0].user.auth-provider (auth provider)' },
      [uniqueName('token-file')]: { user: { 'token-file': tokenFile }, refused: 'users[0].user.token-file (file path)' },
      [uniqueName('cert-files')]: { user: { 'client-certificate': client.certPath, 'client-key': client.keyPath }, refused: 'users[0].user.client-certificate (file path)' },
      [uniqueName('ca-file')]: { user: { token: 'inline' }, cluster: { 'certificate-authority': pki.ca.certPath }, refused: 'clusters[0].cluster.certificate-authority (file path)' },
    });

    for (const [name, h] of Object.entries(hostile)) {
      const cluster = h.cluster ?? { 'certificate-authority-data': caData };
      const kubeconfig = {
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'c', cluster: { server: listener.url, ...cluster } }],
        users: [{ name: 'u', user: h.user }],
        contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
        'current-context': 'x',
      };
      await createCluster(name, JSON.stringify(kubeconfig));
    }
    await createCluster(good, readFileSync(requireControlPlane().kubeconfigPath, 'utf8'));
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => listener?.server.close(() => resolve()));
    listener?.server.closeAllConnections();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const createCluster = (name: string, kubeconfig: string): Promise<void> => createClusterWithKubeconfig(admin, ns, name, kubeconfig);

  async function clusterWarnings(): Promise<Map<string, string[]>> {
    const events = await admin.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.kind=Cluster,type=Warning' });
    const out = new Map<string, string[]>();
    for (const e of events.items) out.set(e.involvedObject.name ?? '', [...(out.get(e.involvedObject.name ?? '') ?? []), `${e.reason}: ${e.message}`]);
    return out;
  }

  function assertNothingLeaked(): void {
    expect(existsSync(marker), 'a planted command ran').toBe(false);
    expect(listener.connections, 'the product connected to a hostile server').toBe(0);
    expect(listener.requests).toEqual([]);
  }

  it('the forwarder refuses each hostile kubeconfig, reports it on the Cluster, and keeps watching the other cluster', async () => {
    // Prepare
    acceptAllSends();
    const label = uniqueName('l');
    const fwd = startForwarder(admin, { clusterMode: 'capi', machineNamespace: ns, stateNamespace: ns, leaseName: uniqueName('lease'), nodeLabelSelector: `hostile-test=${label}` });

    // Act: wait for the Warning Events (the hostile Secrets were read and refused), then change the good cluster.
    try {
      await waitFor(async () => (await clusterWarnings()).size >= Object.keys(hostile).length, { timeoutMs: 30_000, description: 'a Warning Event on every hostile Cluster' });
      const node = uniqueName('node');
      await createNode(admin, node, { labels: { 'hostile-test': label } });
      await waitFor(() => sentMessages().some((m) => m.event.subject === `nodes/${node}`), { timeoutMs: 20_000, description: "the good cluster's Node event" });
      const warnings = await clusterWarnings();
      const counts = fwd.telemetry.counts();

      // Assess
      for (const [name, h] of Object.entries(hostile)) {
        expect(warnings.get(name)?.[0], name).toContain(`KubeconfigRefused: Nodes of this cluster are skipped: No usable credentials for cluster ${ns}/${name}`);
        expect(warnings.get(name)?.[0], name).toContain(h.refused);
      }
      expect(warnings.has(good)).toBe(false);
      expect(sentMessages().find((m) => m.event.subject === `nodes/${node}`)?.event.source).toBe(`/clusters/${ns}/${good}`);
      expect(counts.UnusableKubeconfigs).toBeGreaterThanOrEqual(Object.keys(hostile).length);
      assertNothingLeaked();
      expect(JSON.stringify(warnings)).not.toContain(PLANTED_TOKEN);
      expect(JSON.stringify(warnings)).not.toContain(dir);
    } finally {
      await fwd.stop();
    }
  });

  it('the reconcile function refuses each hostile kubeconfig for its Machines and patches the good cluster', async () => {
    // Prepare
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({});
    const node = uniqueName('node');
    await createNode(admin, node);
    const records = [];
    for (const name of [...Object.keys(hostile), good]) {
      const machine = uniqueName('m');
      await createMachine(admin, ns, machine, { clusterName: name, nodeName: name === good ? node : `n-${name}`, specTaints: [{ key: 'gpu', effect: 'NoSchedule' }] });
      records.push(sqsRecord(machineEvent(ns, machine, { nodeName: name === good ? node : `n-${name}` }), { messageId: name }));
    }
    const workload = workloadKubeConfigs(admin);
    const deps = composeReconcile({
      config: { queueUrl: TEST_QUEUE_URL, deadLetterQueueUrl: TEST_DLQ_URL, dryRun: false, specTaintsOwner: 'product', startupTaint: undefined, retryBaseSeconds: 1, retryMaxSeconds: 5, stateNamespace: ns, firstEnabledAt: new Date('2020-01-01T00:00:00Z') },
      clusterMode: 'capi',
      managementKubeConfig: admin,
      workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }),
      sqs: new SQSClient({ region: 'eu-west-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }),
    });

    // Act
    const response = await processBatch(sqsEvent(...records), { awsRequestId: 'hostile' } as Context, deps);

    // Assess
    expect(response.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(Object.keys(hostile).sort());
    const patched = await admin.makeApiClient(CoreV1Api).readNode({ name: node });
    expect(patched.spec?.taints?.map((t) => t.key)).toEqual(['gpu']);
    const warnings = await clusterWarnings();
    for (const [name, h] of Object.entries(hostile)) expect(warnings.get(name)?.join('\n'), name).toContain(h.refused);
    assertNothingLeaked();
  });
});
