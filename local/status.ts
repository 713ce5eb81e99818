/**
 * `npm run status`: for every Machine/Node pair of the cluster in KUBECONFIG, what the Machine
 * declares, what the Node has, who owns each Node taint (tracked, initialization-only, startup gate,
 * foreign) and whether the pair is in sync. `-- --capi` (or CLUSTER_MODE=capi) reads Nodes from each
 * workload cluster through its `<cluster>-kubeconfig` Secret; MACHINE_NAMESPACE narrows the Machines.
 * Exit code: 0 all in sync (or deliberately left alone), 3 some pair out of sync, 1/2 on errors.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { describeApiError } from '#shared/adapters/kubernetes/api-errors.ts';
import { processEnv } from '#shared/config/env.ts';
import { SyncState } from '#shared/domain/taint-status.ts';
import { ConfigError } from '#shared/errors.ts';
import { readTaintStatuses } from './cluster-status.ts';
import { loadLocalConfig } from './local-config.ts';
import { formatStatusTable, summarizeStates } from './status-format.ts';

let config;
try {
  config = loadLocalConfig(processEnv(), process.argv.slice(2));
} catch (e) {
  process.stderr.write(`${e instanceof ConfigError ? e.message : String(e)}\n`);
  process.exit(2);
}
if (!config.kubeconfig) {
  process.stderr.write('KUBECONFIG is not set: point it at the cluster to inspect (npm start prints the export line for the local control plane).\n');
  process.exit(2);
}
const kc = new KubeConfig();
kc.loadFromDefault();
try {
  const statuses = await readTaintStatuses({
    kubeConfig: kc,
    mode: config.mode,
    ...(config.machineNamespace ? { machineNamespace: config.machineNamespace } : {}),
    ...(config.startupTaint ? { startupTaint: config.startupTaint } : {}),
    specTaintsOwner: config.specTaintsOwner,
  });
  process.stdout.write(`Cluster ${kc.getCurrentCluster()?.server ?? '?'} (mode ${config.mode})\n\n`);
  for (const line of formatStatusTable(statuses)) process.stdout.write(`${line}\n`);
  if (statuses.length > 0) process.stdout.write(`\n${summarizeStates(statuses)}\n`);
  process.exit(statuses.some((s) => s.state === SyncState.outOfSync || s.state === SyncState.nodeMissing) ? 3 : 0);
} catch (e) {
  process.stderr.write(`status failed: ${describeApiError(e)}\n`);
  process.exit(1);
}
