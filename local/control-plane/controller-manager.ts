/**
 * kube-controller-manager (built from the same Kubernetes module as kube-apiserver, `build-assets.sh`) with only the
 * controllers that make NoExecute taints and disruption budgets real (issue 51):
 * - `taint-eviction-controller`: deletes the pods that do not tolerate a Node's NoExecute taints (at once, or after
 *   their `tolerationSeconds`); it does not consult PodDisruptionBudgets;
 * - `disruption-controller`: computes each PodDisruptionBudget's status (`disruptionsAllowed` from the pods' Ready
 *   condition), which the Eviction API (`pods/eviction`) enforces;
 * - `daemonset-controller`: inert without DaemonSets, it is here for a side effect the taint-eviction controller
 *   relies on. In v1.34.3 the taint-eviction controller lists a Node's pods through the shared pod informer's
 *   `spec.nodeName` index (`taint_eviction.go`, `getPodsAssignedToNode`) but never adds that index: the node-lifecycle
 *   and daemonset controllers do (`controller.AddPodNodeNameIndexer`). Alone, it logs "Failed to get pods assigned to
 *   node" on every Node taint change and evicts nothing until a pod changes. The node-lifecycle controller is not
 *   an option here: without kubelets it would find every Node unhealthy and taint it `node.kubernetes.io/unreachable`.
 *
 * It runs as `system:kube-controller-manager` (a client certificate from the API server's CA) with
 * `--use-service-account-credentials`, as kubeadm runs it: each controller gets its own ServiceAccount in
 * kube-system and the bootstrap RBAC of `system:controller:<name>`, so the RBAC is the real one. Loopback only, no
 * leader election, its serving certificate signed by the same CA (so `/healthz` is checked with it), log at the
 * default verbosity (the taint-eviction controller's "Deleting pod" lines are at that level).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { freePort, httpsGet, pollUntil, spawnChild, stopChild, type Child } from './children.ts';
import { createClientCert, createServingCert, kubeconfigYaml } from './pki.ts';

/** The controllers it runs, by their canonical 1.34 names (`kube-controller-manager --help`, `--controllers`). */
export const CONTROLLER_MANAGER_CONTROLLERS = ['taint-eviction-controller', 'disruption-controller', 'daemonset-controller'] as const;

/** Options of {@link startControllerManager}. */
export interface ControllerManagerOptions {
  readonly binary: string;
  /** `https://127.0.0.1:<port>` of the API server it works for. */
  readonly server: string;
  /** That API server's CA: signs the client and serving certificates. */
  readonly caCertPath: string;
  readonly caKeyPath: string;
  /** A folder for its kubeconfig, certificates and log (inside the control plane's folder). */
  readonly dir: string;
  /** The control plane's children: the process joins them, so that stopping the control plane stops it. */
  readonly children: Child[];
  readonly timeoutMs: number;
}

/** A running kube-controller-manager. */
export interface ControllerManager {
  readonly controllers: readonly string[];
  readonly pid: number | undefined;
  readonly logPath: string;
  /** `https://127.0.0.1:<port>` (`/healthz`; its certificate is signed by the API server's CA). */
  readonly healthEndpoint: string;
  /** SIGTERM to its process group (SIGKILL after 10 s). Idempotent. */
  stop(): Promise<void>;
}

/** Starts kube-controller-manager; resolves once `/healthz` answers 200 (every started controller's check included). */
export async function startControllerManager(o: ControllerManagerOptions): Promise<ControllerManager> {
  await mkdir(o.dir, { recursive: true, mode: 0o700 });
  const [client, serving, port] = await Promise.all([
    createClientCert({ dir: o.dir, stem: 'client', caCertPath: o.caCertPath, caKeyPath: o.caKeyPath, name: 'system:kube-controller-manager', groups: [] }),
    createServingCert({ dir: join(o.dir, 'serving'), caCertPath: o.caCertPath, caKeyPath: o.caKeyPath, commonName: 'kube-controller-manager' }),
    freePort(),
  ]);
  const kubeconfigPath = join(o.dir, 'kubeconfig');
  await writeFile(kubeconfigPath, await kubeconfigYaml({ server: o.server, caCertPath: o.caCertPath, user: 'system:kube-controller-manager', client }), { mode: 0o600 });
  const logPath = join(o.dir, 'kube-controller-manager.log');
  const child = spawnChild('kube-controller-manager', o.binary, [
    `--kubeconfig=${kubeconfigPath}`,
    `--controllers=${CONTROLLER_MANAGER_CONTROLLERS.join(',')}`,
    '--use-service-account-credentials=true',
    '--leader-elect=false',
    '--bind-address=127.0.0.1', `--secure-port=${port}`,
    // No --authentication-kubeconfig/--authorization-kubeconfig: only /healthz is used, which is always allowed, and
    // the delegated authentication would log an error a second for the request-header CA this API server lacks.
    `--tls-cert-file=${serving.certPath}`, `--tls-private-key-file=${serving.keyPath}`,
    '--profiling=false',
  ], logPath);
  o.children.push(child);
  const healthEndpoint = `https://127.0.0.1:${port}`;
  const tls = { ca: await readFile(o.caCertPath), cert: await readFile(client.certPath), key: await readFile(client.keyPath) };
  await pollUntil('kube-controller-manager /healthz', o.timeoutMs, [child], async () => (await httpsGet(`${healthEndpoint}/healthz`, tls)).status === 200);
  return {
    controllers: CONTROLLER_MANAGER_CONTROLLERS,
    pid: child.proc.pid,
    logPath,
    healthEndpoint,
    stop: () => stopChild(child),
  };
}
