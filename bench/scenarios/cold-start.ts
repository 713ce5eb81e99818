/**
 * Scenario 6, cold start: each function's handler bundled with esbuild exactly as serverless-esbuild does it from
 * serverless.yml's `custom.esbuild` (read by infra/lambda-bundle.ts: bundle, minify, sourcemap, keepNames, platform
 * node, target node22, format esm, mainFields, `@aws-sdk/*` external), then its module-load time in fresh Node
 * processes (median), loaded as Lambda loads it: the time `import()` of `handler.mjs` takes (`require()` for a
 * CommonJS `handler.js`). The reconcile handler's init-phase set-up is part of that import; here it finds no
 * kubeconfig (KUBECONFIG names no file) and gives up at once, so the figure is the module load,
 * with `--enable-source-maps` as deployed (serverless.yml sets NODE_OPTIONS) and without. The external AWS SDK
 * resolves from node_modules, as the Lambda runtime's copy does; its own load time is reported alongside.
 *
 * With MANAGEMENT_AUTH=ssm or secretsmanager the reconcile function's set-up also loads that SDK client:
 * `reconcileSsmLoadMs` is the import with MANAGEMENT_AUTH=ssm against an SSM endpoint that refuses the connection (one
 * attempt). The functions load the runtime's SDK with `require()` (shared/adapters/aws/runtime-sdk.ts):
 * `awsSdkSsmRequireMs` and `awsSdkSsmImportMs` are `@aws-sdk/client-ssm` alone by `require()` and by `import()`.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { lambdaBundleOptions, lambdaHandlerFile } from '#infra/lambda-bundle.ts';
import type { BenchContext } from '../lib/context.ts';
import { median, round } from '../lib/stats.ts';

export interface BundleFigures {
  readonly function: string;
  readonly bundleBytes: number;
  readonly sourceMapBytes: number;
  /** Median load (import() or require()) time as deployed (source maps loaded only if serverless.yml's NODE_OPTIONS says so). */
  readonly loadMs: number;
  readonly loadMsRuns: readonly number[];
  /** Median require() time with NODE_OPTIONS=--enable-source-maps. */
  readonly loadMsSourceMaps: number;
  /** Median require() time without source maps. */
  readonly loadMsNoSourceMaps: number;
  /** Median wall time of `node -e require(bundle)`, process start to exit, as deployed. */
  readonly processWallMs: number;
}

export interface ColdStartResult {
  readonly runs: number;
  readonly bundles: readonly BundleFigures[];
  /** Median require() time of the external @aws-sdk/client-sqs alone (part of each loadMs). */
  readonly awsSdkSqsLoadMs: number;
  /** Median import() of the reconcile handler with MANAGEMENT_AUTH=ssm, as packaged (its set-up loads the runtime's SSM client). */
  readonly reconcileSsmLoadMs: number;
  /** Median time of @aws-sdk/client-ssm alone by require() (as the functions load it) and by import(). */
  readonly awsSdkSsmRequireMs: number;
  readonly awsSdkSsmImportMs: number;
  /** Median wall time of an empty `node -e ''`: the runtime's own start, not part of loadMs. */
  readonly emptyProcessWallMs: number;
  readonly reconcileBundleBytes: number;
  readonly reconcileLoadMs: number;
  /** Median import() of the packaged reconcile handler with the shipped EKS auth: the init as Lambda counts it, on demand and provisioned. */
  readonly reconcileInitMsOnDemand: number;
  readonly reconcileInitMsProvisioned: number;
  readonly forwarderBundleBytes: number;
  readonly forwarderLoadMs: number;
}

const FUNCTIONS = ['reconcile-node-taints', 'watch-forwarder'] as const;

/** The environment the handlers read at module scope (configuration is loaded once per cold start). */
const HANDLER_ENV: Readonly<Record<string, string>> = {
  QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/taints.fifo',
  DEAD_LETTER_QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/taints-dlq.fifo',
  CLUSTER_MODE: 'capi',
  MANAGEMENT_AUTH: 'kubeconfig',
  // No file: the reconcile handler's init-phase set-up fails at once instead of calling a cluster.
  KUBECONFIG: '/nonexistent/kubeconfig',
  AWS_REGION: 'eu-west-1',
  POWERTOOLS_LOG_LEVEL: 'SILENT',
  POWERTOOLS_METRICS_DISABLED: 'true',
  POWERTOOLS_SERVICE_NAME: 'capi-taint-propagator',
};

