/**
 * `npm run control-plane`: starts etcd + kube-apiserver with the Cluster API CRDs, the Cluster API core manager and
 * the local infrastructure provider in the foreground, prints the admin kubeconfig path, and stops everything (and
 * removes its files) on SIGINT/SIGTERM/SIGHUP.
 *
 *   --capi-feature-gates=MachineTaintPropagation=true   gates of the manager (ClusterTopology=true by default)
 *   --capi-namespace=<ns>                               the manager watches only this namespace
 *   --no-capi                                           a bare API server with the CRDs (no manager, no provider)
 *   --controller-manager                                kube-controller-manager with the taint-eviction and disruption
 *                                                       controllers (real NoExecute evictions and budget status)
 */
import { parseControlPlaneArgs } from './args.ts';
import { ControlPlaneUnavailableError, startControlPlane } from './control-plane.ts';
import type { ControlPlane } from './control-plane.ts';

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};

let cp: ControlPlane | undefined;
let stopping = false;

async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  out(`\n[control-plane] ${signal}: stopping`);
  await cp?.stop();
  out('[control-plane] stopped');
  process.exit(0);
}

for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => void shutdown(sig));

let capi: ReturnType<typeof parseControlPlaneArgs>;
// This command's own flag; the Cluster API flags are shared with npm start (args.ts).
const controllerManager = process.argv.includes('--controller-manager');
try {
  capi = parseControlPlaneArgs(process.argv.slice(2).filter((a) => a !== '--controller-manager'));
} catch (e) {
  process.stderr.write(`control-plane: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(2);
}

try {
  cp = await startControlPlane({ log: out, handleSignals: false, capi, controllerManager });
} catch (e) {
  if (e instanceof ControlPlaneUnavailableError) {
    process.stderr.write(`${e.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`[control-plane] failed to start: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
}
if (stopping) {
  await cp.stop(); // a signal arrived while starting
} else {
  const kubectl = cp.kubectlPath ?? 'kubectl';
  out(`kubeconfig: ${cp.kubeconfigPath}`);
  out('');
  out('Use it with kubectl (the build matching the server):');
  out(`  export KUBECONFIG=${cp.kubeconfigPath}`);
  out(`  ${kubectl} get --raw /readyz`);
  out(`  ${kubectl} get crds`);
  if (cp.capi) {
    out(`  ${kubectl} apply -f local/examples/cluster-annotations.yaml   # a Cluster whose MachineDeployment makes Machines and Nodes`);
    out(`  ${kubectl} get clusters,machinedeployments,machines,nodes -A`);
  }
  out('');
  out(`server: ${cp.server}   etcd: ${cp.etcdEndpoint}`);
  out(`logs:   ${cp.apiserverLogPath}, ${cp.etcdLogPath}${cp.capi ? `, ${cp.capi.manager.logPath}` : ''}${cp.controllerManager ? `, ${cp.controllerManager.logPath}` : ''}`);
  out('Press Ctrl-C to stop (everything under the folder above is removed).');
  // Stay in the foreground until a signal arrives.
  const keepAlive = setInterval(() => undefined, 1 << 30);
  void keepAlive;
}
