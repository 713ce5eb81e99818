/**
 * `npm run status -- [MACHINE] [--kubeconfig f] [--context c] [-n ns] [-o table|wide|json|yaml] [--capi] [--pods]`: for
 * every Machine/Node pair (or one Machine), what the Machine declares, what the Node has, who owns each Node taint,
 * the pods a NoExecute taint about to be added (or previewed) would evict, and whether the pair is in sync, as decided by the reconcile function's own planner (local/taint-status.ts). Reads only.
 * Kubeconfig: --kubeconfig, else KUBECONFIG, else ~/.kube/config. `--help` lists everything (local/status-args.ts).
 * Exit code: 0 all in sync (or deliberately left alone), 3 some pair out of sync or its Node missing, 4 some workload
 * cluster's Nodes could not be listed (each such cluster is named once, with the reason), 1 the management cluster
 * could not be read or the Machine does not exist, 2 bad arguments or no kubeconfig.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { dumpYaml, KubeConfig } from '@kubernetes/client-node';
import { describeApiError } from '#shared/adapters/kubernetes/api-errors.ts';
import { identifyAs } from '#shared/adapters/kubernetes/user-agent.ts';
import { processEnv } from '#shared/config/env.ts';
import { loadReconcileBehaviour } from '#shared/config/reconcile-config.ts';
import { ConfigError } from '#shared/errors.ts';
import { MachineNotFoundError, readStatusViews } from './cluster-status.ts';
import { formatAutoscalerRows, readAutoscalerStatuses } from './autoscaler-status.ts';
import { OutputFormat, parseStatusArgs, STATUS_USAGE, type StatusArgs } from './status-args.ts';
import { formatNoExecutePreview, formatStatusDetail, formatStatusRows, formatUnreachableClusters, statusExitCode, summarizeStates, toStatusDocument, unreachableClustersOf } from './status-format.ts';

const fail = (code: number, message: string): never => {
  process.stderr.write(`${message}\n`);
  process.exit(code);
};

let args: StatusArgs;
let behaviour: ReturnType<typeof loadReconcileBehaviour>;
try {
  args = parseStatusArgs(process.argv.slice(2), processEnv());
  behaviour = loadReconcileBehaviour(processEnv());
} catch (e) {
  fail(2, `error: ${e instanceof ConfigError ? e.message : String(e)}`);
  throw e;
}
if (args.help) {
  process.stdout.write(`${STATUS_USAGE}\n`);
  process.exit(0);
}

identifyAs('status', 'local');
// kubectl's order: --kubeconfig, then KUBECONFIG (a list of files), then ~/.kube/config. Never an in-cluster guess.
const kc = new KubeConfig();
const defaultFile = join(homedir(), '.kube', 'config');
const envKubeconfig = processEnv()['KUBECONFIG']?.trim();
let source: string;
try {
  if (args.kubeconfig !== undefined) {
    if (!existsSync(args.kubeconfig)) fail(2, `error: --kubeconfig ${args.kubeconfig}: no such file`);
    kc.loadFromFile(args.kubeconfig);
    source = args.kubeconfig;
  } else if (envKubeconfig) {
    kc.loadFromDefault();
    source = `KUBECONFIG=${envKubeconfig}`;
  } else if (existsSync(defaultFile)) {
    kc.loadFromFile(defaultFile);
    source = '~/.kube/config';
  } else {
    fail(2, 'error: no kubeconfig: KUBECONFIG is not set and ~/.kube/config does not exist. Pass --kubeconfig <file>, or run npm start (it prints the export line of its local control plane).');
    throw new Error('unreachable');
  }
} catch (e) {
  fail(2, `error: cannot read the kubeconfig: ${e instanceof Error ? e.message : String(e)}`);
  throw e;
}
if (args.context !== undefined) {
  if (!kc.getContextObject(args.context)) {
    fail(2, `error: context ${JSON.stringify(args.context)} not found in ${source} (contexts: ${kc.getContexts().map((c) => c.name).join(', ') || 'none'})`);
  }
  kc.setCurrentContext(args.context);
}
const contextName = kc.getCurrentContext();
const namespace = args.namespace ?? (args.machine !== undefined ? (kc.getContextObject(contextName)?.namespace ?? 'default') : undefined);

/** The autoscaler node groups of the namespace (all namespaces without one), docs/autoscaler.md. */
function autoscalerRows(): ReturnType<typeof readAutoscalerStatuses> {
  return readAutoscalerStatuses({ kubeConfig: kc, ...(namespace !== undefined ? { namespace } : {}), ...(behaviour.startupTaint ? { startupTaint: behaviour.startupTaint } : {}) });
}

/** The list document with an `autoscalerNodeGroups` list when there is any node group (a single Machine's: unchanged). */
async function withAutoscaler(doc: unknown, single: boolean): Promise<unknown> {
  if (single) return doc;
  const rows = await autoscalerRows();
  return rows.length === 0 ? doc : { ...(doc as Record<string, unknown>), autoscalerNodeGroups: rows };
}

try {
  const views = await readStatusViews({
    kubeConfig: kc,
    mode: args.mode,
    ...(namespace !== undefined ? { machineNamespace: namespace } : {}),
    ...(args.machine !== undefined ? { machineName: args.machine } : {}),
    ...(behaviour.startupTaint ? { startupTaint: behaviour.startupTaint } : {}),
    specTaintsOwner: behaviour.specTaintsOwner,
  });
  const statuses = views.map((v) => v.status);
  const single = args.machine !== undefined;
  switch (args.output) {
    case OutputFormat.Json:
      process.stdout.write(`${JSON.stringify(await withAutoscaler(toStatusDocument(views, single), single), null, 2)}\n`);
      break;
    case OutputFormat.Yaml:
      process.stdout.write(dumpYaml(await withAutoscaler(toStatusDocument(views, single), single)));
      break;
    default: {
      process.stdout.write(`Context ${contextName || '(none)'}, cluster ${kc.getCurrentCluster()?.server ?? '?'} (mode ${args.mode})\n\n`);
      const lines = single && views[0] ? formatStatusDetail(views[0].status, views[0].overrides) : formatStatusRows(statuses, args.output === OutputFormat.Wide);
      for (const line of lines) process.stdout.write(`${line}\n`);
      if (statuses.length > 1) process.stdout.write(`\n${summarizeStates(statuses)}\n`);
      // NoExecute taints about to be added or previewed: the pods they would evict (docs/noexecute-preview.md).
      const preview = single ? [] : formatNoExecutePreview(statuses, args.pods);
      if (preview.length > 0) process.stdout.write(`\n${preview.join('\n')}\n`);
      const unreachable = formatUnreachableClusters(unreachableClustersOf(statuses));
      if (unreachable.length > 0) process.stdout.write(`\n${unreachable.join('\n')}\n`);
      // Scale from zero: the taints the cluster-autoscaler assumes for a new Node of each node group (docs/autoscaler.md).
      if (!single) {
        const autoscaler = formatAutoscalerRows(await autoscalerRows());
        if (autoscaler.length > 0) process.stdout.write(`\n${autoscaler.join('\n')}\n`);
      }
    }
  }
  process.exit(statusExitCode(statuses));
} catch (e) {
  fail(1, e instanceof MachineNotFoundError ? `Error from server (NotFound): ${e.message}` : `status failed: ${describeApiError(e)}`);
}
