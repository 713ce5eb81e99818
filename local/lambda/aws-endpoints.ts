/**
 * The AWS side of the Lambda runner, on loopback only:
 * - a recording proxy in front of fauxqs per caller (a function's code, or the event source mapping that polls for
 *   it), reached through `AWS_ENDPOINT_URL_SQS`: it logs each call's action and queue ARN, then forwards it unchanged;
 * - a small SSM-compatible endpoint (AWS JSON 1.1, `GetParameter` with decryption) per caller, reached through
 *   `AWS_ENDPOINT_URL_SSM`, holding the parameters the test or benchmark put there;
 * - the call log: one JSON line per AWS API call, with the action and the resource ARN as they would be in the
 *   account (format: local/lambda/README.md).
 * Signatures are not checked (the functions sign with dummy credentials); IAM is judged from the log elsewhere.
 */
import { appendFileSync } from 'node:fs';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Who made a call: the function's code (with its role) or Lambda's poller of an event source mapping (same role). */
export type CallerKind = 'function' | 'event-source-mapping' | 'lambda-service';

export interface Caller {
  /** Function name as deployed (`capi-taint-propagator-<stage>-watch-forwarder`). */
  readonly functionName: string;
  /** The execution role's ARN as it would be in the account. */
  readonly principalArn: string;
  readonly kind: CallerKind;
}

/** One line of the call log. */
export interface AwsCallRecord {
  /** ISO time the call was received. */
  readonly time: string;
  readonly functionName: string;
  readonly principalArn: string;
  readonly caller: CallerKind;
  /** `sqs`, `ssm`, `kms` or `logs`. */
  readonly service: string;
  /** IAM action, e.g. `sqs:SendMessageBatch`. */
  readonly action: string;
  /** The resource ARN as it would be in the account. */
  readonly resource: string;
  /** HTTP status the endpoint answered (0 when the call is implied, e.g. KMS behind SSM or the logs Lambda writes). */
  readonly status: number;
  /** For implied calls: the service that made it on the caller's behalf (`kms:ViaService`). */
  readonly viaService?: string;
}

