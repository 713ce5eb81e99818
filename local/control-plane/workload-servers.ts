/**
 * Workload clusters of the local control plane: extra kube-apiservers, each with its own certificate authority,
 * serving certificate and service-account keys, sharing the control plane's etcd under their own key prefix
 * (`--etcd-prefix=/workload/<name>`), so K clusters cost K apiserver processes and no more etcd. Each has its own
 * Nodes, RBAC and identities. The local infrastructure provider registers a Cluster's Nodes in one of them and writes
 * the Cluster's `<name>-kubeconfig` Secret for it, as a real provider does.
 *
 * The kubeconfig handed out is a client certificate of the user `capi-admin` (no `system:masters` group), bound to
 * `cluster-admin` by a ClusterRoleBinding, so that a credential can be revoked (`revokeUser`) — which rotation tests need.
 * `stop()` / `start()` take the API server away and bring it back on the same port with the same certificates (an
 * outage as a client sees it). `pause()` / `resume()` make it hang instead (SIGSTOP / SIGCONT): the kernel still
 * accepts connections on its port, but nothing answers — a slow or wedged API server as a client sees it, the failure
 * that only deadlines catch.
 */
import { writeFileSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { kubeApiserverArgs } from './apiserver-args.ts';
import { freePort, httpsGet, killGroup, pollUntil, spawnChild, stopChild, type Child, type Tls } from './children.ts';
import { startControllerManager, type ControllerManager } from './controller-manager.ts';
import { createClientCert, createServerPki, createServiceAccountKey, kubeconfigYaml, mintClientKubeconfig } from './pki.ts';

/** One workload cluster's API server. */
export interface WorkloadApiServer {
  /** `wc-1`, `wc-2`, … */
  readonly name: string;
  /** `https://127.0.0.1:<port>` (the same across stop/start). */
  readonly server: string;
  /** Kubeconfig (YAML) of `capi-admin` (cluster-admin through RBAC, revocable): what the Cluster's Secret holds. */
  readonly kubeconfigYaml: string;
  /** Kubeconfig path of the unrevocable `system:masters` admin (for tests and the provider). */
  readonly adminKubeconfigPath: string;
  /**
   * The API server's audit log (JSON lines, one per request at stage ResponseComplete, level Metadata: verb, user,
   * user agent, object), when started with `audit`; the benchmarks count requests per client there.
   */
  readonly auditLogPath?: string;
  readonly caCertPath: string;
  /** Its kube-controller-manager (taint-eviction and disruption controllers), when started with `controllerManager`. */
  readonly controllerManager?: ControllerManager;
  /**
   * Mints a new cluster-admin user of this API server (a client certificate bound to `cluster-admin`): a rotated
   * credential. Returns its kubeconfig (YAML).
   */
  mintAdmin(name: string): Promise<string>;
  /** Removes the ClusterRoleBinding of a user minted by `mintAdmin` (or `capi-admin`): its credential stops working. */
  revokeUser(name: string): Promise<void>;
  /** True while the API server process runs. */
  running(): boolean;
  /** Stops the API server process (SIGTERM). Idempotent. */
  stop(): Promise<void>;
  /** Starts it again (same port, certificates and data); resolves once `/readyz` answers. */
  start(): Promise<void>;
  /** Freezes the API server process (SIGSTOP): connections are accepted by the kernel, never answered. */
  pause(): void;
  /** Lets a paused API server run again (SIGCONT); it answers what waited. */
  resume(): void;
}

export interface WorkloadServerOptions {
  readonly name: string;
  /** A folder of the control plane (removed with it). */
  readonly dir: string;
  readonly kubeApiserver: string;
  readonly etcdEndpoint: string;
  /** The control plane's children: a started process joins them, so that stopping the control plane stops it. */
  readonly children: Child[];
  readonly timeoutMs: number;
  /** Write an audit log of every request (see WorkloadApiServer.auditLogPath); off by default. */
  readonly audit?: boolean;
  /** A kube-controller-manager binary: run it against this API server (`controller-manager.ts`); default none. */
  readonly controllerManager?: string;
}

/** Audit policy of a workload API server started with `audit`: every request once, with its metadata only. */
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
`;

/** Starts one workload API server; resolves once it is ready and `capi-admin` is bound. */
export async function startWorkloadApiServer(o: WorkloadServerOptions): Promise<WorkloadApiServer> {
  const dir = join(o.dir, 'workload', o.name);
  const pkiDir = join(dir, 'pki');
  await mkdir(pkiDir, { recursive: true });
  const [{ ca, serving }, port, saKey] = await Promise.all([createServerPki(pkiDir), freePort(), createServiceAccountKey(pkiDir)]);
  const server = `https://127.0.0.1:${port}`;
  const admin = await createClientCert({ dir: pkiDir, stem: 'admin', caCertPath: ca.certPath, caKeyPath: ca.keyPath, name: 'admin', groups: ['system:masters'] });
  const adminKubeconfigPath = join(dir, 'admin.kubeconfig');
  writeFileSync(adminKubeconfigPath, await kubeconfigYaml({ server, caCertPath: ca.certPath, user: 'admin', client: admin }), { mode: 0o600 });
  const tls: Tls = { ca: await readFile(ca.certPath), cert: await readFile(admin.certPath), key: await readFile(admin.keyPath) };
  const auditLogPath = o.audit ? join(dir, 'audit.log') : undefined;
  if (auditLogPath) writeFileSync(join(dir, 'audit-policy.yaml'), AUDIT_POLICY);
  const args = [
    ...kubeApiserverArgs({ etcdEndpoint: o.etcdEndpoint, etcdPrefix: `/workload/${o.name}`, port, pkiDir, serving, caCertPath: ca.certPath, serviceAccountKey: saKey }),
    ...(auditLogPath ? [`--audit-policy-file=${join(dir, 'audit-policy.yaml')}`, `--audit-log-path=${auditLogPath}`, '--audit-log-format=json', '--audit-log-mode=blocking'] : []),
  ];
  let child: Child | undefined;
  let generation = 0;
  const start = async (): Promise<void> => {
    if (child?.alive) return;
    child = spawnChild(`kube-apiserver ${o.name}`, o.kubeApiserver, args, join(dir, `kube-apiserver-${++generation}.log`));
    o.children.push(child);
    await pollUntil(`kube-apiserver ${o.name} /readyz`, o.timeoutMs, [child], async () => (await httpsGet(`${server}/readyz`, tls)).status === 200);
  };
  await start();

  const adminKc = new KubeConfig();
  adminKc.loadFromFile(adminKubeconfigPath);
  const rbac = adminKc.makeApiClient(RbacAuthorizationV1Api);
  const mintAdmin = async (user: string): Promise<string> => {
    const path = await mintClientKubeconfig({ dir: join(dir, 'users'), caCertPath: ca.certPath, caKeyPath: ca.keyPath, server, name: user, groups: [] });
    await rbac.createClusterRoleBinding({
      body: { metadata: { name: `local-admin-${user}` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }] },
    });
    return readFile(path, 'utf8');
  };
  // The bootstrap policy (cluster-admin) appears shortly after readiness.
  await pollUntil(`the cluster-admin ClusterRole of ${o.name}`, o.timeoutMs, [child as Child], async () => (await httpsGet(`${server}/apis/rbac.authorization.k8s.io/v1/clusterroles/cluster-admin`, tls)).status === 200);
  const kubeconfig = await mintAdmin('capi-admin');
  const controllerManager = o.controllerManager
    ? await startControllerManager({ binary: o.controllerManager, server, caCertPath: ca.certPath, caKeyPath: ca.keyPath, dir: join(dir, 'kube-controller-manager'), children: o.children, timeoutMs: o.timeoutMs })
    : undefined;

  return {
    name: o.name,
    server,
    kubeconfigYaml: kubeconfig,
    adminKubeconfigPath,
    ...(auditLogPath ? { auditLogPath } : {}),
    caCertPath: ca.certPath,
    ...(controllerManager ? { controllerManager } : {}),
    mintAdmin,
    revokeUser: async (user) => {
      await rbac.deleteClusterRoleBinding({ name: `local-admin-${user}` });
    },
    running: () => child?.alive === true,
    stop: async () => {
      if (child) await stopChild(child);
    },
    start,
    pause: () => {
      if (!child?.alive) throw new Error(`kube-apiserver ${o.name} is not running`);
      killGroup(child, 'SIGSTOP');
    },
    resume: () => {
      if (child) killGroup(child, 'SIGCONT');
    },
  };
}
