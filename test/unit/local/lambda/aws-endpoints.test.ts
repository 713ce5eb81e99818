/** The runner's SSM endpoint and SQS recording proxy, spoken to by the real SDK clients. */
import { GetParameterCommand, SSMClient } from '@aws-sdk/client-ssm';
import { CreateQueueCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import type { AddressInfo } from 'node:net';
import { buildApp } from 'fauxqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AwsCallLog, SsmStore, startSqsRecorder, startSsmEndpoint, type Endpoint } from '#local/lambda/aws-endpoints.ts';

const caller = { functionName: 's-fn', principalArn: 'arn:aws:iam::111122223333:role/s-role', kind: 'function' as const };
const credentials = { accessKeyId: 'x', secretAccessKey: 'y' };

describe('local/lambda AWS endpoints', () => {
  const log = new AwsCallLog();
  const store = new SsmStore();
  let ssm: Endpoint;
  let sqsProxy: Endpoint;
  let app: ReturnType<typeof buildApp>;
  const bodies: string[] = [];

  beforeAll(async () => {
    ssm = await startSsmEndpoint({ caller, log, store, region: 'eu-west-1', accountId: '111122223333' });
    app = buildApp({ logger: false, defaultRegion: 'eu-west-1' });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const upstream = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    sqsProxy = await startSqsRecorder({ upstream, caller, log, queueArnOf: (u) => `arn:aws:sqs:eu-west-1:111122223333:${u.slice(u.lastIndexOf('/') + 1)}`, onSuccess: (action, body) => bodies.push(`${action} ${body.toString()}`) });
  });
  afterAll(async () => {
    await ssm.stop();
    await sqsProxy.stop();
    await app.close();
  });

  it('answers GetParameter with decryption and logs it with the implied kms:Decrypt of a customer managed key', async () => {
    store.put('/p/kubeconfig', { value: 'apiVersion: v1', keyId: 'arn:aws:kms:eu-west-1:111122223333:key/k' });
    const client = new SSMClient({ endpoint: ssm.url, region: 'eu-west-1', credentials });
    const out = await client.send(new GetParameterCommand({ Name: '/p/kubeconfig', WithDecryption: true }));
    expect(out.Parameter).toMatchObject({ Name: '/p/kubeconfig', Type: 'SecureString', Value: 'apiVersion: v1', Version: 1, ARN: 'arn:aws:ssm:eu-west-1:111122223333:parameter/p/kubeconfig' });
    const undecrypted = await client.send(new GetParameterCommand({ Name: '/p/kubeconfig' }));
    expect(undecrypted.Parameter?.Value).not.toBe('apiVersion: v1');
    expect(log.records().filter((r) => r.service !== 'sqs').map((r) => [r.action, r.resource, r.status, r.viaService])).toEqual([
      ['kms:Decrypt', 'arn:aws:kms:eu-west-1:111122223333:key/k', 0, 'ssm.eu-west-1.amazonaws.com'],
      ['ssm:GetParameter', 'arn:aws:ssm:eu-west-1:111122223333:parameter/p/kubeconfig', 200, undefined],
      ['ssm:GetParameter', 'arn:aws:ssm:eu-west-1:111122223333:parameter/p/kubeconfig', 200, undefined],
    ]);
    await expect(client.send(new GetParameterCommand({ Name: '/p/missing', WithDecryption: true }))).rejects.toMatchObject({ name: 'ParameterNotFound' });
    client.destroy();
  });

  it('forwards SQS calls to the server unchanged and logs each with the queue ARN in the account', async () => {
    const client = new SQSClient({ endpoint: sqsProxy.url, region: 'eu-west-1', credentials });
    const { QueueUrl } = await client.send(new CreateQueueCommand({ QueueName: 'q.fifo', Attributes: { FifoQueue: 'true' } }));
    const sent = await client.send(new SendMessageCommand({ QueueUrl, MessageBody: 'hello', MessageGroupId: 'g', MessageDeduplicationId: 'd' }));
    expect(sent.MessageId).toBeTruthy();
    expect(log.records().filter((r) => r.service === 'sqs').map((r) => [r.action, r.resource, r.status, r.principalArn])).toEqual([
      ['sqs:CreateQueue', 'arn:aws:sqs:eu-west-1:111122223333:q.fifo', 200, caller.principalArn],
      ['sqs:SendMessage', 'arn:aws:sqs:eu-west-1:111122223333:q.fifo', 200, caller.principalArn],
    ]);
    expect(bodies.at(-1)).toMatch(/^SendMessage .*"MessageBody":"hello"/);
    client.destroy();
  });
});
