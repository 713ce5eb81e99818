/**
 * `npm start`: the whole pipeline on this machine — watch-forwarder, an in-process SQS server (fauxqs, on loopback) with the FIFO queue (+ DLQ) and
 * the reconcile handler — in one process.
 *
 * With KUBECONFIG set it prints the context and server and runs against that cluster, but a cluster that is not on
 * this machine needs an explicit opt-in (--allow-remote or ALLOW_REMOTE_CONTEXT; local/cluster-target.ts decides);
 * without KUBECONFIG, it starts the local control plane (kube-apiserver + etcd + Cluster API CRDs) and prints how to
 * reach it with kubectl. Mode `self` by
 * default (Machines and Nodes in one cluster); `npm start -- --capi` or CLUSTER_MODE=capi for Cluster
 * API mode. Every REPORT_INTERVAL_SECONDS (2) it prints the totals, only when they changed, and each
 * Kubernetes Event the reconcile function records as it happens. Ctrl-C stops everything.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { describeApiError } from '#shared/adapters/kubernetes/api-errors.ts';
import { identifyAs } from '#shared/adapters/kubernetes/user-agent.ts';
import { processEnv } from '#shared/config/env.ts';
import { ConfigError } from '#shared/errors.ts';
import { logger } from '#shared/observability/logger.ts';
import { STATE_CONFIGMAP } from '#shared/adapters/kubernetes/enablement-state.ts';
import { decideStart } from './cluster-target.ts';
import { localShards } from './forwarder-rota.ts';
import { shardLeaseName } from '#shared/policy/shards.ts';
import { parseControlPlaneArgs } from './control-plane/args.ts';
import { ControlPlaneUnavailableError, startControlPlane, type CapiOptions, type ControlPlane } from './control-plane/control-plane.ts';
import { loadLocalConfig, START_USAGE, type LocalConfig } from './local-config.ts';
import { startPipeline, type Activity, type Pipeline } from './pipeline.ts';
import { createActivityFilter, formatReport } from './pipeline-report.ts';
import { startStatusReport, type StatusReport } from './start-report.ts';

const isNewActivity = createActivityFilter();

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const clock = (): string => new Date().toTimeString().slice(0, 8);

let config: LocalConfig;
let capi: CapiOptions | false;
try {
  // The local control plane's flags (--no-capi, --capi-feature-gates=…, --capi-namespace=…); the rest is ours.
  const rest: string[] = [];
  capi = parseControlPlaneArgs(process.argv.slice(2), rest);
  config = loadLocalConfig(processEnv(), rest);
} catch (e) {
  process.stderr.write(`${e instanceof ConfigError || e instanceof Error ? e.message : String(e)}\n`);
  process.exit(2);
}
if (config.help) {
  out(START_USAGE);
  process.exit(0);
}
const LEASE_NAME = 'capi-taint-propagator-forwarder';
// Structured JSON logs would drown the human display; POWERTOOLS_LOG_LEVEL=INFO brings them back.
if (processEnv()['POWERTOOLS_LOG_LEVEL'] === undefined) logger.setLogLevel('SILENT');

let cp: ControlPlane | undefined;
let pipeline: Pipeline | undefined;
let display: StatusReport | undefined;
let stopping = false;

async function shutdown(signal: string): Promise<void> {
  if (stopping) {
    out(`${signal} again: stopping the control plane now`);
    await cp?.stop();
    process.exit(130);
  }
  stopping = true;
  out(`\n${signal}: stopping (forwarder hand-over, running reconciles, then the control plane)...`);
  display?.stop();
  try {
    await pipeline?.stop();
  } catch (e) {
    out(`pipeline stop failed: ${e instanceof Error ? e.message : String(e)}`);
  }
  if (pipeline) out(`final: ${formatReport({ ...pipeline.counters(), forwarderActive: true }, undefined).join(' | ')}`);
  await cp?.stop();
  out(cp ? 'stopped (control plane removed)' : 'stopped');
  process.exit(0);
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(sig, () => void shutdown(sig));

// The pipeline names its forwarder and reconcile parts per request (local/pipeline.ts); the rest is `start`'s own.
identifyAs('start', 'local');
const kc = new KubeConfig();
if (config.kubeconfig) {
  // Reads the file only; nothing is sent to the server before the decision.
  try {
    kc.loadFromDefault();
  } catch (e) {
    process.stderr.write(`KUBECONFIG=${config.kubeconfig} cannot be read: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exit(2);
  }
  const decision = decideStart(
    { kubeconfig: config.kubeconfig, context: kc.getCurrentContext() || undefined, server: kc.getCurrentCluster()?.server },
    { allowRemoteFlag: config.allowRemote, allowRemoteContext: config.allowRemoteContext },
    {
      stateNamespace: config.stateNamespace,
      // One Lease per shard this process runs (docs/fleets-and-sizing.md, "Shards").
      leaseName: localShards({ shards: config.shards, shard: config.shard ?? 0, shardPinned: config.shard !== undefined }).map((shard) => shardLeaseName(LEASE_NAME, shard, config.shards)).join(', '),
      stateConfigMap: STATE_CONFIGMAP,
    },
    config.dryRun,
  );
  if (decision.kind === 'refused') {
    process.stderr.write(`${decision.lines.join('\n')}\n`);
    process.exit(2);
  }
  for (const line of decision.lines) out(line);
  out('');
} else {
  out(`KUBECONFIG is not set: starting the local control plane (kube-apiserver + etcd + Cluster API CRDs${capi ? ', the Cluster API manager and the local provider' : ''})...`);
  try {
    cp = await startControlPlane({ log: (line) => out(`  ${line}`), handleSignals: false, capi });
  } catch (e) {
    process.stderr.write(`${e instanceof ControlPlaneUnavailableError ? e.message : `control plane failed to start: ${e instanceof Error ? e.message : String(e)}`}\n`);
    process.exit(e instanceof ControlPlaneUnavailableError ? 2 : 1);
  }
  if (stopping) await new Promise(() => undefined); // a signal arrived while starting: shutdown() exits
  kc.loadFromFile(cp.kubeconfigPath);
  const kubectl = cp.kubectlPath ?? 'kubectl';
  out('');
  out('Local control plane is up. In another terminal:');
  out(`  export KUBECONFIG=${cp.kubeconfigPath}`);
  if (cp.capi) {
    out(`  ${kubectl} apply -f local/examples/cluster-annotations.yaml   # Cluster API makes Machines, the local provider their Nodes`);
    out(`  ${kubectl} get machinedeployments,machines,nodes -A`);
  } else {
    out(`  ${kubectl} get machines,nodes -A`);
  }
  out(`  npm run status`);
  out('');
}

try {
  pipeline = await startPipeline({
    kubeconfig: kc,
    leaseName: LEASE_NAME,
    mode: config.mode,
    shards: config.shards,
    ...(config.shard !== undefined ? { shard: config.shard } : {}),
    stateNamespace: config.stateNamespace,
    ...(config.machineNamespace ? { machineNamespace: config.machineNamespace } : {}),
    ...(config.nodeLabelSelector ? { nodeLabelSelector: config.nodeLabelSelector } : {}),
    visibilityTimeoutSeconds: config.visibilityTimeoutSeconds,
    maxReceiveCount: config.maxReceiveCount,
    retryBaseSeconds: config.retryBaseSeconds,
    retryMaxSeconds: config.retryMaxSeconds,
    dryRun: config.dryRun,
    specTaintsOwner: config.specTaintsOwner,
    startupTaint: config.startupTaint,
    ...(config.firstEnabledAt ? { firstEnabledAt: config.firstEnabledAt } : {}),
    onActivity: (a: Activity) => {
      if (!stopping && isNewActivity(a)) out(`${clock()}  ${a.type === 'Warning' ? 'WARNING ' : ''}${a.reason} ${a.kind} ${a.object}: ${a.message}`);
    },
  });
} catch (e) {
  process.stderr.write(`pipeline failed to start: ${e instanceof Error ? e.message : String(e)}\n`);
  await cp?.stop();
  process.exit(1);
}

out(
  `capi-taint-propagator running locally: mode ${config.mode}, context ${kc.getCurrentContext() || '?'}, cluster ${kc.getCurrentCluster()?.server ?? '?'}, ` +
    `SQS ${pipeline.localSqs.endpoint} (in memory; visibility ${config.visibilityTimeoutSeconds} s, DLQ after ${config.maxReceiveCount} receives), ` +
    `retry backoff ${config.retryBaseSeconds}-${config.retryMaxSeconds} s${config.dryRun ? ', DRY RUN' : ''}`,
);
out('Apply local/examples/*.yaml or edit MachineDeployments (spec.taints, or the taints.capi-taint-propagator.dev/* annotations in their template) and watch the Nodes follow. Ctrl-C stops.');

display = await startStatusReport({
  kubeConfig: kc,
  mode: config.mode,
  ...(config.machineNamespace ? { machineNamespace: config.machineNamespace } : {}),
  pipeline,
  intervalMs: config.reportIntervalSeconds * 1000,
  print: (lines) => {
    if (stopping) return;
    out(`--- ${clock()}`);
    for (const line of lines) out(`  ${line}`);
  },
});
