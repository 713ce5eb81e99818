/**
 * The product's Kubernetes HTTP client: JSON requests to a cluster's API server over `node:https`, with
 * - one keep-alive connection pool for every cluster (`https.Agent` keys its sockets by TLS identity: CA, client
 *   certificate and key, server name), so a warm function reuses its connections; bearer tokens travel per request;
 * - a deadline on every call (the innermost `withCallDeadline` scope, call-deadline.ts), which also bounds reading
 *   the body;
 * - one retry of a request whose reused keep-alive socket turned out closed (the server's idle timeout, or a Lambda
 *   environment thawed after minutes): the request never reached the server;
 * - a cap on the bytes of an answer, so that a server named by an untrusted kubeconfig cannot exhaust memory;
 * - failures as {@link KubeApiError} (status and body) or the transport's own error, mapped by api-errors.ts.
 *
 * It replaces @kubernetes/client-node in the Lambda bundles: client-node 2.x and its HTTP client undici were most of
 * the bundles' bytes and so most of their module load (BENCHMARKS.md, cold start). Where the credentials come from
 * is a {@link ClusterEndpoint}: the product's own {@link RestConfig} (EKS token, untrusted kubeconfigs' inline
 * credentials), or, on the developer side, a client-node `KubeConfig`, which has the same two methods.
 */
import http from 'node:http';
import https from 'node:https';
import { callSignal } from './call-deadline.ts';

/** A cluster and the credentials of its requests: the two methods of client-node's KubeConfig the client needs. */
export interface ClusterEndpoint {
  /** The API server (`https://host:port`), or null when there is none. */
  getCurrentCluster(): { readonly server: string } | null;
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

/** Larger than any object the product reads (a Node, a Machine, a Secret is at most 1 MiB); bigger answers fail. */
export const MAX_RESPONSE_BYTES = 8 * 1024 * 1024;

/** The User-Agent of every request the product sends (API server audit logs and metrics name the client by it). */
export const USER_AGENT = 'capi-taint-propagator';

const agent = new https.Agent({ keepAlive: true, scheduling: 'lifo' });

export interface KubeCall {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** The path, e.g. `/api/v1/nodes/n1`; query parameters go in `query`. */
  readonly path: string;
  readonly query?: Readonly<Record<string, string | undefined>>;
  /** Sent as JSON. */
  readonly body?: unknown;
  /** Content-Type of the body (default `application/json`; patches name their kind). */
  readonly contentType?: string;
  /** Bounds the call (default: the current call deadline, call-deadline.ts). */
  readonly signal?: AbortSignal;
}

/** `path?query`, with the undefined parameters left out. */
export function pathWithQuery(path: string, query: Readonly<Record<string, string | undefined>> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) q.set(k, v);
  const text = q.toString();
  return text === '' ? path : `${path}?${text}`;
}

/** Percent-encodes one path segment (an object's name or namespace). */
export const seg = encodeURIComponent;

/**
 * Opens a request and resolves with the response once its headers arrived; the caller reads (or destroys) the body.
 * A request on a reused socket that the server had closed is sent once more on a fresh one.
 */
export async function openRequest(
  endpoint: ClusterEndpoint,
  method: string,
  pathAndQuery: string,
  options: { readonly body?: string; readonly contentType?: string; readonly signal: AbortSignal },
): Promise<http.IncomingMessage> {
  const cluster = endpoint.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const url = new URL(cluster.server.replace(/\/+$/, '') + pathAndQuery);
  // A User-Agent of its own, so that an API server's audit log tells the product's requests from other clients'.
  const headers: Record<string, string | number> = { Accept: 'application/json', 'User-Agent': USER_AGENT };
  if (options.body !== undefined) {
    headers['Content-Type'] = options.contentType ?? 'application/json';
    headers['Content-Length'] = Buffer.byteLength(options.body);
  }
  // method and path are set before the credentials are applied, so a wrapper of applyToHTTPSOptions sees the call.
  const opts: https.RequestOptions = { method, path: url.pathname + url.search, headers };
  await endpoint.applyToHTTPSOptions(opts);
  const send = (): Promise<{ res?: http.IncomingMessage; retry?: boolean }> =>
    new Promise((resolve, reject) => {
      const mod = url.protocol === 'http:' ? http : https;
      const req = mod.request(url, { ...opts, ...(url.protocol === 'https:' ? { agent } : {}), signal: options.signal }, (res) => resolve({ res }));
      req.on('error', (err: NodeJS.ErrnoException) => {
        if (req.reusedSocket && err.code === 'ECONNRESET' && !options.signal.aborted) resolve({ retry: true });
        else reject(err);
      });
      req.end(options.body);
    });
  const first = await send();
  if (first.res) return first.res;
  const second = await send();
  if (second.res) return second.res;
  throw new Error('connection reset twice');
}

/** Reads a response body as text, at most `MAX_RESPONSE_BYTES`. */
export async function readBody(res: NodeJS.ReadableStream & { destroy(err?: Error): void }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of res) {
    const chunk = typeof c === 'string' ? Buffer.from(c) : (c as Buffer);
    size += chunk.length;
    if (size > MAX_RESPONSE_BYTES) {
      res.destroy();
      throw new Error(`the answer exceeds ${MAX_RESPONSE_BYTES} bytes`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * One JSON call: resolves with the parsed answer of a 2xx, rejects with {@link KubeApiError} otherwise, or with the
 * transport's error (a system error, the signal's abort; its reason when it fired while the body was read).
 */
export async function kubeCall<T = unknown>(endpoint: ClusterEndpoint, call: KubeCall): Promise<T> {
  const body = call.body === undefined ? undefined : JSON.stringify(call.body);
  const signal = call.signal ?? callSignal();
  const res = await openRequest(endpoint, call.method, pathWithQuery(call.path, call.query), {
    ...(body === undefined ? {} : { body }),
    ...(call.contentType ? { contentType: call.contentType } : {}),
    signal,
  });
  let text: string;
  try {
    text = await readBody(res);
  } catch (error) {
    // A deadline that passes while the body streams destroys the socket: node:http reports that as `aborted`
    // (ECONNRESET). The call ran out of time: say so (a TimeoutError), as for a deadline before the answer.
    throw signal.aborted ? signal.reason : error;
  }
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
 * Every item of a collection, read page by page (`limit`, then the server's `continue` token), so that no answer holds
 * thousands of objects.
 */
export async function kubeList<T>(endpoint: ClusterEndpoint, path: string, query: Readonly<Record<string, string | undefined>>, pageSize: number): Promise<T[]> {
  const items: T[] = [];
  let cont: string | undefined;
  do {
    // The wire's JSON: the token is `continue` (client-node's model renames it `_continue`).
    const page = await kubeCall<{ items?: T[]; metadata?: { continue?: string } }>(endpoint, { method: 'GET', path, query: { ...query, limit: String(pageSize), continue: cont } });
    items.push(...(page.items ?? []));
    cont = page.metadata?.continue || undefined;
  } while (cont);
  return items;
}
