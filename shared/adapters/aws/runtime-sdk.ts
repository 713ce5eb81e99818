/**
 * The AWS SDK v3 packages the Lambda runtime provides (the bundles leave `@aws-sdk/*` out: serverless.yml `exclude`),
 * loaded with `require()`. They are CommonJS (`main: dist-cjs/index.js`, no `exports` map): an ES `import()` of one
 * goes through Node's CommonJS-from-ES translation (its export lexer and format detection for every file), which
 * `require()` skips. Measured (the cold-start scenario, 2026-11-27, medians of 11 fresh processes, Node 22):
 * `@aws-sdk/client-ssm` 91.1 ms by `import()`, 65.2 ms by `require()`; the reconcile handler's import with
 * MANAGEMENT_AUTH=ssm 146.9 ms before, 122.4 ms after (docs/benchmarks.md, cold start). The reconcile function loads
 * the SSM (or Secrets Manager) client in every cold start's init phase, so this is cold-start time. `require()`
 * resolves through `node_modules` beside the bundle and then `NODE_PATH`, which is where the Lambda runtime keeps its
 * SDK (`/var/runtime/node_modules`), as it was for CommonJS handlers.
 */
import { createRequire } from 'node:module';

// A CommonJS bundle of this file (the benchmarks' forwarder child) has no import.meta.url, but a __filename.
const load = createRequire(import.meta.url ?? __filename);

/** The runtime's packages this project loads, by name. */
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
