/**
 * Helpers for the forwarder's integration tests: a forwarder wired and run exactly as in production
 * (composeWatchForwarder over the real API server; windows of the rota, here a rota of one as `npm run forwarder`
 * runs it), with the SQS client mocked by aws-sdk-client-mock.
 */
import { mockClient } from 'aws-sdk-client-mock';
import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { KubeConfig } from '@kubernetes/client-node';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';
import { loadForwarderConfig, type ForwarderConfig } from '#shared/config/forwarder-config.ts';
import { createForwarderTelemetry, type CountingForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';
import { composeWatchForwarder } from '#functions/watch-forwarder/compose.ts';
import { WatchForwarder, type ForwarderRunSummary, type WatchForwarderDeps, type WatchForwarderOptions } from '#functions/watch-forwarder/forward-watch-events.ts';
import { LOCAL_WATCH_MEMBERS, localRota, runWindows } from '#local/forwarder-rota.ts';

export const QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/capi-taint-propagator-events.fifo';

/** The one SQS mock of the file; every SQSClient instance sends into it. */
export const sqsMock = mockClient(SQSClient);

/** Makes every SendMessageBatch succeed. */
export function acceptAllSends(): void {
  sqsMock.reset();
  sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommand['input']) => ({
    Successful: (input.Entries ?? []).map((e) => ({ Id: e.Id, MessageId: `m-${e.Id}`, MD5OfMessageBody: 'x' })),
    Failed: [],
  }));
}

/** One message as sent to SQS. */
export interface SentMessage {
  readonly event: TaintEvent;
  readonly groupId: string | undefined;
  readonly dedupId: string | undefined;
}

/** Every message sent so far (in order), parsed back with fromCloudEventBody. */
export function sentMessages(): SentMessage[] {
  return sqsMock.commandCalls(SendMessageBatchCommand).flatMap((c) =>
    (c.args[0].input.Entries ?? []).map((e) => ({ event: fromCloudEventBody(e.MessageBody ?? ''), groupId: e.MessageGroupId, dedupId: e.MessageDeduplicationId })),
  );
}

/** `<change> <subject>` of the messages about the given subjects, for exact assertions. */
export function summary(messages: readonly SentMessage[], subjects: readonly string[]): string[] {
  return messages
    .filter((m) => subjects.includes(m.event.subject))
    .map((m) => `${m.event.type.split('.').slice(-2, -1)[0]} ${m.event.subject}`);
}

export interface RunningForwarder {
  readonly forwarder: WatchForwarder;
  readonly telemetry: CountingForwarderTelemetry;
  readonly config: ForwarderConfig;
  stop(): Promise<ForwarderRunSummary>;
}

/** Starts a forwarder: windows of a rota of one (`WATCH_MEMBERS=1` unless `settings` say otherwise), not waiting for it to join. */
export function startForwarder(
  kc: KubeConfig,
  settings: Partial<ForwarderConfig> & Pick<ForwarderConfig, 'stateNamespace' | 'leaseName'>,
  extra: {
    watchTimeoutSeconds?: number;
    requestTimeoutMs?: number;
    watchBackoff?: { initialMs: number; maxMs: number };
    logger?: WatchForwarderDeps['logger'];
    options?: WatchForwarderOptions;
  } = {},
): RunningForwarder {
  const config: ForwarderConfig = { ...loadForwarderConfig({}), queueUrl: QUEUE_URL, watchMembers: LOCAL_WATCH_MEMBERS, leaseDurationSeconds: 4, watchIdleSeconds: 20, resyncIntervalSeconds: 0, ...settings };
  const telemetry = createForwarderTelemetry();
  const deps = composeWatchForwarder({
    config,
    managementKubeConfig: kc,
    sqs: new SQSClient({ region: 'eu-west-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }),
    telemetry,
    ...(extra.watchTimeoutSeconds !== undefined ? { watchTimeoutSeconds: extra.watchTimeoutSeconds } : {}),
    ...(extra.requestTimeoutMs !== undefined ? { requestTimeoutMs: extra.requestTimeoutMs } : {}),
    ...(extra.watchBackoff ? { watchBackoff: extra.watchBackoff } : {}),
    ...(extra.logger ? { logger: extra.logger } : {}),
  });
  const options: WatchForwarderOptions = { renewIntervalMs: 1_000, acquireRetryMs: 250, flushIntervalMs: 20, drainTimeoutMs: 5_000, ...extra.options };
  const forwarder = new WatchForwarder(deps, options);
  const controller = new AbortController();
  const done = runWindows(forwarder, { signal: controller.signal, rota: localRota(config), retryMs: options.acquireRetryMs ?? 250, logger: extra.logger ?? { error: () => undefined } });
  return {
    forwarder,
    telemetry,
    config,
    stop: async () => {
      controller.abort();
      return done;
    },
  };
}
