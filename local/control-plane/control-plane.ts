/**
 * A real Kubernetes control plane on loopback: etcd + kube-apiserver (RBAC on, client-certificate authentication,
 * a generated CA), with the Cluster API CRDs installed and established. The envtest model, in TypeScript.
 *
 * Nothing is left behind: children run in their own process group under `setpriv --pdeathsig KILL` (they die with
 * this process even on SIGKILL), they are killed on stop, on process exit and on SIGINT/SIGTERM/SIGHUP, and the
 * temporary folder is removed. Folders of earlier runs whose owner died are swept at the next start.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync, accessSync, constants as fsConstants } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { request } from 'node:https';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, KubeConfig, loadAllYaml } from '@kubernetes/client-node';
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import { CAPI_CRD_FILES, isAlive, resolveBinaries, resolveCrdDir } from './assets.ts';
import type { Binaries } from './assets.ts';
import { compactEtcdAt } from './etcd-maintenance.ts';
import { createClientCert, createServerPki, createServiceAccountKey, kubeconfigYaml, mintClientKubeconfig } from './pki.ts';

/** A running control plane. */
export interface ControlPlane {
  /** Temporary folder holding PKI, etcd data, logs and kubeconfigs; removed by `stop()`. */
  readonly dir: string;
  /** `https://127.0.0.1:<port>`. */
  readonly server: string;
  /** Kubeconfig of the admin identity (client certificate, group `system:masters`: bypasses RBAC). */
  readonly kubeconfigPath: string;
  /** The test CA; it signed the serving certificate and signs client certificates. */
  readonly caCertPath: string;
  readonly caKeyPath: string;
  /** etcd client URL, `http://127.0.0.1:<port>` (v3 JSON gateway included). */
  readonly etcdEndpoint: string;
  /** kubectl matching the server, when one was found. */
  readonly kubectlPath: string | undefined;
  /** Logs of the two processes (inside `dir`). */
  readonly apiserverLogPath: string;
  readonly etcdLogPath: string;
  /** Signs a client certificate (CN = name, O = groups) and returns the path of a kubeconfig using it. */
  mintUser(name: string, groups: string[]): Promise<string>;
  /** Compacts etcd at its current revision: watches and lists from older resourceVersions then get 410 Gone. */
  compactEtcd(): Promise<void>;
  /** Stops kube-apiserver then etcd (SIGTERM, SIGKILL after 10 s) and removes `dir`. Idempotent. */
  stop(): Promise<void>;
}

/** Options of {@link startControlPlane}. */
export interface StartOptions {
  /** Receives progress lines (default: stderr). */
  readonly log?: (line: string) => void;
  /** Build missing binaries from Go modules (default true). */
  readonly build?: boolean;
  /**
   * Stop on SIGINT/SIGTERM/SIGHUP, then re-raise the signal when nobody else listens to it (default true).
   * Pass false when the caller handles the signals and calls `stop()` itself.
   */
  readonly handleSignals?: boolean;
  /**
   * Extra kube-apiserver flags, appended last (a repeated flag wins). Example: `['--watch-cache=false']` serves every
   * watch from etcd, so that a compaction makes watches of Nodes and Machines from older resourceVersions get 410.
   */
  readonly extraApiserverArgs?: readonly string[];
}

/** Thrown when the control plane cannot run here (no binaries and no Go, no CRDs); `reason` says why and how to fix it. */
export class ControlPlaneUnavailableError extends Error {
  readonly reason: string;
  constructor(reason: string) {
    super(`Kubernetes control plane unavailable: ${reason}`);
    this.name = 'ControlPlaneUnavailableError';
    this.reason = reason;
  }
}

const DIR_PREFIX = 'capi-tp-control-plane-';
const STOP_TIMEOUT_MS = 10_000;

/** How long to wait for readiness: `KUBEBUILDER_CONTROLPLANE_START_TIMEOUT` (Go duration: `90s`, `2m`), default 60 s. */
function startTimeoutMs(): number {
  const raw = process.env['KUBEBUILDER_CONTROLPLANE_START_TIMEOUT']?.trim();
  const m = raw ? /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(raw) : null;
  if (!m) return 60_000;
  const n = Number(m[1]);
  return m[2] === 'ms' ? n : m[2] === 's' ? n * 1000 : n * 60_000;
}

// ---------------------------------------------------------------------------------------------------------------
// Child processes and their cleanup

interface Child {
  readonly name: string;
  readonly proc: ChildProcess;
  readonly logPath: string;
  /** Resolves with a description of how the process ended. */
  readonly exited: Promise<string>;
  alive: boolean;
}

