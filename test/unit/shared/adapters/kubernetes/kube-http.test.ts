/**
 * The product's HTTP client without a cluster: the answer cap of readBody, and kubeCall against a plain-http server on
 * loopback (the transport the integration tests cannot make misbehave: oversized, non-JSON and failed answers).
 * TLS, credentials, pooling and deadlines against a real API server: test/integration/adapters/kube-http.test.ts.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeApiError, MAX_RESPONSE_BYTES, kubeCall, pathWithQuery, readBody, type ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { ApiException } from '@kubernetes/client-node';
import { describeApiError, statusOf } from '#shared/adapters/kubernetes/api-errors.ts';

const MiB = 1024 * 1024;

/** A stream of `chunks` chunks of 1 MiB; `pulled()` says how many were read. */
function mebibytes(chunks: number): { stream: Readable; pulled: () => number } {
  let pulled = 0;
  const stream = Readable.from(
    (function* () {
      for (let i = 0; i < chunks; i++) {
        pulled++;
        yield Buffer.alloc(MiB, 0x61);
      }
    })(),
  );
  return { stream, pulled: () => pulled };
}

describe('Function: readBody()', () => {
  it('reads an answer of exactly MAX_RESPONSE_BYTES', async () => {
    // Prepare
    const { stream } = mebibytes(MAX_RESPONSE_BYTES / MiB);

    // Act
    const text = await readBody(stream);

    // Assess
    expect(text).toHaveLength(MAX_RESPONSE_BYTES);
  });

  it('refuses a larger answer as soon as it passes the cap, and destroys the stream', async () => {
    // Prepare: twice the cap on offer.
    const { stream, pulled } = mebibytes((2 * MAX_RESPONSE_BYTES) / MiB);

    // Act
    const error = await readBody(stream).then(
      () => undefined,
      (e: unknown) => e as Error,
    );

    // Assess
    expect(error?.message).toBe(`the answer exceeds ${MAX_RESPONSE_BYTES} bytes`);
    expect(stream.destroyed).toBe(true);
    expect(pulled()).toBeLessThanOrEqual(MAX_RESPONSE_BYTES / MiB + 2);
  });
});

describe('Function: pathWithQuery()', () => {
  it('leaves undefined parameters out and encodes the others', () => {
    // Act + Assess
    expect(pathWithQuery('/api/v1/nodes', {})).toBe('/api/v1/nodes');
    expect(pathWithQuery('/api/v1/nodes', { labelSelector: undefined })).toBe('/api/v1/nodes');
    expect(pathWithQuery('/apis/g/v/ms', { labelSelector: 'cluster.x-k8s.io/cluster-name=a b', limit: '5' })).toBe('/apis/g/v/ms?labelSelector=cluster.x-k8s.io%2Fcluster-name%3Da+b&limit=5');
  });
});