/**
 * The shipped auth (serverless.yml's `managementAuth: eks`), as Lambda counts a cold start (issue 48): on demand the
 * init is the module load alone (the set-up goes on beside the first invocation); provisioned, the init also waits
 * for the set-up, which loads the runtime's credential provider and mints the first token. Its endpoint refuses at
 * once, so a real cluster's round trips (discovery) come on top of the provisioned figure.
 */
const EKS_ENV: Readonly<Record<string, string>> = {
  MANAGEMENT_AUTH: 'eks',
  EKS_CLUSTER_NAME: 'management',
  EKS_ENDPOINT: 'https://127.0.0.1:9',
  EKS_CA_DATA: Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64'),
  AWS_MAX_ATTEMPTS: '1',
  AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
  AWS_SECRET_ACCESS_KEY: 'example',
};

/** The deployed auth mode: the kubeconfig from SSM, here from an endpoint that refuses at once (one attempt). */
const SSM_ENV: Readonly<Record<string, string>> = {
  MANAGEMENT_AUTH: 'ssm',
  MANAGEMENT_KUBECONFIG_PARAMETER: '/capi-taint-propagator/management-kubeconfig',
  AWS_ENDPOINT_URL_SSM: 'http://127.0.0.1:9',
  AWS_MAX_ATTEMPTS: '1',
  AWS_ACCESS_KEY_ID: 'AKIDEXAMPLE',
  AWS_SECRET_ACCESS_KEY: 'example',
};