/** Collects call records in memory and, when given a path, appends them to a JSON-lines file. */
export class AwsCallLog {
  readonly #records: AwsCallRecord[] = [];
  readonly path: string | undefined;
  constructor(path?: string) {
    this.path = path;
  }
  add(record: AwsCallRecord): void {
    this.#records.push(record);
    if (this.path !== undefined) appendFileSync(this.path, `${JSON.stringify(record)}\n`);
  }
  /** A snapshot of every record so far. */
  records(): readonly AwsCallRecord[] {
    return [...this.#records];
  }
}

/** Maps local queue URLs (or names) to their ARN in the account. */
export type QueueArnOf = (queueUrlOrName: string) => string;

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

function listen(server: Server): Promise<string> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}`));
  });
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
}

/** A loopback endpoint; `stop()` closes it. */
export interface Endpoint {
  readonly url: string;
  stop(): Promise<void>;
}

/**
 * The SQS action of a request: AWS JSON 1.0 (`X-Amz-Target: AmazonSQS.<Action>`, what SDK v3 speaks) or the query
 * protocol (`Action=<Action>`), with the queue it names.
 */
export function sqsActionOf(headers: IncomingMessage['headers'], body: Buffer): { action: string; queue: string | undefined } {
  const target = headers['x-amz-target'];
  if (typeof target === 'string' && target.startsWith('AmazonSQS.')) {
    let parsed: { QueueUrl?: string; QueueName?: string } = {};
    try {
      parsed = JSON.parse(body.toString('utf8') || '{}') as typeof parsed;
    } catch {
      // the server answers the malformed body; the log keeps the action
    }
    return { action: target.slice('AmazonSQS.'.length), queue: parsed.QueueUrl ?? parsed.QueueName };
  }
  const form = new URLSearchParams(body.toString('utf8'));
  return { action: form.get('Action') ?? 'Unknown', queue: form.get('QueueUrl') ?? form.get('QueueName') ?? undefined };
}

/** A proxy in front of the SQS server that logs every call of one caller. */
export async function startSqsRecorder(o: {
  readonly upstream: string;
  readonly caller: Caller;
  readonly log: AwsCallLog;
  readonly queueArnOf: QueueArnOf;
  /** Sees each request's action and body when the server has answered it with 200 (e.g. to time queue messages). */
  readonly onSuccess?: (action: string, body: Buffer) => void;
}): Promise<Endpoint> {
  const upstream = new URL(o.upstream);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const body = await readBody(req);
      const { action, queue } = sqsActionOf(req.headers, body);
      const forward = request(
        { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
        (up) => {
          o.log.add({
            time: new Date().toISOString(),
            functionName: o.caller.functionName,
            principalArn: o.caller.principalArn,
            caller: o.caller.kind,
            service: 'sqs',
            action: `sqs:${action}`,
            resource: queue === undefined ? '*' : o.queueArnOf(queue),
            status: up.statusCode ?? 0,
          });
          if (up.statusCode === 200) o.onSuccess?.(action, body);
          res.writeHead(up.statusCode ?? 502, up.headers);
          up.pipe(res);
        },
      );
      forward.on('error', (e) => {
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`SQS server unreachable: ${e.message}`);
      });
      forward.end(body);
    })();
  });
  const url = await listen(server);
  return { url, stop: () => close(server) };
}

/** A stored parameter of the SSM endpoint. */
export interface SsmParameter {
  readonly value: string;
  /** `SecureString` (default) or `String`. */
  readonly type?: 'SecureString' | 'String';
  /** KMS key that encrypts a SecureString: a key ARN, or `alias/aws/ssm` (the AWS managed key; default). */
  readonly keyId?: string;
}

/** The parameters of the SSM endpoint (shared by every caller's endpoint). */
export class SsmStore {
  readonly #params = new Map<string, { p: SsmParameter; version: number; modified: number }>();
  put(name: string, parameter: SsmParameter): void {
    const version = (this.#params.get(name)?.version ?? 0) + 1;
    this.#params.set(name, { p: parameter, version, modified: Date.now() });
  }
  get(name: string): { p: SsmParameter; version: number; modified: number } | undefined {
    return this.#params.get(name);
  }
}

/**
 * An SSM-compatible endpoint (AWS JSON 1.1) for one caller: `GetParameter` (with or without decryption). Any other
 * action is refused with `InvalidAction`. A SecureString read with decryption also logs the `kms:Decrypt` that SSM
 * makes on the caller's behalf (`viaService: ssm.<region>.amazonaws.com`) when its key is a customer managed key.
 */
export async function startSsmEndpoint(o: { readonly caller: Caller; readonly log: AwsCallLog; readonly store: SsmStore; readonly region: string; readonly accountId: string }): Promise<Endpoint> {
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const body = await readBody(req);
      const target = String(req.headers['x-amz-target'] ?? '');
      const action = target.startsWith('AmazonSSM.') ? target.slice('AmazonSSM.'.length) : 'Unknown';
      const reply = (status: number, payload: unknown, resource: string): void => {
        o.log.add({ time: new Date().toISOString(), functionName: o.caller.functionName, principalArn: o.caller.principalArn, caller: o.caller.kind, service: 'ssm', action: `ssm:${action}`, resource, status });
        res.writeHead(status, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-requestid': crypto.randomUUID() });
        res.end(JSON.stringify(payload));
      };
      let input: { Name?: unknown; WithDecryption?: unknown };
      try {
        input = JSON.parse(body.toString('utf8') || '{}') as typeof input;
      } catch {
        reply(400, { __type: 'SerializationException', message: 'The request body is not JSON' }, '*');
        return;
      }
      if (action !== 'GetParameter') {
        reply(400, { __type: 'InvalidAction', message: `The local SSM endpoint implements GetParameter only, not ${action}` }, '*');
        return;
      }
      const name = typeof input.Name === 'string' ? input.Name : '';
      const arn = `arn:aws:ssm:${o.region}:${o.accountId}:parameter${name.startsWith('/') ? '' : '/'}${name}`;
      const stored = o.store.get(name);
      if (!stored) {
        reply(400, { __type: 'ParameterNotFound', message: `Parameter ${name} not found.` }, arn);
        return;
      }
      const type = stored.p.type ?? 'SecureString';
      const decrypt = input.WithDecryption === true;
      const keyId = stored.p.keyId ?? 'alias/aws/ssm';
      if (type === 'SecureString' && decrypt && keyId.startsWith('arn:')) {
        o.log.add({ time: new Date().toISOString(), functionName: o.caller.functionName, principalArn: o.caller.principalArn, caller: o.caller.kind, service: 'kms', action: 'kms:Decrypt', resource: keyId, status: 0, viaService: `ssm.${o.region}.amazonaws.com` });
      }
      // Without decryption SSM returns the ciphertext of a SecureString: here an opaque base64 stand-in.
      const value = type === 'SecureString' && !decrypt ? Buffer.from(`encrypted:${stored.version}`).toString('base64') : stored.p.value;
      reply(200, { Parameter: { Name: name, Type: type, Value: value, Version: stored.version, LastModifiedDate: stored.modified / 1000, ARN: arn, DataType: 'text' } }, arn);
    })();
  });
  const url = await listen(server);
  return { url, stop: () => close(server) };
}
