/**
 * Untrusted kubeconfigs (CAPI Secrets, stored management kubeconfigs): inline credentials only. Every hostile kind is
 * refused by name before client-node sees it, and no error quotes the text.
 */
import type { V1Secret } from '@kubernetes/client-node';
import { KubeConfig } from '@kubernetes/client-node';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { kubeConfigFromUntrusted } from '#shared/adapters/kubernetes/untrusted-kubeconfig.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { ClusterCredentialsError, RefusedKubeconfigError } from '#shared/errors.ts';

const dir = mkdtempSync(join(tmpdir(), 'ctp-untrusted-'));
const MARKER = join(dir, 'pwned');
const SECRET_FILE = join(dir, 'planted-secret');
writeFileSync(SECRET_FILE, 'FILE-CONTENT-MUST-NOT-BE-READ');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TOKEN = 'planted-bearer-TOKEN-0123456789';
const CA = Buffer.from('-----BEGIN CERTIFICATE-----\nPLANTEDCA\n-----END CERTIFICATE-----\n').toString('base64');
const CERT = Buffer.from('-----BEGIN CERTIFICATE-----\nPLANTEDCERT\n-----END CERTIFICATE-----\n').toString('base64');
const KEY = Buffer.from('-----BEGIN EC PRIVATE KEY-----\nPLANTEDKEY\n-----END EC PRIVATE KEY-----\n').toString('base64');

/** The bearer token a request through `kc` carries. */
async function bearerOf(kc: { applyToHTTPSOptions(opts: never): Promise<void> }): Promise<string | undefined> {
  const opts: { headers?: Record<string, string> } = {};
  await kc.applyToHTTPSOptions(opts as never);
  return opts.headers?.Authorization?.replace(/^Bearer /, '');
}

function kubeconfig(cluster: Record<string, unknown>, user: Record<string, unknown>): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: 'https://wc.example:6443', 'certificate-authority-data': CA, ...cluster } }],
    users: [{ name: 'u', user }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'ctx',
  });
}
const from = { cluster: 'ns/wc1', source: 'the kubeconfig in Secret ns/wc1-kubeconfig' };

function refusal(text: string): RefusedKubeconfigError {
  try {
    kubeConfigFromUntrusted(text, from);
  } catch (err) {
    if (err instanceof RefusedKubeconfigError) return err;
    throw err;
  }
  throw new Error('not refused');
}

