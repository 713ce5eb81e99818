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
export type LambdaBundleOptions = Pick<BuildOptions, 'bundle' | 'minify' | 'sourcemap' | 'keepNames' | 'target' | 'platform' | 'format' | 'define' | 'banner'> & {
  readonly mainFields: string[];
  readonly external: string[];
  /** Package name to replacement; a relative replacement is made absolute against `root` (serverless-esbuild runs esbuild there). */
  readonly alias?: Record<string, string>;
  /** From serverless-esbuild's `outputFileExtension` (`.js` when unset), as it passes it to esbuild. */
  readonly outExtension: { '.js': string };
};

/** serverless-esbuild's own keys (not esbuild options); it removes them before calling esbuild. */
const PLUGIN_KEYS = new Set(['exclude', 'packager', 'packagerOptions', 'concurrency', 'zipConcurrency', 'nativeZip', 'watch', 'keepOutputDirectory', 'outputFileExtension']);
const ESBUILD_KEYS = new Set(['bundle', 'minify', 'sourcemap', 'keepNames', 'target', 'platform', 'format', 'mainFields', 'external', 'alias', 'define', 'banner']);

/** `custom.esbuild` of the serverless.yml in `root`, as the esbuild options serverless-esbuild builds with. */
export function lambdaBundleOptions(root: string): LambdaBundleOptions {
  const yml = load(readFileSync(join(root, 'serverless.yml'), 'utf8')) as { custom?: { esbuild?: Record<string, unknown> } };
  const settings = yml.custom?.esbuild;
  if (!settings) throw new Error('serverless.yml has no custom.esbuild');
  const unknown = Object.keys(settings).filter((k) => !PLUGIN_KEYS.has(k) && !ESBUILD_KEYS.has(k));
  if (unknown.length > 0) throw new Error(`serverless.yml custom.esbuild sets ${unknown.join(', ')}: add them to infra/lambda-bundle.ts so that the benchmarks and tests build the same bundle`);
  const list = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);
  const { exclude, external, mainFields, alias, outputFileExtension, ...rest } = settings;
  const options = {
    ...Object.fromEntries(Object.entries(rest).filter(([k]) => ESBUILD_KEYS.has(k))),
    // esbuild's default for platform node when serverless.yml does not say.
    mainFields: mainFields === undefined ? ['main', 'module'] : list(mainFields),
    external: [...list(external), ...list(exclude)],
    // serverless-esbuild names the handler file with this extension (esbuild's outExtension); Lambda's Node.js runtime
    // finds `<file>.js`, `.mjs` or `.cjs` for the handler `<file>.<export>`.
    outExtension: { '.js': outputFileExtension === undefined ? '.js' : String(outputFileExtension) },
    // esbuild resolves a relative alias against its working directory, which for `serverless package` is the
    // service directory: the same file from any working directory here.
    ...(alias === undefined ? {} : { alias: Object.fromEntries(Object.entries(record(alias, 'alias')).map(([from, to]) => [from, to.startsWith('.') ? join(root, to) : to])) }),
  };
  return options as LambdaBundleOptions;
}

function record(value: unknown, key: string): Record<string, string> {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || !Object.values(value).every((v) => typeof v === 'string')) {
    throw new Error(`serverless.yml custom.esbuild.${key} must map names to strings`);
  }
  return value as Record<string, string>;
}

/** The handler file's name in the package, e.g. `handler.mjs` for `handler`: the extension serverless-esbuild gives it. */
export function lambdaHandlerFile(options: LambdaBundleOptions, base = 'handler'): string {
  return `${base}${options.outExtension['.js']}`;
}
