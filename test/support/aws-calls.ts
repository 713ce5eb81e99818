/**
 * Recorded AWS calls: what the functions call on AWS, as IAM authorizes it (action + resource ARN as it would be in
 * the account), one JSON object per line. The least-privilege test (test/unit/infra/least-privilege.test.ts) checks
 * every such call against the packaged template's policies; docs/security.md ("Least privilege in AWS, checked") explains it.
 *
 * A line:
 *   {"function":"reconcile-node-taints","action":"sqs:SendMessage","resource":"arn:{partition}:sqs:{region}:{account}:{queue:DEAD_LETTER_QUEUE_URL}"}
 * - `function`: the serverless function key (`reconcileNodeTaints`) or the end of its deployed name
 *   (`reconcile-node-taints`, or a whole deployed name such as `capi-taint-propagator-dev-reconcile-node-taints`).
 * - `action`: the IAM action (`sqs:SendMessage` for an SDK SendMessageBatch).
 * - `resource`: an ARN. It may name the deployment's resources by placeholders, filled per packaged parameter set:
 *   `{partition}`, `{region}`, `{account}`, `{stage}`, `{service}`, `{function}` (deployed function name),
 *   `{queue:ENV}` (the name of the queue whose URL the function gets in environment variable ENV),
 *   `{eventSource}` (the name of the queue of the function's SQS event source), `{env:ENV}` (that variable's value)
 *   and `{param:name}` (a resolved deploy parameter). A call whose placeholder resolves to an empty string does not
 *   apply to that parameter set (an SSM read where `managementAuth` is not `ssm`).
 * - optional `context`: condition keys of the request (e.g. `kms:ViaService`), with the same placeholders.
 * - optional `by`: who makes the call with the function's role: `code` (default, the function's own code),
 *   `lambda-runtime` (logs), `lambda-event-source` (the SQS poller), `aws-service` (e.g. KMS called by SSM).
 * - optional `note`: why the call is made (for the committed fixture read from the code).
 *
 * Recorders in tests turn concrete calls into this form: they are told which concrete value (a queue URL, a
 * parameter name) stands for which placeholder, exactly as the function was configured.
 *
 * A recorder that only knows concrete ARNs (a Lambda-like runner of the packaged zips, say) may write them as they
 * were, with the function's environment beside them in `env` (at least QUEUE_URL, DEAD_LETTER_QUEUE_URL and the
 * MANAGEMENT_KUBECONFIG_* variables it set): the reader then names each resource by the variable that held it
 * ({@link withPlaceholders}), e.g. the queue whose URL was QUEUE_URL becomes `{queue:QUEUE_URL}`.
 */
import type { InitializeMiddleware } from '@smithy/types';
import { mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { glob } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';

export interface RecordedCall {
  readonly function: string;
  /** The function's environment when the resource is a concrete ARN (see {@link withPlaceholders}). */
  readonly env?: Readonly<Record<string, string>>;
  readonly action: string;
  readonly resource: string;
  readonly context?: Readonly<Record<string, string>>;
  readonly by?: 'code' | 'lambda-runtime' | 'lambda-event-source' | 'aws-service';
  readonly note?: string;
  /** Where the line was read from (set by the reader, never written). */
  readonly origin?: string;
}

/** The committed fixtures: `code.jsonl` (read from the code) and `recorded/*.jsonl` (golden recordings of tests). */
export const AWS_CALLS_DIR = resolve(import.meta.dirname, '../fixtures/aws-calls');
export const CODE_FIXTURE = join(AWS_CALLS_DIR, 'code.jsonl');
export const RECORDED_DIR = join(AWS_CALLS_DIR, 'recorded');

/** The identity of a call for set comparisons (function, action, resource, context). */
export function callKey(c: RecordedCall): string {
  const ctx = c.context ? Object.entries(c.context).sort(([a], [b]) => a.localeCompare(b)) : [];
  return JSON.stringify([c.function, c.action, c.resource, ctx]);
}

function parseLine(line: string, origin: string): RecordedCall {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    throw new Error(`${origin}: not JSON: ${line.slice(0, 200)}`);
  }
  const o = value as Record<string, unknown>;
  for (const field of ['function', 'action', 'resource'] as const) {
    if (typeof o[field] !== 'string' || o[field] === '') throw new Error(`${origin}: "${field}" must be a non-empty string in ${line.slice(0, 200)}`);
  }
  if (!/^[a-z0-9-]+:[A-Za-z0-9*]+$/.test(o['action'] as string)) throw new Error(`${origin}: "action" must be service:Action, got ${JSON.stringify(o['action'])}`);
  const call = { ...(o as unknown as RecordedCall), origin };
  return call.env ? withPlaceholders(call) : call;
}

