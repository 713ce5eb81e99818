/**
 * A real Kubernetes control plane on loopback: etcd + kube-apiserver (RBAC on, client-certificate authentication,
 * a generated CA), with the Cluster API CRDs installed and established. The envtest model, in TypeScript. With
 * `capi` it also runs the upstream Cluster API core manager (its webhooks registered with the API server) and the
 * local infrastructure provider (`local/infrastructure/`), which turns LocalMachines into Nodes.
 *
 * Nothing is left behind: children run in their own process group under `setpriv --pdeathsig KILL` (they die with
 * this process even on SIGKILL), they are killed on stop, on process exit and on SIGINT/SIGTERM/SIGHUP, and the
 * temporary folder is removed. Folders of earlier runs whose owner died are swept at the next start.
 */
import { readdirSync, readFileSync, rmSync, writeFileSync, accessSync, constants as fsConstants } from 'node:fs';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, KubeConfig, loadAllYaml } from '@kubernetes/client-node';
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import { LocalProvider, type NodeCluster } from '../infrastructure/provider.ts';
import { startWorkloadApiServer, type WorkloadApiServer } from './workload-servers.ts';
import { kubeApiserverArgs } from './apiserver-args.ts';
import { LOCAL_PROVIDER_CRDS } from '../infrastructure/crds.ts';
import { isAlive, resolveBinaries, resolveClusterApiManager, resolveClusterApiManifests, resolveControllerManager } from './assets.ts';
import type { Binaries, ClusterApiManifests } from './assets.ts';
import { startCapiManager, type CapiManager, type FeatureGates } from './capi-manager.ts';
import { ChildExitedError, freePort, httpsGet, killGroup, pollUntil, spawnChild, stopChild, type Child, type Tls } from './children.ts';
import { startControllerManager, type ControllerManager } from './controller-manager.ts';
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
  /** The Cluster API version whose CRDs are installed (and whose manager runs, with `capi`). */
  readonly clusterApiVersion: string;
  /** The Cluster API manager and the local infrastructure provider; undefined for a bare control plane (`capi: false`). */
  readonly capi: ClusterApiRuntime | undefined;
  /**
   * kube-controller-manager with the taint-eviction, disruption (and daemonset) controllers, when started with
   * `controllerManager`; undefined otherwise. Workload API servers get one each (`WorkloadApiServer.controllerManager`).
   */
  readonly controllerManager: ControllerManager | undefined;
  /**
   * Stops the local provider and the Cluster API manager (webhook registrations removed first), then kube-apiserver
   * and etcd (SIGTERM, SIGKILL after 10 s), and removes `dir`. Idempotent.
   */
  stop(): Promise<void>;
}

/** Cluster API options of {@link startControlPlane}. */
export interface CapiOptions {
  /** Gates on top of the defaults (`ClusterTopology=true`; `MachineTaintPropagation` stays off unless set here). */
  readonly featureGates?: FeatureGates;
  /** Restrict the manager (and its webhooks) to one namespace; default all namespaces. */
  readonly namespace?: string;
  /**
   * Workload clusters with API servers of their own (default 0: every Cluster is self-hosted, its Nodes in the
   * management API server). With K > 0, the first K Clusters the local provider sees get one each (`wc-1` … `wc-K`,
   * own CA, sharing etcd under their own prefix); later ones are self-hosted.
   */
  readonly workloadClusters?: number;
  /** The workload API servers write an audit log of every request (`WorkloadApiServer.auditLogPath`); default off. */
  readonly auditWorkloadServers?: boolean;
}

