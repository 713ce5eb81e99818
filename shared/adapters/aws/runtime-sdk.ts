/**
 * The AWS SDK v3 packages the Lambda runtime provides (the bundles leave `@aws-sdk/*` out: serverless.yml `exclude`),
 * loaded with `require()`: they are CommonJS, and an ES `import()` of one pays for Node's CommonJS-from-ES translation
 * (about 25 ms of the reconcile function's cold start with MANAGEMENT_AUTH=ssm; docs/benchmarks.md, cold start).
 * `require()` resolves through `node_modules` beside the bundle and then `NODE_PATH`, where the runtime keeps its SDK.
 */
import { createRequire } from 'node:module';

// A CommonJS bundle of this file (the benchmarks' forwarder child) has no import.meta.url, but a __filename.
const load = createRequire(import.meta.url ?? __filename);

interface RuntimeSdk {
  '@aws-sdk/client-ssm': typeof import('@aws-sdk/client-ssm');
  '@aws-sdk/client-secrets-manager': typeof import('@aws-sdk/client-secrets-manager');
  '@aws-sdk/client-sqs': typeof import('@aws-sdk/client-sqs');
  '@aws-sdk/credential-provider-node': typeof import('@aws-sdk/credential-provider-node');
}

/** One of the runtime's SDK packages, by `require()` (Node caches it after the first call). */
export function runtimeSdk<N extends keyof RuntimeSdk>(name: N): RuntimeSdk[N] {
  return load(name) as RuntimeSdk[N];
}
