/**
 * One Lambda execution environment ("container") of the runner: a Node process (runtime-bootstrap.ts) that loads the
 * packaged handler once, runs one invocation at a time, is frozen (SIGSTOP) between invocations and thawed (SIGCONT)
 * for the next (an on-demand cold start goes from its init to its first invocation unfrozen, as on Lambda), is killed
 * (SIGKILL) at the function's timeout or when it goes over its memory setting, and is then never used again (the next
 * invocation is a cold start), as on Lambda.
 *
 * Memory: the process's resident set is sampled every 100 ms while it runs and read (VmHWM, the kernel's peak) at the
 * end of each invocation; going over `MemorySize` kills the container (`Runtime.OutOfMemory`). The V8 heap is also
 * bounded as Lambda's Node.js bootstrap bounds it: `--max-old-space-size` at 90 % of `MemorySize` unless
 * `NODE_OPTIONS` already sets a semi-space or old-space size (then neither flag is added). Both are approximations of
 * the Firecracker VM's memory limit, which also counts the runtime's own memory.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { transformSync } from 'esbuild';

/**
 * runtime-bootstrap.ts as plain JavaScript, which each container runs. Lambda's runtime is JavaScript; a `.ts` entry
 * would make every container load Node's type stripper first (about 30 ms of CPU per cold start, measured: 10 bare
 * processes starting at once took 321 ms from a `.ts` file and 122 ms from a `.js` one on 2 cores). Written once per
 * content, under the temporary directory, by esbuild's type stripping (no bundling: the file imports `node:` only).
 */
export function bootstrapFile(): string {
  const source = readFileSync(join(import.meta.dirname, 'runtime-bootstrap.ts'), 'utf8');
  const dir = join(tmpdir(), 'capi-taint-propagator-runtime');
  const file = join(dir, `bootstrap-${createHash('sha256').update(source).digest('hex').slice(0, 16)}.mjs`);
  if (!existsSync(file)) {
    mkdirSync(dir, { recursive: true });
    const partial = `${file}.${process.pid}.tmp`;
    writeFileSync(partial, transformSync(source, { loader: 'ts', format: 'esm', target: 'node22' }).code);
    renameSync(partial, file);
  }
  return file;
}
let bootstrap: string | undefined;
/** Lambda's limit for the init phase of an on-demand container. */
const INIT_TIMEOUT_MS = 10_000;
const RSS_SAMPLE_MS = 100;
const hasSetpriv = ((): boolean => spawnSync('setpriv', ['--help'], { stdio: 'ignore' }).status === 0)();

/** How an invocation ended. */
export type InvokeResult =
  | { readonly ok: true; readonly value: unknown }
  | { readonly ok: false; readonly errorType: string; readonly errorMessage: string };

export interface ContainerOptions {
  readonly id: string;
  readonly taskRoot: string;
  readonly env: Readonly<Record<string, string>>;
  readonly memoryMiB: number;
  /** Called with each line the function writes (stdout and stderr; CloudWatch Logs on Lambda). */
  readonly onOutput: (line: string) => void;
  /**
   * Freeze the process once its init is done (default true): a provisioned container waits frozen for its first
   * invocation, as on Lambda. False for an on-demand cold start, whose invocation is already waiting: Lambda goes from
   * the init phase straight to the invoke phase and freezes the environment only after that invocation.
   */
  readonly freezeAfterInit?: boolean;
}

