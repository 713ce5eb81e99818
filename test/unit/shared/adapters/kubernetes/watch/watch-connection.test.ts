/**
 * One watch connection against a loopback `node:http` server that answers as each test says: its connect deadline,
 * its idle watchdog, the resync timer, the line cap and the `established` signal.
 */
import { getEventListeners } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openRequest, type ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { StreamCapError } from '#shared/adapters/kubernetes/watch/caps.ts';
import { WatchConnection, type WatchConnectionOptions } from '#shared/adapters/kubernetes/watch/watch-connection.ts';
import { TransientError } from '#shared/errors.ts';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

let handler: Handler = (_req, res) => res.end();
let server: http.Server;
let endpoint: ClusterEndpoint;

beforeAll(async () => {
  server = http.createServer((req, res) => handler(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  endpoint = { getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }), applyToHTTPSOptions: async () => undefined };
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function options(extra: Partial<WatchConnectionOptions> = {}): WatchConnectionOptions {
  return {
    open: (signal) => openRequest(endpoint, 'GET', '/api/v1/nodes?watch=1', { signal }),
    failed: async (_res, status) => new TransientError('watching /api/v1/nodes', `HTTP ${status}`),
    operation: 'watching /api/v1/nodes',
    connectTimeoutMs: 5_000,
    idleTimeoutMs: 5_000,
    resyncAt: Infinity,
    maxLineBytes: 1_024,
    signal: new AbortController().signal,
    ...extra,
  };
}

/** Opens a connection and reads every line; returns the lines, why it ended, or the error. */
async function readAll(o: WatchConnectionOptions): Promise<{ lines: string[]; end?: string; error?: unknown }> {
  const lines: string[] = [];
  try {
    const connection = await WatchConnection.open(o);
    for await (const line of connection.lines()) lines.push(line);
    return { lines, end: connection.end };
  } catch (error) {
    return { lines, error };
  }
}

describe('Class: WatchConnection', () => {
  it("leaves no listener on the session's signal once a watch ends, is refused, or cannot connect", async () => {
    // Prepare: one session signal for three watches, as a session reconnecting to a failing cluster.
    const session = new AbortController();
    const answers: Handler[] = [(_req, res) => res.end('{"type":"BOOKMARK"}\n'), (_req, res) => res.writeHead(500).end(), (req) => req.socket.destroy()];

    // Act
    const results = [];
    for (const answer of answers) {
      handler = answer;
      results.push(await readAll(options({ signal: session.signal })));
    }

    // Assess
    expect(results.map((r) => r.end ?? 'failed')).toEqual(['closed', 'failed', 'failed']);
    expect(getEventListeners(session.signal, 'abort')).toHaveLength(0);
  });

  it('yields the non-empty lines and ends `closed` when the server ends the watch', async () => {
    // Prepare
    handler = (_req, res) => res.writeHead(200).end('{"a":1}\n\n{"b":2}\n');

    // Act
    const { lines, end } = await readAll(options());

    // Assess
    expect(lines).toEqual(['{"a":1}', '{"b":2}']);
    expect(end).toBe('closed');
  });

  it('gives up a connect that gets no answer within its deadline', async () => {
    // Prepare
    handler = () => undefined; // never answers

    // Act
    const { error } = await readAll(options({ connectTimeoutMs: 200 }));

    // Assess
    expect(error).toBeInstanceOf(TransientError);
    expect((error as Error).message).toBe('watching /api/v1/nodes failed: not connected within 200 ms');
  });

  it('rejects a non-200 answer with the error `failed` makes of it', async () => {
    // Prepare
    handler = (_req, res) => res.writeHead(503).end('{"kind":"Status"}');

    // Act
    const { error } = await readAll(options());

    // Assess
    expect((error as Error).message).toBe('watching /api/v1/nodes failed: HTTP 503');
  });

  it('cuts a watch that sends no line within the idle timeout, though it drips bytes', async () => {
    // Prepare: headers, then one byte every 100 ms, never a line end.
    handler = (_req, res) => {
      res.writeHead(200);
      const drip = setInterval(() => res.write('x'), 100);
      res.on('close', () => clearInterval(drip));
    };
    const started = Date.now();

    // Act
    const { end } = await readAll(options({ idleTimeoutMs: 400 }));

    // Assess
    expect(end).toBe('idle');
    expect(Date.now() - started).toBeLessThan(3_000);
  });

  it('ends a watch for the periodic resync, and says once that it is established', async () => {
    // Prepare
    handler = (_req, res) => res.writeHead(200).write('{"a":1}\n');
    let established = 0;

    // Act
    const { lines, end } = await readAll(options({ resyncAt: Date.now() + 1_500, establishedAfterMs: 300, onEstablished: () => established++ }));

    // Assess
    expect(lines).toEqual(['{"a":1}']);
    expect(end).toBe('resync');
    expect(established).toBe(1);
  });

  it('cuts a line over the cap with a StreamCapError', async () => {
    // Prepare
    handler = (_req, res) => {
      res.writeHead(200);
      const flood = setInterval(() => res.write('y'.repeat(512)), 5);
      res.on('close', () => clearInterval(flood));
    };

    // Act
    const { error } = await readAll(options({ maxLineBytes: 4_096 }));

    // Assess
    expect(error).toBeInstanceOf(StreamCapError);
    expect((error as Error).message).toBe('watching /api/v1/nodes failed: a line exceeds 4096 bytes');
  });

  it("ends `aborted` when the caller's signal aborts", async () => {
    // Prepare
    handler = (_req, res) => res.writeHead(200).write('{"a":1}\n');
    const controller = new AbortController();
    const lines: string[] = [];

    // Act
    const connection = await WatchConnection.open(options({ signal: controller.signal }));
    for await (const line of connection.lines()) {
      lines.push(line);
      controller.abort();
    }

    // Assess
    expect(lines).toEqual(['{"a":1}']);
    expect(connection.end).toBe('aborted');
  });
});