/** The Cluster API side of a running control plane. */
export interface ClusterApiRuntime {
  /** The running manager (changes on restart). */
  readonly manager: CapiManager;
  /** The local infrastructure provider (LocalCluster, LocalMachine, …), running in this process. */
  readonly provider: LocalProvider;
  /** The workload API servers (`workloadClusters`), in order. */
  readonly workloadServers: readonly WorkloadApiServer[];
  /** The workload API server holding a Cluster's Nodes; undefined for a self-hosted Cluster. */
  workloadServerOf(cluster: { readonly namespace: string; readonly name: string }): WorkloadApiServer | undefined;
  /** Stops the manager (webhooks first) and starts it again with other gates or namespace; the provider keeps running. */
  restartManager(options?: CapiOptions): Promise<CapiManager>;
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
  /**
   * Run the Cluster API core manager and the local infrastructure provider (default false: a bare API server with
   * the Cluster API CRDs, which is what tests writing bare Machines need).
   */
  readonly capi?: CapiOptions | false;
  /**
   * Cluster API release whose CRDs (and manager) to run, e.g. `v1.10.9` (default: `CAPI_VERSION`, else the pinned
   * default). The version matrix starts one control plane per release with it.
   */
  readonly clusterApiVersion?: string;
  /**
   * Run kube-controller-manager with the taint-eviction and disruption controllers (`controller-manager.ts`) against
   * this API server and, with `capi.workloadClusters`, against each workload API server (where those Clusters'
   * Nodes live): real NoExecute evictions and real PodDisruptionBudget status. Default false (no controller deletes
   * pods behind a test's back).
   */
  readonly controllerManager?: boolean;
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

/** Live control planes of this process, for the exit and signal handlers. */
const live = new Set<{ children: Child[]; dir: string; stop: () => Promise<void> }>();
let handlersInstalled = false;

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
  // An explicit release ignores the overrides that name one release's files (a manager binary, an unpacked module).
  const env = opts.clusterApiVersion ? { ...process.env, CAPI_VERSION: opts.clusterApiVersion, TEST_ASSET_CLUSTER_API_MANAGER: '', CAPI_MODULE_DIR: '' } : process.env;
  const manifests = resolveClusterApiManifests(env);
  if (!manifests.available) throw new ControlPlaneUnavailableError(manifests.reason);
  let controllerManagerBinary: string | undefined;
  if (opts.controllerManager) {
    const kcm = await resolveControllerManager({ build: opts.build ?? true, log, env });
    if (!kcm.available) throw new ControlPlaneUnavailableError(kcm.reason);
    controllerManagerBinary = kcm.value;
  }
  let managerBinary: string | undefined;
  if (opts.capi) {
    const manager = await resolveClusterApiManager({ build: opts.build ?? true, log, env });
    if (!manager.available) throw new ControlPlaneUnavailableError(manager.reason);
    managerBinary = manager.value;
  }
  installProcessHandlers(opts.handleSignals ?? true);

