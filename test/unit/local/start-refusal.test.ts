/**
 * `npm start` with a KUBECONFIG whose server is not a loopback address: it must refuse, say why and how to opt in,
 * exit non-zero, and never contact the server. The server address is this machine's own non-loopback address with
 * a TCP listener that counts connections (so "never contacted" is observed, not assumed).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../../..');

function nonLoopbackAddress(): string | undefined {
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return undefined;
}

let dir: string;
let server: Server;
let connections = 0;
let host: string;
let port: number;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'ctp-start-'));
  host = nonLoopbackAddress() ?? '192.0.2.10'; // TEST-NET-1 when the machine has no other address: unroutable
  server = createServer((socket) => {
    connections += 1;
    socket.destroy();
  });
  await new Promise<void>((done) => server.listen(0, '0.0.0.0', done));
  port = (server.address() as { port: number }).port;
  await writeFile(
    join(dir, 'kubeconfig'),
    [
      'apiVersion: v1',
      'kind: Config',
      'current-context: prod-admin',
      'clusters: [{ name: prod, cluster: { server: "https://' + host + ':' + port + '", insecure-skip-tls-verify: true } }]',
      'users: [{ name: admin, user: { token: not-a-real-token } }]',
      'contexts: [{ name: prod-admin, context: { cluster: prod, user: admin } }]',
    ].join('\n'),
  );
});

afterAll(async () => {
  await new Promise<void>((done) => server.close(() => done()));
  await rm(dir, { recursive: true, force: true });
});

function npmStart(args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile('npm', ['start', '--silent', '--', ...args], { cwd: root, env: { ...process.env, ...env }, timeout: 60_000 }, (error, stdout, stderr) => {
      done({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

describe('npm start against a cluster that is not on this machine', () => {
  it('refuses without an opt-in, naming the context and server and the way out, and contacts nothing', async () => {
    // Act
    const r = await npmStart([], { KUBECONFIG: join(dir, 'kubeconfig'), ALLOW_REMOTE_CONTEXT: '' });

    // Assess
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('  context  prod-admin');
    expect(r.stderr).toContain(`  server   https://${host}:${port}`);
    expect(r.stderr).toContain('NOT on this machine: refusing to start without an explicit opt-in.');
    expect(r.stderr).toContain('ConfigMap capi-taint-propagator/capi-taint-propagator-state with enabledAt');
    expect(r.stderr).toContain('npm start -- --allow-remote --dry-run');
    expect(r.stdout).not.toContain('running locally');
    expect(connections).toBe(0);
  });

  it('refuses when ALLOW_REMOTE_CONTEXT names another context', async () => {
    const r = await npmStart([], { KUBECONFIG: join(dir, 'kubeconfig'), ALLOW_REMOTE_CONTEXT: 'staging' });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('ALLOW_REMOTE_CONTEXT=staging does not name this context (prod-admin), so it does not apply.');
    expect(connections).toBe(0);
  });

  it('prints its options with --help and exits 0', async () => {
    const r = await npmStart(['--help'], { KUBECONFIG: join(dir, 'kubeconfig') });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('--allow-remote');
    expect(r.stdout).toContain('--dry-run');
    expect(connections).toBe(0);
  });
});
