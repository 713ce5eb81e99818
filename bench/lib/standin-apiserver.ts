/**
 * Stand-in workload API servers for the hundred-cluster benchmark (issue 29, item 3): a hundred real kube-apiservers
 * do not fit on the benchmark machine, so each workload cluster is a loopback HTTPS server (`node:https`, a serving
 * certificate of a CA shared by the stand-ins of one call, a bearer token) serving only what the watch-forwarder and
 * the benchmark ask of a workload cluster, with the API server's wire format:
 *
 * - `GET /api/v1/nodes`: a NodeList, paged (`limit`, an opaque `continue` token), at the current resourceVersion
 *   (`resourceVersionMatch=Exact` at an older one is answered 410 Expired, as a compacted etcd would);
 * - `GET /api/v1/nodes?watch=1&resourceVersion=R&allowWatchBookmarks=true&timeoutSeconds=T`: a chunked stream of watch
 *   events (one JSON line each) after R, a BOOKMARK every `bookmarkIntervalMs`, ended after T seconds; R older than
 *   the kept history gets an ERROR 410 event;
 * - `labelSelector` (equality terms `k=v`, comma-separated) on both;
 * - `GET /api/v1/nodes/{name}`, `POST /api/v1/nodes` (the benchmark registers its Nodes like kubelets do), and JSON
 *   merge patches (RFC 7386) of `/api/v1/nodes/{name}` (metadata and spec) and `/api/v1/nodes/{name}/status`.
 *
 * resourceVersions count up from {@link FIRST_RESOURCE_VERSION}, one counter for every stand-in of the process, so a
 * resourceVersion names one write across the whole fleet and never one of the real management API server's (etcd's
 * revisions are far smaller). Everything else is 404 with a Status body (counted in `unknownRequests`). Loopback only.
 */
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { Socket } from 'node:net';
import { createServerPki } from '#local/control-plane/pki.ts';

/** The first resourceVersion a stand-in hands out. */
export const FIRST_RESOURCE_VERSION = 1_000_000_000_000;
let revision = FIRST_RESOURCE_VERSION;

export interface StandinStats {
  readonly lists: number;
  readonly listPages: number;
  readonly watches: number;
  readonly writes: number;
  readonly gets: number;
  readonly unknownRequests: number;
  readonly expired: number;
}

export interface StandinApiServer {
  readonly name: string;
  /** `https://127.0.0.1:<port>`. */
  readonly server: string;
  /** A kubeconfig (JSON, which YAML reads) with the server, its CA and a bearer token: what the Cluster's Secret holds. */
  readonly kubeconfigYaml: string;
  stats(): StandinStats;
  /** Nodes held. */
  size(): number;
  stop(): Promise<void>;
}

export interface StandinOptions {
  /** Folder for the CA and the serving certificate. */
  readonly dir: string;
  readonly names: readonly string[];
  /** Between two BOOKMARK events of a watch (default 10 s). */
  readonly bookmarkIntervalMs?: number;
  /** Watch events kept for a resume (default 20 000 per server); an older resourceVersion is answered 410. */
  readonly historyEvents?: number;
}

interface NodeObject {
  metadata: { name: string; uid: string; resourceVersion: string; creationTimestamp: string; labels?: Record<string, string>; [k: string]: unknown };
  [k: string]: unknown;
}

/** Starts one stand-in per name, sharing one CA and serving certificate (127.0.0.1). */
export async function startStandinApiServers(o: StandinOptions): Promise<StandinApiServer[]> {
  const { ca, serving } = await createServerPki(o.dir);
  const tls = { cert: await readFile(serving.certPath), key: await readFile(serving.keyPath), caData: (await readFile(ca.certPath)).toString('base64') };
  const started: StandinApiServer[] = [];
  try {
    for (const name of o.names) started.push(await startOne(name, o, tls));
  } catch (e) {
    await Promise.all(started.map((s) => s.stop()));
    throw e;
  }
  return started;
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function parseSelector(text: string | null): Array<[string, string]> {
  if (!text) return [];
  return text.split(',').map((term) => {
    const [k, v] = term.split('=');
    if (!k || v === undefined || term.includes('!')) throw new Error(`unsupported labelSelector term ${JSON.stringify(term)}`);
    return [k, v];
  });
}

function matches(node: NodeObject, selector: ReadonlyArray<[string, string]>): boolean {
  return selector.every(([k, v]) => node.metadata.labels?.[k] === v);
}

function kubeTime(d = new Date()): string {
  return d.toISOString().replace(/\.\d+Z$/, 'Z');
}

function status(res: ServerResponse, code: number, reason: string, message: string): void {
  res.statusCode = code;
  res.setHeader('Content-Type', 'application/json');
  res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code }));
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

