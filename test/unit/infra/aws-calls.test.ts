/**
 * The recorded-calls format (test/support/aws-calls.ts): reading files, directories and globs, turning concrete calls
 * into the deployment's placeholders, and the golden comparison the recording tests rely on.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AwsCallRecorder, readRecordings, recordingSourcesFromEnv, withPlaceholders } from '#test/support/aws-calls.ts';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ctp-aws-calls-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('reading recordings', () => {
  it('reads files, directories (their *.jsonl) and globs, and refuses a source that matches nothing', async () => {
    // Prepare
    const line = (action: string): string => JSON.stringify({ function: 'watch-forwarder', action, resource: 'arn:{partition}:sqs:{region}:{account}:{queue:QUEUE_URL}' });
    await writeFile(join(dir, 'a.jsonl'), `// a comment\n${line('sqs:SendMessage')}\n\n`);
    await writeFile(join(dir, 'b.jsonl'), `${line('sqs:ReceiveMessage')}\n`);
    await writeFile(join(dir, 'c.txt'), `${line('sqs:PurgeQueue')}\n`);

    // Act + Assess
    expect((await readRecordings([dir])).map((c) => c.action)).toEqual(['sqs:SendMessage', 'sqs:ReceiveMessage']);
    expect((await readRecordings([join(dir, 'b.jsonl')])).map((c) => c.action)).toEqual(['sqs:ReceiveMessage']);
    expect((await readRecordings([join(dir, '*.txt')])).map((c) => c.action)).toEqual(['sqs:PurgeQueue']);
    await expect(readRecordings([join(dir, 'nothing-*.jsonl')])).rejects.toThrow(/nothing matches/);
    expect(recordingSourcesFromEnv(' /a/x.jsonl, /b ,')).toEqual(['/a/x.jsonl', '/b']);
  });

  it('refuses a line without an IAM action, naming the file and line', async () => {
    await writeFile(join(dir, 'bad.jsonl'), `${JSON.stringify({ function: 'f', action: 'SendMessage', resource: 'arn:x' })}\n`);
    await expect(readRecordings([join(dir, 'bad.jsonl')])).rejects.toThrow(/bad\.jsonl:1: "action" must be service:Action, got "SendMessage"/);
  });

  it('names concrete resources by the environment variable that held them (a runner of the packaged zips)', async () => {
    const env = {
      QUEUE_URL: 'http://127.0.0.1:4566/000000000000/run-1-events.fifo',
      DEAD_LETTER_QUEUE_URL: 'http://127.0.0.1:4566/000000000000/run-1-dlq.fifo',
      MANAGEMENT_KUBECONFIG_PARAMETER: '/run-1/kubeconfig',
      MANAGEMENT_KUBECONFIG_SECRET_ID: 'run-1/kubeconfig',
    };
    const named = (action: string, resource: string): string => withPlaceholders({ function: 'reconcile-node-taints', action, resource, env }).resource;
    expect(named('sqs:SendMessage', 'arn:aws:sqs:us-east-1:000000000000:run-1-dlq.fifo')).toBe('arn:{partition}:sqs:{region}:{account}:{queue:DEAD_LETTER_QUEUE_URL}');
    expect(named('sqs:SendMessage', 'arn:aws:sqs:us-east-1:000000000000:run-1-events.fifo')).toBe('arn:{partition}:sqs:{region}:{account}:{queue:QUEUE_URL}');
    expect(named('ssm:GetParameter', 'arn:aws:ssm:us-east-1:000000000000:parameter/run-1/kubeconfig')).toBe('arn:{partition}:ssm:{region}:{account}:parameter{env:MANAGEMENT_KUBECONFIG_PARAMETER}');
    expect(named('secretsmanager:GetSecretValue', 'arn:aws:secretsmanager:us-east-1:000000000000:secret:run-1/kubeconfig-x1Y2z3')).toBe(
      'arn:{partition}:secretsmanager:{region}:{account}:secret:{env:MANAGEMENT_KUBECONFIG_SECRET_ID}-AbCdEf',
    );
    expect(named('logs:PutLogEvents', 'arn:aws:logs:us-east-1:000000000000:log-group:/aws/lambda/run-1-reconcile:log-stream:s')).toBe(
      'arn:{partition}:logs:{region}:{account}:log-group:/aws/lambda/{function}:log-stream:s',
    );
    // Another queue stays as it was, and the environment is not kept.
    const other = withPlaceholders({ function: 'f', action: 'sqs:SendMessage', resource: 'arn:aws:sqs:us-east-1:000000000000:other.fifo', env });
    expect(other).toEqual({ function: 'f', action: 'sqs:SendMessage', resource: 'arn:aws:sqs:us-east-1:000000000000:other.fifo' });
  });
});

describe('AwsCallRecorder', () => {
  it('records the IAM action of each command (a batch as its single form), once, and refuses an unbound resource', () => {
    const recorder = new AwsCallRecorder('watch-forwarder', { 'https://q/events.fifo': '{queue:QUEUE_URL}' });
    recorder.record('SQSClient', 'SendMessageBatchCommand', { QueueUrl: 'https://q/events.fifo' });
    recorder.record('sqs', 'SendMessageCommand', { QueueUrl: 'https://q/events.fifo' });
    expect(recorder.calls()).toEqual([{ function: 'watch-forwarder', action: 'sqs:SendMessage', resource: 'arn:{partition}:sqs:{region}:{account}:{queue:QUEUE_URL}' }]);
    expect(() => recorder.record('sqs', 'SendMessageCommand', { QueueUrl: 'https://q/other.fifo' })).toThrow(/no binding for queue URL "https:\/\/q\/other.fifo"/);
  });
});
