/**
 * Scheduled Lambda entry: one window of one shard's forwarder rota (README, "Deployed form"), the shard given by the
 * schedule's input (shard-event.ts). It watches until shortly before its timeout, or exits at once when enough
 * members with time left already watch.
 */
import { processEnv } from '#shared/config/env.ts';
import type { Context, ScheduledEvent } from 'aws-lambda';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { sqsSdk } from '#shared/adapters/sqs/sdk.ts';
import { createManagementKubeConfigLoader } from '#shared/adapters/kubernetes/management-kubeconfig.ts';
import { identifyAs } from '#shared/adapters/kubernetes/user-agent.ts';
import { loadClusterAccessConfig } from '#shared/config/cluster-access-config.ts';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import { createForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';
import { logger } from '#shared/observability/logger.ts';
import { metrics } from '#shared/observability/metrics.ts';
import { composeWatchForwarder } from './compose.ts';
import { shardOfEvent } from './shard-event.ts';
import { forwardWatchEvents, type ForwarderRunSummary } from './forward-watch-events.ts';

identifyAs('watch-forwarder', 'lambda');
const config = loadForwarderConfig(processEnv());
const management = createManagementKubeConfigLoader(loadClusterAccessConfig(processEnv()));
// The SQS SDK (about 90 ms to load) is not loaded with the module: each cold start loads it while its first Kubernetes
// calls wait on the network (below). One client per container, made on the first send (shared/adapters/sqs/sdk.ts).
let client: SQSClient | undefined;
const sqs = async (): Promise<SQSClient> => {
  const { SQSClient: Client } = await sqsSdk();
  return (client ??= new Client({}));
};
const telemetry = createForwarderTelemetry(metrics);
/** Time kept back from the Lambda timeout for draining sends (at most 10 s) and releasing the Lease; README: window + 15 s ≤ timeout. */
const HAND_OVER_RESERVE_MS = 15_000;

export const handler = async (event: ScheduledEvent | { readonly shard?: number }, context: Context): Promise<ForwarderRunSummary> => {
  const shard = shardOfEvent(event, config);
  const managementKubeConfig = await management.load();
  const deps = composeWatchForwarder({ config: { ...config, shard }, managementKubeConfig, sqs, telemetry });
  const durationMs = Math.max(1_000, Math.min(config.watchWindowSeconds * 1000, context.getRemainingTimeInMillis() - HAND_OVER_RESERVE_MS));
  const rota = { targetMembers: config.watchMembers, overlapMs: config.watchOverlapSeconds * 1000, staleAfterMs: config.leaseDurationSeconds * 1000 };
  const run = forwardWatchEvents(deps, { durationMs, rota });
  setImmediate(() => void sqsSdk().catch(() => undefined)); // a failure is the first send's to report
  const summary = await run;
  const { active, unsent } = summary;
  const failingClusters = summary.failingClusters.map((f) => f.cluster);
  const ended = { shard, shards: config.shards, joined: summary.rota.joined, active, unsent, failingClusters };
  logger.info('Forwarder window ended', { ...ended, counts: telemetry.counts() });
  if (metrics.hasStoredMetrics()) metrics.publishStoredMetrics();
  return summary;
};
