/**
 * The product's Kubernetes HTTP client on `node:https`, in place of client-node (docs/design-decisions.md); its pool,
 * proxies, stale-socket retries and gzip: docs/proxies.md. Every call has a deadline, body included (call-deadline.ts),
 * and an answer read whole has a byte cap, so that a server named by an untrusted kubeconfig cannot exhaust memory.
 * Failures carry a `code` and are mapped by api-errors.ts. A client-node `KubeConfig` is a {@link ClusterEndpoint} too.
 */
import http from 'node:http';
import https from 'node:https';
import zlib from 'node:zlib';
import { callSignal } from './call-deadline.ts';
import { ProxyTunnelError, createProxyAgent } from './proxy-agents.ts';
import { proxyFor } from './proxy.ts';
import { userAgent } from './user-agent.ts';
import type { StreamCaps } from './watch/caps.ts';
import { listPages, readErrorBody } from './watch/list-pager.ts';

/** A cluster and the credentials of its requests: the two methods of client-node's KubeConfig the client needs. */
export interface ClusterEndpoint {
  /** The API server (`https://host:port`) and its proxy (kubeconfig `proxy-url`), or null when there is none. */
  getCurrentCluster(): { readonly server: string; readonly proxyUrl?: string | undefined } | null;
  /** Puts the TLS options (CA, client certificate, server name) and the Authorization header into `opts`. */
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
}

/** A non-2xx answer: its status and (capped) body. */
export class KubeApiError extends Error {
  readonly code: number;
  readonly body: string;
  constructor(code: number, body: string) {
    super(`HTTP ${code}`);
    this.name = 'KubeApiError';
    this.code = code;
    this.body = body;
  }
}

/** A failure of the client itself or of a proxy's tunnel; `code` is a Node-style code, the message quotes no answer. */
export class KubeTransportError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'KubeTransportError';
    this.code = code;
  }
}

/** The code of the error an answer larger than MAX_RESPONSE_BYTES fails with. */
export const ANSWER_TOO_LARGE = 'ERR_ANSWER_TOO_LARGE';

/** Larger than any object the product reads (a Node, a Machine, a Secret is at most 1 MiB); bigger answers fail. */
export const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

/** A pooled socket unused this long is closed: below kube-apiserver's (90 s) and load balancers' (60 s) idle timeouts. */
export const IDLE_SOCKET_TIMEOUT_MS = 45_000;

/** Idle sockets kept per identity and route; also bounds the stale-socket retries of one request. */
export const MAX_FREE_SOCKETS = 32;

const POOL: https.AgentOptions = { keepAlive: true, scheduling: 'lifo', timeout: IDLE_SOCKET_TIMEOUT_MS, maxFreeSockets: MAX_FREE_SOCKETS };
const direct = { 'https:': new https.Agent(POOL), 'http:': new http.Agent(POOL) };
/** Proxy agents by route (`<target protocol> <proxy URL>`); the key holds a proxy's password, it is never logged. */
const proxied = new Map<string, http.Agent>();

async function agentFor(url: URL, proxy: URL | undefined): Promise<http.Agent> {
  const protocol = url.protocol === 'http:' ? 'http:' : 'https:';
  if (!proxy) return direct[protocol];
  const key = `${protocol} ${proxy.href}`;
  let agent = proxied.get(key);
  if (!agent) proxied.set(key, (agent = await createProxyAgent(protocol, proxy, POOL)));
  return agent;
}

/** Codes of a request that failed on a reused socket before any answer: the server had closed it. */
const STALE_SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE', 'ECONNABORTED']);

export interface KubeCall {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The path, e.g. `/api/v1/nodes/n1`, without the query. */
  readonly path: string;
  readonly query?: Readonly<Record<string, string | undefined>>;
  /** Sent as JSON, with `contentType` (default `application/json`). */
  readonly body?: unknown;
  readonly contentType?: string;
}

/** `path?query`, with the undefined parameters left out. */
export function pathWithQuery(path: string, query: Readonly<Record<string, string | undefined>> = {}): string {
  const defined = Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined);
  const text = new URLSearchParams(defined).toString();
  return text === '' ? path : `${path}?${text}`;
}

/** Percent-encodes one path segment (an object's name or namespace). */
export const seg = encodeURIComponent;

