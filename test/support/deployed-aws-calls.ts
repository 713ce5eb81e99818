/**
 * The deployed tier's AWS calls in the recorded-calls format (test/support/aws-calls.ts): the Lambda runner's call log
 * (local/lambda/README.md, "The AWS call log") turned into one line per distinct call of each function, its resources
 * named by the placeholders of the code fixture (test/fixtures/aws-calls/code.jsonl), so that each can be compared with
 * the fixture and evaluated by the least-privilege test against the packaged template's policies.
 */
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { AwsCallRecord } from '#local/lambda/aws-endpoints.ts';
import { callKey, readCalls, withPlaceholders, writeCalls, type RecordedCall } from './aws-calls.ts';

/** What the conversion needs to know of one deployed function. */
export interface DeployedFunction {
  /** The function as deployed (`functionName` in the call log). */
  readonly functionName: string;
  /** Its name in the recorded-calls format, as the code fixture names it (`watch-forwarder`). */
  readonly name: string;
  /** Its environment as the runner set it (QUEUE_URL, DEAD_LETTER_QUEUE_URL, MANAGEMENT_KUBECONFIG_*). */
  readonly env: Readonly<Record<string, string>>;
  /** The names of the queues of its SQS event sources. */
  readonly eventSourceQueues: readonly string[];
}

/** The IAM action an SDK batch command is authorized as. */
const SINGLE_FORM: Record<string, string> = {
  'sqs:SendMessageBatch': 'sqs:SendMessage',
  'sqs:DeleteMessageBatch': 'sqs:DeleteMessage',
  'sqs:ChangeMessageVisibilityBatch': 'sqs:ChangeMessageVisibility',
};

/** The log stream the code fixture writes for the logs Lambda writes (any concrete stream stands for it). */
const FIXTURE_LOG_STREAM = '2026/11/25/[$LATEST]0123456789abcdef0123456789abcdef';

const BY: Record<AwsCallRecord['caller'], RecordedCall['by']> = { function: 'code', 'event-source-mapping': 'lambda-event-source', 'lambda-service': 'lambda-runtime' };

/**
 * One recorded call per distinct (function, action, resource, context) of the call log. A call of a function not in
 * `functions` is an error (the log names every caller by its deployed name).
 */
export function deployedCalls(records: readonly AwsCallRecord[], functions: readonly DeployedFunction[]): RecordedCall[] {
  const byName = new Map(functions.map((f) => [f.functionName, f]));
  const calls = new Map<string, RecordedCall>();
  for (const r of records) {
    const f = byName.get(r.functionName);
    if (!f) throw new Error(`AWS call log: a call by ${JSON.stringify(r.functionName)}, not one of ${[...byName.keys()].join(', ')}`);
    const action = SINGLE_FORM[r.action] ?? r.action;
    let call: RecordedCall;
    const head = 'arn:{partition}';
    if (r.viaService !== undefined) {
      // Implied: KMS called by SSM or Secrets Manager with the caller's permission; the key is the parameter set's.
      const service = r.viaService.split('.')[0] ?? '';
      const context: Record<string, string> = { 'kms:ViaService': `${service}.{region}.amazonaws.com` };
      if (service === 'ssm') context['kms:EncryptionContext:PARAMETER_ARN'] = `${head}:ssm:{region}:{account}:parameter{env:MANAGEMENT_KUBECONFIG_PARAMETER}`;
      if (service === 'secretsmanager') context['kms:EncryptionContext:SecretARN'] = `${head}:secretsmanager:{region}:{account}:secret:{env:MANAGEMENT_KUBECONFIG_SECRET_ID}-AbCdEf`;
      call = { function: f.name, action, resource: '{param:managementKubeconfigKmsKeyArn}', context, by: 'aws-service' };
    } else if (r.service === 'logs') {
      const group = `:log-group:/aws/lambda/${r.functionName}:`;
      const resource = r.resource.includes(group) ? `${head}:logs:{region}:{account}:log-group:/aws/lambda/{function}:log-stream:${FIXTURE_LOG_STREAM}` : r.resource;
      call = { function: f.name, action, resource, by: BY[r.caller] };
    } else if (r.caller === 'event-source-mapping' && f.eventSourceQueues.some((q) => r.resource.endsWith(`:${q}`))) {
      call = { function: f.name, action, resource: `${head}:sqs:{region}:{account}:{eventSource}`, by: BY[r.caller] };
    } else {
      const named = withPlaceholders({ function: f.name, action, resource: r.resource, env: f.env });
      call = { ...named, by: BY[r.caller] };
    }
    calls.set(callKey(call), call);
  }
  return [...calls.values()].sort((a, b) => callKey(a).localeCompare(callKey(b)));
}

/** The calls the code fixture does not list (function, action, resource and context compared). */
export function unlistedCalls(calls: readonly RecordedCall[], code: readonly RecordedCall[]): RecordedCall[] {
  const listed = new Set(code.map((c) => callKey(c)));
  return calls.filter((c) => !listed.has(callKey(c)));
}

/**
 * Writes the calls to `<AWS_CALL_RECORDINGS_OUT or the OS temp dir>/capi-taint-propagator-aws-calls/<name>.jsonl` (the
 * directory the e2e tier writes to; pass it in AWS_CALL_RECORDINGS to the least-privilege test) and returns those the
 * code fixture does not list.
 */
export async function writeDeployedCalls(name: string, calls: readonly RecordedCall[], codeFixture: string): Promise<{ file: string; unlisted: RecordedCall[] }> {
  const file = join(process.env['AWS_CALL_RECORDINGS_OUT'] ?? join(tmpdir(), 'capi-taint-propagator-aws-calls'), `${name}.jsonl`);
  await writeCalls(file, calls);
  return { file, unlisted: unlistedCalls(calls, await readCalls(codeFixture)) };
}
