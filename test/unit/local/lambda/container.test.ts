/**
 * The runner's containers (local/lambda/container.ts + runtime-bootstrap.ts) with small handlers written here: the
 * runtime behaviours the product depends on, by name.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { bootstrapFile, Container, heapFlags } from '#local/lambda/container.ts';

const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'lambda-container-test-'));
// A folder that exposes only @aws-sdk/*, as the runner's NODE_PATH does.
const sdkDir = join(dir, 'runtime', 'node_modules');
mkdirSync(sdkDir, { recursive: true });
symlinkSync(dirname(dirname(createRequire(import.meta.url).resolve('@aws-sdk/client-sqs/package.json'))), join(sdkDir, '@aws-sdk'), 'dir');

const HANDLERS = {
  // An ES import() of the runtime's SDK from a CommonJS bundle, as esbuild leaves `import('@aws-sdk/client-sqs')`.
  sdk: `exports.handler = async () => { const m = await import('@aws-sdk/client-sqs'); return typeof m.SQSClient; };`,
  remaining: `exports.handler = async (_e, ctx) => { const a = ctx.getRemainingTimeInMillis(); await new Promise((r) => setTimeout(r, 200)); return { a, b: ctx.getRemainingTimeInMillis(), id: ctx.awsRequestId }; };`,
  counter: `let n = 0; exports.handler = async () => ++n;`,
  hang: `exports.handler = () => new Promise(() => undefined);`,
  hog: `exports.handler = async () => { const keep = []; for (let i = 0; i < 400; i++) keep.push(Buffer.alloc(1024 * 1024, 1)); return keep.length; };`,
  throws: `exports.handler = async () => { throw new RangeError('bad input'); };`,
  // Closes its end of the runtime's channel shortly after its init, and keeps running.
  closes: `setInterval(() => undefined, 1000); setTimeout(() => process.disconnect(), 100); exports.handler = async () => 1;`,
  // An ES module (as serverless.yml packages the functions: handler.mjs) whose top-level await is its init phase.
  esm: `const { SQSClient } = await import('@aws-sdk/client-sqs'); const setUpAt = await new Promise((r) => setTimeout(() => r(Date.now()), 300)); export const handler = async () => ({ sdk: typeof SQSClient, setUpAt, invokedAt: Date.now() });`,
} as const;
for (const [name, code] of Object.entries(HANDLERS)) {
  mkdirSync(join(dir, name), { recursive: true });
  writeFileSync(join(dir, name, name === 'esm' ? 'handler.mjs' : 'handler.js'), code);
}

const started: Container[] = [];
async function container(name: keyof typeof HANDLERS, memoryMiB = 256, output: string[] = [], freezeAfterInit?: boolean): Promise<Container> {
  const c = await Container.start({
    id: name,
    taskRoot: join(dir, name),
    memoryMiB,
    ...(freezeAfterInit === undefined ? {} : { freezeAfterInit }),
    env: { PATH: process.env['PATH'] ?? '', LAMBDA_TASK_ROOT: join(dir, name), _HANDLER: 'handler.handler', NODE_PATH: sdkDir, AWS_LAMBDA_FUNCTION_NAME: name },
    onOutput: (line) => output.push(line),
  });
  started.push(c);
  return c;
}
const state = (pid: number | undefined): string => /^State:\s+(\w)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? '?';

describe('Lambda runner containers', () => {
  afterEach(async () => {
    for (const c of started.splice(0)) {
      c.kill();
      await c.exited;
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('loads handler.mjs as an ES module and counts its top-level await as the init, done before the first invocation', async () => {
    const c = await container('esm');
    expect(c.initMs).toBeGreaterThanOrEqual(290);
    const r = await c.invoke({}, Date.now() + 10_000, 'r1');
    expect(r.ok).toBe(true);
    const value = (r as { value: { sdk: string; setUpAt: number; invokedAt: number } }).value;
    expect(value.sdk).toBe('function');
    expect(value.setUpAt).toBeLessThanOrEqual(value.invokedAt);
  });

  it('resolves the runtime SDK from an ES import() through NODE_PATH, which plain Node does not', async () => {
    const c = await container('sdk');
    expect(await c.invoke({}, Date.now() + 10_000, 'r1')).toEqual({ ok: true, value: 'function' });
    // Control: the same handler in plain Node with the same NODE_PATH fails to resolve the import.
    const plain = run(process.execPath, ['-e', `require(${JSON.stringify(join(dir, 'sdk', 'handler.js'))}).handler().then(console.log)`], { env: { PATH: process.env['PATH'] ?? '', NODE_PATH: sdkDir }, cwd: join(dir, 'sdk') });
    await expect(plain).rejects.toThrow(/Cannot find package '@aws-sdk\/client-sqs'/);
  });

  it('counts getRemainingTimeInMillis() down to the deadline and passes the request id', async () => {
    const c = await container('remaining');
    const r = await c.invoke({}, Date.now() + 5_000, 'req-42');
    expect(r.ok).toBe(true);
    const v = (r as { value: { a: number; b: number; id: string } }).value;
    expect(v.id).toBe('req-42');
    expect(v.a).toBeLessThanOrEqual(5_000);
    expect(v.a).toBeGreaterThan(3_000);
    expect(v.a - v.b).toBeGreaterThanOrEqual(190);
  });

  it('keeps one process warm across invocations and freezes it (SIGSTOP) between them', async () => {
    const c = await container('counter');
    expect(state(c.pid)).toBe('T');
    expect(await c.invoke({}, Date.now() + 5_000, 'a')).toEqual({ ok: true, value: 1 });
    expect(state(c.pid)).toBe('T');
    expect(await c.invoke({}, Date.now() + 5_000, 'b')).toEqual({ ok: true, value: 2 });
    expect(c.frozen).toBe(true);
    expect(c.peakRssMiB).toBeGreaterThan(10);
  });

  it('goes from the init of an on-demand cold start to its first invocation unfrozen, and freezes after it', async () => {
    const c = await container('counter', 256, [], false);
    expect(c.frozen).toBe(false);
    expect(state(c.pid)).not.toBe('T');
    expect(await c.invoke({}, Date.now() + 5_000, 'a')).toEqual({ ok: true, value: 1 });
    expect(c.frozen).toBe(true);
    expect(state(c.pid)).toBe('T');
  });

  it('kills the container at the deadline (Sandbox.Timedout); it is not used again', async () => {
    const c = await container('hang');
    const r = await c.invoke({}, Date.now() + 300, 'late');
    expect(r).toMatchObject({ ok: false, errorType: 'Sandbox.Timedout', errorMessage: expect.stringMatching(/^Task timed out after 0\.3\d seconds$/) });
    expect(await c.exited).toMatch(/Task timed out/);
    expect(c.alive).toBe(false);
  });

  it('kills a container whose resident set goes over the memory setting (Runtime.OutOfMemory)', async () => {
    const c = await container('hog', 128);
    const r = await c.invoke({}, Date.now() + 20_000, 'hog');
    expect(r).toMatchObject({ ok: false, errorType: 'Runtime.OutOfMemory', errorMessage: expect.stringContaining('over the 128 MiB memory setting') });
  });

  it('fails an invocation that cannot be sent to the container (its channel closed) as Runtime.ExitError, instead of an unhandled error', async () => {
    // CI once met EPIPE here: the invocation was written to a container that had just died. A container that closes
    // its end of the channel while still running fails the send the same way, every time.
    const c = await container('closes', 256, [], false); // not frozen after its init, so that it closes the channel
    await new Promise((r) => setTimeout(r, 400)); // its process.disconnect() is seen here; it is still running
    expect(c.alive).toBe(true);
    const r = await c.invoke({}, Date.now() + 10_000, 'r1');
    expect(r).toMatchObject({ ok: false, errorType: 'Runtime.ExitError' });
    expect((r as { errorMessage: string }).errorMessage).toContain('could not be sent');
    expect(c.alive).toBe(false);
  });

  it("returns a handler's error by name and message, and the container stays warm", async () => {
    const c = await container('throws');
    expect(await c.invoke({}, Date.now() + 5_000, 'x')).toEqual({ ok: false, errorType: 'RangeError', errorMessage: 'bad input' });
    expect(c.alive).toBe(true);
  });

  it("runs its runtime bootstrap as JavaScript, as Lambda's runtime is: Node's type stripper is not part of a cold start", async () => {
    const file = bootstrapFile();
    expect(file).toMatch(/\.mjs$/);
    expect(bootstrapFile()).toBe(file);
    // Type stripping off: a TypeScript file would not even parse; this one does.
    await expect(run(process.execPath, ['--no-experimental-strip-types', '--check', file])).resolves.toBeDefined();
    await expect(run(process.execPath, ['--no-experimental-strip-types', '--check', join(import.meta.dirname, '../../../../local/lambda/runtime-bootstrap.ts')])).rejects.toThrow();
    const c = await container('esm');
    expect(readFileSync(`/proc/${c.pid}/cmdline`, 'utf8').split('\0')).toContain(file);
  });

  it('adds the heap bound of Lambda\'s bootstrap unless NODE_OPTIONS sets a heap size', () => {
    expect(heapFlags(512, undefined)).toEqual(['--max-old-space-size=460']);
    expect(heapFlags(512, '--max-semi-space-size=2')).toEqual([]);
    expect(heapFlags(1024, '--enable-source-maps')).toEqual(['--max-old-space-size=921']);
  });
});