function procStatus(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/status`, 'utf8');
  } catch {
    return undefined;
  }
}

/** Reads a `/proc/<pid>/status` field in KiB (VmRSS, VmHWM); undefined once the process is gone. */
function procKiB(pid: number, field: string): number | undefined {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(procStatus(pid) ?? '');
  return m ? Number(m[1]) : undefined;
}

/** The heap flags Lambda's Node.js bootstrap adds (see the module comment). */
export function heapFlags(memoryMiB: number, nodeOptions: string | undefined): string[] {
  if (/--max-(semi|old)-space-size/.test(nodeOptions ?? '')) return [];
  return [`--max-old-space-size=${Math.floor(memoryMiB * 0.9)}`];
}

export class Container {
  readonly id: string;
  readonly #o: ContainerOptions;
  readonly #proc: ChildProcess;
  readonly #exited: Promise<string>;
  #alive = true;
  #frozen = false;
  #nextId = 1;
  #pending: { id: number; resolve: (r: InvokeResult) => void } | undefined;
  #exitReason: string | undefined;
  /** Milliseconds the handler module took to load (the init phase). */
  initMs = 0;
  invocations = 0;
  /** Peak resident set in MiB (VmHWM), read after each invocation. */
  peakRssMiB = 0;
  readonly startedAt = Date.now();
  lastUsedAt = Date.now();
  /** When the invocation under way started (`Date.now()`), undefined between invocations. */
  runningSince: number | undefined;

  private constructor(o: ContainerOptions, proc: ChildProcess) {
    this.id = o.id;
    this.#o = o;
    this.#proc = proc;
    this.#exited = new Promise((resolve) => {
      proc.once('exit', (code, signal) => {
        this.#alive = false;
        const reason = this.#exitReason ?? (signal ? `Runtime exited with error: signal: ${signal === 'SIGKILL' ? 'killed' : signal}` : `Runtime exited with error: exit status ${code}`);
        const pending = this.#pending;
        this.#pending = undefined;
        pending?.resolve({ ok: false, errorType: this.#exitReason?.startsWith('Task timed out') ? 'Sandbox.Timedout' : this.#exitReason?.includes('memory') ? 'Runtime.OutOfMemory' : 'Runtime.ExitError', errorMessage: reason });
        resolve(reason);
      });
    });
    proc.on('message', (m: { type: string; id?: number; ok?: boolean; value?: unknown; error?: { name: string; message: string } }) => {
      if (m.type !== 'result' || this.#pending?.id !== m.id) return;
      const pending = this.#pending;
      this.#pending = undefined;
      pending?.resolve(m.ok ? { ok: true, value: m.value } : { ok: false, errorType: m.error?.name ?? 'Error', errorMessage: m.error?.message ?? '' });
    });
  }

  /** Starts the process and waits for its init phase (the handler module loaded); throws with the init error. */
  static async start(o: ContainerOptions): Promise<Container> {
    bootstrap ??= bootstrapFile();
    const execArgv = [...heapFlags(o.memoryMiB, o.env['NODE_OPTIONS']), '--no-warnings=ExperimentalWarning', bootstrap];
    // setpriv: the kernel kills the container if the runner's process dies, even by SIGKILL (frozen ones too).
    const [cmd, argv] = hasSetpriv ? ['setpriv', ['--pdeathsig', 'KILL', '--', process.execPath, ...execArgv]] : [process.execPath, execArgv];
    const proc = spawn(cmd, argv, { cwd: o.taskRoot, env: o.env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    for (const stream of [proc.stdout, proc.stderr]) {
      let buffered = '';
      stream?.setEncoding('utf8');
      stream?.on('data', (chunk: string) => {
        buffered += chunk;
        let nl: number;
        while ((nl = buffered.indexOf('\n')) >= 0) {
          o.onOutput(buffered.slice(0, nl));
          buffered = buffered.slice(nl + 1);
        }
      });
    }
    const container = new Container(o, proc);
    const ready = await new Promise<{ initMs: number } | { error: string }>((resolve) => {
      const timer = setTimeout(() => resolve({ error: `init did not finish within ${INIT_TIMEOUT_MS} ms` }), INIT_TIMEOUT_MS);
      proc.on('message', (m: { type: string; initMs?: number; error?: { name: string; message: string } }) => {
        if (m.type === 'ready') {
          clearTimeout(timer);
          resolve({ initMs: m.initMs ?? 0 });
        } else if (m.type === 'init-error') {
          clearTimeout(timer);
          resolve({ error: `${m.error?.name}: ${m.error?.message}` });
        }
      });
      void container.#exited.then((reason) => {
        clearTimeout(timer);
        resolve({ error: reason });
      });
    });
    if ('error' in ready) {
      container.kill();
      throw new Error(`Init of container ${o.id} failed: ${ready.error}`);
    }
    container.initMs = ready.initMs;
    if (o.freezeAfterInit !== false) await container.#freeze();
    return container;
  }

  get pid(): number | undefined {
    return this.#proc.pid;
  }
  get alive(): boolean {
    return this.#alive;
  }
  get frozen(): boolean {
    return this.#frozen;
  }
  /** Resolves with how the process ended. */
  get exited(): Promise<string> {
    return this.#exited;
  }

  /**
   * Thaws the container, runs one invocation and freezes it again. The container is killed when the deadline passes
   * (`Sandbox.Timedout`) or its resident set goes over `MemorySize` (`Runtime.OutOfMemory`); it is then dead.
   */
  async invoke(event: unknown, deadlineMs: number, requestId: string): Promise<InvokeResult> {
    if (!this.#alive) return { ok: false, errorType: 'Runtime.ExitError', errorMessage: 'the container is gone' };
    if (this.#pending) throw new Error(`container ${this.id} is busy`);
    this.invocations += 1;
    const started = Date.now();
    this.runningSince = started;
    const id = this.#nextId++;
    const result = new Promise<InvokeResult>((resolve) => {
      this.#pending = { id, resolve };
    });
    this.#thaw();
    // A container killed a moment ago (its exit not seen yet) has closed its end of the channel: the write fails with
    // EPIPE, which would otherwise be emitted as an unhandled 'error'. The exit that follows fails the invocation.
    this.#proc.send({ type: 'invoke', id, event, deadlineMs, requestId }, (error) => {
      if (error) this.#killWith(`Runtime exited with error: the invocation could not be sent (${error.message})`);
    });
    const pid = this.#proc.pid ?? 0;
    const limitKiB = this.#o.memoryMiB * 1024;
    const sampler = setInterval(() => {
      const rss = procKiB(pid, 'VmRSS');
      if (rss !== undefined && rss > limitKiB) this.#killWith(`Runtime exited with error: signal: killed (resident set ${Math.round(rss / 1024)} MiB over the ${this.#o.memoryMiB} MiB memory setting)`);
    }, RSS_SAMPLE_MS);
    const timeout = setTimeout(() => this.#killWith(`Task timed out after ${((deadlineMs - started) / 1000).toFixed(2)} seconds`), Math.max(0, deadlineMs - Date.now()));
    try {
      const r = await result;
      const hwm = procKiB(pid, 'VmHWM');
      if (hwm !== undefined) this.peakRssMiB = Math.max(this.peakRssMiB, hwm / 1024);
      return r;
    } finally {
      clearInterval(sampler);
      clearTimeout(timeout);
      this.runningSince = undefined;
      this.lastUsedAt = Date.now();
      if (this.#alive) await this.#freeze();
    }
  }

  /** Kills the container at once (SIGKILL), frozen or running; an invocation under way fails. */
  kill(reason?: string): void {
    this.#killWith(reason ?? 'Runtime exited with error: signal: killed');
  }

  #killWith(reason: string): void {
    if (!this.#alive) return;
    this.#exitReason ??= reason;
    try {
      this.#proc.kill('SIGKILL');
    } catch {
      // already gone
    }
  }

  /** Sends SIGSTOP and waits (up to 1 s) until the kernel reports the process stopped. */
  async #freeze(): Promise<void> {
    if (!this.#alive || this.#frozen) return;
    this.#proc.kill('SIGSTOP');
    this.#frozen = true;
    const pid = this.#proc.pid ?? 0;
    for (let i = 0; i < 1000 && this.#alive; i++) {
      if (/^State:\s+[Tt]/m.test(procStatus(pid) ?? 'State: T')) return;
      await new Promise((r) => setTimeout(r, 1));
    }
  }

  #thaw(): void {
    if (!this.#alive || !this.#frozen) return;
    this.#proc.kill('SIGCONT');
    this.#frozen = false;
  }
}