/** Live control planes of this process, for the exit and signal handlers. */
const live = new Set<{ children: Child[]; dir: string; stop: () => Promise<void> }>();
let handlersInstalled = false;

const hasSetpriv = ((): boolean => spawnSync('setpriv', ['--help'], { stdio: 'ignore' }).status === 0)();

function spawnChild(name: string, bin: string, args: string[], logPath: string): Child {
  const fd = openSync(logPath, 'a');
  // setpriv sets PR_SET_PDEATHSIG then execs the binary: the kernel kills it if this process dies, even by SIGKILL.
  // detached: its own process group, so a terminal's Ctrl-C reaches only us and we stop the children in order.
  const [cmd, argv] = hasSetpriv ? ['setpriv', ['--pdeathsig', 'KILL', '--', bin, ...args]] : [bin, args];
  const proc = spawn(cmd, argv as string[], { detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const child: Child = {
    name,
    proc,
    logPath,
    alive: true,
    exited: new Promise<string>((resolve) => {
      proc.once('error', (e) => {
        child.alive = false;
        resolve(`failed to start: ${e.message}`);
      });
      proc.once('exit', (code, signal) => {
        child.alive = false;
        resolve(signal ? `killed by ${signal}` : `exited with code ${code}`);
      });
    }),
  };
  return child;
}

function killGroup(child: Child, signal: NodeJS.Signals): void {
  if (!child.alive || child.proc.pid === undefined) return;
  try {
    process.kill(-child.proc.pid, signal);
  } catch {
    try {
      child.proc.kill(signal);
    } catch {
      /* already gone */
    }
  }
}

async function stopChild(child: Child): Promise<void> {
  if (!child.alive) return;
  killGroup(child, 'SIGTERM');
  const timer = setTimeout(() => killGroup(child, 'SIGKILL'), STOP_TIMEOUT_MS);
  await child.exited;
  clearTimeout(timer);
}

function installProcessHandlers(handleSignals: boolean): void {
  if (handlersInstalled) return;
  handlersInstalled = true;
  // Last resort, synchronous: whatever is still running when the process exits is killed and its folder removed.
  process.once('exit', () => {
    for (const cp of live) {
      for (const c of cp.children) killGroup(c, 'SIGKILL');
      rmSync(cp.dir, { recursive: true, force: true });
    }
  });
  if (!handleSignals) return;
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      process.removeListener(sig, onSignal);
      void Promise.allSettled([...live].map((cp) => cp.stop())).then(() => {
        // Keep the default behaviour (exit by that signal) unless someone else handles it.
        if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
      });
    };
    process.on(sig, onSignal);
  }
}

