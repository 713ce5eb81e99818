/**
 * `npx serverless package` offline, without AWS credentials (no AWS_* variables, an empty HOME), in a copy of the
 * service in a temp dir (so that parallel runs never share .serverless/ or .esbuild/).
 *
 * Packaging takes 5–20 s, and several readers use the result (serverless-package.test.ts: our own assertions;
 * template-validation.test.ts: AWS's validator and IAM names; the `deployed` tier and the deployed benchmarks: the
 * Lambda runner of this folder). They share one packaging per parameter set: the result
 * is kept under the OS temp dir, keyed by a hash of every input (serverless.yml, package.json, package-lock.json,
 * tsconfig.json, infra/, functions/, shared/, the arguments and this checkout's path), and a lock directory makes
 * the second caller wait for the first instead of packaging again. Any change to an input means a new key.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdir, readdir, readFile, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const INPUTS = ['serverless.yml', 'package.json', 'package-lock.json', 'tsconfig.json', 'infra', 'functions', 'shared'];
const CACHE = join(tmpdir(), 'capi-taint-propagator-sls');
/** A lock older than this belongs to a run that died; packaging itself takes well under a minute. */
const STALE_LOCK_MS = 5 * 60_000;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a CloudFormation template is untyped JSON
export type Json = any;

export interface Packaged {
  /** The generated `cloudformation-template-update-stack.json`, parsed. */
  readonly template: Json;
  readonly templatePath: string;
  /** The packaged copy of the service (its `.serverless/` holds the zips). */
  readonly serviceDir: string;
  /** Seconds `serverless package` took when it ran (also when the result was then reused). */
  readonly seconds: number;
  /** True when this call reused a packaging done earlier with identical inputs. */
  readonly reused: boolean;
}

/** A refused `serverless package`: exit code, stdout + stderr, and whether a template was written anyway. */
export class PackageError extends Error {
  readonly code: number | string | undefined;
  readonly output: string;
  readonly templateWritten: boolean;
  constructor(code: number | string | undefined, output: string, templateWritten: boolean) {
    super(`serverless package failed (exit ${String(code)}):\n${output}`);
    this.code = code;
    this.output = output;
    this.templateWritten = templateWritten;
  }
}

/** Parameter sets the tests package: one deployable set per management auth mode. */
export const PACKAGE_VARIANTS = {
  // The worked parameter files (infra/params/*.yml, wired as stages of serverless.yml); ssm also with a redrive role.
  eks: ['--stage', 'example-eks'],
  ssm: ['--stage', 'example-ssm', '--param=queueRedriveRoleArn=arn:aws:iam::111122223333:role/ops-dlq-redrive'],
  secretsmanager: ['--stage', 'example-secrets'],
} as const satisfies Record<string, readonly string[]>;

/** Evaluates a CloudFormation condition whose parameters were already resolved by the framework. */
export function evaluateCondition(template: Json, c: Json): boolean {
  if (typeof c === 'string') return evaluateCondition(template, template.Conditions[c]);
  if ('Condition' in c) return evaluateCondition(template, c.Condition);
  if ('Fn::Equals' in c) return String(c['Fn::Equals'][0]) === String(c['Fn::Equals'][1]);
  if ('Fn::Not' in c) return !evaluateCondition(template, c['Fn::Not'][0]);
  if ('Fn::And' in c) return (c['Fn::And'] as Json[]).every((x) => evaluateCondition(template, x));
  if ('Fn::Or' in c) return (c['Fn::Or'] as Json[]).some((x) => evaluateCondition(template, x));
  throw new Error(`cannot evaluate condition ${JSON.stringify(c)}`);
}

/** False when the resource has a Condition that is false for this packaged template (CloudFormation skips it). */
export function isCreated(template: Json, logicalId: string): boolean {
  const condition: unknown = template.Resources?.[logicalId]?.Condition;
  return condition === undefined || evaluateCondition(template, condition);
}

async function filesUnder(path: string): Promise<string[]> {
  const s = await stat(path);
  if (!s.isDirectory()) return [path];
  const entries = await readdir(path, { withFileTypes: true });
  const nested = await Promise.all(entries.sort((a, b) => a.name.localeCompare(b.name)).map((e) => filesUnder(join(path, e.name))));
  return nested.flat();
}

