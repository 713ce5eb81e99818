/**
 * Child process of test/integration/forwarder/rota.test.ts: one window of the deployed form, run as the Lambda handler
 * runs it (composeWatchForwarder + forwardWatchEvents with the rota policy), with a short window, sending to the
 * parent's SQS server (fauxqs) over its wire protocol. A process of its own, so that the test can SIGKILL it in the
 * middle of its window (no drain, no release: the Lease and its member entry are left to expire, as after a killed
 * Lambda container).
 * IPC to the parent: `{ summary }` when the window ended. From the parent: `stop` (ends the window early, cleanly).
 * Environment: ROTA_KUBECONFIG, ROTA_NAMESPACE, ROTA_LEASE, ROTA_LABEL_SELECTOR, ROTA_ID, ROTA_WINDOW_MS,
 * ROTA_OVERLAP_SECONDS, ROTA_LEASE_SECONDS, ROTA_SQS_ENDPOINT, ROTA_QUEUE_URL.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import { KubeConfig } from '@kubernetes/client-node';
import { composeWatchForwarder } from '#functions/watch-forwarder/compose.ts';
import { forwardWatchEvents } from '#functions/watch-forwarder/forward-watch-events.ts';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import { createForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';

const env = process.env;
const config = loadForwarderConfig({
  QUEUE_URL: env['ROTA_QUEUE_URL'],
  CLUSTER_MODE: 'self',
  STATE_NAMESPACE: env['ROTA_NAMESPACE'],
  LEASE_NAME: env['ROTA_LEASE'],
  FORWARDER_ID: env['ROTA_ID'],
  MACHINE_NAMESPACE: env['ROTA_NAMESPACE'],
  NODE_LABEL_SELECTOR: env['ROTA_LABEL_SELECTOR'],
  LEASE_DURATION_SECONDS: env['ROTA_LEASE_SECONDS'],
  WATCH_MEMBERS: '2',
  WATCH_OVERLAP_SECONDS: env['ROTA_OVERLAP_SECONDS'],
  RESYNC_INTERVAL_SECONDS: '0',
  // The markers are Machine `spec.taints` edits: with the product owning them, every one is a change to announce.
  SPEC_TAINTS_OWNER: 'product',
});
const kc = new KubeConfig();
kc.loadFromFile(env['ROTA_KUBECONFIG'] ?? '');
const sqs = new SQSClient({ endpoint: env['ROTA_SQS_ENDPOINT'] ?? '', region: 'eu-west-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, maxAttempts: 3 });
const telemetry = createForwarderTelemetry();
const deps = composeWatchForwarder({ config, managementKubeConfig: kc, sqs, telemetry });
const stop = new AbortController();
process.on('message', (message) => {
  if (message === 'stop') stop.abort();
});
// As the handler: the rota policy from the configuration; the lease-related periods shortened to the test's scale.
const summary = await forwardWatchEvents(
  deps,
  {
    durationMs: Number(env['ROTA_WINDOW_MS'] ?? '10000'),
    signal: stop.signal,
    rota: { targetMembers: config.watchMembers, overlapMs: config.watchOverlapSeconds * 1000, staleAfterMs: config.leaseDurationSeconds * 1000 },
  },
  { renewIntervalMs: 500, acquireRetryMs: 200, flushIntervalMs: 20, drainTimeoutMs: 3_000 },
);
process.send?.({ summary: { active: summary.active, rota: summary.rota, unsent: summary.unsent, counts: telemetry.counts() } });
sqs.destroy();
process.disconnect?.();
