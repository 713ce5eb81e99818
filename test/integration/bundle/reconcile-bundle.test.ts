/**
 * The deployable artifact, not the sources: the reconcile handler bundled with the esbuild options of
 * serverless.yml (as serverless-esbuild builds it), loaded as Lambda loads it (an ES module, `handler.mjs`, in a fresh
 * Node process, configuration from the environment; its set-up runs in the import, Lambda's init phase) and invoked
 * with an SQS event against the real API server.
 */
import { CoreV1Api } from '@kubernetes/client-node';
import { build } from 'esbuild';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, expect, it } from 'vitest';
import { lambdaBundleOptions, lambdaHandlerFile } from '#infra/lambda-bundle.ts';
import { OWN_TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';
import { adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, requireControlPlane, uniqueName } from '#test/support/control-plane.ts';
import { machineEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'reconcile-bundle-'));

describeWithControlPlane('The bundled reconcile handler (the Lambda artifact)', () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads as an ES module, sets up in its init phase, with its configuration from the environment, and reconciles a Node', async () => {
    // Prepare: bundle exactly as serverless-esbuild does with serverless.yml's custom.esbuild.
    const options = lambdaBundleOptions(resolve('.'));
    const file = lambdaHandlerFile(options);
    expect(file).toBe('handler.mjs');
    await build({ ...options, entryPoints: ['functions/reconcile-node-taints/handler.ts'], outfile: join(dir, file), logLevel: 'silent' });
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'bundle');
    const node = uniqueName('node');
    await createNode(kc, node, { taints: [{ key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' }] });
    await createMachine(kc, ns, 'm1', { nodeName: node, specTaints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }] });
    const event = sqsEvent(sqsRecord(machineEvent(ns, 'm1', { nodeName: node, cluster: { mode: 'self' } })));
    writeFileSync(join(dir, 'event.json'), JSON.stringify(event));
    writeFileSync(
      join(dir, 'invoke.mjs'),
      `import { readFileSync } from 'node:fs';
       const { handler } = await import('./${file}');
       process.stdout.write('IMPORTED\\n');
       handler(JSON.parse(readFileSync('./event.json', 'utf8')), { awsRequestId: 'bundle-test', functionName: 'reconcile', getRemainingTimeInMillis: () => 30000 })
         .then((r) => process.stdout.write('RESULT ' + JSON.stringify(r) + '\\n'), (e) => { console.error(e); process.exit(1); });`,
    );

    // Act: a fresh process with nothing but the Lambda-style environment (the SDK resolves from node_modules here,
    // from the runtime on Lambda).
    const { stdout } = await run(process.execPath, ['--enable-source-maps', join(dir, 'invoke.mjs')], {
      cwd: dir,
      env: {
        PATH: process.env.PATH ?? '',
        NODE_PATH: resolve('node_modules'),
        KUBECONFIG: requireControlPlane().kubeconfigPath,
        CLUSTER_MODE: 'self',
        MANAGEMENT_AUTH: 'kubeconfig',
        QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/taints.fifo',
        DEAD_LETTER_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/taints-dlq.fifo',
        STATE_NAMESPACE: ns,
        // A bare API server: no CAPI controller propagates spec.taints or removes its startup taint, the product does.
        SPEC_TAINTS_OWNER: 'product',
        STARTUP_TAINT_KEY: UNINITIALIZED_TAINT_KEY,
        AWS_REGION: 'eu-west-1',
        POWERTOOLS_LOG_LEVEL: 'INFO',
      },
      timeout: 60_000,
    });

    // Assess: Cluster API discovery ran in the import (the init phase), before the invocation.
    expect(stdout).toContain('RESULT {"batchItemFailures":[]}');
    const discovered = stdout.indexOf('Cluster API version chosen by discovery');
    expect(discovered).toBeGreaterThan(-1);
    expect(discovered).toBeLessThan(stdout.indexOf('IMPORTED'));
    expect(stdout).not.toContain('Set-up in the init phase failed');
    expect(stdout).toMatch(/"Outcome":"patched","Reconciles":1/);
    const after = await kc.makeApiClient(CoreV1Api).readNode({ name: node });
    expect(after.spec?.taints?.map((t) => `${t.key}=${t.value}:${t.effect}`)).toEqual(['gpu=a100:NoSchedule']);
    expect(after.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
  });
});