/**
 * A call recorded with concrete ARNs and the function's environment, with its resource named by placeholders: an SQS
 * queue by the variable that held its URL (`{queue:VAR}`), an SSM parameter or a Secrets Manager secret by the
 * variable that held its name (`{env:VAR}`), and the partition, region and account as `{partition}`, `{region}`,
 * `{account}`; a Lambda log group as the calling function's (`/aws/lambda/{function}`). A resource no variable held stays
 * as it was (and will not match the deployment's policies).
 */
export function withPlaceholders(call: RecordedCall): RecordedCall {
  const env = call.env ?? {};
  const arn = /^arn:([^:]+):([^:]+):([^:]*):([^:]*):(.*)$/.exec(call.resource);
  const { env: _env, ...rest } = call;
  if (!arn) return rest;
  const [, , service, , , tail] = arn as unknown as [string, string, string, string, string, string];
  const head = `arn:{partition}:${service}:{region}:{account}:`;
  const logGroup = /^log-group:\/aws\/lambda\/[^:]+(:.*)?$/.exec(tail);
  if (service === 'logs' && logGroup) return { ...rest, resource: `${head}log-group:/aws/lambda/{function}${logGroup[1] ?? ''}` };
  for (const [name, value] of Object.entries(env).sort(([a], [b]) => a.localeCompare(b))) {
    if (value === '') continue;
    if (service === 'sqs' && value.split('/').at(-1) === tail) return { ...rest, resource: `${head}{queue:${name}}` };
    if (service === 'ssm' && tail === `parameter${value}`) return { ...rest, resource: `${head}parameter{env:${name}}` };
    if (service === 'secretsmanager' && new RegExp(`^secret:${value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-[A-Za-z0-9]{6}$`).test(tail)) {
      return { ...rest, resource: `${head}secret:{env:${name}}-AbCdEf` };
    }
  }
  return rest;
}

/** Reads one JSON-lines file (blank lines and lines starting with `//` are skipped). */
export async function readCalls(file: string): Promise<RecordedCall[]> {
  const text = await readFile(file, 'utf8');
  return text
    .split('\n')
    .map((l, i) => [l.trim(), i + 1] as const)
    .filter(([l]) => l !== '' && !l.startsWith('//'))
    .map(([l, n]) => parseLine(l, `${relative(process.cwd(), file)}:${n}`));
}

/**
 * Reads every recording named by `sources`: files, directories (their `*.jsonl`, not recursive) or globs
 * (`recordings/*.jsonl`). A source that matches nothing is an error, so a mistyped path is never silently empty.
 */
export async function readRecordings(sources: readonly string[]): Promise<RecordedCall[]> {
  const calls: RecordedCall[] = [];
  for (const source of sources) {
    const files: string[] = [];
    const s = await stat(source).catch(() => undefined);
    if (s?.isDirectory()) {
      for (const name of (await readdir(source)).sort()) if (name.endsWith('.jsonl')) files.push(join(source, name));
    } else if (s) {
      files.push(source);
    } else {
      for await (const f of glob(source)) files.push(f);
      files.sort();
      if (files.length === 0) throw new Error(`AWS call recordings: nothing matches ${source}`);
    }
    for (const f of files) calls.push(...(await readCalls(f)));
  }
  return calls;
}

