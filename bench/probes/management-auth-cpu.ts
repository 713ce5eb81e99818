/**
 * `node bench/probes/management-auth-cpu.ts [--runs=5]`
 *
 * What the management cluster's credentials cost a cold start in CPU, per `MANAGEMENT_AUTH`, beyond the handler's
 * bundle: fresh Node processes that resolve the runtime's AWS SDK through `NODE_PATH`, as Lambda's Node.js runtime does
 * (here node_modules), with credentials in the environment, as Lambda gives them.
 * - `ssm`: `require('@aws-sdk/client-ssm')`, then the first and the second `GetParameter` (a SecureString of 6 000
 *   characters) against a loopback `node:http` server in this process, which plays SSM;
 * - `eks`: `require('@aws-sdk/credential-provider-node')` (the only SDK package the EKS token loads from the runtime:
 *   `@smithy/signature-v4` and the SHA-256 are bundled, shared/adapters/aws/eks-token.ts), then one presigned STS
 *   `GetCallerIdentity` URL, the token (no network).
 * CPU is the child's own (`process.cpuUsage()`, user + system), so the server's work is not counted. Prints the median
 * (bench/lib/stats.ts, nearest rank) of `--runs` processes per step, in ms.
 */
import { execFile } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { median, round } from '../lib/stats.ts';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer, got ${JSON.stringify(values.runs)}`);
const ROOT = join(import.meta.dirname, '..', '..');

const CPU = 'const cpu = () => { const c = process.cpuUsage(); return (c.user + c.system) / 1000; };';
const SSM = `${CPU}
const t0 = cpu();
const { SSMClient, GetParameterCommand } = require('@aws-sdk/client-ssm');
const t1 = cpu();
const client = new SSMClient({ region: 'eu-west-1', endpoint: process.env.SSM_URL });
const get = () => client.send(new GetParameterCommand({ Name: '/kubeconfig', WithDecryption: true }));
get().then(() => { const t2 = cpu(); return get().then(() => console.log(JSON.stringify({ require: t1 - t0, firstCall: t2 - t1, secondCall: cpu() - t2 }))); });`;
const EKS = `${CPU}
const { SignatureV4 } = require('@smithy/signature-v4');
const { Sha256 } = require('@aws-crypto/sha256-js');
const { HttpRequest } = require('@smithy/protocol-http');
const t0 = cpu();
const { defaultProvider } = require('@aws-sdk/credential-provider-node');
const t1 = cpu();
const host = 'sts.eu-west-1.amazonaws.com';
new SignatureV4({ credentials: defaultProvider(), region: 'eu-west-1', service: 'sts', sha256: Sha256 })
  .presign(new HttpRequest({ method: 'GET', protocol: 'https:', hostname: host, path: '/', query: { Action: 'GetCallerIdentity', Version: '2011-06-15' }, headers: { host, 'x-k8s-aws-id': 'management' } }), { expiresIn: 60 })
  .then(() => console.log(JSON.stringify({ require: t1 - t0, token: cpu() - t1 })));`;

const parameter = JSON.stringify({ Parameter: { Name: '/kubeconfig', Type: 'SecureString', Value: 'x'.repeat(6_000), Version: 1 } });
const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    res.writeHead(200, { 'content-type': 'application/x-amz-json-1.1', 'x-amzn-requestid': 'probe' });
    res.end(parameter);
  });
});
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const env = {
  PATH: process.env['PATH'] ?? '',
  NODE_PATH: join(ROOT, 'node_modules'),
  AWS_REGION: 'eu-west-1',
  AWS_ACCESS_KEY_ID: 'AKIAPROBE',
  AWS_SECRET_ACCESS_KEY: 'probe',
  AWS_SESSION_TOKEN: 'probe',
  SSM_URL: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
};

function child(script: string): Promise<Record<string, number>> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script], { env, cwd: ROOT }, (error, stdout) => (error ? reject(error) : resolve(JSON.parse(stdout) as Record<string, number>)));
  });
}

try {
  for (const [name, script] of [['ssm', SSM], ['eks', EKS]] as const) {
    const samples: Array<Record<string, number>> = [];
    for (let i = 0; i < runs; i++) samples.push(await child(script));
    const steps = Object.keys(samples[0] ?? {});
    const medians = Object.fromEntries(steps.map((step) => [step, round(median(samples.map((s) => s[step] ?? 0)), 1)]));
    const total = round(steps.filter((s) => s !== 'secondCall').reduce((sum, s) => sum + (medians[s] ?? 0), 0), 1);
    process.stdout.write(`${name}: ${JSON.stringify({ ...medians, coldStartTotal: total })} (CPU ms, median of ${runs} processes)\n`);
  }
} finally {
  server.close();
}
