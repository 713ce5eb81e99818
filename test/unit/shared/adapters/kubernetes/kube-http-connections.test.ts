/**
 * The connection behaviour of the product's HTTP client (kube-http.ts) against loopback servers: a request that fails
 * on stale pooled sockets before any answer is sent again until it gets a fresh socket, however many stale ones the
 * pool holds; a reset on a fresh socket is not retried and carries its code; idle pooled sockets are closed after
 * IDLE_SOCKET_TIMEOUT_MS; every request carries the product's User-Agent. Proxies against the real API server:
 * test/integration/adapters/kube-http-proxy.test.ts.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { IDLE_SOCKET_TIMEOUT_MS, kubeCall, openRequest, readBody, type ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { asComponent, identifyAs, PRODUCT_VERSION, userAgent } from '#shared/adapters/kubernetes/user-agent.ts';

interface Loopback {
  endpoint: ClusterEndpoint;
  /** Server-side sockets in the order they connected. */
  sockets: Socket[];
  /** Sockets that are destroyed, unanswered, when their next request arrives. */
  stale: Set<Socket>;
  userAgents: Array<string | undefined>;
  /** Holds answers until this many requests are waiting (to fill the pool with parallel sockets). */
  holdUntil: number;
  close(): Promise<void>;
}

const servers: Loopback[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

async function loopback(): Promise<Loopback> {
  const waiting: Array<() => void> = [];
  const self: Loopback = {
    endpoint: undefined as unknown as ClusterEndpoint,
    sockets: [],
    stale: new Set(),
    userAgents: [],
    holdUntil: 0,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = http.createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
    if (self.stale.has(req.socket)) {
      self.stale.delete(req.socket);
      req.socket.destroy();
      return;
    }
    self.userAgents.push(req.headers['user-agent']);
    const answer = (): void => void res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"kind":"Status","status":"Success"}');
    waiting.push(answer);
    if (waiting.length >= self.holdUntil) for (const a of waiting.splice(0)) a();
  });
  server.on('connection', (s: Socket) => self.sockets.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  self.endpoint = { getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }), applyToHTTPSOptions: async () => undefined };
  servers.push(self);
  return self;
}

/** Fills the client's pool with `n` keep-alive sockets to the server (n requests in parallel), all idle afterwards. */
async function fillPool(server: Loopback, n: number): Promise<void> {
  server.holdUntil = n;
  await Promise.all(Array.from({ length: n }, () => kubeCall(server.endpoint, { method: 'GET', path: '/fill' })));
  server.holdUntil = 0;
  expect(server.sockets).toHaveLength(n);
}

describe('Function: openRequest(), stale pooled sockets', () => {
  it('sends a request again on the next pooled socket while the one it failed on was reused: 4 stale sockets, then a fresh one', async () => {
    // Prepare: four idle pooled sockets, each of which the server resets when the next request arrives on it (as a
    // server whose idle timeout closed them while the Lambda environment was frozen).
    const server = await loopback();
    await fillPool(server, 4);
    for (const s of server.sockets) server.stale.add(s);

    // Act
    const answer = await kubeCall<{ status: string }>(server.endpoint, { method: 'PATCH', path: '/api/v1/nodes/n1', body: { spec: {} }, contentType: 'application/merge-patch+json' });

    // Assess: every stale socket was tried once and dropped, then a fresh (fifth) socket carried the answer.
    expect(answer.status).toBe('Success');
    expect(server.stale.size).toBe(0);
    expect(server.sockets).toHaveLength(5);
  });

  it('does not send again a request that failed on a fresh socket, and rejects with the transport code', async () => {
    // Prepare: the server resets every new socket at its first request.
    const server = await loopback();
    const hostile = http.createServer((req) => req.socket.destroy());
    let connections = 0;
    hostile.on('connection', () => connections++);
    await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve));
    const port = (hostile.address() as AddressInfo).port;
    servers.push({ ...server, close: () => new Promise<void>((resolve) => hostile.close(() => resolve())) });

    // Act
    const call = kubeCall({ getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }), applyToHTTPSOptions: async () => undefined }, { method: 'GET', path: '/x' });

    // Assess
    await expect(call).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(connections).toBe(1);
  });

  it('closes a pooled socket after it idled IDLE_SOCKET_TIMEOUT_MS (below kube-apiserver\'s 90 s)', async () => {
    // Prepare
    const server = await loopback();
    const controller = new AbortController();

    // Act: one call; once its answer is read the socket goes back to the pool.
    const res = await openRequest(server.endpoint, 'GET', '/idle', { signal: controller.signal });
    const socket = res.socket;
    await readBody(res);
    await new Promise((r) => setImmediate(r));

    // Assess: Node's Agent destroys a free socket when this timeout fires.
    expect(IDLE_SOCKET_TIMEOUT_MS).toBeLessThan(90_000);
    expect((socket as Socket & { timeout?: number }).timeout).toBe(IDLE_SOCKET_TIMEOUT_MS);
    expect(socket.destroyed).toBe(false);
  });
});

describe('User-Agent', () => {
  it('is capi-taint-propagator/<package.json version> (<form>; <component>) on every request', async () => {
    // Prepare
    const server = await loopback();
    const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;

    // Act
    identifyAs('status', 'local');
    await kubeCall(server.endpoint, { method: 'GET', path: '/a' });
    await asComponent('reconcile-node-taints', () => kubeCall(server.endpoint, { method: 'GET', path: '/b' }));
    identifyAs('watch-forwarder', 'lambda');
    await kubeCall(server.endpoint, { method: 'GET', path: '/c' });

    // Assess
    expect(PRODUCT_VERSION).toBe(version);
    expect(server.userAgents).toEqual([
      `capi-taint-propagator/${version} (local; status)`,
      `capi-taint-propagator/${version} (local; reconcile-node-taints)`,
      `capi-taint-propagator/${version} (lambda; watch-forwarder)`,
    ]);
    expect(userAgent()).toMatch(/^capi-taint-propagator\/\d+\.\d+\.\d+ \(lambda; watch-forwarder\)$/);
  });
});