describe('Function: kubeCall() over plain http', () => {
  interface Seen {
    method: string;
    url: string;
    headers: http.IncomingHttpHeaders;
    body: string;
  }
  const seen: Seen[] = [];
  /** What the server answers to a path: status, content type, body. */
  const answers: Record<string, { status: number; body: string | Buffer }> = {
    '/ok': { status: 200, body: '{"kind":"Node","metadata":{"name":"n1"}}' },
    '/empty': { status: 200, body: '' },
    '/not-json': { status: 200, body: 'SECRET-ECHO <html>' },
    '/huge': { status: 200, body: Buffer.alloc(MAX_RESPONSE_BYTES + 1, 0x20) },
    '/missing': { status: 404, body: JSON.stringify({ kind: 'Status', reason: 'NotFound', message: 'nodes "x" not found', echo: 'SECRET-ECHO' }) },
    '/long-error': { status: 500, body: 'x'.repeat(10_000) },
  };
  let server: http.Server;
  let endpoint: ClusterEndpoint;

  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString() });
        const answer = answers[(req.url ?? '').split('?')[0] ?? ''] ?? { status: 599, body: '' };
        res.writeHead(answer.status, { 'Content-Type': 'application/json' });
        res.end(answer.body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    endpoint = {
      getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}/` }),
      applyToHTTPSOptions: async (opts) => {
        opts.headers = { ...(opts.headers as Record<string, string>), Authorization: 'Bearer t1' };
      },
    };
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('sends method, path, query, body, content type and the endpoint\'s headers, and parses the answer', async () => {
    // Act
    const answer = await kubeCall<{ metadata: { name: string } }>(endpoint, {
      method: 'PATCH',
      path: '/ok',
      query: { fieldManager: 'fm', dryRun: undefined },
      body: { spec: { taints: [] } },
      contentType: 'application/merge-patch+json',
    });

    // Assess
    expect(answer.metadata.name).toBe('n1');
    const request = seen.at(-1);
    expect(request).toMatchObject({ method: 'PATCH', url: '/ok?fieldManager=fm', body: '{"spec":{"taints":[]}}' });
    expect(request?.headers).toMatchObject({ 'content-type': 'application/merge-patch+json', authorization: 'Bearer t1', accept: 'application/json' });
  });

  it('resolves an empty 2xx answer with undefined', async () => {
    // Act + Assess
    await expect(kubeCall(endpoint, { method: 'DELETE', path: '/empty' })).resolves.toBeUndefined();
  });

  it('refuses an answer larger than MAX_RESPONSE_BYTES', async () => {
    // Act
    const call = kubeCall(endpoint, { method: 'GET', path: '/huge' });

    // Assess
    await expect(call).rejects.toThrow(`the answer exceeds ${MAX_RESPONSE_BYTES} bytes`);
  });

  it('rejects a 2xx answer that is not JSON without quoting it', async () => {
    // Act
    const error = await kubeCall(endpoint, { method: 'GET', path: '/not-json' }).catch((e: unknown) => e as Error);

    // Assess
    expect(error).toBeInstanceOf(Error);
    expect(error).not.toBeInstanceOf(KubeApiError);
    expect((error as Error).message).toBe('the answer to GET /not-json is not JSON');
    expect(String((error as Error).message)).not.toContain('SECRET-ECHO');
  });

  it('rejects a non-2xx answer with KubeApiError, described by Status reason and message only', async () => {
    // Act
    const error = await kubeCall(endpoint, { method: 'GET', path: '/missing' }).catch((e: unknown) => e);

    // Assess
    expect(error).toBeInstanceOf(KubeApiError);
    expect(statusOf(error)).toBe(404);
    expect((error as Error).message).toBe('HTTP 404');
    expect(describeApiError(error)).toBe('HTTP 404: NotFound nodes "x" not found');
  });

  it('keeps at most 4 KiB of a failed answer', async () => {
    // Act
    const error = (await kubeCall(endpoint, { method: 'GET', path: '/long-error' }).catch((e: unknown) => e)) as KubeApiError;

    // Assess
    expect(error.code).toBe(500);
    expect(error.body).toHaveLength(4096);
    expect(describeApiError(error)).toBe('HTTP 500');
  });
});

describe('Function: describeApiError() of client-node errors (the developer tools)', () => {
  it.each([
    { kind: 'a Status body as text', body: JSON.stringify({ kind: 'Status', reason: 'Forbidden', message: 'nope', echo: 'Bearer sEcReT' }) },
    { kind: 'a Status body already parsed', body: { kind: 'Status', reason: 'Forbidden', message: 'nope', echo: 'Bearer sEcReT' } },
  ])('keeps the reason and message of $kind, never the rest or the headers', ({ body }) => {
    // Prepare: client-node's ApiException puts body and headers into its message
    const error = new ApiException(403, 'HTTP-Code: 403\nHeaders: {"x-echo":"Bearer sEcReT"}', body, { 'x-echo': 'Bearer sEcReT' });

    // Act
    const described = describeApiError(error);

    // Assess
    expect(described).toBe('HTTP 403: Forbidden nope');
    expect(described).not.toContain('sEcReT');
  });
});
