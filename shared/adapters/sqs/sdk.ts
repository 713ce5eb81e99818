/**
 * The SQS SDK, loaded on first use and then kept: the Lambda functions do not load it with their module (about 90 ms
 * of a cold start; docs/benchmarks.md, cold start). The promise is kept because an `import()` per call is not free: one per
 * send made the forwarder's initial sync of 5 000 Nodes + 5 000 Machines peak at 166 MiB instead of 125 MiB.
 */
import { runtimeSdk } from '#shared/adapters/aws/runtime-sdk.ts';

type SqsSdk = typeof import('@aws-sdk/client-sqs');

let loaded: Promise<SqsSdk> | undefined;

/** The SDK's module (its command classes), loading it on the first call. */
export function sqsSdk(): Promise<SqsSdk> {
  // require() (runtime-sdk.ts), in a promise so that callers keep one load and a failed one is tried again.
  loaded ??= Promise.resolve().then(() => runtimeSdk('@aws-sdk/client-sqs')).catch((err: unknown) => {
    loaded = undefined; // the next call tries again
    throw err;
  });
  return loaded;
}
