/**
 * The SQS SDK, loaded on first use and then kept: the Lambda functions do not load it with their module (about 90 ms
 * of a cold start; docs/benchmarks.md, cold start). The promise is kept because an `import()` per call is not free: one per
 * send made the forwarder's initial sync of 5 000 Nodes + 5 000 Machines peak at 166 MiB instead of 125 MiB.
 */
import type * as Sqs from '@aws-sdk/client-sqs';
import { runtimeSdk } from '#shared/adapters/aws/runtime-sdk.ts';

/** The commands the SQS adapters send. */
export type SqsCommand = Sqs.SendMessageBatchCommand | Sqs.SendMessageCommand | Sqs.ChangeMessageVisibilityCommand;

/**
 * The part of an SQS client the adapters use: the real SQSClient, its mocks and the benchmarks' in-process queues fit.
 * Only the publisher reads an answer (a SendMessageBatch's), hence its type.
 */
export interface SqsSender {
  send(command: SqsCommand): Promise<Partial<Sqs.SendMessageBatchCommandOutput>>;
}

/** An SQS client, or a function that makes one on first use (the Lambda handlers': the SDK loads after their start). */
export type SqsClientSource = SqsSender | (() => Promise<SqsSender>);

/** `make`, called on first use; returns its kept promise, made again on the call after one that failed. */
function lazily<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () =>
    (made ??= make().catch((err: unknown) => {
      made = undefined;
      throw err;
    }));
}

/** The SDK's module (its command classes), by require() (runtime-sdk.ts) on the first call. */
export const sqsSdk = lazily(async () => runtimeSdk('@aws-sdk/client-sqs'));

/** Returns the client of `source`: `source` itself, or the one its function made on first use (then kept). */
export function sqsClientOf(source: SqsClientSource): () => Promise<SqsSender> {
  return typeof source === 'function' ? lazily(source) : async () => source;
}
