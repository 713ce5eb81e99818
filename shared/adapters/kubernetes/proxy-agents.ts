/**
 * Connection pools (Node Agents) that reach an API server through a proxy, TLS inside the tunnel (docs/proxies.md):
 * hpagent for `http://` and `https://` proxies; for `socks5://` and `socks5h://` the `socks` library directly, not
 * socks-proxy-agent, whose debug output can print the proxy's password. Both load on first use, so a deployment
 * without a proxy loads neither at cold start. Errors never quote the proxy URL.
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
  // The tunnel's socket goes to the request as it is, or (https) through https.Agent's own TLS connection.
  const Base: typeof http.Agent = target === 'https:' ? https.Agent : http.Agent;
  return new (class SocksAgent extends Base {
    override createConnection(options: http.ClientRequestArgs, callback: Connected = () => undefined): undefined {
      const tls = (socket: Duplex): Duplex =>
        super.createConnection({ ...options, socket } as https.RequestOptions) as Duplex;
      SocksClient.createConnection({
        proxy: socksProxy,
        command: 'connect',
        destination: { host: String(options.host ?? options.hostname ?? ''), port: Number(options.port) },
        timeout: Number(options.timeout) || 30_000,
      }).then(
        ({ socket }) => callback(null, target === 'https:' ? tls(socket) : socket),
        // The library's error keeps its options (the proxy's password): only its short message goes on.
        (err: unknown) => {
          const coded = err instanceof Error && typeof (err as { code?: unknown }).code === 'string';
          callback(
            coded ? err : new ProxyTunnelError(err instanceof Error ? err.message : 'SOCKS error'),
            undefined as never,
          );
        },
      );
      return undefined;
    }
  })(pool);
}
