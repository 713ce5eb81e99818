/**
 * Child process of the kill test (test/e2e/faults.test.ts): the whole local pipeline (`startPipeline`,
 * as `npm start` runs it, with its in-memory queue) in a process of its own, so that the test can
 * SIGKILL it at any moment. Tells its parent `ready` over IPC once its forwarder holds the Lease, and
 * answers `counters` with the pipeline's counters.
 * Environment: FAULT_KUBECONFIG, FAULT_NAMESPACE, FAULT_RUN, FAULT_LABEL_SELECTOR, FAULT_LEASE_SECONDS; or
 * PIPELINE_CHILD_OPTIONS, the whole `PipelineOptions` as JSON (kubeconfig a file path; test/e2e-capi/noexecute-budgets).
 */
import { startPipeline, type PipelineOptions } from '#local/pipeline.ts';
import { UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';

const env = process.env;
const given = env['PIPELINE_CHILD_OPTIONS'];
const pipeline = await startPipeline(given ? (JSON.parse(given) as PipelineOptions) : {
  kubeconfig: env['FAULT_KUBECONFIG'] ?? '',
  mode: 'self',
  stateNamespace: env['FAULT_NAMESPACE'] ?? '',
  leaseName: `forwarder-${env['FAULT_RUN'] ?? ''}`,
  machineNamespace: env['FAULT_NAMESPACE'] ?? '',
  nodeLabelSelector: env['FAULT_LABEL_SELECTOR'] ?? '',
  leaseDurationSeconds: Number(env['FAULT_LEASE_SECONDS'] ?? '15'),
  firstEnabledAt: new Date('2000-01-01T00:00:00Z'),
  // As the other e2e pipelines (test/e2e/support.ts): no CAPI controller runs, so the product applies spec.taints.
  specTaintsOwner: 'product',
  startupTaint: { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' },
  forwarderOptions: { renewIntervalMs: 1000, acquireRetryMs: 200, flushIntervalMs: 20 },
});
await pipeline.waitForForwarder(60_000);
process.on('message', (message) => {
  if (message === 'counters') process.send?.({ counters: pipeline.counters() });
});
process.send?.('ready');
