/**
 * The esbuild options of the Lambda packages, read from serverless.yml's `custom.esbuild` and turned into what
 * serverless-esbuild hands to esbuild: its own keys dropped, `exclude` added to `external`. The benchmarks (cold
 * start) and the bundle test build with these, so they measure and test the artifact that `serverless package`
 * builds, and a change to serverless.yml reaches them without a second copy of the options.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BuildOptions } from 'esbuild';
import { load } from 'js-yaml';

/** The esbuild options serverless.yml may set (only these are passed through; anything else fails loudly). */
export type LambdaBundleOptions = Pick<BuildOptions, 'bundle' | 'minify' | 'sourcemap' | 'keepNames' | 'target' | 'platform' | 'format'> & {
  readonly mainFields: string[];
  readonly external: string[];
};

/** serverless-esbuild's own keys (not esbuild options); it removes them before calling esbuild. */
const PLUGIN_KEYS = new Set(['exclude', 'packager', 'packagerOptions', 'concurrency', 'zipConcurrency', 'nativeZip', 'watch', 'keepOutputDirectory', 'outputFileExtension']);
const ESBUILD_KEYS = new Set(['bundle', 'minify', 'sourcemap', 'keepNames', 'target', 'platform', 'format', 'mainFields', 'external']);

/** `custom.esbuild` of the serverless.yml in `root`, as the esbuild options serverless-esbuild builds with. */
export function lambdaBundleOptions(root: string): LambdaBundleOptions {
  const yml = load(readFileSync(join(root, 'serverless.yml'), 'utf8')) as { custom?: { esbuild?: Record<string, unknown> } };
  const settings = yml.custom?.esbuild;
  if (!settings) throw new Error('serverless.yml has no custom.esbuild');
  const unknown = Object.keys(settings).filter((k) => !PLUGIN_KEYS.has(k) && !ESBUILD_KEYS.has(k));
  if (unknown.length > 0) throw new Error(`serverless.yml custom.esbuild sets ${unknown.join(', ')}: add them to infra/lambda-bundle.ts so that the benchmarks and tests build the same bundle`);
  const list = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);
  const { exclude, external, mainFields, ...rest } = settings;
  const options = {
    ...Object.fromEntries(Object.entries(rest).filter(([k]) => ESBUILD_KEYS.has(k))),
    // esbuild's default for platform node when serverless.yml does not say.
    mainFields: mainFields === undefined ? ['main', 'module'] : list(mainFields),
    external: [...list(external), ...list(exclude)],
  };
  return options as LambdaBundleOptions;
}
