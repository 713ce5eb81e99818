/**
 * `npm run status` as a user runs it, against the real control plane: each output format once, one Machine by name,
 * --kubeconfig with --context, the ~/.kube/config fallback, a Machine that does not exist, and (capi mode) a workload
 * cluster whose API server refuses connections.
 */
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { CoreV1Api, loadYaml } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, uniqueName } from '#test/support/control-plane.ts';

const root = resolve(import.meta.dirname, '../../..');
const TRACKING = OWN_TRACKING_ANNOTATION;
const MACHINE_ANNOTATION = 'taints.capi-taint-propagator.dev/machine';

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** A port nothing listens on (taken from the OS, then released): connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((r) => server.close(() => r()));
  return port;
}

function status(args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  const base = { ...process.env };
  delete base['KUBECONFIG'];
  delete base['MACHINE_NAMESPACE'];
  delete base['CLUSTER_MODE'];
  return new Promise((done) => {
    execFile('npm', ['run', '-s', 'status', '--', ...args], { cwd: root, env: { ...base, ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      done({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describeWithControlPlane('npm run status against the real control plane', () => {
  let dir: string;
  let home: string;
  let kubeconfig: string;
  let ns: string;
  let adminContext: string;
  const nodes = { sync: uniqueName('sync'), out: uniqueName('out'), invalid: uniqueName('invalid') };

  beforeAll(async () => {
    const kc = adminKubeConfig();
    ns = await createNamespace(kc, 'status');
    await createNode(kc, nodes.sync, { taints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }, { key: 'example.com/foreign', effect: 'NoExecute' }], annotations: { [TRACKING]: 'gpu:NoSchedule' } });
    await createNode(kc, nodes.out, {});
    await createNode(kc, nodes.invalid, { taints: [{ key: 'gpu', effect: 'NoSchedule' }], annotations: { [TRACKING]: 'gpu:NoSchedule' } });
    await createMachine(kc, ns, 'm-sync', { nodeName: nodes.sync, annotations: { [MACHINE_ANNOTATION]: 'gpu=a100:NoSchedule' } });
    await createMachine(kc, ns, 'm-out', { nodeName: nodes.out, annotations: { [MACHINE_ANNOTATION]: 'pool=x:NoSchedule' } });
    await createMachine(kc, ns, 'm-invalid', { nodeName: nodes.invalid, annotations: { [MACHINE_ANNOTATION]: 'gpu:NoSchedul' } });

    // A kubeconfig whose current context points nowhere (127.0.0.1:1), plus the admin context: --context must pick it.
    adminContext = kc.getCurrentContext();
    const user = kc.getCurrentUser()?.name ?? '';
    kc.addCluster({ name: 'nowhere', server: 'https://127.0.0.1:1', skipTLSVerify: true });
    kc.addContext({ name: 'elsewhere', cluster: 'nowhere', user });
    kc.setCurrentContext('elsewhere');
    dir = await mkdtemp(join(tmpdir(), 'ctp-status-'));
    kubeconfig = join(dir, 'two-contexts.kubeconfig');
    await writeFile(kubeconfig, kc.exportConfig());
    // A HOME whose ~/.kube/config is the admin kubeconfig, for the fallback when KUBECONFIG is unset.
    home = join(dir, 'home');
    await mkdir(join(home, '.kube'), { recursive: true });
    await writeFile(join(home, '.kube', 'config'), adminKubeConfig().exportConfig());
  });

  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('prints a table from ~/.kube/config when KUBECONFIG is unset, and exits 3 while a Node is out of sync', async () => {
    const r = await status(['-n', ns], { HOME: home });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(3);
    const rows = r.stdout.split('\n');
    expect(rows).toContainEqual(expect.stringMatching(/^NAMESPACE\s+MACHINE\s+NODE\s+STATE\s+DECLARED\s+NODE TAINTS$/));
    expect(rows).toContainEqual(expect.stringMatching(new RegExp(`^${ns}\\s+m-sync\\s+${nodes.sync}\\s+in sync\\s+1\\s+2$`)));
    expect(rows).toContainEqual(expect.stringMatching(new RegExp(`^${ns}\\s+m-out\\s+${nodes.out}\\s+out of sync\\s+1\\s+0$`)));
    expect(rows).toContainEqual(expect.stringMatching(new RegExp(`^${ns}\\s+m-invalid\\s+${nodes.invalid}\\s+invalid declaration \\(left alone\\)\\s+0\\s+1$`)));
    expect(rows).toContain('1 invalid declaration (left alone), 1 out of sync, 1 in sync');
  });

  it('uses --kubeconfig and --context, and prints owners and reasons with -o wide', async () => {
    const r = await status(['-n', ns, '-o', 'wide', '--kubeconfig', kubeconfig, '--context', adminContext], { HOME: dir });
    expect(r.code).toBe(3);
    expect(r.stdout).toContain(`Context ${adminContext}, cluster https://127.0.0.1:`);
    expect(r.stdout).toMatch(/gpu=a100:NoSchedule\(tracked\),example\.com\/foreign:NoExecute\(foreign\)/);
    expect(r.stdout).toMatch(/m-invalid .*gpu:NoSchedule\(tracked\)\s+metadata\.annotations\[taints\.capi-taint-propagator\.dev\/machine\]\[0\]\.effect: /);
  });

  it('fails on the kubeconfig\'s own current context when it points nowhere (so --context above really chose)', async () => {
    const r = await status(['-n', ns, '--kubeconfig', kubeconfig], { HOME: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^status failed: /);
  });

  it('prints a TaintStatusList with -o json', async () => {
    const r = await status(['-n', ns, '-o', 'json'], { KUBECONFIG: join(home, '.kube', 'config') });
    expect(r.code).toBe(3);
    const doc = JSON.parse(r.stdout) as { kind: string; items: { machine: string; state: string; stateLabel: string }[] };
    expect(doc.kind).toBe('TaintStatusList');
    expect(doc.items.map((i) => [i.machine, i.state])).toEqual([
      [`${ns}/m-invalid`, 'invalid-declaration'],
      [`${ns}/m-out`, 'out-of-sync'],
      [`${ns}/m-sync`, 'in-sync'],
    ]);
  });

  it('prints one Machine by name with -o yaml, exit 0 when that one is left alone', async () => {
    const r = await status(['m-invalid', '-n', ns, '-o', 'yaml'], { KUBECONFIG: join(home, '.kube', 'config') });
    expect(r.code).toBe(0);
    const doc = loadYaml<{ kind: string; machine: string; state: string; stateLabel: string; reason: string }>(r.stdout);
    expect(doc).toMatchObject({ kind: 'TaintStatus', machine: `${ns}/m-invalid`, state: 'invalid-declaration', stateLabel: 'invalid declaration (left alone)' });
    expect(doc.reason).toContain('metadata.annotations[taints.capi-taint-propagator.dev/machine][0].effect');
  });

  it('shows one Machine in detail, and says NotFound for one that does not exist', async () => {
    const one = await status(['m-sync', '-n', ns], { KUBECONFIG: join(home, '.kube', 'config') });
    expect(one.code).toBe(0);
    expect(one.stdout).toContain(`${ns}/m-sync -> ${nodes.sync}  in sync`);
    expect(one.stdout).toContain('tracked (Always from machine annotation)');
    const missing = await status(['nope', '-n', ns], { KUBECONFIG: join(home, '.kube', 'config') });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`Error from server (NotFound): machines.cluster.x-k8s.io "nope" not found in namespace "${ns}"\n`);
  });

  it('in capi mode names each workload cluster whose Nodes cannot be listed once, with the reason, and exits 4', async () => {
    // Prepare: cluster `gone` (its kubeconfig Secret names an address that refuses connections) with two Machines, and
    // cluster `here` (this API server) with one Machine in sync.
    const kc = adminKubeConfig();
    const capiNs = await createNamespace(kc, 'status-capi');
    const secret = async (cluster: string, server: string | undefined): Promise<void> => {
      const copy = adminKubeConfig();
      if (server) copy.clusters = copy.clusters.map((c) => ({ ...c, server }));
      await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
        namespace: capiNs,
        body: { metadata: { name: `${cluster}-kubeconfig` }, type: 'cluster.x-k8s.io/secret', data: { value: Buffer.from(copy.exportConfig()).toString('base64') } },
      });
    };
    await secret('gone', `https://127.0.0.1:${await closedPort()}`);
    await secret('here', undefined);
    await createMachine(kc, capiNs, 'm-gone-1', { clusterName: 'gone', nodeName: 'gone-node-1', annotations: { [MACHINE_ANNOTATION]: 'gpu=a100:NoSchedule' } });
    await createMachine(kc, capiNs, 'm-gone-2', { clusterName: 'gone', nodeName: 'gone-node-2', annotations: { [MACHINE_ANNOTATION]: 'gpu=a100:NoSchedule' } });
    await createMachine(kc, capiNs, 'm-here', { clusterName: 'here', nodeName: nodes.sync, annotations: { [MACHINE_ANNOTATION]: 'gpu=a100:NoSchedule' } });

    // Act
    const table = await status(['--capi', '-n', capiNs], { HOME: home });
    const json = await status(['--capi', '-n', capiNs, '-o', 'json'], { HOME: home });

    // Assess: the rows say `cluster unreachable` (not "Node missing"), the cluster is named once with its reason.
    expect(table.stderr).toBe('');
    expect(table.code).toBe(4);
    expect(json.code).toBe(4);
    const rows = table.stdout.split('\n');
    expect(rows).toContainEqual(expect.stringMatching(new RegExp(`^${capiNs}\\s+m-gone-1\\s+gone-node-1\\s+cluster unreachable\\s+1\\s+0$`)));
    expect(rows).toContainEqual(expect.stringMatching(new RegExp(`^${capiNs}\\s+m-here\\s+${nodes.sync}\\s+in sync\\s+1\\s+2$`)));
    expect(rows).toContain('2 cluster unreachable, 1 in sync');
    expect(rows).toContain('1 unreachable cluster (Nodes could not be listed; the state of their Machines is unknown):');
    const named = rows.filter((r) => r.includes(`${capiNs}/gone`));
    expect(named).toHaveLength(1);
    expect(named[0]).toMatch(new RegExp(`^  ${capiNs}/gone  .*ECONNREFUSED`));
    const doc = JSON.parse(json.stdout) as { unreachableClusters: { cluster: string; reason: string }[] };
    expect(doc.unreachableClusters).toEqual([{ cluster: `${capiNs}/gone`, reason: expect.stringContaining('ECONNREFUSED') }]);
    // No credential in the output: none of the kubeconfig's base64 blobs.
    for (const blob of adminKubeConfig().exportConfig().match(/[A-Za-z0-9+/=]{40,}/g) ?? []) expect(table.stdout + json.stdout).not.toContain(blob);
  });

  it('says what to do without any kubeconfig, and prints --help with exit 0', async () => {
    const none = await status([], { HOME: join(dir, 'empty-home') });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('no kubeconfig: KUBECONFIG is not set and ~/.kube/config does not exist');
    const help = await status(['--help'], { HOME: join(dir, 'empty-home') });
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('-o, --output <format>      table (default), wide, json or yaml');
  });
});
