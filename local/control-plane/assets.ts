/**
 * Finds (or builds) the binaries and the Cluster API CRDs that the local control plane runs on.
 *
 * Binaries are looked up per binary, envtest-style:
 *   1. `TEST_ASSET_KUBE_APISERVER` / `TEST_ASSET_ETCD` / `TEST_ASSET_KUBECTL` / `TEST_ASSET_KUBE_CONTROLLER_MANAGER`
 *      (a full path to one binary);
 *   2. `$KUBEBUILDER_ASSETS/<name>`;
 *   3. the project cache `${XDG_CACHE_HOME:-~/.cache}/capi-taint-propagator/kube-assets/k8s-<K8S>-etcd-<ETCD>/`.
 * When kube-apiserver or etcd is still missing and building is allowed, `build-assets.sh` builds all four into the
 * cache from Go modules (minutes, once per version pair); kube-controller-manager (optional, like kubectl: envtest
 * folders do not have it) is built the same way when asked for and missing (`resolveControllerManager`).
 *
 * The Cluster API CRDs and webhook manifests come from the Go module cache (`go mod download sigs.k8s.io/cluster-api@<v>`);
 * the Cluster API core manager is built from the same module into
 * `${XDG_CACHE_HOME:-~/.cache}/capi-taint-propagator/cluster-api/<v>/` (same lock + partial-folder pattern).
 * This is local tooling, so it reads the environment directly; nothing in shared/ or functions/ imports it.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

/** Kubernetes version of kube-apiserver and kubectl (1.34: what CAPI v1.12-v1.14 are built against). */
export const KUBERNETES_VERSION = 'v1.34.3';
/** etcd version (3.6.x is what Kubernetes 1.34 is tested with; has RequestWatchProgress). */
export const ETCD_VERSION = 'v3.6.16';
/**
 * Default Cluster API release: the core manager is built from it and ALL its CRDs are installed (v1.12 is the first
 * with `Machine.spec.taints`; v1.14 adds `taints` to ClusterClass and Cluster topology). `CAPI_VERSION` overrides it.
 */
export const DEFAULT_CLUSTER_API_VERSION = 'v1.14.2';

/** The Cluster API release to use: `CAPI_VERSION` (a tag such as `v1.12.5`), else {@link DEFAULT_CLUSTER_API_VERSION}. */
export function clusterApiVersion(env: NodeJS.ProcessEnv = process.env): string {
  const v = env['CAPI_VERSION']?.trim();
  if (!v) return DEFAULT_CLUSTER_API_VERSION;
  if (!/^v\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?$/.test(v)) throw new Error(`CAPI_VERSION must be a release tag such as v1.14.2, got ${JSON.stringify(v)}`);
  return v;
}

/** Names of the binaries, as in the envtest layout. */
export const BINARY_NAMES = { kubeApiserver: 'kube-apiserver', etcd: 'etcd', kubectl: 'kubectl', kubeControllerManager: 'kube-controller-manager' } as const;
export type BinaryKey = keyof typeof BINARY_NAMES;

/**
 * Absolute paths of the binaries. kubectl is optional: the control plane does not need it. kube-controller-manager is
 * optional too: only a control plane started with `controllerManager` runs it (see {@link resolveControllerManager}).
 */
export interface Binaries {
  readonly kubeApiserver: string;
  readonly etcd: string;
  readonly kubectl: string | undefined;
  readonly kubeControllerManager: string | undefined;
}

/** Either usable assets, or why not (one sentence that also says how to get them). */
export type Resolution<T> = { readonly available: true; readonly value: T } | { readonly available: false; readonly reason: string };

/** Options of the resolvers. */
export interface ResolveOptions {
  /** Build missing binaries from Go modules (default true). */
  readonly build?: boolean;
  /** Receives progress lines (default: stderr). */
  readonly log?: (line: string) => void;
  /** Environment to read (default: `process.env`). */
  readonly env?: NodeJS.ProcessEnv;
}

