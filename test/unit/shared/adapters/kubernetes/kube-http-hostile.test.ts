/**
 * Hostile answers to the reconcile function's calls (a GET of a Node, a PATCH of its taints) from a loopback server
 * (issue "One bad workload cluster cannot hurt the others", item 6): a huge answer and an endless one are cut at
 * MAX_RESPONSE_BYTES without being read further (bounded memory), an answer that drips and never completes, or never
 * starts, is cut at the call's deadline. Each maps to the product's transient errors: OversizedAnswerError or
 * CallTimeoutError, which the batch uses to stop trying that cluster (process-batch.ts).
 */
import http from 'node:http';
import zlib from 'node:zlib';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { toProductError } from '#shared/adapters/kubernetes/api-errors.ts';
import { withCallDeadline } from '#shared/adapters/kubernetes/call-deadline.ts';
import { MAX_RESPONSE_BYTES, kubeCall, type ClusterEndpoint, type KubeCall } from '#shared/adapters/kubernetes/kube-http.ts';
import { CallTimeoutError, OversizedAnswerError } from '#shared/errors.ts';

const MiB = 1024 * 1024;

/** Per answer: bytes the server got written into the socket before the client closed it. */
const written = new Map<string, number>();
let server: http.Server;
let endpoint: ClusterEndpoint;
const drips = new Set<NodeJS.Timeout>();

beforeAll(async () => {
  server = http.createServer((req, res) => {
    const kind = (req.url ?? '').split('/').at(-1) ?? '';
    req.resume();
    const id = `${req.method} ${kind}`;
    written.set(id, 0);
    const write = (chunk: Buffer): Promise<boolean> =>
      new Promise((resolve) => {
        if (res.destroyed || res.socket?.destroyed) return resolve(false);
        written.set(id, (written.get(id) ?? 0) + chunk.length);
        if (res.write(chunk)) resolve(true);
        else {
          res.once('drain', () => resolve(true));
          res.once('close', () => resolve(false));
        }
      });
    switch (kind) {
      case 'huge': // one answer of 64 MiB, announced with its length
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': 64 * MiB });
        void (async () => {
          for (let i = 0; i < 64 && (await write(Buffer.alloc(MiB, 0x20))); i++);
          res.end();
        })();
        return;
      case 'endless': // chunked, never ends
        res.writeHead(200, { 'Content-Type': 'application/json' });
        void (async () => {
          while (await write(Buffer.alloc(256 * 1024, 0x20)));
        })();
        return;
      case 'dripping': // one byte every 100 ms, never completes
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.write('{');
        {
          const timer = setInterval(() => (res.destroyed ? clearInterval(timer) : void write(Buffer.from(' '))), 100);
          drips.add(timer);
        }
        return;
      case 'silent': // headers never come
        return;
      case 'gzip-bomb': // 64 MiB of spaces in about 64 KiB of gzip
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' });
        void write(zlib.gzipSync(Buffer.alloc(64 * MiB, 0x20))).then(() => res.end());
        return;
      case 'gzipped': // a proper answer, compressed because the client asked for it
        if (req.headers['accept-encoding'] !== 'gzip') return void res.writeHead(406).end();
        res.writeHead(200, { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' }).end(zlib.gzipSync(JSON.stringify({ kind: 'NodeList', items: Array.from({ length: 2000 }, (_, i) => ({ metadata: { name: `n${i}` } })) })));
        return;
      case 'hostile-error': // a 500 whose body never ends
        res.writeHead(500, { 'Content-Type': 'application/json' });
        void (async () => {
          while (await write(Buffer.alloc(256 * 1024, 0x41)));
        })();
        return;
      default:
        res.writeHead(200, { 'Content-Type': 'application/json' }).end('{}');
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  endpoint = { getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }), applyToHTTPSOptions: async () => undefined };
});

afterAll(async () => {
  for (const t of drips) clearInterval(t);
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const calls: ReadonlyArray<{ name: string; call: (kind: string) => KubeCall }> = [
  { name: 'GET of a Node', call: (kind) => ({ method: 'GET', path: `/api/v1/nodes/${kind}` }) },
  {
    name: 'PATCH of its taints',
    call: (kind) => ({ method: 'PATCH', path: `/api/v1/nodes/${kind}`, body: { spec: { taints: [{ key: 'gpu', effect: 'NoSchedule' }] } }, contentType: 'application/merge-patch+json' }),
  },
];

/** The call's rejection, mapped as the stores map it, and how long it took. */
async function fail(call: KubeCall, callTimeoutMs: number): Promise<{ error: Error; ms: number }> {
  const started = Date.now();
  const error = await withCallDeadline(Date.now() + 60_000, () => kubeCall(endpoint, call), callTimeoutMs).then(
    () => new Error('the call succeeded'),
    (e: unknown) => toProductError(`${call.method} ${call.path}`, e),
  );
  return { error, ms: Date.now() - started };
}

describe.each(calls)('Function: kubeCall(), a hostile answer to the $name', ({ call }) => {
  it.each(['huge', 'endless'])('cuts a %s answer at MAX_RESPONSE_BYTES, reading no further, as OversizedAnswerError', async (kind) => {
    // Act
    const { error } = await fail(call(kind), 30_000);
    await new Promise((r) => setTimeout(r, 50));

    // Assess: what the server got into the socket is the cap plus what socket buffers hold, not the answer.
    expect(error).toBeInstanceOf(OversizedAnswerError);
    expect(error.message).toContain(`the answer exceeds ${MAX_RESPONSE_BYTES} bytes`);
    expect(written.get(`${call(kind).method} ${kind}`)).toBeLessThan(MAX_RESPONSE_BYTES + 6 * MiB);
  });

  it.each(['dripping', 'silent'])('cuts a %s answer at the call deadline, as CallTimeoutError', async (kind) => {
    // Act
    const { error, ms } = await fail(call(kind), 600);

    // Assess
    expect(error).toBeInstanceOf(CallTimeoutError);
    expect(ms).toBeGreaterThanOrEqual(550);
    expect(ms).toBeLessThan(5_000);
  });

  it('cuts a gzip answer that inflates past MAX_RESPONSE_BYTES at the cap (counting decompressed bytes)', async () => {
    // Act
    const { error } = await fail(call('gzip-bomb'), 30_000);

    // Assess: the compressed answer is small; what counts is what it inflates to.
    expect(error).toBeInstanceOf(OversizedAnswerError);
    expect(written.get(`${call('gzip-bomb').method} gzip-bomb`)).toBeLessThan(1 * MiB);
  });

  it('cuts an error answer (500) whose body never ends at the cap, as OversizedAnswerError', async () => {
    // Act
    const { error } = await fail(call('hostile-error'), 30_000);

    // Assess
    expect(error).toBeInstanceOf(OversizedAnswerError);
  });
});

describe('Function: kubeCall(), compressed answers', () => {
  it('asks for gzip and decompresses the answer', async () => {
    // Act
    const list = await kubeCall<{ items: Array<{ metadata: { name: string } }> }>(endpoint, { method: 'GET', path: '/api/v1/nodes/gzipped' });

    // Assess
    expect(list.items).toHaveLength(2000);
    expect(list.items[1999]?.metadata.name).toBe('n1999');
  });
});
