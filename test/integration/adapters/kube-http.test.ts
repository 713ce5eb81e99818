/**
 * The product's HTTP client (kube-http.ts) with its own credentials (RestConfig) against the real API server: a client
 * certificate and a ServiceAccount token (TokenRequest) authenticate; a wrong token is refused as AccessDeniedError;
 * one keep-alive connection serves many calls of one identity, and another identity gets a connection of its own;
 * a call past its deadline rejects as CallTimeoutError, whether the server hangs before answering or while streaming;
 * a 404 is a KubeApiError; a large answer comes gzip-compressed and is decompressed. The answer cap is unit-tested (test/unit/shared/adapters/kubernetes/kube-http.test.ts).
 */
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeApiError, statusOf, toProductError } from '#shared/adapters/kubernetes/api-errors.ts';
import { isCallTimeout, withCallDeadline } from '#shared/adapters/kubernetes/call-deadline.ts';
import { KubeApiError, kubeCall, openRequest, type ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { KubernetesNodeStore } from '#shared/adapters/kubernetes/node-store.ts';
import { RestConfig, type RestConfigOptions } from '#shared/adapters/kubernetes/rest-config.ts';
import { AccessDeniedError, CallTimeoutError, TransientError } from '#shared/errors.ts';
import { FaultProxy } from '#test/support/fault-proxy.ts';
import { adminKubeConfig, createNamespace, createNode, describeWithControlPlane, requireControlPlane, uniqueName, waitFor } from '#test/support/control-plane.ts';

/** The admin identity of the test control plane (client certificate, group system:masters) as RestConfig options. */
function adminOptions(): RestConfigOptions & { caData: string } {
  const kc = adminKubeConfig();
  const cluster = kc.getCurrentCluster();
  const user = kc.getCurrentUser();
  if (!cluster?.caData || !user?.certData || !user.keyData) throw new Error('the admin kubeconfig has no inline CA, certificate or key');
  return { server: cluster.server, caData: cluster.caData, certData: user.certData, keyData: user.keyData };
}

interface NamedObject {
  metadata: { name: string; uid: string; creationTimestamp?: unknown };
}

/** Who the API server takes the caller for (SelfSubjectReview). */
async function whoAmI(endpoint: ClusterEndpoint): Promise<string | undefined> {
  const review = await kubeCall<{ status?: { userInfo?: { username?: string } } }>(endpoint, {
    method: 'POST',
    path: '/apis/authentication.k8s.io/v1/selfsubjectreviews',
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
  });
  return review.status?.userInfo?.username;
}

/** A TCP proxy on loopback in front of `upstream` that counts the connections it accepted. */
async function countingProxy(upstream: string): Promise<{ url: string; connections: () => number; close: () => Promise<void> }> {
  const target = new URL(upstream);
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((client) => {
    connections++;
    const up = net.connect(Number(target.port), target.hostname);
    for (const s of [client, up]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => {
        sockets.delete(s);
        client.destroy();
        up.destroy();
      });
    }
    client.pipe(up).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `https://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    connections: () => connections,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describeWithControlPlane('Function: kubeCall(), with RestConfig', () => {
  let admin: RestConfig;
  let node: string;
  let nodeUid: string;
  let saToken: string;
  let saUser: string;

  beforeAll(async () => {
    admin = new RestConfig(adminOptions());
    const kc = adminKubeConfig();
    node = uniqueName('node');
    nodeUid = (await createNode(kc, node)).metadata?.uid ?? '';

    // A ServiceAccount allowed to get and list Nodes (nothing else), and a token for it from the TokenRequest API.
    const ns = await createNamespace(kc, 'kube-http');
    const sa = 'reader';
    const role = uniqueName('kube-http-nodes');
    await kubeCall(admin, { method: 'POST', path: `/api/v1/namespaces/${ns}/serviceaccounts`, body: { metadata: { name: sa } } });
    await kubeCall(admin, {
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      body: { metadata: { name: role }, rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list'] }] },
    });
    await kubeCall(admin, {
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      body: {
        metadata: { name: role },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
        subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
      },
    });
    const minted = await kubeCall<{ status: { token: string } }>(admin, {
      method: 'POST',
      path: `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`,
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
    });
    saToken = minted.status.token;
    saUser = `system:serviceaccount:${ns}:${sa}`;
    const { server, caData } = adminOptions();
    const reader = new RestConfig({ server, caData, token: saToken });
    await waitFor(() => kubeCall(reader, { method: 'GET', path: `/api/v1/nodes/${node}` }).then(() => true), { description: 'the ServiceAccount to read Nodes' });
  });

  describe('authentication', () => {
    it('reads a Node and lists namespaces with the client certificate of a kubeconfig', async () => {
      // Prepare
      const ns = await createNamespace(adminKubeConfig(), 'listed');

      // Act
      const got = await kubeCall<NamedObject>(admin, { method: 'GET', path: `/api/v1/nodes/${node}` });
      const namespaces = await kubeCall<{ items: NamedObject[] }>(admin, { method: 'GET', path: '/api/v1/namespaces' });

      // Assess: the raw JSON (times are strings, not the Date objects client-node made of them).
      expect(got.metadata.uid).toBe(nodeUid);
      expect(got.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(namespaces.items.map((n) => n.metadata.name)).toContain(ns);
      expect(await whoAmI(admin)).not.toMatch(/^system:(anonymous|serviceaccount:)/);
    });

    it('reads a Node with a ServiceAccount token, fixed or minted per request', async () => {
      // Prepare
      const { server, caData } = adminOptions();
      let minted = 0;
      const fixed = new RestConfig({ server, caData, token: saToken });
      const perRequest = new RestConfig({ server, caData, token: async () => (minted++, saToken) });

      // Act
      const viaFixed = await kubeCall<NamedObject>(fixed, { method: 'GET', path: `/api/v1/nodes/${node}` });
      const viaFunction = await kubeCall<NamedObject>(perRequest, { method: 'GET', path: `/api/v1/nodes/${node}` });
      await kubeCall(perRequest, { method: 'GET', path: '/api/v1/nodes', query: { fieldSelector: `metadata.name=${node}` } });

      // Assess
      expect(viaFixed.metadata.uid).toBe(nodeUid);
      expect(viaFunction.metadata.uid).toBe(nodeUid);
      expect(minted).toBe(2);
      expect(await whoAmI(fixed)).toBe(saUser);
    });

    it('refuses a wrong token with 401, an AccessDeniedError for the product', async () => {
      // Prepare
      const { server, caData } = adminOptions();
      const wrong = new RestConfig({ server, caData, token: `${saToken.slice(0, -4)}AAAA` });

      // Act
      const error = await kubeCall(wrong, { method: 'GET', path: `/api/v1/nodes/${node}` }).catch((e: unknown) => e);

      // Assess
      expect(error).toBeInstanceOf(KubeApiError);
      expect(statusOf(error)).toBe(401);
      const mapped = toProductError(`Reading Node ${node}`, error);
      expect(mapped).toBeInstanceOf(AccessDeniedError);
      expect(mapped.message).not.toContain(saToken.slice(0, -4));
    });

    it('answers 403 to what RBAC does not grant the token, an AccessDeniedError too', async () => {
      // Prepare
      const { server, caData } = adminOptions();
      const reader = new RestConfig({ server, caData, token: saToken });

      // Act
      const error = await kubeCall(reader, { method: 'GET', path: '/api/v1/namespaces/default/secrets' }).catch((e: unknown) => e);

      // Assess
      expect(statusOf(error)).toBe(403);
      expect(toProductError('Listing Secrets', error)).toBeInstanceOf(AccessDeniedError);
    });

    it('checks the server against the CA: without it, the test CA is not trusted', async () => {
      // Prepare
      const { server, certData, keyData } = adminOptions();
      const noCa = new RestConfig({ server, certData, keyData });

      // Act
      const error = await kubeCall(noCa, { method: 'GET', path: '/api/v1/namespaces' }).catch((e: unknown) => e);

      // Assess: a TLS verification failure, retried by the product as transient, never an answer.
      expect(error).toBeInstanceOf(Error);
      expect(error).not.toBeInstanceOf(KubeApiError);
      expect((error as NodeJS.ErrnoException).code).toMatch(/CERT|SIGNATURE|ISSUER/);
      expect(toProductError('Listing namespaces', error)).toBeInstanceOf(TransientError);
    });
  });

  describe('errors', () => {
    it('rejects a missing object with KubeApiError 404, described by the Status', async () => {
      // Prepare
      const missing = uniqueName('no-such-node');

      // Act
      const error = await kubeCall(admin, { method: 'GET', path: `/api/v1/nodes/${missing}` }).catch((e: unknown) => e);

      // Assess
      expect(error).toBeInstanceOf(KubeApiError);
      expect((error as KubeApiError).code).toBe(404);
      expect(statusOf(error)).toBe(404);
      expect(describeApiError(error)).toBe(`HTTP 404: NotFound nodes "${missing}" not found`);
    });
  });

  describe('connections', () => {
    let proxy: Awaited<ReturnType<typeof countingProxy>>;

    beforeAll(async () => {
      proxy = await countingProxy(requireControlPlane().server);
    });

    afterAll(async () => {
      await proxy.close();
    });

    it('serves many sequential calls of one identity over one connection, and another identity over its own', async () => {
      // Prepare: two RestConfigs of the admin (equal credentials), one of the ServiceAccount token, all through the proxy.
      const options = { ...adminOptions(), server: proxy.url };
      const first = new RestConfig(options);
      const second = new RestConfig(options);
      const reader = new RestConfig({ server: proxy.url, caData: options.caData, token: saToken });

      // Act
      for (let i = 0; i < 20; i++) await kubeCall(i % 2 === 0 ? first : second, { method: 'GET', path: `/api/v1/nodes/${node}` });
      const afterAdmin = proxy.connections();
      for (let i = 0; i < 10; i++) await kubeCall(reader, { method: 'GET', path: `/api/v1/nodes/${node}` });
      const readerIs = await whoAmI(reader);
      const adminIs = await whoAmI(first);

      // Assess: the client certificate belongs to its connection, so the token's calls never ride on it.
      expect(afterAdmin).toBe(1);
      expect(proxy.connections()).toBe(2);
      expect(readerIs).toBe(saUser);
      expect(adminIs).not.toBe(saUser);
    });
  });

  describe('compression', () => {
    it('gets a large answer gzip-compressed from kube-apiserver and decompresses it', async () => {
      // Prepare: a ConfigMap of about 400 KB (kube-apiserver compresses answers above 128 KiB).
      const ns = await createNamespace(adminKubeConfig(), 'gzip');
      const data = Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`k${i}`, `${i}`.padEnd(1000, 'x')]));
      await kubeCall(admin, { method: 'POST', path: `/api/v1/namespaces/${ns}/configmaps`, body: { metadata: { name: 'big' }, data } });
      const path = `/api/v1/namespaces/${ns}/configmaps/big`;

      // Act
      const res = await openRequest(admin, 'GET', path, { signal: AbortSignal.timeout(10_000), acceptGzip: true });
      const encoding = res.headers['content-encoding'];
      res.destroy();
      const read = await kubeCall<{ data: Record<string, string> }>(admin, { method: 'GET', path });

      // Assess
      expect(encoding).toBe('gzip');
      expect(read.data).toEqual(data);
    });
  });

  describe('deadlines', () => {
    let hanging: FaultProxy;

    beforeAll(async () => {
      hanging = await FaultProxy.start(requireControlPlane().server);
      hanging.hang();
    });

    afterAll(async () => {
      await hanging.close();
    });

    it('rejects a call to a server that never answers once its deadline passes, as CallTimeoutError', async () => {
      // Prepare
      const rc = new RestConfig({ ...adminOptions(), server: hanging.url });
      const started = Date.now();

      // Act
      const error = await withCallDeadline(Date.now() + 30_000, () => kubeCall(rc, { method: 'GET', path: '/api/v1/namespaces' }), 300).catch((e: unknown) => e);
      const elapsed = Date.now() - started;

      // Assess
      expect(isCallTimeout(error)).toBe(true);
      expect(toProductError('Listing namespaces', error)).toBeInstanceOf(CallTimeoutError);
      expect(elapsed).toBeGreaterThanOrEqual(250);
      expect(elapsed).toBeLessThan(5_000);
    });

    it("bounds an adapter's call too: the NodeStore's read fails with CallTimeoutError", async () => {
      // Prepare
      const store = new KubernetesNodeStore(new RestConfig({ ...adminOptions(), server: hanging.url }));

      // Act
      const error = await withCallDeadline(Date.now() + 300, () => store.getNode(node)).catch((e: unknown) => e);

      // Assess
      expect(error).toBeInstanceOf(CallTimeoutError);
    });

    it('bounds reading the body: an answer that keeps streaming (a watch) is cut at the deadline', async () => {
      // Prepare: the headers come at once, the body never ends (server-side timeout 60 s).
      const started = Date.now();

      // Act
      const error = await withCallDeadline(
        Date.now() + 30_000,
        () => kubeCall(admin, { method: 'GET', path: '/api/v1/nodes', query: { watch: 'true', timeoutSeconds: '60' } }),
        500,
      ).catch((e: unknown) => e);
      const elapsed = Date.now() - started;

      // Assess
      expect(isCallTimeout(error)).toBe(true);
      expect(toProductError('Watching Nodes', error)).toBeInstanceOf(CallTimeoutError);
      expect(elapsed).toBeLessThan(5_000);
    });
  });
});
