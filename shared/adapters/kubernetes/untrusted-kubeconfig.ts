/**
 * Kubeconfigs the product did not get from its own operator are data, never programs (docs/security.md, "Kubeconfigs
 * are data"): parsed and checked here into a RestConfig with the current context's inline credentials only. Not
 * client-node's `KubeConfig`: it reads `token-file` while loading, and runs `exec` plugins and the gcp `cmd-path`.
 * Errors name the field and where it is, never the text.
 */
import { parseProxyUrl, ProxyConfigError } from './proxy.ts';
import { RestConfig } from './rest-config.ts';
import { load } from 'js-yaml';
import { ClusterCredentialsError, RefusedKubeconfigError } from '#shared/errors.ts';

/** Larger than any real kubeconfig (a Secret is at most 1 MiB); bigger input is refused before parsing. */
const MAX_KUBECONFIG_BYTES = 256 * 1024;

/** Refused fields of `users[].user`, by the reason shown in errors. */
const REFUSED_USER_FIELDS: ReadonlyArray<readonly [why: string, fields: readonly string[]]> = [
  ['exec plugin', ['exec']],
  ['auth provider', ['auth-provider']],
  ['file path', ['client-certificate', 'client-key', 'token-file', 'tokenFile']],
  ['basic auth', ['username', 'password']],
  ['impersonation', ['as', 'as-uid', 'as-groups', 'as-user-extra']],
];

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const stringOrUndefined = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * Parses and checks an untrusted kubeconfig: returns a RestConfig with the current context's inline credentials only.
 * Throws RefusedKubeconfigError for a refused feature, ClusterCredentialsError for an unusable kubeconfig; both name
 * `from.cluster` (the key errors carry) and `from.source` (e.g. `Secret ns/wc1-kubeconfig`).
 */
export function kubeConfigFromUntrusted(text: string, from: { cluster: string; source: string }): RestConfig {
  const fail = (detail: string): ClusterCredentialsError => new ClusterCredentialsError(from.cluster, `${from.source} ${detail}`);
  if (Buffer.byteLength(text, 'utf8') > MAX_KUBECONFIG_BYTES) throw fail(`holds more than ${MAX_KUBECONFIG_BYTES} bytes`);
  let doc: unknown;
  try {
    doc = load(text, { maxAliases: 0, maxDepth: 20 }); // no aliases: no alias bombs
  } catch (err) {
    // js-yaml's message quotes the offending lines and its `mark.buffer` holds the whole text: keep the line only.
    const line = isObj(err) && isObj(err.mark) && typeof err.mark.line === 'number' ? ` (YAML error at line ${err.mark.line + 1})` : '';
    throw fail(`is not a valid kubeconfig${line}`);
  }
  if (!isObj(doc)) throw fail('is not a valid kubeconfig (not a YAML mapping)');

  const refused: string[] = [];
  const clusters = entries(doc.clusters, 'cluster');
  const users = entries(doc.users, 'user');
  const contexts = entries(doc.contexts, 'context');
  for (const { index: i, body } of clusters) {
    const refuse = (field: string, why: string): void => void refused.push(`clusters[${i}].cluster.${field} (${why})`);
    if (body['certificate-authority'] !== undefined) refuse('certificate-authority', 'file path');
    const insecure = body['insecure-skip-tls-verify'];
    if (insecure === true || insecure === 'true') refuse('insecure-skip-tls-verify', 'TLS verification off');
    if (typeof body.server === 'string' && !body.server.startsWith('https://')) refuse('server', 'not https');
    const proxy = body['proxy-url'] ?? '';
    try {
      // The URL may hold a password: the reason names the scheme at most (proxy.ts), never the value.
      if (typeof proxy !== 'string') throw new ProxyConfigError('proxy-url is not a string');
      if (proxy !== '') parseProxyUrl(proxy, 'proxy-url');
    } catch (err) {
      refuse('proxy-url', err instanceof ProxyConfigError ? err.message : 'not a valid URL');
    }
  }
  for (const { index: i, body } of users) {
    for (const [why, fields] of REFUSED_USER_FIELDS) {
      refused.push(...fields.filter((f) => body[f] !== undefined).map((f) => `users[${i}].user.${f} (${why})`));
    }
  }
  if (refused.length > 0) throw new RefusedKubeconfigError(from.cluster, from.source, refused);

  const currentName = doc['current-context'];
  if (typeof currentName !== 'string' || currentName === '') throw fail('has no current context (current-context is missing)');
  const context = contexts.find((c) => c.name === currentName)?.body;
  if (!context) throw fail('has no current context (no context named by current-context)');
  const cluster = clusters.find((c) => c.name === context.cluster);
  const user = users.find((u) => u.name === context.user);
  if (!cluster || !user) throw fail('has no current context with a cluster and a user');

  const server = cluster.body.server;
  if (typeof server !== 'string' || URL.parse(server)?.protocol !== 'https:') throw fail(`has no valid https server in clusters[${cluster.index}]`);
  const caData = optionalBase64(cluster.body['certificate-authority-data'], `clusters[${cluster.index}].cluster.certificate-authority-data`, fail);
  const certData = optionalBase64(user.body['client-certificate-data'], `users[${user.index}].user.client-certificate-data`, fail);
  const keyData = optionalBase64(user.body['client-key-data'], `users[${user.index}].user.client-key-data`, fail);
  const token = user.body.token;
  if (token !== undefined && (typeof token !== 'string' || token === '' || /[\r\n]/.test(token))) throw fail(`has an invalid users[${user.index}].user.token (must be one line)`);
  if ((certData === undefined) !== (keyData === undefined)) throw fail(`has only one of client-certificate-data and client-key-data in users[${user.index}]`);
  if (token === undefined && certData === undefined) throw fail(`has no inline credential (token or client certificate) in users[${user.index}]`);

  return new RestConfig({
    server,
    caData,
    tlsServerName: stringOrUndefined(cluster.body['tls-server-name']),
    proxyUrl: stringOrUndefined(cluster.body['proxy-url']),
    token: stringOrUndefined(token),
    certData,
    keyData,
  });
}

/** The named entries of `clusters`, `users` or `contexts` (entries without a name or body are skipped). */
function entries(list: unknown, bodyKey: string): Array<{ index: number; name: string; body: Obj }> {
  return (Array.isArray(list) ? list : []).flatMap((entry: unknown, index) =>
    isObj(entry) && typeof entry.name === 'string' && isObj(entry[bodyKey]) ? [{ index, name: entry.name, body: entry[bodyKey] as Obj }] : []);
}

function optionalBase64(value: unknown, field: string, fail: (detail: string) => ClusterCredentialsError): string | undefined {
  if (value === undefined || value === null || value === '') return undefined;
  const compact = typeof value === 'string' ? value.replace(/\s+/g, '') : '';
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(compact)) throw fail(`has an invalid ${field} (not base64)`);
  return compact;
}