describe('kubeConfigFromUntrusted()', () => {
  it.each([
    { kind: 'user.exec plugin', user: { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: '/bin/sh', args: ['-c', `touch ${MARKER}`] } }, field: 'users[0].user.exec (exec plugin)' },
    { kind: 'auth-provider with config.exec', user: { 'auth-provider': { name: 'exec', config: { exec: { command: '/bin/sh', args: ['-c', `touch ${MARKER}`] } } } }, field: 'users[0].user.auth-provider (auth provider)' },
    { kind: 'gcp auth-provider cmd-path', user: { 'auth-provider': { name: 'gcp', config: { 'cmd-path': '/bin/sh', 'cmd-args': `-c "touch ${MARKER}"` } } }, field: 'users[0].user.auth-provider (auth provider)' },
    { kind: 'auth-provider tokenFile', user: { 'auth-provider': { name: 'x', config: { tokenFile: SECRET_FILE } } }, field: 'users[0].user.auth-provider (auth provider)' },
    { kind: 'oidc auth-provider', user: { 'auth-provider': { name: 'oidc', config: { 'idp-issuer-url': 'https://idp.example', 'refresh-token': TOKEN } } }, field: 'users[0].user.auth-provider (auth provider)' },
    { kind: 'token-file', user: { 'token-file': SECRET_FILE }, field: 'users[0].user.token-file (file path)' },
    { kind: 'client-certificate path', user: { 'client-certificate': SECRET_FILE, 'client-key-data': KEY }, field: 'users[0].user.client-certificate (file path)' },
    { kind: 'client-key path', user: { 'client-certificate-data': CERT, 'client-key': SECRET_FILE }, field: 'users[0].user.client-key (file path)' },
    { kind: 'basic auth', user: { username: 'admin', password: TOKEN }, field: 'users[0].user.password (basic auth)' },
    { kind: 'impersonation', user: { token: TOKEN, as: 'system:admin' }, field: 'users[0].user.as (impersonation)' },
  ])('refuses $kind, naming the field and never its value', ({ user, field }) => {
    // Act
    const error = refusal(kubeconfig({}, user));

    // Assess
    expect(error).toBeInstanceOf(ClusterCredentialsError);
    expect(error.refused).toContain(field);
    expect(error.message).toContain(field);
    expect(error.message).toContain('Secret ns/wc1-kubeconfig');
    for (const planted of [TOKEN, SECRET_FILE, MARKER, KEY, '/bin/sh']) expect(error.message).not.toContain(planted);
    expect(existsSync(MARKER)).toBe(false);
  });

  it.each([
    { kind: 'certificate-authority path', cluster: { 'certificate-authority': SECRET_FILE }, field: 'clusters[0].cluster.certificate-authority (file path)' },
    { kind: 'insecure-skip-tls-verify', cluster: { 'insecure-skip-tls-verify': true }, field: 'clusters[0].cluster.insecure-skip-tls-verify (TLS verification off)' },
    {
      kind: 'a socks4 proxy-url',
      cluster: { 'proxy-url': `socks4://user:${TOKEN}@proxy.example:1080` },
      field: 'clusters[0].cluster.proxy-url (proxy-url uses the scheme "socks4", which the product does not support (http, https, socks5 and socks5h proxies only))',
    },
    { kind: 'a proxy-url that is no URL', cluster: { 'proxy-url': `http://user:${TOKEN}@[bad` }, field: 'clusters[0].cluster.proxy-url (proxy-url is not a valid URL)' },
    { kind: 'a proxy-url that is no string', cluster: { 'proxy-url': { host: TOKEN } }, field: 'clusters[0].cluster.proxy-url (proxy-url is not a string)' },
    { kind: 'an http server', cluster: { server: 'http://wc.example:8080' }, field: 'clusters[0].cluster.server (not https)' },
  ])('refuses a cluster with $kind', ({ cluster, field }) => {
    // Act
    const error = refusal(kubeconfig(cluster, { token: TOKEN }));

    // Assess
    expect(error.refused).toEqual([field]);
    expect(error.message).not.toContain(TOKEN);
    expect(error.message).not.toContain(SECRET_FILE);
  });

  it('refuses a hostile entry even when the current context does not use it, and lists every offence', () => {
    // Prepare
    const doc = JSON.parse(kubeconfig({}, { token: TOKEN })) as { users: unknown[] };
    doc.users.push({ name: 'other', user: { exec: { command: '/bin/sh' }, 'client-key': SECRET_FILE } });

    // Act
    const error = refusal(JSON.stringify(doc));

    // Assess
    expect(error.refused).toEqual(['users[1].user.exec (exec plugin)', 'users[1].user.client-key (file path)']);
  });

  it('numbers a refused entry by its place in the text when an unnamed entry comes first', () => {
    // Prepare: unnamed entries are skipped, but still count for the position an error names
    const doc = JSON.parse(kubeconfig({}, { token: TOKEN })) as { clusters: unknown[]; users: unknown[] };
    doc.clusters.unshift({ cluster: { server: 'https://unnamed.example' } });
    doc.users.unshift({ user: { token: TOKEN } });
    doc.clusters.push({ name: 'other', cluster: { 'certificate-authority': SECRET_FILE } });
    doc.users.push({ name: 'other', user: { exec: { command: '/bin/sh' } } });

    // Act
    const error = refusal(JSON.stringify(doc));

    // Assess
    expect(error.refused).toEqual([
      'clusters[2].cluster.certificate-authority (file path)',
      'users[2].user.exec (exec plugin)',
    ]);
  });

  it.each([
    { kind: 'a token', user: { token: TOKEN }, expectAuth: `Bearer ${TOKEN}`, expectCert: false },
    { kind: 'a client certificate', user: { 'client-certificate-data': CERT, 'client-key-data': KEY }, expectAuth: undefined, expectCert: true },
  ])('accepts inline credentials: $kind, and keeps nothing else', async ({ user, expectAuth, expectCert }) => {
    // Act
    const kc = kubeConfigFromUntrusted(kubeconfig({ 'tls-server-name': 'wc.internal' }, user), from);
    const opts: Record<string, unknown> & { headers?: Record<string, string>; ca?: Buffer; cert?: Buffer; key?: Buffer; servername?: string } = {};
    await kc.applyToHTTPSOptions(opts as never);

    // Assess: the request gets the server, CA, server name and the one credential, and nothing else (no file, no
    // agent, no proxy, no verification switched off)
    expect(kc.getCurrentCluster()).toEqual({ server: 'https://wc.example:6443' });
    expect(Object.keys(opts).sort()).toEqual(['ca', ...(expectCert ? ['cert'] : []), ...(expectAuth ? ['headers'] : []), ...(expectCert ? ['key'] : []), 'rejectUnauthorized', 'servername']);
    expect(opts.rejectUnauthorized).toBe(true);
    expect(opts.servername).toBe('wc.internal');
    expect(opts.headers?.Authorization).toBe(expectAuth);
    expect(opts.ca?.toString()).toContain('PLANTEDCA');
    expect(opts.cert !== undefined).toBe(expectCert);
  });

  it.each([
    { kind: 'an http proxy with a user and password', proxy: `http://user:${TOKEN}@proxy.example:3128` },
    { kind: 'an https proxy', proxy: 'https://proxy.example:3129' },
    { kind: 'a socks5 proxy with a user and password', proxy: `socks5://user:${TOKEN}@proxy.example:1080` },
  ])('accepts a proxy-url: $kind, for every request to that cluster (TLS settings unchanged)', async ({ proxy }) => {
    // Act
    const kc = kubeConfigFromUntrusted(kubeconfig({ 'proxy-url': proxy }, { token: TOKEN }), from);
    const opts: Record<string, unknown> = {};
    await kc.applyToHTTPSOptions(opts as never);

    // Assess: the proxy goes with the cluster; the request options are as without one (no agent, verification on).
    expect(kc.getCurrentCluster()).toEqual({ server: 'https://wc.example:6443', proxyUrl: proxy });
    expect(Object.keys(opts).sort()).toEqual(['ca', 'headers', 'rejectUnauthorized']);
    expect(opts.rejectUnauthorized).toBe(true);
  });

  it('accepts a kubeconfig as CAPI writes it (YAML, client certificate)', async () => {
    // Prepare
    const yaml = [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- cluster:',
      `    certificate-authority-data: ${CA}`,
      '    server: https://10.0.0.1:6443',
      '  name: wc1',
      'contexts:',
      '- context:',
      '    cluster: wc1',
      '    user: wc1-admin',
      '  name: wc1-admin@wc1',
      'current-context: wc1-admin@wc1',
      'preferences: {}',
      'users:',
      '- name: wc1-admin',
      '  user:',
      `    client-certificate-data: ${CERT}`,
      `    client-key-data: ${KEY}`,
      '',
    ].join('\n');

    // Act
    const kc = kubeConfigFromUntrusted(yaml, from);

    // Assess
    const opts: { key?: Buffer } = {};
    await kc.applyToHTTPSOptions(opts as never);
    expect(kc.getCurrentCluster().server).toBe('https://10.0.0.1:6443');
    expect(opts.key?.toString('base64')).toBe(KEY);
  });

  it.each([
    { kind: 'broken YAML with a token inside', text: `users: [\n  token: ${TOKEN}\n  client-key-data: ${KEY}\n: : :`, message: 'is not a valid kubeconfig (YAML error at line' },
    { kind: 'a YAML alias bomb', text: 'a: &a ["x","x"]\nb: [*a,*a]\nc: [*b,*b]\n', message: 'is not a valid kubeconfig' },
    { kind: 'no current context', text: JSON.stringify({ users: [{ name: 'u', user: { token: TOKEN } }] }), message: 'has no current context' },
    { kind: 'no credential', text: kubeconfig({}, {}), message: 'has no inline credential' },
    { kind: 'a certificate without its key', text: kubeconfig({}, { 'client-certificate-data': CERT }), message: 'only one of client-certificate-data and client-key-data' },
    { kind: 'a multi-line token', text: kubeconfig({}, { token: `${TOKEN}\nX-Injected: 1` }), message: 'invalid users[0].user.token' },
    { kind: 'non-base64 key data', text: kubeconfig({}, { 'client-certificate-data': CERT, 'client-key-data': `${TOKEN}!!` }), message: 'invalid users[0].user.client-key-data (not base64)' },
    { kind: 'an oversized text', text: `# ${'x'.repeat(300 * 1024)}\n${kubeconfig({}, { token: TOKEN })}`, message: 'holds more than' },
  ])('reports $kind without quoting the text', ({ text, message }) => {
    // Act
    const error = (() => {
      try {
        kubeConfigFromUntrusted(text, from);
      } catch (err) {
        return err as Error;
      }
      throw new Error('accepted');
    })();

    // Assess
    expect(error).toBeInstanceOf(ClusterCredentialsError);
    expect(error).not.toBeInstanceOf(RefusedKubeconfigError);
    expect(error.message).toContain(message);
    expect(error.message).not.toContain(TOKEN);
    expect(error.message).not.toContain(KEY);
    expect(error.cause).toBeUndefined();
  });
});

