/**
 * The runtime inside one container of the Lambda runner (local/lambda/container.ts forks it per container, with
 * the function's environment and the unzipped package as working directory, `LAMBDA_TASK_ROOT`).
 *
 * As the Node.js runtime of AWS Lambda does:
 * - loads the handler module named by `_HANDLER` (`<file>.<export>`) from the task root once, at init, trying the
 *   file names in the runtime's order: `<file>.js` (CommonJS: the zip holds no package.json), then `<file>.mjs` (an ES
 *   module, loaded with `import()`: its top-level await is part of the init, as on Lambda), then `<file>.cjs`;
 * - makes the runtime's AWS SDK v3 resolvable from ES `import()` through `NODE_PATH`, which plain Node does for
 *   `require()` only (Lambda's runtime does it for ES modules since nodejs18.x): a resolve hook retries a bare
 *   specifier that Node's ES resolver did not find in each `NODE_PATH` directory;
 * - invokes the handler once per request with the event and a context whose `getRemainingTimeInMillis()` counts down
 *   to the deadline the runner sets from the function's timeout;
 * - answers with the handler's result or error. Freezing (SIGSTOP/SIGCONT) and the kill at the timeout are done by
 *   the runner from outside, as Lambda does.
 */
import { existsSync } from 'node:fs';
import { registerHooks } from 'node:module';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

interface InvokeMessage {
  readonly type: 'invoke';
  readonly id: number;
  readonly event: unknown;
  readonly deadlineMs: number;
  readonly requestId: string;
}

const send = (message: unknown): void => {
  process.send?.(message);
};
const describe = (e: unknown): { name: string; message: string; stack?: string } =>
  e instanceof Error ? { name: e.name, message: e.message, ...(e.stack ? { stack: e.stack } : {}) } : { name: 'Error', message: String(e) };

const nodePath = (process.env['NODE_PATH'] ?? '').split(':').filter((p) => p !== '');
registerHooks({
  resolve(specifier, context, nextResolve) {
    try {
      return nextResolve(specifier, context);
    } catch (error) {
      const bare = !specifier.startsWith('.') && !specifier.startsWith('/') && !specifier.includes(':');
      if (!bare || (error as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw error;
      for (const dir of nodePath) {
        try {
          // A parent inside the NODE_PATH directory: the ES resolver then looks in <dir>/node_modules, then in
          // <dir>/../node_modules, which is <dir> itself for a directory named node_modules.
          return nextResolve(specifier, { ...context, parentURL: pathToFileURL(join(dir, '__node_path__.js')).href });
        } catch {
          // next directory
        }
      }
      throw error;
    }
  },
});

const taskRoot = process.env['LAMBDA_TASK_ROOT'] ?? process.cwd();
const handlerName = process.env['_HANDLER'] ?? '';
const functionName = process.env['AWS_LAMBDA_FUNCTION_NAME'] ?? 'function';
const dot = handlerName.lastIndexOf('.');
const initStarted = performance.now();
let handler: (event: unknown, context: unknown) => unknown;
try {
  const base = join(taskRoot, handlerName.slice(0, dot));
  const load = createRequire(join(taskRoot, 'index.js'));
  let mod: Record<string, unknown>;
  if (existsSync(`${base}.js`)) mod = load(`${base}.js`) as Record<string, unknown>;
  else if (existsSync(`${base}.mjs`)) mod = (await import(pathToFileURL(`${base}.mjs`).href)) as Record<string, unknown>;
  else if (existsSync(`${base}.cjs`)) mod = load(`${base}.cjs`) as Record<string, unknown>;
  else throw new Error(`Cannot find module '${handlerName.slice(0, dot)}' (.js, .mjs or .cjs) in the task root`);
  const fn = mod[handlerName.slice(dot + 1)];
  if (typeof fn !== 'function') throw new Error(`${handlerName} is undefined or not exported`);
  handler = fn as typeof handler;
} catch (error) {
  send({ type: 'init-error', error: describe(error) });
  process.exit(1);
}
send({ type: 'ready', initMs: performance.now() - initStarted });

process.on('message', (m: InvokeMessage) => {
  if (m.type !== 'invoke') return;
  const unsupported = (name: string) => (): never => {
    throw new TypeError(`context.${name}() belongs to callback-style handlers`);
  };
  const context = {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: process.env['AWS_LAMBDA_FUNCTION_VERSION'] ?? '$LATEST',
    invokedFunctionArn: process.env['LOCAL_LAMBDA_FUNCTION_ARN'] ?? '',
    memoryLimitInMB: process.env['AWS_LAMBDA_FUNCTION_MEMORY_SIZE'] ?? '128',
    awsRequestId: m.requestId,
    logGroupName: process.env['AWS_LAMBDA_LOG_GROUP_NAME'] ?? '',
    logStreamName: process.env['AWS_LAMBDA_LOG_STREAM_NAME'] ?? '',
    getRemainingTimeInMillis: () => Math.max(0, m.deadlineMs - Date.now()),
    done: unsupported('done'),
    fail: unsupported('fail'),
    succeed: unsupported('succeed'),
  };
  Promise.resolve()
    .then(() => handler(m.event, context))
    .then(
      (value) => send({ type: 'result', id: m.id, ok: true, value: value === undefined ? null : value }),
      (error: unknown) => send({ type: 'result', id: m.id, ok: false, error: describe(error) }),
    );
});