interface Watcher {
  readonly res: ServerResponse;
  readonly selector: ReadonlyArray<[string, string]>;
}

async function startOne(name: string, o: StandinOptions, tls: { cert: Buffer; key: Buffer; caData: string }): Promise<StandinApiServer> {
  const token = `standin-${name}-${randomUUID()}`;
  const bookmarkMs = o.bookmarkIntervalMs ?? 10_000;
  const historyMax = o.historyEvents ?? 20_000;
  const nodes = new Map<string, NodeObject>();
  /** Watch events after the oldest kept resourceVersion: [rv, type, node]. */
  const history: Array<{ rv: number; type: 'ADDED' | 'MODIFIED'; node: NodeObject }> = [];
  let oldestKept = revision;
  const watchers = new Set<Watcher>();
  const sockets = new Set<Socket>();
  const stats = { lists: 0, listPages: 0, watches: 0, writes: 0, gets: 0, unknownRequests: 0, expired: 0 };

  const emit = (type: 'ADDED' | 'MODIFIED', node: NodeObject): void => {
    const rv = Number(node.metadata.resourceVersion);
    history.push({ rv, type, node });
    if (history.length > historyMax) oldestKept = (history.splice(0, history.length - historyMax)[0]?.rv ?? oldestKept) + 1;
    let line: string | undefined;
    for (const w of watchers) {
      if (!matches(node, w.selector)) continue;
      line ??= `${JSON.stringify({ type, object: node })}\n`;
      w.res.write(line);
    }
  };

  const write = (node: NodeObject, type: 'ADDED' | 'MODIFIED'): NodeObject => {
    node.metadata.resourceVersion = String(++revision);
    nodes.set(node.metadata.name, node);
    stats.writes++;
    emit(type, node);
    return node;
  };

  const list = (url: URL, res: ServerResponse): void => {
    const selector = parseSelector(url.searchParams.get('labelSelector'));
    const limit = Number(url.searchParams.get('limit') ?? '0');
    const cont = url.searchParams.get('continue');
    const exact = url.searchParams.get('resourceVersionMatch') === 'Exact' ? url.searchParams.get('resourceVersion') : null;
    if (exact !== null && Number(exact) !== revision) {
      stats.expired++;
      status(res, 410, 'Expired', `too old resource version: ${exact} (${revision})`);
      return;
    }
    // The continue token: the list's resourceVersion and the name after which the page starts (names sorted).
    let at = revision;
    let after = '';
    if (cont) {
      const [rv, last] = Buffer.from(cont, 'base64url').toString('utf8').split('\u0000');
      at = Number(rv);
      after = last ?? '';
    } else stats.lists++;
    stats.listPages++;
    const names = [...nodes.keys()].sort();
    const items: NodeObject[] = [];
    let next: string | undefined;
    for (const n of names) {
      if (n <= after) continue;
      const node = nodes.get(n);
      if (!node || !matches(node, selector)) continue;
      if (limit > 0 && items.length === limit) {
        next = Buffer.from(`${at}\u0000${items[items.length - 1]?.metadata.name ?? ''}`).toString('base64url');
        break;
      }
      items.push(node);
    }
    res.setHeader('Content-Type', 'application/json');
    res.end(JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: String(at), ...(next ? { continue: next } : {}) }, items }));
  };

  const watch = (url: URL, req: IncomingMessage, res: ServerResponse): void => {
    stats.watches++;
    const selector = parseSelector(url.searchParams.get('labelSelector'));
    const from = Number(url.searchParams.get('resourceVersion') ?? '0') || revision;
    res.statusCode = 200;
    res.setHeader('Content-Type', 'application/json');
    res.setHeader('Transfer-Encoding', 'chunked');
    res.flushHeaders();
    if (from + 1 < oldestKept) {
      stats.expired++;
      res.end(`${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: `too old resource version: ${from} (${oldestKept})`, reason: 'Expired', code: 410 } })}\n`);
      return;
    }
    for (const e of history) if (e.rv > from && matches(e.node, selector)) res.write(`${JSON.stringify({ type: e.type, object: e.node })}\n`);
    const w: Watcher = { res, selector };
    watchers.add(w);
    const bookmarks = url.searchParams.get('allowWatchBookmarks') === 'true'
      ? setInterval(() => res.write(`${JSON.stringify({ type: 'BOOKMARK', object: { kind: 'Node', apiVersion: 'v1', metadata: { resourceVersion: String(revision) } } })}\n`), bookmarkMs)
      : undefined;
    const timeoutSeconds = Number(url.searchParams.get('timeoutSeconds') ?? '0');
    const timeout = timeoutSeconds > 0 ? setTimeout(() => res.end(), timeoutSeconds * 1000) : undefined;
    const done = (): void => {
      watchers.delete(w);
      if (bookmarks) clearInterval(bookmarks);
      if (timeout) clearTimeout(timeout);
    };
    res.on('close', done);
    req.on('close', done);
  };

  const answer = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.headers.authorization !== `Bearer ${token}`) {
      status(res, 401, 'Unauthorized', 'Unauthorized');
      return;
    }
    const url = new URL(req.url ?? '/', 'https://standin');
    const path = url.pathname.replace(/\/+$/, '');
    const method = req.method ?? 'GET';
    if (path === '/api/v1/nodes' && method === 'GET') {
      const w = url.searchParams.get('watch');
      if (w === '1' || w === 'true') watch(url, req, res);
      else list(url, res);
      return;
    }
    if (path === '/api/v1/nodes' && method === 'POST') {
      const body = (await readBody(req)) as NodeObject;
      const nodeName = body.metadata?.name;
      if (!nodeName) return status(res, 422, 'Invalid', 'metadata.name: Required value');
      if (nodes.has(nodeName)) return status(res, 409, 'AlreadyExists', `nodes "${nodeName}" already exists`);
      const node = write({ ...body, apiVersion: 'v1', kind: 'Node', metadata: { ...body.metadata, uid: randomUUID(), creationTimestamp: kubeTime(), resourceVersion: '' } }, 'ADDED');
      res.statusCode = 201;
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(node));
      return;
    }
    const m = /^\/api\/v1\/nodes\/([^/]+)(\/status)?$/.exec(path);
    if (m) {
      const nodeName = decodeURIComponent(m[1] ?? '');
      const node = nodes.get(nodeName);
      if (!node) return status(res, 404, 'NotFound', `nodes "${nodeName}" not found`);
      if (method === 'GET') {
        stats.gets++;
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify(node));
        return;
      }
      if (method === 'PATCH' && req.headers['content-type'] === 'application/merge-patch+json') {
        const patch = (await readBody(req)) as Record<string, unknown>;
        // The status subresource takes `status` only; the object itself everything else (as the API server does).
        const part = m[2] ? { status: patch['status'] } : { ...patch, status: undefined };
        const merged = mergePatch(node, JSON.parse(JSON.stringify(part))) as NodeObject;
        merged.metadata = { ...merged.metadata, name: nodeName, uid: node.metadata.uid, creationTimestamp: node.metadata.creationTimestamp };
        if (m[2]) merged['spec'] = node['spec'];
        else merged['status'] = node['status'];
        const written = write(merged, 'MODIFIED');
        res.setHeader('Content-Type', 'application/json');
        res.end(JSON.stringify(written));
        return;
      }
    }
    stats.unknownRequests++;
    status(res, 404, 'NotFound', `the stand-in does not serve ${method} ${path}`);
  };

  const server: Server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    answer(req, res).catch((e: unknown) => {
      if (!res.headersSent) status(res, 400, 'BadRequest', e instanceof Error ? e.message : String(e));
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 120_000;
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('stand-in API server: no port');
  const serverUrl = `https://127.0.0.1:${address.port}`;
  const kubeconfig = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server: serverUrl, 'certificate-authority-data': tls.caData } }],
    users: [{ name: `${name}-admin`, user: { token } }],
    contexts: [{ name, context: { cluster: name, user: `${name}-admin` } }],
    'current-context': name,
  };
  let stopped: Promise<void> | undefined;
  return {
    name,
    server: serverUrl,
    kubeconfigYaml: `${JSON.stringify(kubeconfig, null, 2)}\n`,
    stats: () => ({ ...stats }),
    size: () => nodes.size,
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => {
        for (const w of watchers) w.res.end();
        watchers.clear();
        server.close(() => resolve());
        for (const s of sockets) s.destroy();
      })),
  };
}
