/**
 * Child processes of the local control plane (etcd, kube-apiserver, the Cluster API manager) and the small HTTP and
 * polling helpers used while starting them. Every child runs in its own process group under
 * `setpriv --pdeathsig KILL`, so the kernel kills it when this process dies, even by SIGKILL.
 */
import { spawn, spawnSync } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import { createServer } from 'node:net';

const STOP_TIMEOUT_MS = 10_000;

/** A started child process. */
export interface Child {
  readonly name: string;
  readonly proc: ChildProcess;
  readonly logPath: string;
  /** Resolves with a description of how the process ended. */
  readonly exited: Promise<string>;
  alive: boolean;
}


const hasSetpriv = ((): boolean => spawnSync('setpriv', ['--help'], { stdio: 'ignore' }).status === 0)();

export function spawnChild(name: string, bin: string, args: string[], logPath: string): Child {
  const fd = openSync(logPath, 'a');
  // setpriv sets PR_SET_PDEATHSIG then execs the binary: the kernel kills it if this process dies, even by SIGKILL.
  // detached: its own process group, so a terminal's Ctrl-C reaches only us and we stop the children in order.
  const [cmd, argv] = hasSetpriv ? ['setpriv', ['--pdeathsig', 'KILL', '--', bin, ...args]] : [bin, args];
  const proc = spawn(cmd, argv as string[], { detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const child: Child = {
    name,
    proc,
    logPath,
    alive: true,
    exited: new Promise<string>((resolve) => {
      proc.once('error', (e) => {
        child.alive = false;
        resolve(`failed to start: ${e.message}`);
      });
      proc.once('exit', (code, signal) => {
        child.alive = false;
        resolve(signal ? `killed by ${signal}` : `exited with code ${code}`);
      });
    }),
  };
  return child;
}

export function killGroup(child: Child, signal: NodeJS.Signals): void {
  if (!child.alive || child.proc.pid === undefined) return;
  try {
    process.kill(-child.proc.pid, signal);
  } catch {
    try {
      child.proc.kill(signal);
    } catch {
      /* already gone */
    }
  }
}

export async function stopChild(child: Child): Promise<void> {
  if (!child.alive) return;
  killGroup(child, 'SIGTERM');
  // A paused (SIGSTOP) process would keep the SIGTERM pending until the SIGKILL below: let it handle it now.
  killGroup(child, 'SIGCONT');
  const timer = setTimeout(() => killGroup(child, 'SIGKILL'), STOP_TIMEOUT_MS);
  await child.exited;
  clearTimeout(timer);
}

// HTTP helpers (node:https: fetch cannot present a client certificate without an undici dispatcher)

export interface Tls {
  readonly ca: Buffer;
  readonly cert: Buffer;
  readonly key: Buffer;
}

export function httpsGet(url: string, tls: Tls): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'GET', ...tls, timeout: 5000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${url} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export function logTail(path: string, lines = 25): string {
  try {
    return readFileSync(path, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Polls `probe` every 100 ms until it returns true. Fails early when one of `children` exits, and after `timeoutMs`
 * with `what` in the message. Never sleeps for a fixed time beyond the polling interval.
 */
export async function pollUntil(what: string, timeoutMs: number, children: Child[], probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  for (;;) {
    const dead = children.find((c) => !c.alive);
    if (dead) throw new ChildExitedError(dead, await dead.exited);
    try {
      if (await probe()) return;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last})` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export class ChildExitedError extends Error {
  readonly portClash: boolean;
  constructor(child: Child, how: string) {
    const tail = logTail(child.logPath);
    super(`${child.name} ${how} during startup; last lines of ${child.logPath}:\n${tail}`);
    this.name = 'ChildExitedError';
    this.portClash = /address already in use/i.test(tail);
  }
}