/** The base for temporary folders: /dev/shm when writable (etcd is faster on tmpfs), else the OS temp dir. */
function tempBase(): string {
  try {
    accessSync('/dev/shm', fsConstants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
}

/** Removes folders of earlier runs whose owner process is gone, killing any of their processes still running. */
function sweepStale(base: string): void {
  let entries: string[] = [];
  try {
    entries = readdirSync(base).filter((e) => e.startsWith(DIR_PREFIX));
  } catch {
    return;
  }
  for (const e of entries) {
    const dir = join(base, e);
    let owner = NaN;
    try {
      owner = Number(readFileSync(join(dir, 'owner.pid'), 'utf8'));
    } catch {
      continue; // being created right now, or not ours
    }
    if (!Number.isInteger(owner) || isAlive(owner)) continue;
    for (const pid of pidsWithArgument(dir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
}


/** Processes whose command line mentions `needle` (checked in /proc, so a reused pid is never killed by mistake). */
function pidsWithArgument(needle: string): number[] {
  const pids: number[] = [];
  let procs: string[] = [];
  try {
    procs = readdirSync('/proc').filter((p) => /^\d+$/.test(p));
  } catch {
    return pids;
  }
  for (const p of procs) {
    try {
      if (readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(needle)) pids.push(Number(p));
    } catch {
      /* exited meanwhile */
    }
  }
  return pids;
}

// ---------------------------------------------------------------------------------------------------------------
// HTTP helpers (node:https: fetch cannot present a client certificate without an undici dispatcher)

interface Tls {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}

function httpsGet(url: string, tls: Tls): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', ...tls, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function logTail(path: string, lines = 25): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Polls `probe` every 100 ms until it returns true. Fails early when one of `children` exits, and after `timeoutMs`
 * with `what` in the message. Never sleeps for a fixed time beyond the polling interval.
 */
async function pollUntil(what: string, timeoutMs: number, children: Child[], probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const dead = children.find((c) => !c.alive);
    if (dead) throw new ChildExitedError(dead, await dead.exited);
    try {
      if (await probe()) return;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last})` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

class ChildExitedError extends Error {
  readonly portClash: boolean;
  constructor(child: Child, how: string) {
    const tail = logTail(child.logPath);
    super(`${child.name} ${how} during startup; last lines of ${child.logPath}:\n${tail}`);
    this.name = 'ChildExitedError';
    this.portClash = /address already in use/i.test(tail);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Start

/**
 * Starts etcd and kube-apiserver on free loopback ports, waits for `/readyz` and the `default` namespace, and installs
 * the Cluster API CRDs (waiting until they are Established and served by discovery).
 * Throws {@link ControlPlaneUnavailableError} when binaries or CRDs cannot be found or built here; any other error
 * means the control plane failed to start (the message carries the relevant log lines).
 */
export async function startControlPlane(opts: StartOptions = {}): Promise<ControlPlane> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const binaries = await resolveBinaries({ build: opts.build ?? true, log });
  if (!binaries.available) throw new ControlPlaneUnavailableError(binaries.reason);
  const crdDir = resolveCrdDir();
  if (!crdDir.available) throw new ControlPlaneUnavailableError(crdDir.reason);
  installProcessHandlers(opts.handleSignals ?? true);

  const started = Date.now();
  const base = tempBase();
  sweepStale(base);
  for (let attempt = 1; ; attempt++) {
    try {
      const cp = await startOnce(binaries.value, crdDir.value, base, opts.extraApiserverArgs ?? []);
      log(`[control-plane] control plane ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${cp.server} (etcd ${cp.etcdEndpoint}, dir ${cp.dir})`);
      return cp;
    } catch (e) {
      // Free ports are picked then released; another process may take one in between (envtest has the same race).
      if (e instanceof ChildExitedError && e.portClash && attempt < 3) {
        log(`[control-plane] port clash, retrying (${attempt}/3)`);
        continue;
      }
      throw e;
    }
  }
}

async function startOnce(bin: Binaries, crdDir: string, base: string, extraApiserverArgs: readonly string[]): Promise<ControlPlane> {
  const dir = await mkdtemp(join(base, DIR_PREFIX));
  writeFileSync(join(dir, 'owner.pid'), String(process.pid));
  const children: Child[] = [];
  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      // The apiserver first: etcd going away under a running apiserver only produces noise.
      for (const c of [...children].reverse()) await stopChild(c);
      rmSync(dir, { recursive: true, force: true });
      live.delete(entry);
    })();
    return stopping;
  };
  const entry = { children, dir, stop };
  live.add(entry);

  try {
    const pkiDir = join(dir, 'pki');
    const [{ ca, serving }, [etcdClientPort, etcdPeerPort, apiPort]] = await Promise.all([
      createServerPki(pkiDir),
      Promise.all([freePort(), freePort(), freePort()]),
    ]);
    const server = `https://127.0.0.1:${apiPort}`;
    const [saKey, admin] = await Promise.all([
      createServiceAccountKey(pkiDir),
      createClientCert({ dir: pkiDir, stem: 'admin', caCertPath: ca.certPath, caKeyPath: ca.keyPath, name: 'admin', groups: ['system:masters'] }),
    ]);
    const kubeconfigPath = join(dir, 'admin.kubeconfig');
    writeFileSync(kubeconfigPath, await kubeconfigYaml({ server, caCertPath: ca.certPath, user: 'admin', client: admin }), { mode: 0o600 });

    // etcd
    const etcdEndpoint = `http://127.0.0.1:${etcdClientPort}`;
    const peer = `http://127.0.0.1:${etcdPeerPort}`;
    const etcdLogPath = join(dir, 'etcd.log');
    const etcd = spawnChild('etcd', bin.etcd, [
      '--name=cp', `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=${etcdEndpoint}`, `--advertise-client-urls=${etcdEndpoint}`,
      `--listen-peer-urls=${peer}`, `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=cp=${peer}`, '--initial-cluster-state=new',
      '--unsafe-no-fsync=true', '--log-level=warn',
    ], etcdLogPath);
    children.push(etcd);
    const timeout = startTimeoutMs();
    await pollUntil('etcd /health', timeout, children, async () => {
      const res = await fetch(`${etcdEndpoint}/health`, { signal: AbortSignal.timeout(2000) });
      return res.ok && /"health":\s*"true"/.test(await res.text());
    });

    // kube-apiserver
    const apiserverLogPath = join(dir, 'kube-apiserver.log');
    const apiserver = spawnChild('kube-apiserver', bin.kubeApiserver, [
      `--etcd-servers=${etcdEndpoint}`,
      '--bind-address=127.0.0.1', `--secure-port=${apiPort}`, '--advertise-address=127.0.0.1',
      '--endpoint-reconciler-type=none',
      `--cert-dir=${pkiDir}`, `--tls-cert-file=${serving.certPath}`, `--tls-private-key-file=${serving.keyPath}`,
      `--client-ca-file=${ca.certPath}`,
      '--authorization-mode=RBAC',
      `--service-account-issuer=${server}`,
      `--service-account-key-file=${saKey.publicKeyPath}`, `--service-account-signing-key-file=${saKey.privateKeyPath}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      // ServiceAccount: no controller creates the default ServiceAccounts. TaintNodesByCondition: it adds
      // node.kubernetes.io/not-ready:NoSchedule to every created Node and no node lifecycle controller ever removes
      // it; tests must see exactly the taints they write.
      '--disable-admission-plugins=ServiceAccount,TaintNodesByCondition', '--allow-privileged=true',
      '--profiling=false', '--v=1',
      ...extraApiserverArgs,
    ], apiserverLogPath);
    children.push(apiserver);
    const tls: Tls = { ca: await readFile(ca.certPath), cert: await readFile(admin.certPath), key: await readFile(admin.keyPath) };
    await pollUntil('kube-apiserver /readyz', timeout, children, async () => {
      const res = await httpsGet(`${server}/readyz`, tls);
      return res.status === 200;
    });
    // The default namespace is created by a bootstrap controller shortly after readiness.
    await pollUntil('the default namespace', timeout, children, async () => (await httpsGet(`${server}/api/v1/namespaces/default`, tls)).status === 200);

    await installCrds(kubeconfigPath, crdDir, tls, server, children, timeout);

    return {
      dir,
      server,
      kubeconfigPath,
      caCertPath: ca.certPath,
      caKeyPath: ca.keyPath,
      etcdEndpoint,
      kubectlPath: bin.kubectl,
      apiserverLogPath,
      etcdLogPath,
      mintUser: (name, groups) => mintClientKubeconfig({ dir: join(dir, 'users'), caCertPath: ca.certPath, caKeyPath: ca.keyPath, server, name, groups }),
      compactEtcd: async () => {
        await compactEtcdAt(etcdEndpoint);
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** Creates the CRDs, then waits until each is Established and its group version lists every resource. */
async function installCrds(kubeconfigPath: string, crdDir: string, tls: Tls, server: string, children: Child[], timeout: number): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const api = kc.makeApiClient(ApiextensionsV1Api);
  // client-node's loadAllYaml returns typed models; its serializer turns them back into the same JSON (checked for these files).
  const crds: V1CustomResourceDefinition[] = [];
  for (const f of CAPI_CRD_FILES) {
    for (const doc of loadAllYaml(await readFile(join(crdDir, f), 'utf8'))) if (doc) crds.push(doc as V1CustomResourceDefinition);
  }
  await Promise.all(crds.map((body) => api.createCustomResourceDefinition({ body })));
  const names = crds.map((c) => c.metadata?.name ?? '');
  await pollUntil('the Cluster API CRDs to be Established', timeout, children, async () => {
    const got = await Promise.all(names.map((name) => api.readCustomResourceDefinition({ name })));
    return got.every((crd) => crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True'));
  });
  // Established can precede discovery by a moment; wait until every v1beta2 resource is served.
  const byGroupVersion = new Map<string, string[]>();
  for (const crd of crds) {
    for (const v of crd.spec.versions.filter((x) => x.served)) {
      const gv = `${crd.spec.group}/${v.name}`;
      byGroupVersion.set(gv, [...(byGroupVersion.get(gv) ?? []), crd.spec.names.plural]);
    }
  }
  await pollUntil('discovery to list the Cluster API resources', timeout, children, async () => {
    for (const [gv, plurals] of byGroupVersion) {
      const res = await httpsGet(`${server}/apis/${gv}`, tls);
      if (res.status !== 200) return false;
      const served = new Set((JSON.parse(res.body) as { resources: { name: string }[] }).resources.map((r) => r.name));
      if (!plurals.every((p) => served.has(p))) return false;
    }
    return true;
  });
}
