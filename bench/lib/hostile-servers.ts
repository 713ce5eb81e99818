/**
 * Hostile workload API servers of our own (issue 27): loopback TLS servers with a certificate of a CA of their own,
 * each handing out a valid-looking kubeconfig (that CA, a bearer token) so that the product connects to them through
 * a `<cluster>-kubeconfig` Secret as it would to a real workload cluster — and then misbehaves in one way:
 *
 * | behaviour       | a list (`GET /api/v1/nodes`)                          | a watch (`?watch=1`)                                   |
 * |-----------------|-------------------------------------------------------|--------------------------------------------------------|
 * | `endless-line`  | an empty NodeList                                     | one line that never ends (64 KiB chunks, no newline)   |
 * | `huge-event`    | an empty NodeList                                     | one ADDED event of `hugeEventBytes` (default 300 MiB)  |
 * | `endless-pages` | pages of 50 Nodes, always with a `continue` token     | (never reached while the list never ends)              |
 * | `ends-at-once`  | an empty NodeList, at once                            | 200 and the end of the answer, at once                 |
 * | `garbage-lines` | an empty NodeList                                     | non-JSON lines (with escape bytes), as fast as it can  |
 * | `drip`          | one byte every `dripIntervalMs` (default 3 s)         | the same                                               |
 * | `empty-close`   | 200, an empty body and `Connection: close`            | the same (so is every other request)                   |
 * | `gone`          | an empty NodeList                                     | HTTP 410 with a `Status` (Expired), at once            |
 *
 * The first six are issue 27's set (`ISSUE27_BEHAVIOURS`, the default); issue 48 tried `empty-close`, `ends-at-once`
 * and `gone` (`HOSTILE_SETS.three`). Each server counts its requests, and by whom: the product names its component in
 * its User-Agent (shared/adapters/kubernetes/user-agent.ts).
 *
 * Every payload is built from the marker {@link HOSTILE_MARKER}, so a test can find hostile bytes in the product's
 * logs. Bounded in count and time: each server answers at most `maxRequests` requests, sends at most `maxBytesPerAnswer`
 * per answer, and stops by itself after `lifetimeMs` (every connection is cut then); `stop()` stops it earlier. The
 * payloads are generated chunk by chunk, as the socket drains: a server costs this process little memory whatever
 * it sends. Loopback only (127.0.0.1).
 */
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { createServerPki } from '#local/control-plane/pki.ts';

export const HOSTILE_BEHAVIOURS = ['endless-line', 'huge-event', 'endless-pages', 'ends-at-once', 'garbage-lines', 'drip', 'empty-close', 'gone'] as const;
export type HostileBehaviour = (typeof HOSTILE_BEHAVIOURS)[number];

/** Issue 27's six: the default set of a run. */
export const ISSUE27_BEHAVIOURS: readonly HostileBehaviour[] = ['endless-line', 'huge-event', 'endless-pages', 'ends-at-once', 'garbage-lines', 'drip'];

/** The sets a run can name (`--hostile-set`): issue 27's six, and issue 48's three servers that answer at once. */
export const HOSTILE_SETS: Readonly<Record<'six' | 'three', readonly HostileBehaviour[]>> = {
  six: ISSUE27_BEHAVIOURS,
  three: ['empty-close', 'ends-at-once', 'gone'],
};

/** The component a request names in its User-Agent (`capi-taint-propagator/0.1.0 (local; watch-forwarder)`), or `other`. */
export function componentOf(userAgent: string | undefined): string {
  return /\(\w+; ([\w.-]+)\)\s*$/.exec(userAgent ?? '')?.[1] ?? 'other';
}

/** The text every hostile payload repeats: more than a short excerpt of it in a log line is a leak. */
export const HOSTILE_MARKER = 'HOSTILE-PAYLOAD-';

/** What a server saw, for the measurements (requests per second to each server). */
export interface HostileStats {
  readonly requests: number;
  readonly lists: number;
  readonly watches: number;
  readonly bytesSent: number;
  /** Connections accepted (TLS handshakes started). */
  readonly connections: number;
  /** Requests by the component their User-Agent names (`watch-forwarder`, `reconcile-node-taints`, `start`, …). */
  readonly byComponent: Readonly<Record<string, number>>;
}

export interface HostileServer {
  readonly behaviour: HostileBehaviour;
  /** `https://127.0.0.1:<port>`. */
  readonly server: string;
  /** A kubeconfig (JSON, which YAML reads) naming the server, its CA and a bearer token: what the Cluster's Secret holds. */
  readonly kubeconfigYaml: string;
  stats(): HostileStats;
  running(): boolean;
  /** Stops answering and cuts every connection. Idempotent. */
  stop(): Promise<void>;
  /** Resolves when the server has stopped (by `stop()`, its lifetime or its request bound). */
  readonly stopped: Promise<void>;
}