const HOW_TO_GET =
  'install Go >= 1.24 (the binaries are then built once into the cache, ~5-10 min), or point ' +
  'KUBEBUILDER_ASSETS (or TEST_ASSET_KUBE_APISERVER/TEST_ASSET_ETCD) at existing kube-apiserver 1.34 + etcd 3.5/3.6 binaries';

const BUILD_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'build-assets.sh');

/** The project cache folder for the pinned version pair. */
export function assetCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const cacheHome = env['XDG_CACHE_HOME']?.trim() || join(homedir(), '.cache');
  return join(cacheHome, 'capi-taint-propagator', 'kube-assets', `k8s-${KUBERNETES_VERSION}-etcd-${ETCD_VERSION}`);
}

function isExecutableFile(path: string): boolean {
  try {
    const st = statSync(path);
    return st.isFile() && (st.mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

function envVarFor(key: BinaryKey): string {
  return `TEST_ASSET_${BINARY_NAMES[key].toUpperCase().replace(/[^A-Z0-9]/g, '_')}`;
}

/** Where one binary is, or why it cannot be used. An explicit TEST_ASSET_* that does not exist is an error, not a fallback. */
type Lookup = { path: string } | { missing: true } | { error: string };

function lookupBinary(key: BinaryKey, env: NodeJS.ProcessEnv): Lookup {
  const name = BINARY_NAMES[key];
  const explicitVar = envVarFor(key);
  const explicit = env[explicitVar]?.trim();
  if (explicit) {
    return isExecutableFile(explicit) ? { path: explicit } : { error: `${explicitVar}=${explicit} is not an executable file` };
  }
  const kubebuilder = env['KUBEBUILDER_ASSETS']?.trim();
  if (kubebuilder && isExecutableFile(join(kubebuilder, name))) return { path: join(kubebuilder, name) };
  const cached = join(assetCacheDir(env), name);
  if (isExecutableFile(cached)) return { path: cached };
  return { missing: true };
}

/** Looks the binaries up without building anything. */
export function findBinaries(env: NodeJS.ProcessEnv = process.env): Resolution<Binaries> {
  const api = lookupBinary('kubeApiserver', env);
  const etcd = lookupBinary('etcd', env);
  const kubectl = lookupBinary('kubectl', env);
  const kcm = lookupBinary('kubeControllerManager', env);
  for (const l of [api, etcd, kubectl, kcm]) if ('error' in l) return { available: false, reason: l.error };
  if ('path' in api && 'path' in etcd) {
    const optional = (l: Lookup): string | undefined => ('path' in l ? l.path : undefined);
    return { available: true, value: { kubeApiserver: api.path, etcd: etcd.path, kubectl: optional(kubectl), kubeControllerManager: optional(kcm) } };
  }
  const missing = [api, etcd].map((l, i) => ('missing' in l ? ['kube-apiserver', 'etcd'][i] : undefined)).filter(Boolean);
  return { available: false, reason: `no ${missing.join(' or ')} binary found` };
}

/** True when `go` is on PATH. */
export function hasGo(env: NodeJS.ProcessEnv = process.env): boolean {
  return spawnSync('go', ['version'], { env, stdio: 'ignore' }).status === 0;
}

/**
 * Finds the binaries; builds them into the cache when kube-apiserver or etcd is missing, Go is present and
 * `build` is not false. Never throws for a missing toolchain: returns `available: false` with the reason.
 */
export async function resolveBinaries(opts: ResolveOptions = {}): Promise<Resolution<Binaries>> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const found = findBinaries(env);
  if (found.available || !found.reason.startsWith('no ')) return found;
  if (opts.build === false) return { available: false, reason: `${found.reason} and building is disabled; ${HOW_TO_GET}` };
  if (!hasGo(env)) return { available: false, reason: `${found.reason} and Go is not installed; ${HOW_TO_GET}` };
  const built = await buildAssets({ env, log });
  if (!built.ok) return { available: false, reason: built.reason };
  return findBinaries(env);
}

/**
 * The kube-controller-manager binary (same Kubernetes version as kube-apiserver): found like the others, else built
 * into the cache by `build-assets.sh` when Go is present and `build` is not false. A cache folder made before
 * kube-controller-manager was added is rebuilt whole: with Go's build cache warm from it, only the
 * controller-manager's own packages compile.
 */
export async function resolveControllerManager(opts: ResolveOptions = {}): Promise<Resolution<string>> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const found = lookupBinary('kubeControllerManager', env);
  if ('path' in found) return { available: true, value: found.path };
  if ('error' in found) return { available: false, reason: found.error };
  const how = `install Go >= 1.24 (it is then built once into the cache with kube-apiserver), or set TEST_ASSET_KUBE_CONTROLLER_MANAGER to a kube-controller-manager ${KUBERNETES_VERSION} binary`;
  if (opts.build === false) return { available: false, reason: `no kube-controller-manager binary found and building is disabled; ${how}` };
  if (!hasGo(env)) return { available: false, reason: `no kube-controller-manager binary found and Go is not installed; ${how}` };
  const built = await buildAssets({ env, log, needs: ['kube-apiserver', 'etcd', 'kube-controller-manager'] });
  if (!built.ok) return { available: false, reason: built.reason };
  const again = lookupBinary('kubeControllerManager', env);
  return 'path' in again ? { available: true, value: again.path } : { available: false, reason: `build-assets.sh did not produce kube-controller-manager in ${assetCacheDir(env)}` };
}

/** Runs build-assets.sh into the cache, one builder at a time (a lock folder next to the cache folder). */
function buildAssets(o: { env: NodeJS.ProcessEnv; log: (line: string) => void; needs?: readonly string[] }): Promise<{ ok: true } | { ok: false; reason: string }> {
  const out = assetCacheDir(o.env);
  const needs = o.needs ?? ['kube-apiserver', 'etcd'];
  return buildInto({
    out,
    script: BUILD_SCRIPT,
    scriptEnv: { K8S_VERSION: KUBERNETES_VERSION, ETCD_VERSION },
    done: () => needs.every((n) => existsSync(join(out, n))),
    what: `kube-apiserver + kube-controller-manager + kubectl ${KUBERNETES_VERSION} and etcd ${ETCD_VERSION}`,
    estimate: 'one-time, usually 5-10 min on 2 cores',
    env: o.env,
    log: o.log,
  });
}

/** Runs a build script with `OUT=<out>` under the `<out>.lock` folder; the script builds into `<out>.partial` and renames it. */
async function buildInto(o: {
  out: string;
  script: string;
  scriptEnv: Record<string, string>;
  done: () => boolean;
  what: string;
  estimate: string;
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}): Promise<{ ok: true } | { ok: false; reason: string }> {
  const out = o.out;
  mkdirSync(dirname(out), { recursive: true });
  const lock = `${out}.lock`;
  await acquireLock(lock, o.log);
  try {
    if (o.done()) return { ok: true }; // built by whoever held the lock
    o.log(`[control-plane] building ${o.what} from Go modules into ${out} (${o.estimate})`);
    const started = Date.now();
    const code = await new Promise<number>((resolve, reject) => {
      const child = spawn('bash', [o.script], {
        env: { ...o.env, OUT: out, ...o.scriptEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const forward = (s: NodeJS.ReadableStream): void => {
        createInterface({ input: s }).on('line', (line) => o.log(line));
      };
      forward(child.stdout);
      forward(child.stderr);
      child.on('error', reject);
      child.on('close', (c) => resolve(c ?? 1));
    });
    const secs = ((Date.now() - started) / 1000).toFixed(0);
    if (code !== 0) return { ok: false, reason: `building ${o.what} failed (exit ${code}) after ${secs} s; see the lines above` };
    o.log(`[control-plane] ${o.what} built in ${formatDuration(Date.now() - started)}`);
    return { ok: true };
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function formatDuration(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** True when a process with this pid exists (EPERM: it exists but is not ours). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function acquireLock(lock: string, log: (line: string) => void): Promise<void> {
  let announced = false;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'pid'), String(process.pid));
      return;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let owner = NaN;
    try {
      owner = Number(readFileSync(join(lock, 'pid'), 'utf8'));
    } catch {
      /* the owner has not written its pid yet */
    }
    if (Number.isInteger(owner) && !isAlive(owner)) {
      rmSync(lock, { recursive: true, force: true }); // left behind by a builder that died
      continue;
    }
    if (!announced) log(`[control-plane] another process (pid ${owner}) is building the binaries; waiting for it`);
    announced = true;
    await new Promise((r) => setTimeout(r, 2000));
  }
}

/** Where the Cluster API module's manifests are: every CRD of the core manager, and its webhook configurations. */
export interface ClusterApiManifests {
  readonly version: string;
  /** Folder of the core CRDs (`core/config/crd/bases` from v1.14, `config/crd/bases` before). */
  readonly crdDir: string;
  /** Every `*.yaml` in `crdDir`. */
  readonly crdFiles: readonly string[];
  /** `…/config/webhook/manifests.yaml`: the core manager's Mutating/ValidatingWebhookConfigurations. */
  readonly webhookManifest: string;
}

/** Both layouts of the module: v1.14 moved the core manager's config under `core/`. */
function manifestsIn(moduleDir: string, version: string): ClusterApiManifests | undefined {
  for (const base of [join(moduleDir, 'core', 'config'), join(moduleDir, 'config')]) {
    const crdDir = join(base, 'crd', 'bases');
    const webhookManifest = join(base, 'webhook', 'manifests.yaml');
    if (!existsSync(crdDir) || !existsSync(webhookManifest)) continue;
    const crdFiles = readdirSync(crdDir).filter((f) => f.endsWith('.yaml')).sort();
    if (crdFiles.includes('cluster.x-k8s.io_machines.yaml')) return { version, crdDir, crdFiles, webhookManifest };
  }
  return undefined;
}

/**
 * The Cluster API module's manifests for {@link clusterApiVersion}: from the Go module cache (`go mod download`,
 * which fetches the module from the proxy on first use), else the default module cache path `~/go/pkg/mod` when Go
 * itself is absent. `CAPI_MODULE_DIR` points at an unpacked module instead (offline use).
 */
export function resolveClusterApiManifests(env: NodeJS.ProcessEnv = process.env): Resolution<ClusterApiManifests> {
  let version: string;
  try {
    version = clusterApiVersion(env);
  } catch (e) {
    return { available: false, reason: (e as Error).message };
  }
  const explicit = env['CAPI_MODULE_DIR']?.trim();
  if (explicit) {
    const m = manifestsIn(explicit, version);
    return m ? { available: true, value: m } : { available: false, reason: `CAPI_MODULE_DIR=${explicit} has no core/config or config folder with crd/bases and webhook/manifests.yaml` };
  }
  const module = `sigs.k8s.io/cluster-api@${version}`;
  if (hasGo(env)) {
    const r = spawnSync('go', ['mod', 'download', '-json', module], {
      env: { ...env, GOFLAGS: '-mod=mod', GOWORK: 'off', GOTOOLCHAIN: 'local' },
      cwd: homedir(), // outside any go.mod / go.work
      encoding: 'utf8',
    });
    let info: { Dir?: string; Error?: string } = {};
    try {
      info = JSON.parse(r.stdout) as typeof info;
    } catch {
      info = { Error: (r.stderr || r.stdout || `exit ${r.status}`).trim() };
    }
    if (info.Error || !info.Dir) return { available: false, reason: `go mod download ${module} failed: ${info.Error ?? 'no Dir'}; or set CAPI_MODULE_DIR` };
    const m = manifestsIn(info.Dir, version);
    return m ? { available: true, value: m } : { available: false, reason: `${info.Dir} has no CRDs and webhook manifests where Cluster API keeps them` };
  }
  const gopath = env['GOPATH']?.split(':')[0]?.trim() || join(homedir(), 'go');
  const fallback = join(env['GOMODCACHE']?.trim() || join(gopath, 'pkg', 'mod'), 'sigs.k8s.io', `cluster-api@${version}`);
  const m = manifestsIn(fallback, version);
  if (m) return { available: true, value: m };
  return {
    available: false,
    reason: `the Cluster API ${version} module is not in the Go module cache and Go is not installed; install Go, or set CAPI_MODULE_DIR to an unpacked sigs.k8s.io/cluster-api@${version}`,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// The Cluster API core manager

/** File name of the manager binary in its cache folder. */
export const CAPI_MANAGER_BINARY = 'cluster-api-manager';

const CAPI_BUILD_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'build-capi.sh');

/** `${XDG_CACHE_HOME:-~/.cache}/capi-taint-propagator/cluster-api/<version>/`, beside the kube binaries. */
export function capiCacheDir(env: NodeJS.ProcessEnv = process.env, version = clusterApiVersion(env)): string {
  const cacheHome = env['XDG_CACHE_HOME']?.trim() || join(homedir(), '.cache');
  return join(cacheHome, 'capi-taint-propagator', 'cluster-api', version);
}

/** The manager binary: `TEST_ASSET_CLUSTER_API_MANAGER`, else the cache. Never builds. */
export function findClusterApiManager(env: NodeJS.ProcessEnv = process.env): Resolution<string> {
  const explicit = env['TEST_ASSET_CLUSTER_API_MANAGER']?.trim();
  if (explicit) return isExecutableFile(explicit) ? { available: true, value: explicit } : { available: false, reason: `TEST_ASSET_CLUSTER_API_MANAGER=${explicit} is not an executable file` };
  let dir: string;
  try {
    dir = capiCacheDir(env);
  } catch (e) {
    return { available: false, reason: (e as Error).message };
  }
  const bin = join(dir, CAPI_MANAGER_BINARY);
  return isExecutableFile(bin) ? { available: true, value: bin } : { available: false, reason: `no Cluster API manager binary in ${dir}` };
}

/**
 * The Cluster API core manager binary; builds it into the cache (`build-capi.sh`, one builder at a time, into a
 * `.partial` folder renamed when complete) when missing, Go is present and `build` is not false.
 */
export async function resolveClusterApiManager(opts: ResolveOptions = {}): Promise<Resolution<string>> {
  const env = opts.env ?? process.env;
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const found = findClusterApiManager(env);
  if (found.available || !found.reason.startsWith('no ')) return found;
  const version = clusterApiVersion(env);
  const how = `install Go >= 1.24 (the manager is then built once into the cache, ~2-4 min), or set TEST_ASSET_CLUSTER_API_MANAGER to a Cluster API ${version} core manager binary`;
  if (opts.build === false) return { available: false, reason: `${found.reason} and building is disabled; ${how}` };
  if (!hasGo(env)) return { available: false, reason: `${found.reason} and Go is not installed; ${how}` };
  const out = capiCacheDir(env, version);
  const built = await buildInto({
    out,
    script: CAPI_BUILD_SCRIPT,
    scriptEnv: { CAPI_VERSION: version },
    done: () => existsSync(join(out, CAPI_MANAGER_BINARY)),
    what: `the Cluster API ${version} core manager`,
    estimate: 'one-time, usually 2-4 min on 2 cores',
    env,
    log,
  });
  if (!built.ok) return { available: false, reason: built.reason };
  return findClusterApiManager(env);
}
