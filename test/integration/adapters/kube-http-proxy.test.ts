/**
 * Proxies as client-go honours them (docs/proxies.md), through a real CONNECT proxy of the test's own
 * (test/support/connect-proxy.ts) to the real API server. The API server is named `api.only-via-proxy.test`, a name
 * only the proxy resolves (to the loopback API server): a request that does not go through the proxy cannot reach it.
 * TLS still verifies end to end against the kubeconfig's CA (`tls-server-name: localhost`, a SAN of the test
 * apiserver's certificate): the proxy only relays bytes.
 *
 * - the product's RestConfig with `proxy-url` (http with user and password, https), and the operator's client-node
 *   KubeConfig with `proxy-url` (which the client used to ignore);
 * - HTTPS_PROXY / NO_PROXY, and loopback never proxied through them;
 * - a wrong CA through the proxy is refused; a proxy that refuses the tunnel (407) fails with a code, without the
 *   password;
 * - the reconcile function patches the Node of a workload cluster whose `<cluster>-kubeconfig` Secret names a proxy.
 */
import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { composeReconcile } from '#functions/reconcile-node-taints/compose.ts';
import { processBatch } from '#functions/reconcile-node-taints/process-batch.ts';
import { describeApiError, toProductError } from '#shared/adapters/kubernetes/api-errors.ts';
import { kubeCall } from '#shared/adapters/kubernetes/kube-http.ts';
import { RestConfig, type RestConfigOptions } from '#shared/adapters/kubernetes/rest-config.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { createServerPki } from '#local/control-plane/pki.ts';
import { startConnectProxy, type ConnectProxy } from '#test/support/connect-proxy.ts';
import { startSocks5Proxy } from '#test/support/socks5-proxy.ts';
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

const HIDDEN = 'api.only-via-proxy.test';
const PASSWORD = `proxy-password-${Date.now()}`;
const sqsMock = mockClient(SQSClient);

