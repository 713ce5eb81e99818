/**
 * Scenario 6, cold start: each function's handler bundled with esbuild exactly as serverless-esbuild does it from
 * serverless.yml's `custom.esbuild` (read by infra/lambda-bundle.ts: bundle, minify, sourcemap, keepNames, platform
 * node, target node22, format esm, mainFields, `@aws-sdk/*` external), then its module-load time in fresh Node
 * processes (median), loaded as Lambda loads it: the time `import()` of `handler.mjs` takes (`require()` for a
 * CommonJS `handler.js`). The reconcile handler's init-phase set-up is part of that import; here it finds no
 * kubeconfig (KUBECONFIG names no file) and gives up at once, so the figure is the module load,
 * with `--enable-source-maps` as deployed (serverless.yml sets NODE_OPTIONS) and without. The external AWS SDK
 * resolves from node_modules, as the Lambda runtime's copy does; its own load time is reported alongside.
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
  /** Median wall time of an empty `node -e ''`: the runtime's own start, not part of loadMs. */
  readonly emptyProcessWallMs: number;
  readonly reconcileBundleBytes: number;
  readonly reconcileLoadMs: number;
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
    const sdk = measureLoads('@aws-sdk/client-sqs', runs, false, outRoot);
    const empty = measureLoads(undefined, runs, false);
    const reconcile = bundles.find((b) => b.function === 'reconcile-node-taints');
    const forwarder = bundles.find((b) => b.function === 'watch-forwarder');
    if (!reconcile || !forwarder) throw new Error('reconcile or forwarder bundle missing');
    return {
      runs,
      bundles,
      awsSdkSqsLoadMs: round(median(sdk.loads), 1),
      emptyProcessWallMs: round(median(empty.walls), 1),
      reconcileBundleBytes: reconcile.bundleBytes,
      reconcileLoadMs: reconcile.loadMs,
      forwarderBundleBytes: forwarder.bundleBytes,
      forwarderLoadMs: forwarder.loadMs,
    };
  } finally {
    rmSync(outRoot, { recursive: true, force: true });
  }
}

/** Loads `target` in `runs` fresh processes; returns the require() times and process wall times in ms. */
function measureLoads(target: string | undefined, runs: number, sourceMaps: boolean, cwd?: string): { loads: number[]; walls: number[] } {
  const esm = target?.endsWith('.mjs') === true;
  const load = esm ? `await import(${JSON.stringify(pathToFileURL(target ?? '').href)})` : `require(${JSON.stringify(target)})`;
  const script = target === undefined ? '' : `const t=process.hrtime.bigint();${load};process.stdout.write(String(Number(process.hrtime.bigint()-t)/1e6))`;
  const loads: number[] = [];
  const walls: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    const r = spawnSync(process.execPath, [...(esm ? ['--input-type=module'] : []), '-e', script], {
      encoding: 'utf8',
      ...(cwd ? { cwd } : {}),
      env: { PATH: process.env['PATH'] ?? '', HOME: process.env['HOME'] ?? '', ...HANDLER_ENV, ...(sourceMaps ? { NODE_OPTIONS: '--enable-source-maps' } : {}) },
    });
    walls.push(performance.now() - start);
    if (r.status !== 0) throw new Error(`loading ${target} failed: ${r.stderr.slice(0, 500)}`);
    if (target !== undefined) loads.push(Number(r.stdout));
  }
  return { loads, walls };
}
