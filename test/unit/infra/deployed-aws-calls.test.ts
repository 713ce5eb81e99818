/**
 * The deployed tier's AWS calls (test/support/deployed-aws-calls.ts): the Lambda runner's call log turned into the
 * recorded-calls format and compared with the code fixture, which the least-privilege test evaluates.
 */
import { describe, expect, it } from 'vitest';
import type { AwsCallRecord } from '#local/lambda/aws-endpoints.ts';
import { CODE_FIXTURE, readCalls } from '#test/support/aws-calls.ts';
import { deployedCalls, unlistedCalls, type DeployedFunction } from '#test/support/deployed-aws-calls.ts';

const ARN = 'arn:aws:sqs:eu-west-1:111122223333';
const FORWARDER = 'capi-taint-propagator-example-ssm-watch-forwarder';
const RECONCILE = 'capi-taint-propagator-example-ssm-reconcile-node-taints';
const env = {
  QUEUE_URL: 'http://127.0.0.1:4566/111122223333/capi-taint-propagator-example-ssm-events.fifo',
  DEAD_LETTER_QUEUE_URL: 'http://127.0.0.1:4566/111122223333/capi-taint-propagator-example-ssm-dlq.fifo',
  MANAGEMENT_KUBECONFIG_PARAMETER: '/capi-taint-propagator/management-kubeconfig',
};
const functions: DeployedFunction[] = [
  { functionName: FORWARDER, name: 'watch-forwarder', env, eventSourceQueues: [] },
  { functionName: RECONCILE, name: 'reconcile-node-taints', env, eventSourceQueues: ['capi-taint-propagator-example-ssm-events.fifo'] },
];
const rec = (functionName: string, caller: AwsCallRecord['caller'], action: string, resource: string, extra: Partial<AwsCallRecord> = {}): AwsCallRecord => ({
  time: '2026-11-25T01:44:18.695Z',
  functionName,
  principalArn: 'arn:aws:iam::111122223333:role/r',
  caller,
  service: action.split(':')[0] as string,
  action,
  resource,
  status: 200,
  ...extra,
});
/** A call log as the deployed tier's runner writes it: each kind of call the functions make there. */
const LOG: AwsCallRecord[] = [
  rec(FORWARDER, 'function', 'ssm:GetParameter', 'arn:aws:ssm:eu-west-1:111122223333:parameter/capi-taint-propagator/management-kubeconfig'),
  rec(FORWARDER, 'function', 'sqs:SendMessageBatch', `${ARN}:capi-taint-propagator-example-ssm-events.fifo`),
  rec(FORWARDER, 'function', 'sqs:SendMessageBatch', `${ARN}:capi-taint-propagator-example-ssm-events.fifo`),
  rec(FORWARDER, 'lambda-service', 'logs:CreateLogStream', `arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/${FORWARDER}:log-stream:2026/11/25/[$LATEST]abc`, { status: 0 }),
  rec(FORWARDER, 'lambda-service', 'logs:PutLogEvents', `arn:aws:logs:eu-west-1:111122223333:log-group:/aws/lambda/${FORWARDER}:log-stream:*`, { status: 0 }),
  rec(FORWARDER, 'function', 'kms:Decrypt', 'arn:aws:kms:eu-west-1:111122223333:key/1234', { status: 0, viaService: 'ssm.eu-west-1.amazonaws.com' }),
  rec(RECONCILE, 'event-source-mapping', 'sqs:ReceiveMessage', `${ARN}:capi-taint-propagator-example-ssm-events.fifo`),
  rec(RECONCILE, 'event-source-mapping', 'sqs:DeleteMessageBatch', `${ARN}:capi-taint-propagator-example-ssm-events.fifo`),
  rec(RECONCILE, 'function', 'sqs:ChangeMessageVisibility', `${ARN}:capi-taint-propagator-example-ssm-events.fifo`),
  rec(RECONCILE, 'function', 'sqs:SendMessage', `${ARN}:capi-taint-propagator-example-ssm-dlq.fifo`),
  rec(RECONCILE, 'function', 'ssm:GetParameter', 'arn:aws:ssm:eu-west-1:111122223333:parameter/capi-taint-propagator/management-kubeconfig', { status: 400 }),
];

describe('the deployed tier\'s AWS calls', () => {
  it('names each call of the call log as the code fixture does, once per distinct call, and the fixture lists them all', async () => {
    const calls = deployedCalls(LOG, functions);
    expect(calls.map((c) => `${c.function} ${c.action} ${c.resource}`).sort()).toEqual(
      [
        'reconcile-node-taints sqs:ChangeMessageVisibility arn:{partition}:sqs:{region}:{account}:{queue:QUEUE_URL}',
        'reconcile-node-taints sqs:DeleteMessage arn:{partition}:sqs:{region}:{account}:{eventSource}',
        'reconcile-node-taints sqs:ReceiveMessage arn:{partition}:sqs:{region}:{account}:{eventSource}',
        'reconcile-node-taints sqs:SendMessage arn:{partition}:sqs:{region}:{account}:{queue:DEAD_LETTER_QUEUE_URL}',
        'reconcile-node-taints ssm:GetParameter arn:{partition}:ssm:{region}:{account}:parameter{env:MANAGEMENT_KUBECONFIG_PARAMETER}',
        'watch-forwarder kms:Decrypt {param:managementKubeconfigKmsKeyArn}',
        'watch-forwarder logs:CreateLogStream arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/{function}:log-stream:2026/11/25/[$LATEST]0123456789abcdef0123456789abcdef',
        'watch-forwarder logs:PutLogEvents arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/{function}:log-stream:2026/11/25/[$LATEST]0123456789abcdef0123456789abcdef',
        'watch-forwarder sqs:SendMessage arn:{partition}:sqs:{region}:{account}:{queue:QUEUE_URL}',
        'watch-forwarder ssm:GetParameter arn:{partition}:ssm:{region}:{account}:parameter{env:MANAGEMENT_KUBECONFIG_PARAMETER}',
      ].sort(),
    );
    expect(unlistedCalls(calls, await readCalls(CODE_FIXTURE))).toEqual([]);
  });

  it('reports a stray call the fixture does not list (a purge by the forwarder, a send to an unknown queue, KMS through another service)', async () => {
    const stray = [
      rec(FORWARDER, 'function', 'sqs:PurgeQueue', `${ARN}:capi-taint-propagator-example-ssm-events.fifo`),
      rec(RECONCILE, 'function', 'sqs:SendMessage', `${ARN}:somebody-elses.fifo`),
      rec(RECONCILE, 'function', 'kms:Decrypt', 'arn:aws:kms:eu-west-1:111122223333:key/1234', { status: 0, viaService: 's3.eu-west-1.amazonaws.com' }),
    ];
    const unlisted = unlistedCalls(deployedCalls([...LOG, ...stray], functions), await readCalls(CODE_FIXTURE));
    expect(unlisted.map((c) => `${c.function} ${c.action} ${c.resource}`).sort()).toEqual([
      'reconcile-node-taints kms:Decrypt {param:managementKubeconfigKmsKeyArn}',
      'reconcile-node-taints sqs:SendMessage arn:aws:sqs:eu-west-1:111122223333:somebody-elses.fifo',
      'watch-forwarder sqs:PurgeQueue arn:{partition}:sqs:{region}:{account}:{queue:QUEUE_URL}',
    ]);
  });

  it('refuses a call by a function it was not told about, naming it', () => {
    expect(() => deployedCalls([rec('other-function', 'function', 'sqs:SendMessage', `${ARN}:x.fifo`)], functions)).toThrow(/a call by "other-function"/);
  });
});
