/**
 * `npm start`: the whole pipeline on this machine — watch-forwarder, embedded SQS FIFO queue (+ DLQ) and
 * the reconcile handler — in one process.
 *
 * With KUBECONFIG set it runs against that cluster; without, it starts the local control plane
 * (kube-apiserver + etcd + Cluster API CRDs) and prints how to reach it with kubectl. Mode `self` by
 * default (Machines and Nodes in one cluster); `npm start -- --capi` or CLUSTER_MODE=capi for Cluster
 * API mode. Every REPORT_INTERVAL_SECONDS (2) it prints the totals, only when they changed, and each
 * Kubernetes Event the reconcile function records as it happens. Ctrl-C stops everything.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { describeApiError } from '#shared/adapters/kubernetes/api-errors.ts';
import { processEnv } from '#shared/config/env.ts';
import { ConfigError } from '#shared/errors.ts';
import { logger } from '#shared/observability/logger.ts';
import { ControlPlaneUnavailableError, startControlPlane, type ControlPlane } from './control-plane/control-plane.ts';
import { readTaintStatuses } from './cluster-status.ts';
import { loadLocalConfig, type LocalConfig } from './local-config.ts';
import { startPipeline, type Activity, type Pipeline } from './pipeline.ts';
import { createActivityFilter, formatReport, outOfSyncNodes, type OutOfSyncNode } from './pipeline-report.ts';

const isNewActivity = createActivityFilter();

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const clock = (): string => new Date().toTimeString().slice(0, 8);

let config: LocalConfig;
try {
  config = loadLocalConfig(processEnv(), process.argv.slice(2));
} catch (e) {
  process.stderr.write(`${e instanceof ConfigError ? e.message : String(e)}\n`);
  process.exit(2);
}
// Structured JSON logs would drown the human display; POWERTOOLS_LOG_LEVEL=INFO brings them back.
if (processEnv()['POWERTOOLS_LOG_LEVEL'] === undefined) logger.setLogLevel('SILENT');

let cp: ControlPlane | undefined;
let pipeline: Pipeline | undefined;
let timer: NodeJS.Timeout | undefined;
let stopping = false;

async function shutdown(signal: string): Promise<void> {
  if (stopping) {
    out(`${signal} again: stopping the control plane now`);
    await cp?.stop();
    process.exit(130);
  }
  stopping = true;
  out(`\n${signal}: stopping (forwarder hand-over, running reconciles, then the control plane)...`);
  if (timer) clearInterval(timer);
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

const kc = new KubeConfig();
if (config.kubeconfig) {
  kc.loadFromDefault();
} else {
  out('KUBECONFIG is not set: starting the local control plane (kube-apiserver + etcd + Cluster API CRDs)...');
  try {
    cp = await startControlPlane({ log: (line) => out(`  ${line}`), handleSignals: false });
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
  out(`  ${kubectl} get machines,nodes -A`);
  out(`  npm run status`);
  out('');
}

try {
  pipeline = await startPipeline({
    kubeconfig: kc,
    mode: config.mode,
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
      if (!stopping && isNewActivity(a)) out(`${clock()}  ${a.type === 'Warning' ? 'WARNING ' : ''}${a.reason} Machine ${a.machine}: ${a.message}`);
    },
  });
} catch (e) {
  process.stderr.write(`pipeline failed to start: ${e instanceof Error ? e.message : String(e)}\n`);
  await cp?.stop();
  process.exit(1);
}

out(
  `capi-taint-propagator running locally: mode ${config.mode}, cluster ${kc.getCurrentCluster()?.server ?? '?'}, ` +
    `embedded queue (visibility ${config.visibilityTimeoutSeconds} s, DLQ after ${config.maxReceiveCount} receives), ` +
    `retry backoff ${config.retryBaseSeconds}-${config.retryMaxSeconds} s${config.dryRun ? ', DRY RUN' : ''}`,
);
out('Edit Machines (spec.taints or the taints.capi-taint-propagator.dev/* annotations) and watch the Nodes follow. Ctrl-C stops.');

let last = '';
let reading = false;
const running = pipeline;
const report = async (): Promise<void> => {
  if (reading || stopping) return;
  reading = true;
  try {
    let outOfSync: OutOfSyncNode[] | undefined;
    let statusError = '';
    try {
      const statuses = await readTaintStatuses({
        kubeConfig: kc,
        mode: config.mode,
        ...(config.machineNamespace ? { machineNamespace: config.machineNamespace } : {}),
        ...(running.startupTaint ? { startupTaint: running.startupTaint } : {}),
        specTaintsOwner: running.specTaintsOwner,
      });
      outOfSync = outOfSyncNodes(statuses);
    } catch (e) {
      statusError = `Nodes     (status unavailable: ${describeApiError(e)})`;
    }
    const lines = formatReport(running.counters(), outOfSync);
    if (statusError) lines.push(statusError);
    const block = lines.join('\n');
    if (block !== last && !stopping) {
      last = block;
      out(`--- ${clock()}`);
      for (const line of lines) out(`  ${line}`);
    }
  } finally {
    reading = false;
  }
};
await report();
timer = setInterval(() => void report(), config.reportIntervalSeconds * 1000);
