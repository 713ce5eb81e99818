/**
 * Which proxy a request to a cluster goes through, chosen as client-go chooses it (docs/proxies.md). A proxy of an
 * unsupported scheme is refused, never ignored, so that a request meant for a proxy never goes out directly.
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

const SUPPORTED_PROXY_SCHEMES: readonly string[] = ['http:', 'https:', 'socks5:', 'socks5h:'];

/**
 * Parses a proxy URL and checks its scheme; `where` names its origin in errors (e.g. `HTTPS_PROXY`). A value of the
 * environment without a scheme is read as `http://…`, as Go reads it. Throws ProxyConfigError.
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

/** Whether NO_PROXY, as Go reads it (docs/proxies.md), names the host and port. */
export function noProxyMatches(noProxy: string, host: string, port: string): boolean {
  return noProxy.split(',').some((raw) => {
    const entry = raw.trim().toLowerCase();
    if (entry === '*') return true;
    if (entry.includes('/')) return inCidr(entry, host);
    // `[v6]:port` or `name:port`; a bare IPv6 address has colons but no port.
    const bracketed = /^\[(.+)\](?::(\d+))?$/.exec(entry);
    const parts = bracketed ?? (net.isIP(entry) === 0 ? /^(.*?)(?::(\d+))?$/.exec(entry) : null);
    const name = parts ? (parts[1] ?? '') : entry;
    if (name === '' || (parts?.[2] !== undefined && parts[2] !== port)) return false;
    if (net.isIP(name) !== 0) return name === host;
    const domain = name.replace(/^\*\./, '.');
    return domain.startsWith('.') ? host.endsWith(domain) : host === domain || host.endsWith(`.${domain}`);
  });
}

/** Whether `host` is an address in the CIDR `entry`; an entry that is no CIDR is ignored, as Go ignores it. */
function inCidr(entry: string, host: string): boolean {
  const [base = '', bits] = entry.split('/');
  const family = net.isIP(base) === 4 ? 'ipv4' : 'ipv6';
  if (net.isIP(base) === 0 || net.isIP(base) !== net.isIP(host)) return false;
  const list = new net.BlockList();
  try {
    list.addSubnet(base, Number(bits), family);
    return list.check(host, family);
  } catch {
    return false;
  }
}