  const started = Date.now();
  const base = tempBase();
  sweepStale(base);
  for (let attempt = 1; ; attempt++) {
    try {
      let cp = await startOnce(binaries.value, manifests.value, base, opts.extraApiserverArgs ?? []);
      const kubeApiserver = binaries.value.kubeApiserver;
      if (controllerManagerBinary) {
        try {
          const kcmStarted = Date.now();
          const controllerManager = await startControllerManager({ binary: controllerManagerBinary, server: cp.server, caCertPath: cp.caCertPath, caKeyPath: cp.caKeyPath, dir: join(cp.dir, 'kube-controller-manager'), children: childrenByDir.get(cp.dir) ?? [], timeoutMs: startTimeoutMs() });
          log(`[control-plane] kube-controller-manager (${controllerManager.controllers.join(', ')}) ready in ${((Date.now() - kcmStarted) / 1000).toFixed(1)} s (log ${controllerManager.logPath})`);
          cp = { ...cp, controllerManager };
        } catch (e) {
          await cp.stop();
          throw e;
        }
      }
      log(`[control-plane] control plane ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${cp.server} (etcd ${cp.etcdEndpoint}, dir ${cp.dir})`);
      if (!opts.capi || !managerBinary) return cp;
      try {
        const capiStarted = Date.now();
        const capi = await startClusterApi(cp, managerBinary, manifests.value, opts.capi, log, kubeApiserver, controllerManagerBinary);
        const gates = Object.entries(capi.manager.featureGates).map(([k, v]) => `${k}=${String(v)}`).join(',');
        log(`[control-plane] Cluster API ${manifests.value.version} manager and local provider ready in ${((Date.now() - capiStarted) / 1000).toFixed(1)} s (feature gates ${gates}; ${capi.manager.namespace ? `namespace ${capi.manager.namespace}` : 'all namespaces'}; log ${capi.manager.logPath})`);
        return withCapi(cp, capi);
      } catch (e) {
        await cp.stop();
        throw e;
      }
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

/** Per control plane: its children (for the Cluster API manager to join) by `dir`. */
const childrenByDir = new Map<string, Child[]>();

/** Starts the manager, then the local provider (CRDs installed, informers synced); `restartManager` swaps the manager. */
async function startClusterApi(cp: ControlPlane, binary: string, manifests: ClusterApiManifests, options: CapiOptions, log: (line: string) => void, kubeApiserver: string, controllerManager: string | undefined): Promise<ClusterApiRuntime> {
  const children = childrenByDir.get(cp.dir);
  if (!children) throw new Error(`control plane ${cp.dir} is not running`);
  const start = (o: CapiOptions): Promise<CapiManager> =>
    startCapiManager(
      {
        binary,
        kubeconfigPath: cp.kubeconfigPath,
        dir: cp.dir,
        caCertPath: cp.caCertPath,
        caKeyPath: cp.caKeyPath,
        webhookManifest: manifests.webhookManifest,
        featureGates: o.featureGates ?? {},
        ...(o.namespace ? { namespace: o.namespace } : {}),
        timeoutMs: startTimeoutMs(),
      },
      children,
    );
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfigPath);
  const pki = join(cp.dir, 'pki');
  const tls: Tls = { ca: await readFile(cp.caCertPath), cert: await readFile(join(pki, 'admin.crt')), key: await readFile(join(pki, 'admin.key')) };
  await installCrdObjects(kc, LOCAL_PROVIDER_CRDS, children, startTimeoutMs(), { tls, server: cp.server });
  const workloadServers = await Promise.all(
    Array.from({ length: options.workloadClusters ?? 0 }, (_, i) =>
      startWorkloadApiServer({ name: `wc-${i + 1}`, dir: cp.dir, kubeApiserver, etcdEndpoint: cp.etcdEndpoint, children, timeoutMs: startTimeoutMs(), ...(options.auditWorkloadServers ? { audit: true } : {}), ...(controllerManager ? { controllerManager } : {}) }),
    ),
  );
  if (workloadServers.length > 0) log(`[control-plane] workload API servers: ${workloadServers.map((w) => `${w.name} ${w.server}`).join(', ')}`);
  // The first K Clusters seen get a workload API server each, in order; later ones are self-hosted.
  const assigned = new Map<string, WorkloadApiServer>();
  const workloadServerOf = (c: { readonly namespace: string; readonly name: string }): WorkloadApiServer | undefined => {
    const key = `${c.namespace}/${c.name}`;
    const known = assigned.get(key);
    if (known || assigned.size >= workloadServers.length) return known;
    const next = workloadServers[assigned.size] as WorkloadApiServer;
    assigned.set(key, next);
    return next;
  };
  const selfHosted: NodeCluster = { kubeConfig: kc, kubeconfigYaml: await readFile(cp.kubeconfigPath, 'utf8'), server: cp.server };
  const nodeClusters = new Map<string, NodeCluster>();
  const nodeClusterFor = (c: { readonly namespace: string; readonly name: string }): NodeCluster => {
    const w = workloadServerOf(c);
    if (!w) return selfHosted;
    let target = nodeClusters.get(w.name);
    if (!target) {
      const wkc = new KubeConfig();
      wkc.loadFromFile(w.adminKubeconfigPath);
      target = { kubeConfig: wkc, kubeconfigYaml: w.kubeconfigYaml, server: w.server };
      nodeClusters.set(w.name, target);
    }
    return target;
  };
  let manager = await start(options);
  const provider = new LocalProvider({
    kubeConfig: kc,
    nodeClusterFor,
    ...(options.namespace ? { namespace: options.namespace } : {}),
    log,
  });
  try {
    await provider.start();
  } catch (e) {
    await manager.stop();
    throw e;
  }
  return {
    get manager() {
      return manager;
    },
    provider,
    workloadServers,
    workloadServerOf: (c) => assigned.get(`${c.namespace}/${c.name}`),
    async restartManager(o: CapiOptions = {}) {
      await manager.stop();
      manager = await start({ featureGates: o.featureGates ?? manager.featureGates, ...(o.namespace ?? manager.namespace ? { namespace: o.namespace ?? manager.namespace } : {}) });
      return manager;
    },
  };
}

/** The control plane with its Cluster API side, stopped first. */
function withCapi(cp: ControlPlane, capi: ClusterApiRuntime): ControlPlane {
  let stopping: Promise<void> | undefined;
  return {
    ...cp,
    capi,
    stop: () => {
      stopping ??= (async () => {
        await capi.provider.stop();
        await capi.manager.stop();
        await cp.stop();
      })();
      return stopping;
    },
  };
}

async function startOnce(bin: Binaries, manifests: ClusterApiManifests, base: string, extraApiserverArgs: readonly string[]): Promise<ControlPlane> {
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
      childrenByDir.delete(dir);
    })();
    return stopping;
  };
  const entry = { children, dir, stop };
  live.add(entry);
  childrenByDir.set(dir, children);

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
    const apiserver = spawnChild(
      'kube-apiserver',
      bin.kubeApiserver,
      [...kubeApiserverArgs({ etcdEndpoint, port: apiPort, pkiDir, serving, caCertPath: ca.certPath, serviceAccountKey: saKey }), ...extraApiserverArgs],
      apiserverLogPath,
    );
    children.push(apiserver);
    const tls: Tls = { ca: await readFile(ca.certPath), cert: await readFile(admin.certPath), key: await readFile(admin.keyPath) };
    await pollUntil('kube-apiserver /readyz', timeout, children, async () => {
      const res = await httpsGet(`${server}/readyz`, tls);
      return res.status === 200;
    });
    // The default namespace is created by a bootstrap controller shortly after readiness.
    await pollUntil('the default namespace', timeout, children, async () => (await httpsGet(`${server}/api/v1/namespaces/default`, tls)).status === 200);

    await installCrds(kubeconfigPath, manifests, tls, server, children, timeout);

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
      clusterApiVersion: manifests.version,
      capi: undefined,
      controllerManager: undefined,
      stop,
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** Creates every Cluster API CRD of the module, then waits until each is Established and served by discovery. */
async function installCrds(kubeconfigPath: string, manifests: ClusterApiManifests, tls: Tls, server: string, children: Child[], timeout: number): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  // client-node's loadAllYaml returns typed models; its serializer turns them back into the same JSON (checked for these files).
  const crds: V1CustomResourceDefinition[] = [];
  for (const f of manifests.crdFiles) {
    for (const doc of loadAllYaml(await readFile(join(manifests.crdDir, f), 'utf8'))) if (doc) crds.push(doc as V1CustomResourceDefinition);
  }
  await installCrdObjects(kc, crds, children, timeout, { tls, server });
}