describe('workloadKubeConfigs() over untrusted Secrets', () => {
  const secret = (text: string, resourceVersion = '1'): V1Secret => ({ metadata: { resourceVersion }, data: { value: Buffer.from(text).toString('base64') } });

  it('refuses an exec kubeconfig from a Secret, then picks up the fixed Secret', async () => {
    // Prepare
    const texts = [kubeconfig({}, { exec: { command: '/bin/sh', args: ['-c', `touch ${MARKER}`] } }), kubeconfig({}, { token: TOKEN })];
    let reads = 0;
    const workload = workloadKubeConfigs(new KubeConfig(), {
      readSecret: async (_ns, name) => {
        if (name !== 'wc1-kubeconfig') throw Object.assign(new Error('not found'), { code: 404 });
        return secret(texts[Math.min(reads++, 1)] ?? '', String(reads));
      },
    });

    // Act
    const first = await workload.get({ mode: 'capi', namespace: 'ns', name: 'wc1' }).then(() => undefined, (err: unknown) => err);
    const second = await workload.get({ mode: 'capi', namespace: 'ns', name: 'wc1' });

    // Assess
    expect(first).toBeInstanceOf(RefusedKubeconfigError);
    expect((first as Error).message).toBe(
      'No usable credentials for cluster ns/wc1: the kubeconfig in Secret ns/wc1-kubeconfig uses kubeconfig features the product refuses (only inline credentials are accepted): users[0].user.exec (exec plugin)',
    );
    expect(await bearerOf(second)).toBe(TOKEN);
    expect(existsSync(MARKER)).toBe(false);
  });

  it("prefers the dedicated <cluster>-taint-propagator-kubeconfig and falls back to CAPI's <cluster>-kubeconfig", async () => {
    // Prepare
    const notFound = Object.assign(new Error('not found'), { code: 404 });
    const dedicated = new Map<string, string>([['wc1-taint-propagator-kubeconfig', kubeconfig({}, { token: 'dedicated' })]]);
    const capi = kubeconfig({}, { token: 'capi-admin' });
    const reads: string[] = [];
    const workload = workloadKubeConfigs(new KubeConfig(), {
      readSecret: async (_ns, name) => {
        reads.push(name);
        const text = dedicated.get(name) ?? (name.endsWith('-taint-propagator-kubeconfig') ? undefined : capi);
        if (text === undefined) throw notFound;
        return secret(text);
      },
    });

    // Act
    const withDedicated = await workload.get({ mode: 'capi', namespace: 'ns', name: 'wc1' });
    const withoutDedicated = await workload.get({ mode: 'capi', namespace: 'ns', name: 'wc2' });

    // Assess
    expect(await bearerOf(withDedicated)).toBe('dedicated');
    expect(await bearerOf(withoutDedicated)).toBe('capi-admin');
    expect(reads).toEqual(['wc1-taint-propagator-kubeconfig', 'wc2-taint-propagator-kubeconfig', 'wc2-kubeconfig']);
  });

  it('reports a failed Secret read by status only, without the API response', async () => {
    // Prepare
    const apiError = Object.assign(new Error(`HTTP-Code: 403 Body: ${TOKEN} Headers: {"authorization":"Bearer ${TOKEN}"}`), { code: 403, body: TOKEN, headers: { authorization: TOKEN } });
    const workload = workloadKubeConfigs(new KubeConfig(), { readSecret: async () => Promise.reject(apiError) });

    // Act
    const error = (await workload.get({ mode: 'capi', namespace: 'ns', name: 'wc1' }).then(() => undefined, (err: unknown) => err)) as Error;

    // Assess
    expect(error.message).toBe('No usable credentials for cluster ns/wc1: reading Secret ns/wc1-kubeconfig: HTTP 403');
    expect(error.cause).toBeUndefined();
  });
});
