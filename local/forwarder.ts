/**
 * `npm run forwarder`: the watch-forwarder as a long-running process (a terminal, or a container next
 * to the cluster). Same core and same lifecycle as the scheduled Lambda: windows of the rota (WATCH_WINDOW_SECONDS),
 * started one after another by this process (local/forwarder-rota.ts), by default a rota of one member
 * (WATCH_MEMBERS=1: a second process on the same Lease waits and takes over when this one leaves or dies). With
 * FORWARDER_SHARDS=n it runs every shard's rota side by side (each on its own Lease), or only FORWARDER_SHARD's. On
 * SIGINT/SIGTERM the window ends: it sends what is pending, stores its checkpoint on the Lease, hands over and leaves.
 *
 * Management cluster: KUBECONFIG (or the default kubeconfig). Queue: SQS when QUEUE_URL is set;
 * otherwise every event is printed as one CloudEvent JSON line on stdout (a dry run of the queue).
 * Settings: see functions/watch-forwarder/README.md.
 */
import { KubeConfig } from '@kubernetes/client-node';
import { SQSClient } from '@aws-sdk/client-sqs';
import { identifyAs } from '#shared/adapters/kubernetes/user-agent.ts';
import { toCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import { createForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';
import { logger } from '#shared/observability/logger.ts';
import { ensureNamespace } from './local-namespace.ts';
import type { EventPublisher } from '#shared/ports/event-publisher.ts';
import { composeWatchForwarder } from '#functions/watch-forwarder/compose.ts';
import { WatchForwarder } from '#functions/watch-forwarder/forward-watch-events.ts';
import { shardLeaseName } from '#shared/policy/shards.ts';
import { LOCAL_WATCH_MEMBERS, localRota, localShards, runWindows } from './forwarder-rota.ts';

identifyAs('watch-forwarder', 'local');
const config = loadForwarderConfig({ WATCH_MEMBERS: String(LOCAL_WATCH_MEMBERS), ...process.env });
const kc = new KubeConfig();
kc.loadFromDefault();
if (!kc.getCurrentCluster() || kc.getCurrentCluster()?.server === 'http://localhost:8080') {
  process.stderr.write('forwarder: no cluster configured; set KUBECONFIG (e.g. the path `npm run control-plane` prints)\n');
  process.exit(2);
}
const telemetry = createForwarderTelemetry();
// A developer's cluster may lack the state namespace (installations create it with the RBAC manifests).
await ensureNamespace(kc, config.stateNamespace);

const stdoutPublisher: EventPublisher = {
  async publish(events) {
    for (const e of events) process.stdout.write(`${toCloudEventBody(e)}\n`);
    return { sent: events, unsent: [] };
  },
};

const sqs = config.queueUrl ? new SQSClient({}) : undefined;
const shards = localShards(config);
const forwarders = shards.map(
  (shard) => new WatchForwarder(composeWatchForwarder({ config: { ...config, shard }, managementKubeConfig: kc, telemetry, ...(sqs ? { sqs } : { publisher: stdoutPublisher }) })),
);
const stop = new AbortController();
for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.once(sig, () => {
    process.stderr.write(`${sig}: handing over...\n`);
    stop.abort();
  });
}
const report = setInterval(() => process.stderr.write(`forwarder: ${JSON.stringify(telemetry.counts())}\n`), 30_000);
process.stderr.write(
  `forwarder ${config.forwarderId}: mode ${config.clusterMode}, cluster ${kc.getCurrentCluster()?.server ?? '?'}, ` +
    `queue ${config.queueUrl ?? 'stdout'}, lease ${shards.map((shard) => `${config.stateNamespace}/${shardLeaseName(config.leaseName, shard, config.shards)}`).join(', ')}, ` +
    `rota of ${config.watchMembers}${config.shards > 1 ? ` per shard, shard ${shards.join(', ')} of ${config.shards}` : ''}\n`,
);
const summaries = await Promise.all(forwarders.map((forwarder) => runWindows(forwarder, { signal: stop.signal, rota: localRota(config), retryMs: 2_000, logger })));
summaries.forEach((summary, i) => {
  if (summary.active) logger.info('Forwarder window ended', { shard: shards[i], unsent: summary.unsent, checkpoint: summary.checkpoint });
});
clearInterval(report);
process.stderr.write(`forwarder stopped: ${JSON.stringify(telemetry.counts())}\n`);