export interface HostileServerOptions {
  /** Folder for the CA and the serving certificate (shared by the servers of one call). */
  readonly dir: string;
  /** The server stops by itself after this long (default 10 minutes). */
  readonly lifetimeMs?: number;
  /** Requests answered at most; the server stops after the last (default 1 000 000). */
  readonly maxRequests?: number;
  /** Bytes of one answer at most (default 1 GiB); `huge-event` and the endless answers end there. */
  readonly maxBytesPerAnswer?: number;
  /** Size of the one event `huge-event` sends (default 300 MiB). */
  readonly hugeEventBytes?: number;
  /** Pause between the bytes of `drip` (default 3 s). */
  readonly dripIntervalMs?: number;
}

const CHUNK = 64 * 1024;
const MARKER_CHUNK = HOSTILE_MARKER.repeat(Math.ceil(CHUNK / HOSTILE_MARKER.length)).slice(0, CHUNK);
/** A non-JSON line of about 1 KiB: the marker, terminal escape sequences, a NUL and bytes that are not UTF-8. */
const GARBAGE_LINE = Buffer.concat([Buffer.from(`${HOSTILE_MARKER}\u001b[2J\u001b[31m<not json> `), Buffer.from([0x00, 0xff, 0xfe]), Buffer.from(` ${HOSTILE_MARKER.repeat(60)}\n`)]);
const GARBAGE_CHUNK = Buffer.concat(Array.from({ length: Math.floor(CHUNK / GARBAGE_LINE.length) }, () => GARBAGE_LINE));

function emptyNodeList(resourceVersion: string): string {
  return JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion }, items: [] });
}

/** One page of 50 Nodes (about 40 KiB), each with a name of its own, and a `continue` token that never runs out. */
function nodePage(page: number): string {
  const items = Array.from({ length: 50 }, (_, i) => ({
    metadata: { name: `hostile-${page}-${i}`, uid: `00000000-0000-4000-8000-${String(page * 50 + i).padStart(12, '0')}`, resourceVersion: String(1000 + page), annotations: { filler: HOSTILE_MARKER.repeat(40) } },
    spec: {},
  }));
  return JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: '1000', continue: `${HOSTILE_MARKER}${page + 1}` }, items });
}

/** Writes `next()` chunks while the socket drains, until it returns undefined, `limit` bytes, or the answer closes. */
async function pump(res: ServerResponse, limit: number, count: (n: number) => void, next: (sent: number) => Buffer | string | undefined): Promise<void> {
  let sent = 0;
  while (!res.destroyed && sent < limit) {
    const chunk = next(sent);
    if (chunk === undefined) break;
    const size = Buffer.byteLength(chunk);
    sent += size;
    count(size);
    if (!res.write(chunk)) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          res.off('drain', done);
          res.off('close', done);
          resolve();
        };
        res.on('drain', done);
        res.on('close', done);
      });
    }
  }
  if (!res.destroyed) res.end();
}

/** Starts one hostile server of each behaviour asked for (default issue 27's six), sharing one CA. */
export async function startHostileServers(o: HostileServerOptions & { readonly behaviours?: readonly HostileBehaviour[] }): Promise<HostileServer[]> {
  const { ca, serving } = await createServerPki(o.dir);
  const tls = { cert: await readFile(serving.certPath), key: await readFile(serving.keyPath), caData: (await readFile(ca.certPath)).toString('base64') };
  return Promise.all((o.behaviours ?? ISSUE27_BEHAVIOURS).map((b) => startHostileServer(b, o, tls)));
}