/** Extra recordings named in an environment variable: paths, directories or globs separated by the path delimiter or commas. */
export function recordingSourcesFromEnv(value: string | undefined): string[] {
  return (value ?? '')
    .split(/[,:;]/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** SDK commands whose IAM action has another name (the batch forms are authorized as their single form). */
const ACTION_OF_COMMAND: Record<string, string> = {
  'sqs:SendMessageBatch': 'sqs:SendMessage',
  'sqs:DeleteMessageBatch': 'sqs:DeleteMessage',
  'sqs:ChangeMessageVisibilityBatch': 'sqs:ChangeMessageVisibility',
};

/** IAM service prefix of an SDK client (its class name, or the SDK's `serviceId` in the handler context). */
const SERVICE_OF_CLIENT: Record<string, string> = {
  SQSClient: 'sqs',
  SQS: 'sqs',
  SSMClient: 'ssm',
  SSM: 'ssm',
  SecretsManagerClient: 'secretsmanager',
  'Secrets Manager': 'secretsmanager',
};

/**
 * Turns concrete calls into recorded calls for one function. `bindings` maps each concrete identifier the function
 * was given (a queue URL, a parameter name, a secret id) to its placeholder form; an identifier without a binding is
 * an error (the test must say what the resource is in the deployment).
 */
export class AwsCallRecorder {
  readonly #calls = new Map<string, RecordedCall>();
  readonly #function: string;
  readonly #bindings: Readonly<Record<string, string>>;
  readonly #by: RecordedCall['by'];

  constructor(fn: string, bindings: Readonly<Record<string, string>>, by: RecordedCall['by'] = 'code') {
    this.#function = fn;
    this.#bindings = bindings;
    this.#by = by;
  }

  #bound(kind: string, value: unknown): string {
    const bound = typeof value === 'string' ? this.#bindings[value] : undefined;
    if (bound === undefined) throw new Error(`AwsCallRecorder(${this.#function}): no binding for ${kind} ${JSON.stringify(value)}; add it to the recorder's bindings`);
    return bound;
  }

  /** Records one SDK command (`service`: IAM prefix or client name; `command`: e.g. `SendMessageBatchCommand`). */
  record(service: string, command: string, input: Record<string, unknown>): void {
    const prefix = SERVICE_OF_CLIENT[service] ?? service;
    const name = command.replace(/Command$/, '');
    const action = ACTION_OF_COMMAND[`${prefix}:${name}`] ?? `${prefix}:${name}`;
    let resource: string;
    if (prefix === 'sqs') resource = `arn:{partition}:sqs:{region}:{account}:${this.#bound('queue URL', input['QueueUrl'])}`;
    else if (prefix === 'ssm') resource = `arn:{partition}:ssm:{region}:{account}:parameter${this.#bound('parameter name', input['Name'])}`;
    // Secrets Manager appends six random characters to a secret's name in its ARN.
    else if (prefix === 'secretsmanager') resource = `arn:{partition}:secretsmanager:{region}:{account}:secret:${this.#bound('secret id', input['SecretId'])}-AbCdEf`;
    else throw new Error(`AwsCallRecorder: no resource rule for ${action}`);
    const call: RecordedCall = { function: this.#function, action, resource, ...(this.#by && this.#by !== 'code' ? { by: this.#by } : {}) };
    this.#calls.set(callKey(call), call);
  }

  /** Records every call an aws-sdk-client-mock mock has seen (call it before the mock's reset). */
  recordMock(service: string, mock: { calls(): readonly { args: readonly unknown[] }[] }): void {
    for (const c of mock.calls()) {
      const command = c.args[0] as { constructor: { name: string }; input: Record<string, unknown> };
      this.record(service, command.constructor.name, command.input);
    }
  }

  /**
   * A middleware for a real SDK v3 client: records each command before it is sent
   * (`client.middlewareStack.add(recorder.middleware('sqs'), { step: 'initialize' })`).
   */
  middleware<Input extends object, Output extends object>(service: string): InitializeMiddleware<Input, Output> {
    return (next, context) => async (args) => {
      this.record(service, context.commandName ?? 'Unknown', args.input as Record<string, unknown>);
      return next(args);
    };
  }

  calls(): RecordedCall[] {
    return [...this.#calls.values()].sort((a, b) => callKey(a).localeCompare(callKey(b)));
  }
}

export function toJsonLines(calls: readonly RecordedCall[]): string {
  const unique = new Map(calls.map((c) => [callKey(c), c]));
  return [...unique.values()]
    .sort((a, b) => callKey(a).localeCompare(callKey(b)))
    .map(({ origin: _origin, ...c }) => JSON.stringify(c))
    .join('\n')
    .concat('\n');
}

export async function writeCalls(file: string, calls: readonly RecordedCall[]): Promise<void> {
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, toJsonLines(calls));
}

/**
 * The golden recording of one test file: `test/fixtures/aws-calls/recorded/<name>.jsonl` must hold exactly the calls
 * the test recorded (a call the code starts or stops making changes it). `UPDATE_AWS_CALLS=1` rewrites it instead.
 * Returns the differences (empty when they match).
 */
export async function compareWithGolden(name: string, recorded: readonly RecordedCall[]): Promise<{ missing: string[]; extra: string[] }> {
  const file = join(RECORDED_DIR, `${name}.jsonl`);
  if (process.env['UPDATE_AWS_CALLS'] === '1') {
    await writeCalls(file, recorded);
    return { missing: [], extra: [] };
  }
  const golden = new Set((await readCalls(file).catch(() => [] as RecordedCall[])).map(callKey));
  const now = new Set(recorded.map(callKey));
  return { missing: [...golden].filter((k) => !now.has(k)), extra: [...now].filter((k) => !golden.has(k)) };
}