/**
 * Creates CRDs, waits until each is Established, then (with `discovery`) until every served group version lists
 * its resources: Established can precede discovery by a moment.
 */
export async function installCrdObjects(
  kc: KubeConfig,
  crds: readonly V1CustomResourceDefinition[],
  children: Child[],
  timeout: number,
  discovery?: { tls: Tls; server: string },
): Promise<void> {
  const api = kc.makeApiClient(ApiextensionsV1Api);
  await Promise.all(crds.map((body) => api.createCustomResourceDefinition({ body })));
  const names = crds.map((c) => c.metadata?.name ?? '');
  await pollUntil('the CRDs to be Established', timeout, children, async () => {
    const got = await Promise.all(names.map((name) => api.readCustomResourceDefinition({ name })));
    return got.every((crd) => crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True'));
  });
  if (!discovery) return;
  const byGroupVersion = new Map<string, string[]>();
  for (const crd of crds) {
    for (const v of crd.spec.versions.filter((x) => x.served)) {
      const gv = `${crd.spec.group}/${v.name}`;
      byGroupVersion.set(gv, [...(byGroupVersion.get(gv) ?? []), crd.spec.names.plural]);
    }
  }
  await pollUntil('discovery to list the new resources', timeout, children, async () => {
    for (const [gv, plurals] of byGroupVersion) {
      const res = await httpsGet(`${discovery.server}/apis/${gv}`, discovery.tls);
      if (res.status !== 200) return false;
      const served = new Set((JSON.parse(res.body) as { resources: { name: string }[] }).resources.map((r) => r.name));
      if (!plurals.every((p) => served.has(p))) return false;
    }
    return true;
  });
}