async function startHostileServer(behaviour: HostileBehaviour, o: HostileServerOptions, tls: { cert: Buffer; key: Buffer; caData: string }): Promise<HostileServer> {
  const lifetimeMs = o.lifetimeMs ?? 10 * 60_000;
  const maxRequests = o.maxRequests ?? 1_000_000;
  const limit = o.maxBytesPerAnswer ?? 1024 ** 3;
  const hugeBytes = o.hugeEventBytes ?? 300 * 1024 ** 2;
  const dripMs = o.dripIntervalMs ?? 3_000;
  const stats = { requests: 0, lists: 0, watches: 0, bytesSent: 0, connections: 0 };
  const byComponent: Record<string, number> = {};
  const count = (n: number): void => {
    stats.bytesSent += n;
  };
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  let isRunning = true;

  const answer = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const url = new URL(req.url ?? '/', 'https://hostile');
    const watch = url.searchParams.get('watch') === '1' || url.searchParams.get('watch') === 'true';
    if (watch) stats.watches++;
    else stats.lists++;
    res.setHeader('Content-Type', 'application/json');
    res.statusCode = 200;
    if (behaviour === 'empty-close') {
      res.setHeader('Connection', 'close');
      res.end();
      return;
    }
    if (behaviour === 'gone' && watch) {
      const body = JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: 'too old resource version: 1 (1000)', reason: 'Expired', code: 410 });
      res.statusCode = 410;
      count(Buffer.byteLength(body));
      res.end(body);
      return;
    }
    if (behaviour === 'drip') {
      res.flushHeaders();
      const text = watch ? '{"type":"ADDED","object":{"metadata":{"name":"' : '{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"';
      let i = 0;
      await new Promise<void>((resolve) => {
        const timer = setInterval(() => {
          if (res.destroyed || !isRunning) {
            clearInterval(timer);
            timers.delete(timer);
            resolve();
            return;
          }
          res.write(text[i % text.length] ?? ' ');
          count(1);
          i++;
        }, dripMs);
        timers.add(timer);
        res.on('close', () => {
          clearInterval(timer);
          timers.delete(timer);
          resolve();
        });
      });
      return;
    }
    if (behaviour === 'endless-pages' && !watch) {
      const page = Number((url.searchParams.get('continue') ?? '').slice(HOSTILE_MARKER.length)) || 0;
      const body = nodePage(page);
      count(Buffer.byteLength(body));
      res.end(body);
      return;
    }
    if (!watch) {
      const body = emptyNodeList('1000');
      count(Buffer.byteLength(body));
      res.end(body);
      return;
    }
    switch (behaviour) {
      case 'ends-at-once':
      case 'endless-pages':
      case 'gone':
        res.end();
        return;
      case 'endless-line':
        res.write('{"type":"ADDED","object":{"metadata":{"name":"');
        await pump(res, limit, count, () => MARKER_CHUNK);
        return;
      case 'huge-event': {
        const head = '{"type":"ADDED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"huge","uid":"00000000-0000-4000-8000-000000000001","resourceVersion":"1001","annotations":{"filler":"';
        const tail = '"}},"spec":{}}}\n';
        res.write(head);
        await pump(res, Math.min(limit, hugeBytes), count, (sent) => (sent + CHUNK <= hugeBytes ? MARKER_CHUNK : undefined));
        if (!res.destroyed && !res.writableEnded) res.end(tail);
        return;
      }
      case 'garbage-lines':
        await pump(res, limit, count, () => GARBAGE_CHUNK);
        return;
    }
  };

  let stopResolve: () => void = () => undefined;
  const stopped = new Promise<void>((r) => {
    stopResolve = r;
  });
  const server: Server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    if (!isRunning) {
      res.destroy();
      return;
    }
    stats.requests++;
    const component = componentOf(req.headers['user-agent']);
    byComponent[component] = (byComponent[component] ?? 0) + 1;
    if (stats.requests >= maxRequests) setImmediate(() => void stop());
    answer(req, res).catch(() => res.destroy());
  });
  server.on('connection', (socket: Socket) => {
    stats.connections++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  // A client that goes away mid-handshake is its business, not a failure of the test.
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  const lifetime = setTimeout(() => void stop(), lifetimeMs);
  lifetime.unref();

  async function stop(): Promise<void> {
    if (!isRunning) return stopped;
    isRunning = false;
    clearTimeout(lifetime);
    for (const t of timers) clearInterval(t);
    timers.clear();
    const closed = new Promise<void>((r) => server.close(() => r()));
    for (const s of sockets) s.destroy();
    await closed;
    stopResolve();
    return stopped;
  }

  const serverUrl = `https://127.0.0.1:${port}`;
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: behaviour, cluster: { server: serverUrl, 'certificate-authority-data': tls.caData } }],
    users: [{ name: 'hostile', user: { token: `hostile-${behaviour}-token` } }],
    contexts: [{ name: behaviour, context: { cluster: behaviour, user: 'hostile' } }],
    'current-context': behaviour,
  };
  return {
    behaviour,
    server: serverUrl,
    kubeconfigYaml: `${JSON.stringify(kubeconfig, null, 2)}\n`,
    stats: () => ({ ...stats, byComponent: { ...byComponent } }),
    running: () => isRunning,
    stop,
    stopped,
  };
}
