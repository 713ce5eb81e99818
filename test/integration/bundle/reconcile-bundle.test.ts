/**
 * The deployable artifact, not the sources: the reconcile handler bundled with the esbuild options of
 * serverless.yml (as serverless-esbuild builds it), loaded as Lambda loads it (an ES module, `handler.mjs`, in a fresh
 * Node process, configuration from the environment; its set-up runs in the import, Lambda's init phase) and invoked
 * with an SQS event against the real API server.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { build } from 'esbuild';
import { load } from 'js-yaml';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { lambdaBundleOptions, lambdaHandlerFile } from '#infra/lambda-bundle.ts';
import { OWN_TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';
import { adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, requireControlPlane, uniqueName } from '#test/support/control-plane.ts';
import { machineEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'reconcile-bundle-'));

/** What every cold start here has: Lambda-style configuration, the SDK resolvable as the runtime's. */
const LAMBDA_ENV = {
  PATH: process.env.PATH ?? '',
  NODE_PATH: resolve('node_modules'),
  MANAGEMENT_AUTH: 'kubeconfig',
  QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/taints.fifo',
  DEAD_LETTER_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/taints-dlq.fifo',
  AWS_REGION: 'eu-west-1',
};

describeWithControlPlane('The bundled reconcile handler (the Lambda artifact)', () => {
  /** The bundle's file name in `dir`: built once, exactly as serverless-esbuild does with serverless.yml's custom.esbuild. */
  let file = '';
  beforeAll(async () => {
    const options = lambdaBundleOptions(resolve('.'));
    file = lambdaHandlerFile(options);
    await build({ ...options, entryPoints: ['functions/reconcile-node-taints/handler.ts'], outfile: join(dir, file), logLevel: 'silent' });
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('ends its init phase when the management API server accepts connections and never answers, leaving the set-up to the first invocation', { timeout: 60_000 }, async () => {
    // Prepare: a server on loopback that takes every connection and says nothing.
    const sub = mkdtempSync(join(dir, 'silent-'));
    const sockets: Socket[] = [];
    const silent = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as { port: number }).port;
    // The control plane's admin kubeconfig (its CA and credentials), pointed at the silent server.
    const kubeconfig = load(readFileSync(requireControlPlane().kubeconfigPath, 'utf8')) as { clusters: Array<{ cluster: { server: string } }> };
    for (const c of kubeconfig.clusters) c.cluster.server = `https://127.0.0.1:${port}`;
    writeFileSync(join(sub, 'kubeconfig'), JSON.stringify(kubeconfig));
    writeFileSync(join(sub, 'import.mjs'), `await import('../${file}'); process.stdout.write('IMPORTED\\n'); process.exit(0);`);
    try {
      // Act
      const { stdout, stderr } = await run(process.execPath, [join(sub, 'import.mjs')], {
        cwd: sub,
        env: { ...LAMBDA_ENV, KUBECONFIG: join(sub, 'kubeconfig'), CLUSTER_MODE: 'self', STATE_NAMESPACE: 'default', POWERTOOLS_LOG_LEVEL: 'INFO' },
        timeout: 50_000,
      });

      // Assess: the module finished loading (the init ended) and said why the set-up is left for later.
      expect(stdout).toContain('IMPORTED');
      // Powertools writes warnings to stderr.
      expect(stderr).toMatch(/Set-up in the init phase (did not finish in time|failed)/);
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
  });

  /**
   * A Node with the startup taint, its Machine declaring `gpu=a100:NoSchedule`, and a fresh Node process that imports
   * the bundle, prints IMPORTED, then invokes it with the Machine's event, with the Lambda-style environment plus
   * `env` (the SDK resolves from node_modules here, from the runtime on Lambda).
   */
  async function coldStart(label: string, env: Record<string, string>, nodeArgs: string[] = []): Promise<{ stdout: string; stderr: string; node: string }> {
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, label);
    const node = uniqueName('node');
    await createNode(kc, node, { taints: [{ key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' }] });
    await createMachine(kc, ns, 'm1', { nodeName: node, specTaints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }] });
    writeFileSync(join(dir, `event-${label}.json`), JSON.stringify(sqsEvent(sqsRecord(machineEvent(ns, 'm1', { nodeName: node, cluster: { mode: 'self' } })))));
    writeFileSync(
      join(dir, `invoke-${label}.mjs`),
      `import { readFileSync } from 'node:fs';
       const { handler } = await import('./${file}');
       process.stdout.write('IMPORTED\\n');
       handler(JSON.parse(readFileSync('./event-${label}.json', 'utf8')), { awsRequestId: 'bundle-test', functionName: 'reconcile', getRemainingTimeInMillis: () => 30000 })
         .then((r) => process.stdout.write('RESULT ' + JSON.stringify(r) + '\\n'), (e) => { console.error(e); process.exit(1); });`,
    );
    const { stdout, stderr } = await run(process.execPath, [...nodeArgs, join(dir, `invoke-${label}.mjs`)], {
      cwd: dir,
      env: {
        ...LAMBDA_ENV,
        KUBECONFIG: requireControlPlane().kubeconfigPath,
        CLUSTER_MODE: 'self',
        STATE_NAMESPACE: ns,
        // A bare API server: no CAPI controller propagates spec.taints or removes its startup taint, the product does.
        SPEC_TAINTS_OWNER: 'product',
        STARTUP_TAINT_KEY: UNINITIALIZED_TAINT_KEY,
        POWERTOOLS_LOG_LEVEL: 'INFO',
        ...env,
      },
      timeout: 60_000,
    });
    return { stdout, stderr, node };
  }

  it('loads as an ES module, sets up in its init phase, with its configuration from the environment, and reconciles a Node', async () => {
    // Prepare and act: the bundle's file, then a cold start as Lambda runs the init without saying which kind.
    expect(file).toBe('handler.mjs');
    const { stdout, stderr, node } = await coldStart('bundle', {}, ['--enable-source-maps']);

    // Assess: Cluster API discovery ran in the import (the init phase), before the invocation.
    expect(stdout).toContain('RESULT {"batchItemFailures":[]}');
    const discovered = stdout.indexOf('Cluster API version chosen by discovery');
    expect(discovered).toBeGreaterThan(-1);
    expect(discovered).toBeLessThan(stdout.indexOf('IMPORTED'));
    expect(stderr).not.toContain('Set-up in the init phase');
    expect(stdout).toMatch(/"Outcome":"patched","Reconciles":1/);
    const after = await adminKubeConfig().makeApiClient(CoreV1Api).readNode({ name: node });
    expect(after.spec?.taints?.map((t) => `${t.key}=${t.value}:${t.effect}`)).toEqual(['gpu=a100:NoSchedule']);
    expect(after.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
  });

  it('on demand, ends its init phase without waiting for the set-up, which goes on beside the first invocation (one discovery for both)', async () => {
    // Prepare and act
    const { stdout, stderr, node } = await coldStart('bundle-on-demand', { AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand' });

    // Assess: the import ended before discovery answered; discovery ran once, for the set-up and the record together.
    expect(stdout).toContain('RESULT {"batchItemFailures":[]}');
    expect(stdout.indexOf('IMPORTED')).toBeLessThan(stdout.indexOf('Cluster API version chosen by discovery'));
    expect(stdout.split('Cluster API version chosen by discovery').length - 1).toBe(1);
    expect(stderr).not.toContain('Set-up in the init phase');
    expect(stdout).toMatch(/"Outcome":"patched","Reconciles":1/);
    const after = await adminKubeConfig().makeApiClient(CoreV1Api).readNode({ name: node });
    expect(after.spec?.taints?.map((t) => `${t.key}=${t.value}:${t.effect}`)).toEqual(['gpu=a100:NoSchedule']);
  });
});