async function keyOf(args: readonly string[]): Promise<string> {
  const hash = createHash('sha256').update(JSON.stringify({ root, args }));
  for (const input of INPUTS) {
    for (const file of await filesUnder(join(root, input))) {
      hash.update(relative(root, file)).update('\0').update(await readFile(file)).update('\0');
    }
  }
  return hash.digest('hex').slice(0, 24);
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

async function readPackaged(dir: string, reused: boolean): Promise<Packaged> {
  const serviceDir = join(dir, 'service');
  const templatePath = join(serviceDir, '.serverless', 'cloudformation-template-update-stack.json');
  const meta = JSON.parse(await readFile(join(dir, 'meta.json'), 'utf8')) as { seconds: number };
  return { template: JSON.parse(await readFile(templatePath, 'utf8')) as Json, templatePath, serviceDir, seconds: meta.seconds, reused };
}

async function packageInto(dir: string, args: readonly string[]): Promise<void> {
  const service = join(dir, 'service');
  await mkdir(service, { recursive: true });
  for (const entry of INPUTS) await cp(join(root, entry), join(service, entry), { recursive: true });
  await symlink(join(root, 'node_modules'), join(service, 'node_modules'), 'dir');
  const home = join(dir, 'home');
  await mkdir(home);
  // serverless-esbuild copies each function's files to a temp dir of its own to zip them, and leaves it behind (about
  // 2.4 MB per function and packaging): its temp dirs go here, and are removed with it.
  const temp = join(dir, 'tmp');
  await mkdir(temp);
  // No AWS_* variables, no ~/.aws: proves packaging needs no account.
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, TMPDIR: temp, TMP: temp, TEMP: temp, NPM_CONFIG_UPDATE_NOTIFIER: 'false', SLS_TELEMETRY_DISABLED: '1' };
  const started = Date.now();
  try {
    await run('npx', ['--no-install', 'serverless', 'package', ...args], { cwd: service, env, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const e = err as { code?: number | string; stdout?: string; stderr?: string };
    const templateWritten = await exists(join(service, '.serverless', 'cloudformation-template-update-stack.json'));
    throw new PackageError(e.code, `${e.stdout ?? ''}\n${e.stderr ?? ''}`, templateWritten);
  } finally {
    await rm(temp, { recursive: true, force: true });
  }
  await writeFile(join(dir, 'meta.json'), JSON.stringify({ args, seconds: (Date.now() - started) / 1000 }));
}

/** Removes cached packagings not used for a day (best effort). */
async function evictOld(): Promise<void> {
  const entries = await readdir(CACHE).catch(() => [] as string[]);
  for (const name of entries) {
    const s = await stat(join(CACHE, name)).catch(() => undefined);
    if (s && Date.now() - s.mtimeMs > 24 * 3600_000) await rm(join(CACHE, name), { recursive: true, force: true });
  }
}

/** The packaged service for these arguments: packaged now, or reused from an identical earlier packaging. */
export async function packagedService(args: readonly string[]): Promise<Packaged> {
  await mkdir(CACHE, { recursive: true });
  const key = await keyOf(args);
  const dir = join(CACHE, key);
  const lock = `${dir}.lock`;
  for (;;) {
    if (await exists(join(dir, 'meta.json'))) return readPackaged(dir, true);
    try {
      await mkdir(lock);
    } catch {
      // Someone else is packaging these inputs: wait for their result, or take over a lock left by a dead run.
      const s = await stat(lock).catch(() => undefined);
      if (s && Date.now() - s.mtimeMs > STALE_LOCK_MS) await rm(lock, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 250));
      continue;
    }
    try {
      if (await exists(join(dir, 'meta.json'))) return readPackaged(dir, true);
      const work = `${dir}.${process.pid}.tmp`;
      await rm(work, { recursive: true, force: true });
      try {
        await packageInto(work, args);
        await rename(work, dir);
      } finally {
        await rm(work, { recursive: true, force: true });
      }
      await evictOld();
      return readPackaged(dir, false);
    } finally {
      await rm(lock, { recursive: true, force: true });
    }
  }
}