describeWithControlPlane('kube-http through a CONNECT proxy to the real API server', () => {
  let dir: string;
  let port: string;
  let admin: RestConfigOptions & { caData: string; certData: string; keyData: string };
  let proxy: ConnectProxy;
  let proxyUrl: string;
  const savedEnv = { ...process.env };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ctp-proxy-'));
    const kc = adminKubeConfig();
    const cluster = kc.getCurrentCluster();
    const user = kc.getCurrentUser();
    if (!cluster?.caData || !user?.certData || !user.keyData) throw new Error('the admin kubeconfig has no inline CA, certificate or key');
    port = new URL(cluster.server).port;
    admin = { server: `https://${HIDDEN}:${port}`, tlsServerName: 'localhost', caData: cluster.caData, certData: user.certData, keyData: user.keyData };
    proxy = await startConnectProxy({ hosts: { [HIDDEN]: '127.0.0.1' }, credentials: { user: 'ops', password: PASSWORD } });
    proxyUrl = proxy.url.replace('http://', `http://ops:${PASSWORD}@`);
  });

  afterEach(() => {
    for (const k of ['HTTPS_PROXY', 'https_proxy', 'NO_PROXY', 'no_proxy']) {
      if (savedEnv[k] === undefined) delete process.env[k];
      else process.env[k] = savedEnv[k];
    }
  });

  afterAll(async () => {
    await proxy?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const version = (endpoint: Parameters<typeof kubeCall>[0]): Promise<{ gitVersion: string }> => kubeCall(endpoint, { method: 'GET', path: '/version' });

  it("reaches the API server only through the cluster's proxy-url, with the proxy's credentials, over one tunnel for many calls", async () => {
    // Prepare
    const before = proxy.tunnels();
    const through = new RestConfig({ ...admin, proxyUrl });
    const direct = new RestConfig(admin);

    // Act
    const answers = [await version(through), await version(through), await version(through)];
    const node = uniqueName('proxied');
    await kubeCall(through, { method: 'POST', path: '/api/v1/nodes', body: { metadata: { name: node } } });
    const read = await kubeCall<{ metadata: { name: string } }>(through, { method: 'GET', path: `/api/v1/nodes/${node}` });
    const directly = await version(direct).then(() => undefined, (e: unknown) => e);

    // Assess: the answers came through exactly one tunnel (keep-alive inside it), to the hidden name.
    expect(answers.every((a) => a.gitVersion.startsWith('v'))).toBe(true);
    expect(read.metadata.name).toBe(node);
    expect(proxy.tunnels() - before).toBe(1);
    expect(proxy.targets.at(-1)).toBe(`${HIDDEN}:${port}`);
    expect(proxy.authorizations.at(-1)).toBe(`Basic ${Buffer.from(`ops:${PASSWORD}`).toString('base64')}`);
    expect(directly).toMatchObject({ code: expect.stringMatching(/^(ENOTFOUND|EAI_AGAIN)$/) });
  });

  it("verifies the API server's certificate against the kubeconfig's CA inside the tunnel: another CA is refused", async () => {
    // Prepare: a CA that did not sign the API server's certificate.
    const other = await createServerPki(join(dir, 'other-ca'));
    const before = proxy.tunnels();
    const wrongCa = new RestConfig({ ...admin, caData: readFileSync(other.ca.certPath).toString('base64'), proxyUrl });

    // Act
    const call = version(wrongCa);

    // Assess: the tunnel opened, and TLS inside it failed verification.
    await expect(call).rejects.toMatchObject({ code: expect.stringMatching(/CERT|SIGNATURE|ISSUER/) });
    expect(proxy.tunnels() - before).toBe(1);
  });

  it('fails with a code and without the password when the proxy refuses the tunnel (407)', async () => {
    // Prepare
    const wrong = new RestConfig({ ...admin, proxyUrl: proxy.url.replace('http://', 'http://ops:not-the-password@') });

    // Act
    const error = await version(wrong).then(() => undefined, (e: unknown) => e);
    const product = toProductError('reading /version', error);

    // Assess
    expect(error).toMatchObject({ code: 'ERR_PROXY_TUNNEL', message: 'no tunnel through the proxy (Bad response: 407)' });
    expect(product.name).toBe('TransientError');
    for (const text of [describeApiError(error), product.message, JSON.stringify(error)]) {
      expect(text).not.toContain('not-the-password');
      expect(text).not.toContain(PASSWORD);
    }
  });

  it('refuses a proxy-url scheme it cannot use, instead of connecting directly', async () => {
    // Act
    const call = version(new RestConfig({ ...admin, server: requireControlPlane().server, proxyUrl: `socks4://ops:${PASSWORD}@127.0.0.1:1080` }));

    // Assess
    await expect(call).rejects.toMatchObject({ code: 'ERR_PROXY_CONFIG', message: expect.stringContaining('"socks4"') });
    await expect(call).rejects.not.toThrow(PASSWORD);
  });

  it('goes through an https:// proxy too (TLS to the proxy, then TLS to the API server inside it)', async () => {
    // Prepare: an https proxy whose certificate (SAN localhost) is signed by a CA the process trusts by default.
    const pki = await createServerPki(join(dir, 'proxy-pki'));
    const defaults = tls.getCACertificates('default');
    tls.setDefaultCACertificates([...defaults, readFileSync(pki.ca.certPath, 'utf8')]);
    const secure = await startConnectProxy({ hosts: { [HIDDEN]: '127.0.0.1' }, tls: { cert: readFileSync(pki.serving.certPath), key: readFileSync(pki.serving.keyPath) } });
    try {
      // Act
      const answer = await version(new RestConfig({ ...admin, proxyUrl: secure.url }));

      // Assess
      expect(secure.url).toMatch(/^https:\/\/localhost:\d+$/);
      expect(answer.gitVersion).toMatch(/^v/);
      expect(secure.tunnels()).toBe(1);
    } finally {
      tls.setDefaultCACertificates(defaults);
      await secure.close();
    }
  });

  it('goes through a SOCKS5 proxy (socks5 with user and password, socks5h), the proxy resolving the host name', async () => {
    // Prepare
    const socks = await startSocks5Proxy({ hosts: { [HIDDEN]: '127.0.0.1' }, credentials: { user: 'ops', password: PASSWORD } });
    const open = await startSocks5Proxy({ hosts: { [HIDDEN]: '127.0.0.1' } });
    try {
      // Act
      const withCredentials = await version(new RestConfig({ ...admin, proxyUrl: socks.url.replace('socks5://', `socks5://ops:${PASSWORD}@`) }));
      const again = await version(new RestConfig({ ...admin, proxyUrl: socks.url.replace('socks5://', `socks5://ops:${PASSWORD}@`) }));
      const h = await version(new RestConfig({ ...admin, proxyUrl: open.url.replace('socks5://', 'socks5h://') }));
      const refused = await version(new RestConfig({ ...admin, proxyUrl: socks.url.replace('socks5://', 'socks5://ops:not-the-password@') })).then(() => undefined, (e: unknown) => e);

      // Assess: one tunnel for the two calls with credentials (kept alive), one without; a refused login names no password.
      expect([withCredentials, again, h].every((a) => a.gitVersion.startsWith('v'))).toBe(true);
      expect(socks.tunnels()).toBe(1);
      expect(open.tunnels()).toBe(1);
      expect([...socks.targets, ...open.targets]).toEqual([`${HIDDEN}:${port}`, `${HIDDEN}:${port}`]);
      expect(refused).toMatchObject({ code: 'ERR_PROXY_TUNNEL' });
      for (const text of [describeApiError(refused), toProductError('reading /version', refused).message, JSON.stringify(refused)]) {
        expect(text).not.toContain('not-the-password');
        expect(text).not.toContain(PASSWORD);
      }
    } finally {
      await socks.close();
      await open.close();
    }
  });

  it('uses HTTPS_PROXY without a proxy-url, leaves out the hosts NO_PROXY names, and never proxies loopback through it', async () => {
    // Prepare: only the proxy resolves the hidden name, so an answer from it came through the proxy.
    process.env.HTTPS_PROXY = proxyUrl;
    const targets = proxy.targets.length;

    // Act
    const viaEnv = await version(new RestConfig(admin));
    const loopback = await version(new RestConfig({ ...admin, server: requireControlPlane().server }));
    process.env.NO_PROXY = 'example.com,.only-via-proxy.test';
    const excluded = await version(new RestConfig(admin)).then(() => undefined, (e: unknown) => e);

    // Assess
    expect(viaEnv.gitVersion).toMatch(/^v/);
    expect(loopback.gitVersion).toMatch(/^v/);
    expect(excluded).toMatchObject({ code: expect.stringMatching(/^(ENOTFOUND|EAI_AGAIN)$/) });
    expect(proxy.targets.slice(targets).filter((t) => !t.startsWith(`${HIDDEN}:`))).toEqual([]);
  });

  it("honours the proxy-url of the operator's own kubeconfig (client-node KubeConfig), for kube-http's calls and client-node's", async () => {
    // Prepare
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: admin.server, caData: admin.caData, tlsServerName: 'localhost', proxyUrl, skipTLSVerify: false }],
      users: [{ name: 'u', certData: admin.certData, keyData: admin.keyData }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const before = proxy.tunnels();

    // Act
    const ours = await version(kc);
    const theirs = await kc.makeApiClient(CoreV1Api).listNamespace({ limit: 1 });

    // Assess
    expect(ours.gitVersion).toMatch(/^v/);
    expect(theirs.items.length).toBe(1);
    expect(proxy.tunnels() - before).toBeGreaterThanOrEqual(2);
  });

  it("patches the Node of a workload cluster whose <cluster>-kubeconfig Secret names a proxy (the reconcile function)", async () => {
    // Prepare: the Secret's server is the hidden name; only its proxy-url makes it reachable.
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'proxied');
    const wc = uniqueName('wc');
    const node = uniqueName('node');
    const own = await startConnectProxy({ hosts: { [HIDDEN]: '127.0.0.1' }, credentials: { user: 'wc', password: PASSWORD } });
    const ownUrl = own.url.replace('http://', `http://wc:${PASSWORD}@`);
    await createNode(kc, node);
    const kubeconfig = {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: admin.server, 'certificate-authority-data': admin.caData, 'tls-server-name': 'localhost', 'proxy-url': ownUrl } }],
      users: [{ name: 'u', user: { 'client-certificate-data': admin.certData, 'client-key-data': admin.keyData } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    };
    await createClusterWithKubeconfig(kc, ns, wc, JSON.stringify(kubeconfig));
    await createMachine(kc, ns, 'm1', { clusterName: wc, nodeName: node, specTaints: [{ key: 'gpu', effect: 'NoSchedule' }] });
    sqsMock.reset();
    sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
    sqsMock.on(SendMessageCommand).resolves({});
    const workload = workloadKubeConfigs(kc);
    const deps = composeReconcile({
      config: { queueUrl: TEST_QUEUE_URL, deadLetterQueueUrl: TEST_DLQ_URL, dryRun: false, specTaintsOwner: 'product', startupTaint: undefined, retryBaseSeconds: 1, retryMaxSeconds: 5, stateNamespace: ns, firstEnabledAt: new Date('2020-01-01T00:00:00Z') },
      clusterMode: 'capi',
      managementKubeConfig: kc,
      workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }),
      sqs: new SQSClient({ region: 'eu-west-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }),
    });

    // Act
    const response = await processBatch(sqsEvent(sqsRecord(machineEvent(ns, 'm1', { nodeName: node }), { messageId: 'proxied' })), { awsRequestId: 'proxied' } as Context, deps).finally(() => own.close());

    // Assess
    expect(response.batchItemFailures).toEqual([]);
    expect((await kc.makeApiClient(CoreV1Api).readNode({ name: node })).spec?.taints?.map((t) => t.key)).toEqual(['gpu']);
    expect(own.tunnels()).toBeGreaterThanOrEqual(1);
    expect(own.targets.every((t) => t === `${HIDDEN}:${port}`)).toBe(true);
  });
});