export async function runColdStart(ctx: BenchContext): Promise<ColdStartResult> {
  const { build } = await import('esbuild');
  const root = fileURLToPath(new URL('../../', import.meta.url));
  // Inside the repository (git-ignored) so that the external @aws-sdk/* resolve from node_modules.
  const outRoot = join(root, 'bench', 'out', `cold-start-${process.pid}`);
  // "As deployed": with source maps loaded only when serverless.yml sets NODE_OPTIONS=--enable-source-maps.
  const deployedWithSourceMaps = /^\s*NODE_OPTIONS:.*--enable-source-maps/m.test(readFileSync(join(root, 'serverless.yml'), 'utf8'));
  mkdirSync(outRoot, { recursive: true });
  // The package's zip holds no package.json, so Lambda loads handler.js as CommonJS; without this file the
  // repository's `"type": "module"` would make Node load the bundles here as ES modules.
  writeFileSync(join(outRoot, 'package.json'), '{"type":"commonjs"}\n');
  const bundleOptions = lambdaBundleOptions(root);
  const runs = ctx.sizes.coldStartRuns;
  try {
    const bundles: BundleFigures[] = [];
    for (const fn of FUNCTIONS) {
      const outdir = join(outRoot, fn);
      await build({
        ...bundleOptions,
        entryPoints: [join(root, 'functions', fn, 'handler.ts')],
        outdir,
        logLevel: 'silent',
      });
      const file = join(outdir, lambdaHandlerFile(bundleOptions));
      const withMaps = measureLoads(file, runs, true);
      const withoutMaps = measureLoads(file, runs, false);
      const deployed = deployedWithSourceMaps ? withMaps : withoutMaps;
      const figures: BundleFigures = {
        function: fn,
        bundleBytes: statSync(file).size,
        sourceMapBytes: statSync(`${file}.map`).size,
        loadMs: round(median(deployed.loads), 1),
        loadMsRuns: deployed.loads.map((x) => round(x, 1)),
        loadMsSourceMaps: round(median(withMaps.loads), 1),
        loadMsNoSourceMaps: round(median(withoutMaps.loads), 1),
        processWallMs: round(median(deployed.walls), 1),
      };
      bundles.push(figures);
      ctx.log(
        `  ${fn}: ${(figures.bundleBytes / 1024).toFixed(0)} KiB (+ ${(figures.sourceMapBytes / 1024).toFixed(0)} KiB map), load ${figures.loadMs} ms as deployed ` +
          `(${figures.loadMsSourceMaps} ms with --enable-source-maps, ${figures.loadMsNoSourceMaps} ms without), process ${figures.processWallMs} ms`,
      );
    }
    // The SSM set-up path as packaged, and the SSM client alone by require() and by import().
    const reconcileFile = join(outRoot, 'reconcile-node-taints', lambdaHandlerFile(bundleOptions));
    const reconcileSsmLoadMs = round(median(measureLoads(reconcileFile, runs, false, outRoot, SSM_ENV).loads), 1);
    const eksInit = (type: string) => round(median(measureLoads(reconcileFile, runs, deployedWithSourceMaps, outRoot, { ...EKS_ENV, AWS_LAMBDA_INITIALIZATION_TYPE: type }).loads), 1);
    const reconcileInitMsOnDemand = eksInit('on-demand');
    const reconcileInitMsProvisioned = eksInit('provisioned-concurrency');
    ctx.log(`  reconcile-node-taints with the shipped EKS auth: init ${reconcileInitMsOnDemand} ms on demand, ${reconcileInitMsProvisioned} ms provisioned (the set-up awaited; its endpoint refuses at once)`);
    const ssmRequire = round(median(measureLoads('@aws-sdk/client-ssm', runs, false, outRoot).loads), 1);
    const ssmImport = round(median(measureLoads('@aws-sdk/client-ssm', runs, false, outRoot, {}, true).loads), 1);
    ctx.log(`  reconcile-node-taints with MANAGEMENT_AUTH=ssm: load ${reconcileSsmLoadMs} ms; @aws-sdk/client-ssm alone ${ssmRequire} ms by require(), ${ssmImport} ms by import()`);
    const sdk = measureLoads('@aws-sdk/client-sqs', runs, false, outRoot);
    const empty = measureLoads(undefined, runs, false);
    const reconcile = bundles.find((b) => b.function === 'reconcile-node-taints');
    const forwarder = bundles.find((b) => b.function === 'watch-forwarder');
    if (!reconcile || !forwarder) throw new Error('reconcile or forwarder bundle missing');
    return {
      runs,
      bundles,
      awsSdkSqsLoadMs: round(median(sdk.loads), 1),
      reconcileSsmLoadMs,
      awsSdkSsmRequireMs: ssmRequire,
      awsSdkSsmImportMs: ssmImport,
      emptyProcessWallMs: round(median(empty.walls), 1),
      reconcileBundleBytes: reconcile.bundleBytes,
      reconcileLoadMs: reconcile.loadMs,
      reconcileInitMsOnDemand,
      reconcileInitMsProvisioned,
      forwarderBundleBytes: forwarder.bundleBytes,
      forwarderLoadMs: forwarder.loadMs,
    };
  } finally {
    rmSync(outRoot, { recursive: true, force: true });
  }
}

/** Loads `target` in `runs` fresh processes; returns the require() times and process wall times in ms. */
function measureLoads(target: string | undefined, runs: number, sourceMaps: boolean, cwd?: string, extraEnv: Readonly<Record<string, string>> = {}, importPackage = false): { loads: number[]; walls: number[] } {
  const esm = target?.endsWith('.mjs') === true || importPackage;
  const specifier = target !== undefined && target.startsWith('/') ? pathToFileURL(target).href : target;
  const load = esm ? `await import(${JSON.stringify(specifier)})` : `require(${JSON.stringify(target)})`;
  const script = target === undefined ? '' : `const t=process.hrtime.bigint();${load};process.stdout.write(String(Number(process.hrtime.bigint()-t)/1e6))`;
  const loads: number[] = [];
  const walls: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const r = spawnSync(process.execPath, [...(esm ? ['--input-type=module'] : []), '-e', script], {
      encoding: 'utf8',
      ...(cwd ? { cwd } : {}),
      env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...HANDLER_ENV, ...extraEnv, ...(sourceMaps ? { NODE_OPTIONS: '--enable-source-maps' } : {}) },
    });
    walls.push(performance.now() - start);
    if (r.status !== 0) throw new Error(`loading ${target} failed: ${r.stderr.slice(0, 500)}`);
    if (target !== undefined) loads.push(Number(r.stdout));
  }
  return { loads, walls };
}
