/**
 * The SQS SDK, loaded on first use and then kept: the Lambda functions do not load it with their module (about 90 ms
 * of a cold start; docs/benchmarks.md, cold start). The promise is kept because an `import()` per call is not free: one per
 * send made the forwarder's initial sync of 5 000 Nodes + 5 000 Machines peak at 166 MiB instead of 125 MiB.
 */
import { runtimeSdk } from '#shared/adapters/aws/runtime-sdk.ts';

/** `make`, called on first use; returns its kept promise, made again on the call after one that failed. */
export function lazily<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () =>
    (made ??= make().catch((err: unknown) => {
      made = undefined;
      throw err;
    }));
}

/** The SDK's module (its command classes), by require() (runtime-sdk.ts) on the first call. */
export const sqsSdk = lazily(async () => runtimeSdk('@aws-sdk/client-sqs'));
