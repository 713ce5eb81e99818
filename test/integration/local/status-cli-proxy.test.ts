/**
 * `npm run status` as a user runs it, with a kubeconfig whose API server is reachable only through its `proxy-url`
 * (a CONNECT proxy of the test's own, test/support/connect-proxy.ts, which alone resolves `api.only-via-proxy.test`
 * to the loopback test API server; TLS verifies through `tls-server-name: localhost`). The Machines (client-node's
 * API) and the Nodes (the product's client, kube-http.ts) are both read through the proxy.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { dumpYaml } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { startConnectProxy, type ConnectProxy } from '#test/support/connect-proxy.ts';
import { adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, uniqueName } from '#test/support/control-plane.ts';

const root = resolve(import.meta.dirname, '../../..');
const HIDDEN = 'api.only-via-proxy.test';
const PASSWORD = `proxy-password-${Date.now()}`;

describeWithControlPlane('npm run status through a proxy-url', () => {
  let dir: string;
  let proxy: ConnectProxy;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'ctp-status-proxy-'));
    proxy = await startConnectProxy({ hosts: { [HIDDEN]: '127.0.0.1' }, credentials: { user: 'ops', password: PASSWORD } });
  });

  afterAll(async () => {
    await proxy?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('reads Machines and Nodes through the proxy, and prints no proxy password', async () => {
    // Prepare
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'status-proxy');
    const node = uniqueName('node');
    await createNode(kc, node, { taints: [{ key: 'gpu', effect: 'NoSchedule' }], annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' } });
    await createMachine(kc, ns, 'm1', { nodeName: node, annotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu:NoSchedule' } });
    const cluster = kc.getCurrentCluster();
    const user = kc.getCurrentUser();
    if (!cluster?.caData || !user?.certData || !user.keyData) throw new Error('the admin kubeconfig has no inline CA, certificate or key');
    const file = join(dir, 'kubeconfig');
    await writeFile(file, dumpYaml({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'proxied', cluster: { server: `https://${HIDDEN}:${new URL(cluster.server).port}`, 'certificate-authority-data': cluster.caData, 'tls-server-name': 'localhost', 'proxy-url': proxy.url.replace('http://', `http://ops:${PASSWORD}@`) } }],
      users: [{ name: 'admin', user: { 'client-certificate-data': user.certData, 'client-key-data': user.keyData } }],
      contexts: [{ name: 'proxied', context: { cluster: 'proxied', user: 'admin' } }],
      'current-context': 'proxied',
    }));
    const env = { ...process.env };
    for (const k of ['KUBECONFIG', 'MACHINE_NAMESPACE', 'CLUSTER_MODE', 'HTTPS_PROXY', 'https_proxy']) delete env[k];

    // Act
    const r = await new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
      execFile('npm', ['run', '-s', 'status', '--', '-n', ns, '--kubeconfig', file], { cwd: root, env, timeout: 60_000 }, (error, stdout, stderr) => {
        done({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
      });
    });

    // Assess
    expect(r.stderr).toBe('');
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`^${ns}\\s+m1\\s+${node}\\s+in sync\\s+1\\s+1$`, 'm'));
    expect(proxy.tunnels()).toBeGreaterThanOrEqual(1);
    expect(proxy.targets.every((t) => t === `${HIDDEN}:${new URL(cluster.server).port}`)).toBe(true);
    expect(r.stdout + r.stderr).not.toContain(PASSWORD);
  });
});
