/**
 * `npm run control-plane`: starts etcd + kube-apiserver with the Cluster API CRDs in the foreground, prints the
 * admin kubeconfig path, and stops everything (and removes its files) on SIGINT/SIGTERM/SIGHUP.
 */
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

try {
  cp = await startControlPlane({ log: out, handleSignals: false });
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
  out('');
  out(`server: ${cp.server}   etcd: ${cp.etcdEndpoint}`);
  out(`logs:   ${cp.apiserverLogPath}, ${cp.etcdLogPath}`);
  out('Press Ctrl-C to stop (everything under the folder above is removed).');
  // Stay in the foreground until a signal arrives.
  const keepAlive = setInterval(() => undefined, 1 << 30);
  void keepAlive;
}
