/**
 * The packages serverless.yml's custom.esbuild.alias leaves out of the Lambda bundles (infra/bundle-stubs): built with
 * the Lambda bundle options, client-node's code paths that reach them throw an error naming the kubeconfig feature,
 * and the slim undici is the copy client-node itself resolves.
 */
import { build } from 'esbuild';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { lambdaBundleOptions } from '#infra/lambda-bundle.ts';

const root = resolve(import.meta.dirname, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'bundle-stubs-'));
const run = promisify(execFile);
const require = createRequire(import.meta.url);

/** Runs in a fresh process from a bundle built as the Lambda bundles are: each client-node path that needs a left-out package. */
const PROBE = `
import { KubeConfig } from '@kubernetes/client-node/dist/config.js';
import { fetch } from 'undici';

const jwt = (payload) => ['{"alg":"none"}', JSON.stringify(payload)].map((s) => Buffer.from(s).toString('base64url')).join('.') + '.x';
function kubeConfig(cluster, user) {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:6443', skipTLSVerify: false, ...cluster }],
    users: [{ name: 'u', ...user }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}
const context = () => ({ setHeaderParam() {}, setDispatcher() {} });
const results = {};
async function attempt(name, f) {
  try {
    await f();
    results[name] = 'no error';
  } catch (err) {
    results[name] = err.name + ': ' + err.message + (err.cause ? ' (cause ' + err.cause.name + ': ' + err.cause.message + ')' : '');
  }
}
const token = { token: 't' };
(async () => {
await attempt('https proxy, API request', () => kubeConfig({ proxyUrl: 'http://127.0.0.1:3128' }, token).applySecurityAuthentication(context()));
await attempt('https proxy, watch', () => kubeConfig({ proxyUrl: 'http://127.0.0.1:3128' }, token).applyToHTTPSOptions({}));
await attempt('socks proxy, watch', () => kubeConfig({ proxyUrl: 'socks5://127.0.0.1:1080' }, token).applyToHTTPSOptions({}));
await attempt('socks proxy, API request', async () => {
  let dispatcher;
  await kubeConfig({ proxyUrl: 'socks5://127.0.0.1:1080', caData: 'eA==' }, token).applySecurityAuthentication({ setHeaderParam() {}, setDispatcher: (d) => (dispatcher = d) });
  // The SOCKS connector runs when a connection is opened (undici: the bundle's slim fetch, as client-node's).
  await fetch('https://127.0.0.1:6443/', { dispatcher });
});
const oidc = { 'client-id': 'c', 'idp-issuer-url': 'https://127.0.0.1:6443', 'refresh-token': 'r', 'id-token': jwt({ exp: 1 }) };
await attempt('oidc token refresh', () => kubeConfig({}, { authProvider: { name: 'oidc', config: oidc } }).applySecurityAuthentication(context()));
const cmd = { 'cmd-path': process.execPath, 'cmd-args': '-e "process.stdout.write(\\'{}\\')"', 'token-key': '{.token}', 'expiry-key': '{.expiry}' };
await attempt('gcp cmd-path', () => kubeConfig({}, { authProvider: { name: 'gcp', config: { ...cmd } } }).applySecurityAuthentication(context()));
await attempt('azure cmd-path', () => kubeConfig({}, { authProvider: { name: 'azure', config: { ...cmd } } }).applySecurityAuthentication(context()));
await attempt('no proxy, inline credentials', () => kubeConfig({ caData: 'eA==' }, token).applySecurityAuthentication(context()));
process.stdout.write(JSON.stringify(results));
})();
`;

describe('the packages left out of the Lambda bundles', () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("make client-node's proxy, oidc refresh and cmd-path paths throw an error naming the feature", async () => {
    // Prepare
    const outfile = join(dir, 'probe.cjs');
    const result = await build({
      ...lambdaBundleOptions(root),
      stdin: { contents: PROBE, resolveDir: root, sourcefile: 'probe.mjs' },
      outfile,
      metafile: true,
      logLevel: 'silent',
    });

    // Act
    const { stdout } = await run(process.execPath, [outfile], { cwd: dir, timeout: 30_000 });

    // Assess: the left-out packages are not in the bundle, and each path names its feature.
    const inputs = Object.keys(result.metafile.inputs).join('\n');
    for (const pkg of ['socks', 'socks-proxy-agent', 'hpagent', 'openid-client', 'jsonpath-plus']) expect(inputs).not.toContain(`node_modules/${pkg}/`);
    expect(inputs).not.toContain('node_modules/undici/index.js');
    expect(inputs).not.toContain('node_modules/undici/lib/milo/');
    const proxy = 'LeftOutOfBundleError: A kubeconfig proxy-url (HTTP, HTTPS or SOCKS proxy) is not supported by the Lambda functions';
    expect(JSON.parse(stdout)).toEqual({
      'https proxy, API request': expect.stringContaining(proxy),
      'https proxy, watch': expect.stringContaining(proxy),
      'socks proxy, watch': expect.stringContaining(proxy),
      'socks proxy, API request': expect.stringContaining(`TypeError: fetch failed (cause ${proxy}`),
      'oidc token refresh': expect.stringContaining("LeftOutOfBundleError: The oidc auth-provider's token refresh is not supported by the Lambda functions"),
      'gcp cmd-path': expect.stringContaining("LeftOutOfBundleError: The gcp and azure auth-providers' cmd-path is not supported by the Lambda functions"),
      'azure cmd-path': expect.stringContaining("LeftOutOfBundleError: The gcp and azure auth-providers' cmd-path is not supported by the Lambda functions"),
      'no proxy, inline credentials': 'no error',
    });
  });

  it('take undici from the copy client-node resolves, and its Agent and fetch are the ones its index exports', () => {
    // Prepare
    const fromClientNode = createRequire(require.resolve('@kubernetes/client-node/dist/config.js')).resolve('undici');
    const slim = require(join(root, 'infra/bundle-stubs/undici.cjs')) as { Agent: unknown; fetch: unknown };
    const index = require(fromClientNode) as { Agent: unknown };

    // Assess
    expect(dirname(require.resolve(join(root, 'node_modules/undici/index.js')))).toBe(dirname(fromClientNode));
    expect(slim.Agent).toBe(index.Agent);
    expect(slim.fetch).toBe(require(join(dirname(fromClientNode), 'lib/web/fetch/index.js')).fetch);
  });
});
