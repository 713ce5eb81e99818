/**
 * Child process of the hostile-clusters attack (bench/lib/hostile-attack.ts): the product's whole local pipeline in
 * `capi` mode, as `npm start -- --capi` runs it (`startPipeline`: forwarder, in-process SQS FIFO queue, reconcile
 * event source), in a process of its own, so that its memory can be sampled from /proc and its log output — the
 * product's logger at the level of POWERTOOLS_LOG_LEVEL (the parent sets INFO), written to this process's stdout —
 * can be counted by the parent.
 *
 * IPC: sends `ready` once its forwarder holds the Lease; answers `status` with `{ status: { failingClusters, counters } }`;
 * on `stop`, stops the pipeline (forwarder hand-over first) and exits.
 * Environment: HOSTILE_KUBECONFIG (the management cluster), HOSTILE_NAMESPACE (Machines, Clusters, Lease and state),
 * HOSTILE_LEASE, HOSTILE_API_TIMEOUT_SECONDS (the reconcile function's call deadline), HOSTILE_WATCH_TIMEOUT_MS (the
 * forwarder's list-page and watch-connect deadline), HOSTILE_SPEC_TAINTS_OWNER (`upstream` when Cluster API's manager
 * runs, else `product`), HOSTILE_STATUS_REPORT_MS (when set, `npm start`'s status display runs at that interval, as
 * `npm start` runs it: local/start-report.ts; its blocks go to stdout).
 * Requests name their component as in `npm start` (User-Agent): the pipeline's `watch-forwarder` and
 * `reconcile-node-taints`, and `start` for the rest (the status display).
 */
import { startPipeline } from '#local/pipeline.ts';
import { startStatusReport, type StatusReport } from '#local/start-report.ts';
import { identifyAs } from '#shared/adapters/kubernetes/user-agent.ts';
import { SpecTaintsOwner } from '#shared/domain/ownership.ts';

identifyAs('start', 'local');
const env = process.env;
const num = (name: string): number | undefined => (env[name] ? Number(env[name]) : undefined);
const apiTimeoutSeconds = num('HOSTILE_API_TIMEOUT_SECONDS');
const watchRequestTimeoutMs = num('HOSTILE_WATCH_TIMEOUT_MS');
const pipeline = await startPipeline({
  kubeconfig: env['HOSTILE_KUBECONFIG'] ?? '',
  mode: 'capi',
  stateNamespace: env['HOSTILE_NAMESPACE'] ?? '',
  leaseName: env['HOSTILE_LEASE'] ?? 'capi-taint-propagator-forwarder',
  machineNamespace: env['HOSTILE_NAMESPACE'] ?? '',
  visibilityTimeoutSeconds: 5,
  maxReceiveCount: 50,
  // npm start's retry backoff (1 s doubling to 30 s): with none, a record of a failing cluster that the cluster's
  // backoff refuses would come back at once, again and again, and flood the log the attack measures.
  retryBaseSeconds: 1,
  retryMaxSeconds: 30,
  specTaintsOwner: env['HOSTILE_SPEC_TAINTS_OWNER'] === 'product' ? SpecTaintsOwner.product : SpecTaintsOwner.upstream,
  forwarderOptions: { renewIntervalMs: 1000, acquireRetryMs: 200, flushIntervalMs: 20 },
  ...(apiTimeoutSeconds !== undefined ? { apiTimeoutSeconds } : {}),
  ...(watchRequestTimeoutMs !== undefined ? { watchRequestTimeoutMs } : {}),
});
await pipeline.waitForForwarder(60_000);
const statusReportMs = num('HOSTILE_STATUS_REPORT_MS');
let display: StatusReport | undefined;
if (statusReportMs !== undefined) {
  display = await startStatusReport({
    kubeConfig: pipeline.kubeConfig,
    mode: 'capi',
    machineNamespace: env['HOSTILE_NAMESPACE'] ?? '',
    pipeline,
    intervalMs: statusReportMs,
    print: (lines) => process.stdout.write(`--- status ${new Date().toISOString()}\n${lines.map((l) => `  ${l}\n`).join('')}`),
  });
}
process.on('message', (message) => {
  if (message === 'status') {
    process.send?.({ status: { failingClusters: pipeline.failingClusters().map((f) => ({ ...f, since: f.since.toISOString() })), counters: pipeline.counters() } });
  } else if (message === 'stop') {
    display?.stop();
    void pipeline.stop().finally(() => process.exit(0));
  }
});
process.send?.('ready');
