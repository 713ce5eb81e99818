/**
 * Which proxy a request to a cluster goes through, chosen as client-go chooses it (docs/proxies.md):
 * - the cluster's own `proxy-url` (kubeconfig `clusters[].cluster.proxy-url`), for every request to that cluster,
 *   loopback included;
 * - otherwise the environment: `HTTPS_PROXY` (or `https_proxy`) for an https server, `HTTP_PROXY` (or `http_proxy`)
 *   for an http one, unless `NO_PROXY` (or `no_proxy`) names the host; a loopback host (`localhost`, 127.0.0.0/8,
 *   `::1`) is never proxied through the environment (Go's `httpproxy.Config.ProxyFunc`);
 * - otherwise none.
 *
 * The schemes client-go accepts, `http://`, `https://`, `socks5://` and `socks5h://`, are supported (proxy-agents.ts).
 * Any other scheme (socks4, ftp, …) is refused with {@link ProxyConfigError}, never ignored: a request that was meant
 * to go through a proxy never goes out directly. A proxy URL may hold a user and password: they are sent only to the
 * proxy and never appear in an error message: errors name the scheme at most.
 */
import net from 'node:net';

/** A proxy URL the product cannot use; its message names the field and scheme, never the URL (it may hold a secret). */
export class ProxyConfigError extends Error {
  readonly code = 'ERR_PROXY_CONFIG';
  constructor(message: string) {
    super(message);
    this.name = 'ProxyConfigError';
  }
}

/** Schemes of proxies the product connects through. */
export const SUPPORTED_PROXY_SCHEMES: readonly string[] = ['http:', 'https:', 'socks5:', 'socks5h:'];

/**
 * Parses a proxy URL and checks its scheme; `where` names its origin in errors (e.g. `proxy-url`, `HTTPS_PROXY`). A
 * value of the environment without a scheme (`proxy.corp:3128`) is read as `http://proxy.corp:3128`, as Go reads it;
 * a kubeconfig's `proxy-url` must be a URL.
 */
export function parseProxyUrl(value: string, where: string, o: { readonly fromEnvironment?: boolean } = {}): URL {
  let url = URL.parse(value);
  if (o.fromEnvironment && (url === null || url.host === '')) url = URL.parse(`http://${value}`) ?? url;
  if (url === null) throw new ProxyConfigError(`${where} is not a valid URL`);
  if (!SUPPORTED_PROXY_SCHEMES.includes(url.protocol)) {
    const scheme = /^[a-z][a-z0-9+.-]{0,20}:$/i.test(url.protocol) ? url.protocol.slice(0, -1) : 'unknown';
    throw new ProxyConfigError(`${where} uses the scheme "${scheme}", which the product does not support (http, https, socks5 and socks5h proxies only)`);
  }
  if (url.hostname === '') throw new ProxyConfigError(`${where} has no host`);
  return url;
}

/** The proxy for a request to `server`, or undefined for a direct connection. Throws ProxyConfigError for an unusable one. */
export function proxyFor(server: URL, clusterProxyUrl: string | undefined, env: NodeJS.ProcessEnv = process.env): URL | undefined {
  if (clusterProxyUrl !== undefined && clusterProxyUrl !== '') return parseProxyUrl(clusterProxyUrl, 'the cluster\'s proxy-url');
  const name = server.protocol === 'https:' ? 'HTTPS_PROXY' : 'HTTP_PROXY';
  const value = env[name] || env[name.toLowerCase()];
  if (!value) return undefined;
  const host = server.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (isLoopback(host)) return undefined;
  if (noProxyMatches(env.NO_PROXY || env.no_proxy || '', host, server.port || (server.protocol === 'https:' ? '443' : '80'))) return undefined;
  return parseProxyUrl(value, env[name] ? name : name.toLowerCase(), { fromEnvironment: true });
}

const LOOPBACK = new net.BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** `localhost` (and its subdomains), 127.0.0.0/8 and ::1. */
export function isLoopback(host: string): boolean {
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const family = net.isIP(host);
  return family !== 0 && LOOPBACK.check(host, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * NO_PROXY as Go reads it: comma-separated entries; `*` matches every host; an IP or CIDR matches addresses;
 * `example.com` matches it and its subdomains, `.example.com` its subdomains only; an entry with `:port` matches
 * that port only.
 */
export function noProxyMatches(noProxy: string, host: string, port: string): boolean {
  for (const raw of noProxy.split(',')) {
    let entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    if (entry === '*') return true;
    if (entry.includes('/')) {
      const [base, bits] = entry.split('/');
      if (base !== undefined && bits !== undefined && net.isIP(host) !== 0 && net.isIP(base) === net.isIP(host)) {
        const list = new net.BlockList();
        const family = net.isIP(base) === 4 ? 'ipv4' : 'ipv6';
        try {
          list.addSubnet(base, Number(bits), family);
          if (list.check(host, family)) return true;
        } catch {
          // not a CIDR: ignored, as Go ignores it
        }
      }
      continue;
    }
    let entryPort: string | undefined;
    const bracketed = /^\[(.+)\](?::(\d+))?$/.exec(entry);
    if (bracketed) {
      entry = bracketed[1] ?? '';
      entryPort = bracketed[2];
    } else if (net.isIP(entry) === 0) {
      const m = /^(.*):(\d+)$/.exec(entry);
      if (m) {
        entry = m[1] ?? '';
        entryPort = m[2];
      }
    }
    if (entryPort !== undefined && entryPort !== port) continue;
    if (net.isIP(entry) !== 0) {
      if (entry === host) return true;
      continue;
    }
    if (entry.startsWith('*.')) entry = entry.slice(1);
    if (entry.startsWith('.')) {
      if (host.endsWith(entry)) return true;
      continue;
    }
    if (host === entry || host.endsWith(`.${entry}`)) return true;
  }
  return false;
}
