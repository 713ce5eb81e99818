/**
 * Connection pools (Node Agents) that reach an API server through a proxy, for kube-http.ts; which proxy a request
 * takes is proxy.ts's choice. TLS to the API server runs inside the tunnel, with the request's own TLS options (the
 * kubeconfig's CA, client certificate, server name): the proxy relays bytes it cannot read.
 *
 * - `http://` and `https://` proxies: an HTTP CONNECT tunnel, through hpagent (the small, dependency-free agent that
 *   client-node and the Elasticsearch client use). A proxy's user and password go to it as Proxy-Authorization.
 * - `socks5://` and `socks5h://` proxies: a SOCKS5 CONNECT through the `socks` library (what socks-proxy-agent is
 *   built on; used directly here so that no debug output can print the proxy's password). The API server's host name
 *   is resolved by the proxy for both schemes, as client-go's SOCKS5 dialer does. User and password: RFC 1929.
 *
 * Both libraries are loaded on first use: a deployment without a proxy loads neither at cold start. Failures to open
 * a tunnel are {@link ProxyTunnelError}s (code `ERR_PROXY_TUNNEL`) whose message quotes the library's short reason
 * (a status code, an authentication failure), never the proxy URL; system errors (ECONNREFUSED to the proxy) keep
 * their own code and name an address only.
 */
import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';

/** No tunnel through the proxy: it refused (e.g. 407), failed authentication, or could not reach the target. */
export class ProxyTunnelError extends Error {
  readonly code = 'ERR_PROXY_TUNNEL';
  constructor(reason: string) {
    super(`no tunnel through the proxy (${reason.slice(0, 80)})`);
    this.name = 'ProxyTunnelError';
  }
}

type Connected = (err: Error | null, stream: Duplex) => void;

/** The agent of requests to `target` (`http:` or `https:`) through `proxy`, pooling with `pool`'s options. */
export async function createProxyAgent(target: 'http:' | 'https:', proxy: URL, pool: https.AgentOptions): Promise<http.Agent> {
  if (proxy.protocol === 'socks5:' || proxy.protocol === 'socks5h:') return socksAgent(target, proxy, pool);
  const { HttpProxyAgent, HttpsProxyAgent } = await import('hpagent');
  return target === 'https:' ? new HttpsProxyAgent({ ...pool, proxy }) : new HttpProxyAgent({ ...pool, proxy });
}

async function socksAgent(target: 'http:' | 'https:', proxy: URL, pool: https.AgentOptions): Promise<http.Agent> {
  const { SocksClient } = await import('socks');
  const socksProxy = {
    host: proxy.hostname.replace(/^\[|\]$/g, ''),
    port: Number(proxy.port) || 1080,
    type: 5 as const,
    ...(proxy.username || proxy.password ? { userId: decodeURIComponent(proxy.username), password: decodeURIComponent(proxy.password) } : {}),
  };
  /** Opens the SOCKS tunnel to the request's host and port, then hands the socket to `wrap` (TLS for https). */
  const tunnel = (options: http.ClientRequestArgs, wrap: (socket: Duplex) => Duplex, callback: Connected): void => {
    SocksClient.createConnection({
      proxy: socksProxy,
      command: 'connect',
      destination: { host: String(options.host ?? options.hostname ?? ''), port: Number(options.port) },
      timeout: Number(options.timeout) || 30_000,
    }).then(
      ({ socket }) => callback(null, wrap(socket)),
      // The library's error keeps its options (the proxy's password): only its short message goes on.
      (err: unknown) =>
        callback(err instanceof Error && typeof (err as { code?: unknown }).code === 'string' ? err : new ProxyTunnelError(err instanceof Error ? err.message : 'SOCKS error'), undefined as never),
    );
  };
  if (target === 'https:') {
    return new (class SocksHttpsAgent extends https.Agent {
      override createConnection(options: https.RequestOptions, callback?: Connected): undefined {
        tunnel(options, (socket) => super.createConnection({ ...options, socket } as https.RequestOptions) as Duplex, callback ?? (() => undefined));
        return undefined;
      }
    })(pool);
  }
  return new (class SocksHttpAgent extends http.Agent {
    override createConnection(options: http.ClientRequestArgs, callback?: Connected): undefined {
      tunnel(options, (socket) => socket, callback ?? (() => undefined));
      return undefined;
    }
  })(pool);
}
