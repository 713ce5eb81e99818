/**
 * The AWS SDK v3 packages the Lambda runtime provides (the bundles leave `@aws-sdk/*` out: serverless.yml `exclude`),
 * loaded with `require()`. They are CommonJS (`main: dist-cjs/index.js`, no `exports` map): an ES `import()` of one
 * goes through Node's CommonJS-from-ES translation (its export lexer and format detection for every file), which
 * `require()` skips. Measured (the cold-start scenario, 2026-11-27, medians of 11 fresh processes, Node 22):
 * `@aws-sdk/client-ssm` 91.1 ms by `import()`, 65.2 ms by `require()`; the reconcile handler's import with
 * MANAGEMENT_AUTH=ssm 146.9 ms before, 122.4 ms after (docs/benchmarks.md, cold start). The reconcile function loads
 * the SSM (or Secrets Manager) client in every cold start's init phase, so this is cold-start time. `require()` resolves through
 * `node_modules` beside the bundle and then `NODE_PATH`, which is where the Lambda runtime keeps its SDK
 * (`/var/runtime/node_modules`), as it was for CommonJS handlers.
 */
import { createRequire } from 'node:module';

// A CommonJS bundle of this file (the benchmarks' forwarder child) has no import.meta.url, but a __filename.
const load = createRequire(import.meta.url ?? __filename);

/** The runtime's `@aws-sdk/client-ssm`. */
export const ssmSdk = (): typeof import('@aws-sdk/client-ssm') => load('@aws-sdk/client-ssm') as typeof import('@aws-sdk/client-ssm');
/** The runtime's `@aws-sdk/client-secrets-manager`. */
export const secretsManagerSdk = (): typeof import('@aws-sdk/client-secrets-manager') => load('@aws-sdk/client-secrets-manager') as typeof import('@aws-sdk/client-secrets-manager');
/** The runtime's `@aws-sdk/client-sqs`. */
export const sqsSdkModule = (): typeof import('@aws-sdk/client-sqs') => load('@aws-sdk/client-sqs') as typeof import('@aws-sdk/client-sqs');
/** The runtime's `@aws-sdk/credential-provider-node`. */
export const credentialProviderSdk = (): typeof import('@aws-sdk/credential-provider-node') => load('@aws-sdk/credential-provider-node') as typeof import('@aws-sdk/credential-provider-node');
