/**
 * The runtime's AWS SDK loaded with require() (runtime-sdk.ts): the same module objects an ES import() gives (Node
 * shares its CommonJS cache), so that the SDK's command classes and the clients that aws-sdk-client-mock patches are
 * one and the same, whichever way a caller reached them.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { runtimeSdk } from '#shared/adapters/aws/runtime-sdk.ts';
import { sqsSdk } from '#shared/adapters/sqs/sdk.ts';

describe('runtime SDK loading', () => {
  it('loads each client by require(), the same classes as an ES import() of the package', async () => {
    expect(runtimeSdk('@aws-sdk/client-ssm').SSMClient).toBe((await import('@aws-sdk/client-ssm')).SSMClient);
    expect(runtimeSdk('@aws-sdk/client-secrets-manager').GetSecretValueCommand).toBe((await import('@aws-sdk/client-secrets-manager')).GetSecretValueCommand);
    expect(runtimeSdk('@aws-sdk/client-sqs').SendMessageCommand).toBe((await import('@aws-sdk/client-sqs')).SendMessageCommand);
    expect(runtimeSdk('@aws-sdk/credential-provider-node').defaultProvider).toBe((await import('@aws-sdk/credential-provider-node')).defaultProvider);
  });

  it('loads them from the CommonJS build (dist-cjs), which is what require() saves the ES translation of', () => {
    const cache = createRequire(import.meta.url).cache;
    runtimeSdk('@aws-sdk/client-ssm');
    expect(Object.keys(cache).some((file) => /@aws-sdk\/client-ssm\/dist-cjs\/index\.js$/.test(file))).toBe(true);
  });

  it('keeps one SQS SDK load for every caller', async () => {
    const [a, b] = await Promise.all([sqsSdk(), sqsSdk()]);
    expect(a).toBe(b);
    expect(a.SQSClient).toBe(runtimeSdk('@aws-sdk/client-sqs').SQSClient);
  });
});