/** Opens a request and resolves with the response once its headers arrived; the caller reads (or destroys) the body. */
export async function openRequest(
  endpoint: ClusterEndpoint,
  method: string,
  pathAndQuery: string,
  options: { readonly body?: string; readonly contentType?: string; readonly signal: AbortSignal; readonly acceptGzip?: boolean },
): Promise<http.IncomingMessage> {
  const cluster = endpoint.getCurrentCluster();
  if (!cluster) throw new KubeTransportError('ERR_KUBE_NO_CLUSTER', 'the kubeconfig has no current cluster');
  const url = new URL(cluster.server.replace(/\/+$/, '') + pathAndQuery);
  const proxy = proxyFor(url, cluster.proxyUrl);
  const headers: Record<string, string | number> = { Accept: 'application/json', 'User-Agent': userAgent() };
  if (options.acceptGzip) headers['Accept-Encoding'] = 'gzip';
  if (options.body !== undefined) {
    headers['Content-Type'] = options.contentType ?? 'application/json';
    headers['Content-Length'] = Buffer.byteLength(options.body);
  }
  // Method and path are set first, so that a wrapper of applyToHTTPSOptions sees the call.
  const opts: https.RequestOptions = { method, path: url.pathname + url.search, headers };
  await endpoint.applyToHTTPSOptions(opts);
  // client-node's KubeConfig sets an agent of its own (a proxy agent for proxy-url): the pool here takes its place.
  const agent = await agentFor(url, proxy);
  const mod = url.protocol === 'http:' ? http : https;
  const send = (): Promise<{ res?: http.IncomingMessage; stale?: NodeJS.ErrnoException }> =>
    new Promise((resolve, reject) => {
      let answered = false;
      const req = mod.request(url, { ...opts, agent, signal: options.signal }, (res) => {
        answered = true;
        resolve({ res });
      });
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (!answered && req.reusedSocket && STALE_SOCKET_CODES.has(err.code ?? '') && !options.signal.aborted) resolve({ stale: err });
        // hpagent's own failures (`Bad response: 407`, `Proxy timeout`) have no code: they become ProxyTunnelErrors.
        else reject(proxy && typeof err.code !== 'string' && !options.signal.aborted ? new ProxyTunnelError(err.message) : err);
      });
      req.end(options.body);
    });
  // Each stale socket fails once and leaves the pool: the loop ends on a fresh socket at the latest.
  for (let attempt = 1; ; attempt++) {
    const { res, stale } = await send();
    if (res) return res;
    if (attempt > MAX_FREE_SOCKETS) throw new KubeTransportError(stale?.code ?? 'ECONNRESET', `the connection was reset before any answer on ${attempt} reused sockets`);
  }
}

/** Reads a response body as text, gunzipped as it arrives; fails past `MAX_RESPONSE_BYTES` (decompressed). */
export async function readBody(res: NodeJS.ReadableStream & { destroy(err?: Error): void; readonly headers?: http.IncomingHttpHeaders }): Promise<string> {
  let source: NodeJS.ReadableStream & { destroy(err?: Error): void } = res;
  if (res.headers?.['content-encoding'] === 'gzip') {
    const gunzip = zlib.createGunzip();
    res.on('error', (err: Error) => gunzip.destroy(err));
    source = res.pipe(gunzip);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of source) {
    const chunk = typeof c === 'string' ? Buffer.from(c) : (c as Buffer);
    size += chunk.length;
    if (size > MAX_RESPONSE_BYTES) {
      res.destroy();
      if (source !== res) source.destroy();
      throw new KubeTransportError(ANSWER_TOO_LARGE, `the answer exceeds ${MAX_RESPONSE_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * One JSON call: resolves with the parsed answer of a 2xx, rejects with {@link KubeApiError} otherwise, or with the
 * transport's error (a system error; the call deadline's TimeoutError, also when it passed while the body streamed).
 */
export async function kubeCall<T = unknown>(endpoint: ClusterEndpoint, call: KubeCall): Promise<T> {
  const body = call.body === undefined ? undefined : JSON.stringify(call.body);
  const signal = callSignal();
  const res = await openRequest(endpoint, call.method, pathWithQuery(call.path, call.query), {
    body,
    contentType: call.contentType,
    signal,
    // kube-apiserver compresses answers above 128 KiB (500 Nodes: about 1.5 MB of JSON); streams ask for none.
    acceptGzip: true,
  });
  const text = await readBody(res).catch((error: unknown) => {
    // A deadline that passes while the body streams destroys the socket: node:http reports that as `aborted`
    // (ECONNRESET). The call ran out of time: say so (a TimeoutError), as for a deadline before the answer.
    throw signal.aborted ? signal.reason : error;
  });
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 299) throw new KubeApiError(status, text.slice(0, 4096));
  try {
    return (text === '' ? undefined : JSON.parse(text)) as T;
  } catch {
    // Never the text in the error: a server named by a kubeconfig may echo anything.
    throw new Error(`the answer to ${call.method} ${call.path} is not JSON`);
  }
}

/**
 * Every item of a collection, read page by page (watch/list-pager.ts, with its caps), each page under the call
 * deadline, so that no answer holds thousands of objects. A non-2xx page rejects with {@link KubeApiError}.
 */
export async function kubeList<T>(endpoint: ClusterEndpoint, path: string, query: Readonly<Record<string, string | undefined>>, pageSize: number, caps?: Partial<StreamCaps>): Promise<T[]> {
  const items: T[] = [];
  await listPages({
    openPage: (page, signal) => openRequest(endpoint, 'GET', pathWithQuery(path, { ...query, ...page }), { signal }),
    failed: async (res, status) => new KubeApiError(status, await readErrorBody(res)),
    pageSignal: () => callSignal(),
    onItem: (json) => {
      if (json !== undefined) items.push(JSON.parse(json) as T);
    },
    pageSize,
    operation: `listing ${path}`,
    caps,
  });
  return items;
}
