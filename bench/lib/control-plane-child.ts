/**
 * Child process of {@link startControlPlaneProcess} (control-plane-process.ts): a local control plane
 * (`startControlPlane`: etcd, kube-apiserver, the Cluster API manager and the local infrastructure provider) in a
 * process of its own, as `npm run control-plane` runs it beside `npm start`, so that the provider's watches and writes
 * do not share an event loop with what the benchmark measures.
 *
 * IPC: its options arrive as the environment variable CONTROL_PLANE_OPTIONS (JSON: `extraApiserverArgs`, `capi`);
 * progress lines are sent as `{ log }`; once started it sends `{ ready: ControlPlaneFacts }`, or `{ failed: message }`
 * and exits 1. It answers `{ ask: 'workloadServers', id }` with `{ id, workloadServers }` (the workload API servers the
 * provider has started by then) and, on `'stop'`, stops the control plane and exits 0. It stops too when its parent
 * goes away (the IPC channel closes), so that no API server outlives the benchmark.
 */
import { startControlPlane, type ControlPlane, type StartOptions } from '#local/control-plane/control-plane.ts';
import type { ControlPlaneFacts, ControlPlaneRequest, WorkloadServerFacts } from './control-plane-process.ts';

const send = (message: unknown): void => {
  if (process.connected) process.send?.(message);
};

let cp: ControlPlane | undefined;
let stopWanted = false;
let stopping: Promise<void> | undefined;
/** Stops the control plane and exits; asked while it is still starting, it stops once started (below). */
function stop(code: number): void {
  stopWanted = true;
  if (cp) stopping ??= cp.stop().catch(() => undefined).then(() => process.exit(code));
}
process.on('disconnect', () => stop(0));

const workloadServers = (): WorkloadServerFacts[] =>
  (cp?.capi?.workloadServers ?? []).map((w) => ({ name: w.name, server: w.server, adminKubeconfigPath: w.adminKubeconfigPath, caCertPath: w.caCertPath, ...(w.auditLogPath ? { auditLogPath: w.auditLogPath } : {}) }));

process.on('message', (message: ControlPlaneRequest) => {
  if (message === 'stop') stop(0);
  else if (typeof message === 'object' && message.ask === 'workloadServers') send({ id: message.id, workloadServers: workloadServers() });
});

try {
  const options = JSON.parse(process.env['CONTROL_PLANE_OPTIONS'] ?? '{}') as Pick<StartOptions, 'extraApiserverArgs' | 'capi'>;
  cp = await startControlPlane({ ...options, log: (line) => send({ log: line }), handleSignals: false });
  const facts: ControlPlaneFacts = { server: cp.server, kubeconfigPath: cp.kubeconfigPath, caCertPath: cp.caCertPath, clusterApiVersion: cp.clusterApiVersion };
  if (stopWanted) stop(0);
  else send({ ready: facts });
} catch (error) {
  // startControlPlane stops what it started before it throws.
  send({ failed: error instanceof Error ? error.message : String(error) });
  process.exit(1);
}
