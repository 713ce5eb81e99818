/**
 * A Lambda-like runner for the zips `npx serverless package` builds, driven by the packaged template alone
 * (local/lambda/README.md). It starts, on loopback:
 * - fauxqs with the template's queues (names, FIFO, visibility timeout, redrive policy, ...), behind a recording proxy
 *   per caller;
 * - an SSM endpoint (GetParameter with decryption) for the management kubeconfig;
 * - per function, a pool of containers (container.ts) within its reserved concurrency, reused while warm; a function
 *   with provisioned concurrency (an alias's or version's ProvisionedConcurrencyConfig) gets that many containers of
 *   the version initialized at start, before any trigger, kept warm and replaced when one dies;
 * - the triggers the template declares: each `rate(...)` schedule (one asynchronous invocation per period, at a random
 *   point within it, as EventBridge does; a throttled event is retried until MaximumEventAgeInSeconds, a failed one
 *   MaximumRetryAttempts times) and each SQS event source mapping (batch size, ReportBatchItemFailures,
 *   ScalingConfig.MaximumConcurrency) through local/sqs/sqs-event-source.ts.
 * Every AWS API call is written to the call log (aws-endpoints.ts). Time runs at real speed.
 */
import { execFile } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { buildApp } from 'fauxqs';
import { SqsEventSource, type EventSourceCounters } from '#local/sqs/sqs-event-source.ts';
import { AwsCallLog, SsmStore, startSqsRecorder, startSsmEndpoint, type Caller, type CallerKind, type Endpoint, type SsmParameter } from './aws-endpoints.ts';
import { Container, type InvokeResult } from './container.ts';
import type { EksPrincipal } from './eks-authenticator.ts';
import { eksAccessEntryGroups, readPackagedTemplate, resolveValue, type Json, type PackagedTemplate, type Resolver, type TemplateFunction, type TemplateQueue } from './template.ts';

const run = promisify(execFile);
/** Account the runner plays (the one of the repository's worked parameter files). */
export const DEFAULT_ACCOUNT_ID = '111122223333';
/** Dummy credentials of the runner's own calls (the event source's polls): the local endpoints accept any signature. */
const DUMMY_CREDENTIALS = { AWS_ACCESS_KEY_ID: 'ASIALOCALRUNNER00000', AWS_SECRET_ACCESS_KEY: 'local-runner-secret', AWS_SESSION_TOKEN: 'local-runner-session' };

/**
 * A function's own temporary credentials (its role's session, as Lambda gives each function): fixed per function key,
 * so that the EKS stand-in (eks-authenticator.ts) can tell the roles apart. The SQS and SSM endpoints accept any signature.
 */
export function functionCredentials(fnKey: string): { readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken: string } {
  const h = createHash('sha256').update(fnKey).digest('hex').toUpperCase();
  return { accessKeyId: `ASIALOCAL${h.slice(0, 11)}`, secretAccessKey: `local-runner-secret-${h.slice(11, 31)}`, sessionToken: `local-runner-session-${h.slice(31, 51)}` };
}
/** How long an idle warm container is kept before it is reclaimed (Lambda: minutes, unspecified). */
const DEFAULT_IDLE_MS = 10 * 60_000;
/** A provisioned container that could not be replaced (its init failed) is tried again after this long. */
const PROVISION_RETRY_MS = 5_000;
/** Long-poll wait of the event source mapping's receives (Lambda uses 20 s; shorter so that stopping is prompt). */
const ESM_WAIT_SECONDS = 2;

/** What kind of invocation it was. */
export type Trigger = 'schedule' | 'sqs' | 'direct';

/** One invocation, as the runner saw it. */
export interface InvocationRecord {
  readonly functionKey: string;
  readonly requestId: string;
  readonly trigger: Trigger;
  readonly containerId: string;
  /** This invocation started a new container (init included in `initMs`). */
  readonly coldStart: boolean;
  readonly initMs: number;
  /** The function version that ran: `$LATEST`, or the version an alias points at (`1`). */
  readonly version: string;
  /** It ran in a provisioned container (initialized at start, never a cold start). */
  readonly provisioned: boolean;
  readonly startedAt: number;
  readonly durationMs: number;
  readonly result: InvokeResult;
}

export interface FunctionStats {
  readonly invocations: number;
  readonly coldStarts: number;
  readonly errors: number;
  readonly timeouts: number;
  /** Asynchronous events that found every container of the reserved concurrency busy (retried later). */
  readonly throttles: number;
  /** Asynchronous events dropped (too old, or out of retries). */
  readonly droppedEvents: number;
  /**
   * Sum of invocation durations (Lambda bills each rounded up to 1 ms) and of the cold starts' init phases. The
   * provisioned containers' inits are not in it (`provisionedStats().initMs`).
   */
  readonly billedMs: number;
  readonly gbSeconds: number;
  /** Bytes the function wrote to its log (CloudWatch Logs ingestion). */
  readonly logBytes: number;
  /** Highest peak resident set of any of its containers, MiB. */
  readonly peakRssMiB: number;
  readonly memoryMiB: number;
}

/** The provisioned containers of a function (all zero without provisioned concurrency). */
export interface ProvisionedStats {
  /** Provisioned concurrency of the template (all versions together). */
  readonly provisionedConcurrency: number;
  /** Provisioned containers alive now. */
  readonly containers: number;
  /** Provisioned containers initialized (at start, and each replacement of one that died): not cold starts. */
  readonly inits: number;
  /** Their init phases, ms: on AWS covered by the provisioned-concurrency charge, not in `billedMs`. */
  readonly initMs: number;
  /** Invocations that ran in a provisioned container (AWS/Lambda `ProvisionedConcurrencyInvocations`). */
  readonly invocations: number;
}

export class ThrottledError extends Error {
  constructor(functionName: string, limit: number) {
    super(`Rate Exceeded: ${functionName} is at its reserved concurrency (${limit})`);
    this.name = 'TooManyRequestsException';
  }
}

/** The containers of one function and the invocation accounting. */
export class FunctionPool {
  readonly fn: TemplateFunction;
  readonly #env: Readonly<Record<string, string>>;
  readonly #taskRoot: string;
  readonly #logPath: string;
  readonly #idleMs: number;
  readonly #onInvocation: (r: InvocationRecord) => void;
  readonly #onLogStream: (stream: string) => void;
  readonly #idle: Container[] = [];
  readonly #busy = new Set<Container>();
  readonly #all: Container[] = [];
  /** Version and kind of each container (`$LATEST` and on-demand unless the template has versions). */
  readonly #kind = new Map<Container, { readonly version: string; readonly provisioned: boolean }>();
  /** Provisioned containers being initialized, per version. */
  readonly #provisioning = new Map<string, number>();
  readonly #provisionRuns = new Set<Promise<void>>();
  readonly #retryTimers = new Set<NodeJS.Timeout>();
  #starting = 0;
  #seq = 0;
  #stopped = false;
  /** No more replacements of provisioned containers (the runner is stopping). */
  #retired = false;
  #stats = { invocations: 0, coldStarts: 0, errors: 0, timeouts: 0, throttles: 0, droppedEvents: 0, billedMs: 0, logBytes: 0 };
  #provisionedStats = { inits: 0, initMs: 0, invocations: 0 };
  readonly records: InvocationRecord[] = [];
  /** CloudWatch metrics the function's EMF lines define: `<namespace> <metric> <dimension=value,...>`. */
  readonly #metrics = new Set<string>();
  #dispatchWaiters: ((d: { container: Container; event: unknown; requestId: string }) => void)[] = [];

  /** The function's environment as its containers get it (before the per-container log stream name). */
  get env(): Readonly<Record<string, string>> {
    return this.#env;
  }

  constructor(o: { fn: TemplateFunction; env: Record<string, string>; taskRoot: string; logPath: string; idleMs: number; onInvocation: (r: InvocationRecord) => void; onLogStream: (stream: string) => void }) {
    this.fn = o.fn;
    this.#env = o.env;
    this.#taskRoot = o.taskRoot;
    this.#logPath = o.logPath;
    this.#idleMs = o.idleMs;
    this.#onInvocation = o.onInvocation;
    this.#onLogStream = o.onLogStream;
  }

  get limit(): number {
    return this.fn.reservedConcurrency ?? 1000;
  }

  /** Containers alive now (warm, frozen or running). */
  containers(): readonly Container[] {
    return this.#all.filter((c) => c.alive);
  }

  /** Containers running an invocation now. */
  busy(): readonly Container[] {
    return [...this.#busy];
  }

  /** Provisioned containers alive now (initialized at start or as replacements; warm, frozen or running). */
  provisionedContainers(): readonly Container[] {
    return this.containers().filter((c) => this.#kind.get(c)?.provisioned === true);
  }

  /** Provisioned concurrency of all versions together (0: none). */
  get provisionedConcurrency(): number {
    return [...this.fn.provisionedConcurrency.values()].reduce((a, b) => a + b, 0);
  }

  stats(): FunctionStats {
    const peak = Math.max(0, ...this.#all.map((c) => c.peakRssMiB));
    return { ...this.#stats, gbSeconds: (this.#stats.billedMs / 1000) * (this.fn.memoryMiB / 1024), peakRssMiB: Math.round(peak * 10) / 10, memoryMiB: this.fn.memoryMiB };
  }

  provisionedStats(): ProvisionedStats {
    return { ...this.#provisionedStats, provisionedConcurrency: this.provisionedConcurrency, containers: this.provisionedContainers().length };
  }

  /**
   * The version a qualifier invokes: none or `$LATEST` → `$LATEST`, an alias's name → its version, a version number of
   * the template → itself. Anything else is refused, as Lambda answers ResourceNotFoundException.
   */
  versionOf(qualifier: string | undefined): string {
    if (qualifier === undefined || qualifier === '$LATEST') return '$LATEST';
    const alias = this.fn.aliases.find((a) => a.name === qualifier);
    if (alias) return alias.version;
    if (this.fn.versions.some((v) => v.version === qualifier)) return qualifier;
    throw new Error(`Function not found: ${this.fn.functionName}:${qualifier} (no such alias or version in the template)`);
  }

  /**
   * Initializes the provisioned containers the template asks for (all versions), a few at a time: resolves once all
   * are ready. Throws when one's init fails (on AWS the allocation fails and so does the deployment).
   */
  async provision(): Promise<void> {
    const versions = [...this.fn.provisionedConcurrency].flatMap(([version, n]) => Array.from({ length: n }, () => version));
    const width = Math.max(1, availableParallelism());
    for (let i = 0; i < versions.length; i += width) {
      const results = await Promise.allSettled(versions.slice(i, i + width).map((v) => this.#startProvisioned(v)));
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    }
  }

  countThrottle(): void {
    this.#stats.throttles += 1;
  }
  countDropped(): void {
    this.#stats.droppedEvents += 1;
  }

  /**
   * Runs one invocation of the qualifier's version (unqualified: `$LATEST`) in a warm container of that version (an
   * idle provisioned one first, as Lambda routes to provisioned concurrency before on-demand), or a new one (a cold
   * start); throws ThrottledError at the reserved concurrency, of which the provisioned containers hold their share
   * whether busy or not.
   */
  async invoke(event: unknown, trigger: Trigger, qualifier?: string): Promise<InvocationRecord> {
    if (this.#stopped) throw new Error(`${this.fn.functionName}: the runner is stopped`);
    const version = this.versionOf(qualifier);
    this.#reap();
    let container = this.#takeIdle(version);
    let cold = false;
    if (!container) {
      const onDemandBusy = [...this.#busy].filter((c) => this.#kind.get(c)?.provisioned !== true).length;
      if (onDemandBusy + this.#starting + this.provisionedConcurrency >= this.limit) throw new ThrottledError(this.fn.functionName, this.limit);
      this.#starting += 1;
      try {
        container = await this.#newContainer(version, false);
      } finally {
        this.#starting -= 1;
      }
      cold = true;
      this.#stats.coldStarts += 1;
    }
    const provisioned = this.#kind.get(container)?.provisioned === true;
    this.#busy.add(container);
    const requestId = randomUUID();
    const startedAt = Date.now();
    let result: InvokeResult;
    try {
      const running = container.invoke(event, startedAt + this.fn.timeoutSeconds * 1000, requestId);
      for (const w of this.#dispatchWaiters.splice(0)) w({ container, event, requestId });
      result = await running;
    } finally {
      this.#busy.delete(container);
      if (container.alive && !this.#stopped) this.#idle.push(container);
    }
    const durationMs = Date.now() - startedAt;
    const record: InvocationRecord = { functionKey: this.fn.key, requestId, trigger, containerId: container.id, coldStart: cold, initMs: cold ? container.initMs : 0, version, provisioned, startedAt, durationMs, result };
    this.#stats.invocations += 1;
    if (provisioned) this.#provisionedStats.invocations += 1;
    this.#stats.billedMs += Math.ceil(durationMs) + Math.ceil(record.initMs);
    if (!result.ok) this.#stats.errors += 1;
    if (!result.ok && result.errorType === 'Sandbox.Timedout') this.#stats.timeouts += 1;
    this.records.push(record);
    this.#onInvocation(record);
    return record;
  }

  /** Resolves with the next invocation's container and event, once the event has been handed to the running handler. */
  nextDispatch(): Promise<{ container: Container; event: unknown; requestId: string }> {
    return new Promise((resolve) => this.#dispatchWaiters.push(resolve));
  }

  /**
   * Kills every container of the function (a deployment, or an outage of the host), running or frozen. Provisioned
   * ones are replaced, as Lambda keeps the configured number initialized.
   */
  killAll(): void {
    for (const c of this.#all) c.kill();
  }

  /** Stops replacing provisioned containers that die (the runner is stopping). */
  retire(): void {
    this.#retired = true;
    for (const t of this.#retryTimers) clearTimeout(t);
    this.#retryTimers.clear();
  }

  async stop(): Promise<void> {
    this.retire();
    this.#stopped = true;
    await Promise.allSettled([...this.#provisionRuns]);
    for (const c of this.#all) c.kill();
    await Promise.all(this.#all.map((c) => c.exited));
  }

  /** An idle container of the version: a provisioned one first, else the most recently used. */
  #takeIdle(version: string): Container | undefined {
    const take = (wanted: (k: { version: string; provisioned: boolean } | undefined) => boolean): Container | undefined => {
      for (let i = this.#idle.length - 1; i >= 0; i--) {
        const c = this.#idle[i];
        if (c && wanted(this.#kind.get(c))) return this.#idle.splice(i, 1)[0];
      }
      return undefined;
    };
    return take((k) => k?.provisioned === true && k.version === version) ?? take((k) => k?.version === version);
  }

  /** Starts one provisioned container of the version and puts it among the idle ones; replaced when it dies. */
  #startProvisioned(version: string): Promise<void> {
    this.#provisioning.set(version, (this.#provisioning.get(version) ?? 0) + 1);
    const run = (async (): Promise<void> => {
      try {
        const c = await this.#newContainer(version, true);
        this.#provisionedStats.inits += 1;
        this.#provisionedStats.initMs += c.initMs;
        if (this.#stopped) {
          c.kill();
          return;
        }
        this.#idle.push(c);
        void c.exited.then(() => this.#replenish(version));
      } finally {
        this.#provisioning.set(version, (this.#provisioning.get(version) ?? 1) - 1);
      }
    })();
    this.#provisionRuns.add(run);
    void run.then(
      () => this.#provisionRuns.delete(run),
      () => this.#provisionRuns.delete(run),
    );
    return run;
  }

  /** Brings the version's provisioned containers back to the configured number (one died), retrying a failed init. */
  #replenish(version: string): void {
    if (this.#retired || this.#stopped) return;
    const alive = this.provisionedContainers().filter((c) => this.#kind.get(c)?.version === version).length;
    const missing = (this.fn.provisionedConcurrency.get(version) ?? 0) - alive - (this.#provisioning.get(version) ?? 0);
    for (let i = 0; i < missing; i++) {
      this.#startProvisioned(version).catch(() => {
        if (this.#retired || this.#stopped) return;
        const t = setTimeout(() => {
          this.#retryTimers.delete(t);
          this.#replenish(version);
        }, PROVISION_RETRY_MS);
        this.#retryTimers.add(t);
      });
    }
  }

  async #newContainer(version: string, provisioned: boolean): Promise<Container> {
    const id = `${this.fn.key}-${++this.#seq}`;
    const day = new Date().toISOString().slice(0, 10).replaceAll('-', '/');
    const stream = `${day}/[${version}]${randomBytes(16).toString('hex')}`;
    this.#onLogStream(stream);
    const env: Record<string, string> = { ...this.#env, AWS_LAMBDA_LOG_STREAM_NAME: stream };
    if (version !== '$LATEST') {
      // The ARN it is invoked by: qualified with the version's alias (its number when it has none).
      const qualifier = this.fn.aliases.find((a) => a.version === version)?.name ?? version;
      env['AWS_LAMBDA_FUNCTION_VERSION'] = version;
      if (env['LOCAL_LAMBDA_FUNCTION_ARN'] !== undefined) env['LOCAL_LAMBDA_FUNCTION_ARN'] = `${env['LOCAL_LAMBDA_FUNCTION_ARN']}:${qualifier}`;
    }
    if (provisioned) env['AWS_LAMBDA_INITIALIZATION_TYPE'] = 'provisioned-concurrency';
    const container = await Container.start({
      id,
      taskRoot: this.#taskRoot,
      env,
      memoryMiB: this.fn.memoryMiB,
      // A provisioned container waits frozen for its first invocation; an on-demand one is started for an invocation.
      freezeAfterInit: provisioned,
      onOutput: (line) => {
        this.#stats.logBytes += Buffer.byteLength(line) + 1;
        if (line.includes('"_aws"')) this.#collectMetrics(line);
        appendFileSync(this.#logPath, `[${id}] ${line}\n`);
      },
    });
    this.#all.push(container);
    this.#kind.set(container, { version, provisioned });
    return container;
  }

  /** The custom metrics (namespace, name, dimension values) the function's embedded-metric-format lines defined so far. */
  customMetrics(): string[] {
    return [...this.#metrics].sort();
  }

  #collectMetrics(line: string): void {
    try {
      const doc = JSON.parse(line) as { _aws?: { CloudWatchMetrics?: { Namespace: string; Dimensions?: string[][]; Metrics?: { Name: string }[] }[] } } & Record<string, unknown>;
      for (const directive of doc._aws?.CloudWatchMetrics ?? []) {
        for (const dims of directive.Dimensions?.length ? directive.Dimensions : [[]]) {
          const dimText = dims.map((d) => `${d}=${String(doc[d])}`).join(',');
          for (const m of directive.Metrics ?? []) this.#metrics.add(`${directive.Namespace} ${m.Name} ${dimText}`);
        }
      }
    } catch {
      // not a metrics line after all
    }
  }

  /** Reclaims on-demand containers idle for longer than the idle time (and drops dead ones from the idle list). */
  #reap(): void {
    const now = Date.now();
    for (let i = this.#idle.length - 1; i >= 0; i--) {
      const c = this.#idle[i];
      // Provisioned containers stay initialized however long they idle.
      if (c && (!c.alive || (this.#kind.get(c)?.provisioned !== true && now - c.lastUsedAt > this.#idleMs))) {
        c.kill('reclaimed while idle');
        this.#idle.splice(i, 1);
      }
    }
  }
}

export interface LambdaRunnerOptions {
  /** The packaged service: the directory that holds `.serverless/` (test/support/serverless-package.ts gives it). */
  readonly serviceDir: string;
  readonly accountId?: string;
  /** Where containers' task roots, logs and the call log go (default: a new temp dir, removed by `stop()`). */
  readonly workDir?: string;
  /** The call log's path (default `<workDir>/aws-calls.jsonl`). */
  readonly callLogPath?: string;
  /** Parameters of the SSM endpoint, e.g. the management kubeconfig under the template's parameter name. */
  readonly ssmParameters?: Readonly<Record<string, SsmParameter>>;
  /** Start the schedules and event source mappings at once (default true); else call `startTriggers()`. */
  readonly startTriggers?: boolean;
  readonly idleContainerMs?: number;
  /** Random source of the schedules' firing points (default Math.random). */
  readonly random?: () => number;
  readonly onInvocation?: (r: InvocationRecord) => void;
  /** Each message a function sent to a queue, when SQS accepted it. */
  readonly onQueueMessage?: (m: QueueMessage) => void;
}

/** A message a function sent to a queue (seen at the recording proxy when SQS accepted it). */
export interface QueueMessage {
  /** `Date.now()` when SQS answered the send. */
  readonly at: number;
  readonly functionKey: string;
  readonly queueName: string;
  readonly body: string;
  readonly groupId: string | undefined;
  readonly deduplicationId: string | undefined;
}

/** A local queue of the template: its local URL and ARN (fauxqs) and its ARN in the account. */
export interface RunnerQueue {
  readonly logicalId: string;
  readonly name: string;
  readonly url: string;
  readonly localArn: string;
  readonly accountArn: string;
}

export class LambdaRunner {
  readonly template: PackagedTemplate;
  readonly accountId: string;
  readonly region: string;
  readonly workDir: string;
  readonly callLog: AwsCallLog;
  readonly ssm: SsmStore;
  /** fauxqs: endpoint and a client of the test's own (not recorded: the test is not the account's code). */
  readonly sqs: { readonly endpoint: string; readonly client: SQSClient };
  readonly queues: ReadonlyMap<string, RunnerQueue>;
  readonly #pools = new Map<string, FunctionPool>();
  readonly #eventSources: { fnKey: string; source: SqsEventSource }[] = [];
  readonly #endpoints: Endpoint[];
  readonly #stopFauxqs: () => Promise<void>;
  readonly #ownsWorkDir: boolean;
  readonly #random: () => number;
  #schedules: { stop: () => void }[] = [];
  #asyncRuns = new Set<Promise<void>>();
  #triggersOn = false;
  #stopping = false;
  readonly #abort = new AbortController();

  private constructor(init: {
    template: PackagedTemplate;
    accountId: string;
    workDir: string;
    ownsWorkDir: boolean;
    callLog: AwsCallLog;
    ssm: SsmStore;
    sqs: { endpoint: string; client: SQSClient };
    queues: Map<string, RunnerQueue>;
    endpoints: Endpoint[];
    stopFauxqs: () => Promise<void>;
    random: () => number;
  }) {
    this.template = init.template;
    this.accountId = init.accountId;
    this.region = init.template.region;
    this.workDir = init.workDir;
    this.#ownsWorkDir = init.ownsWorkDir;
    this.callLog = init.callLog;
    this.ssm = init.ssm;
    this.sqs = init.sqs;
    this.queues = init.queues;
    this.#endpoints = init.endpoints;
    this.#stopFauxqs = init.stopFauxqs;
    this.#random = init.random;
  }

  static async start(o: LambdaRunnerOptions): Promise<LambdaRunner> {
    const template = readPackagedTemplate(o.serviceDir);
    const accountId = o.accountId ?? DEFAULT_ACCOUNT_ID;
    const region = template.region;
    const ownsWorkDir = o.workDir === undefined;
    const workDir = o.workDir ?? mkdtempSync(join(tmpdir(), 'lambda-runner-'));
    mkdirSync(workDir, { recursive: true });
    const callLog = new AwsCallLog(o.callLogPath ?? join(workDir, 'aws-calls.jsonl'));
    const ssm = new SsmStore();
    for (const [name, p] of Object.entries(o.ssmParameters ?? {})) ssm.put(name, p);

    // fauxqs on loopback (buildApp: startFauxqs would listen on every interface), the template's queues in it.
    const app = buildApp({ logger: false, defaultRegion: region });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const endpoint = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    const client = new SQSClient({ endpoint, region, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
    const endpoints: Endpoint[] = [];
    const stopFauxqs = async (): Promise<void> => {
      client.destroy();
      await app.close();
    };
    let runner: LambdaRunner | undefined;
    try {
      const queues = await createQueues(client, template, accountId);
      runner = new LambdaRunner({ template, accountId, workDir, ownsWorkDir, callLog, ssm, sqs: { endpoint, client }, queues, endpoints, stopFauxqs, random: o.random ?? Math.random });
      await runner.#startFunctions(o);
      if (o.startTriggers ?? true) runner.startTriggers();
      return runner;
    } catch (error) {
      // Containers already started (a provisioned one whose sibling's init failed) go with the runner.
      if (runner) await Promise.all([...runner.#pools.values()].map((p) => p.stop()));
      for (const e of endpoints) await e.stop();
      await stopFauxqs();
      throw error;
    }
  }

  /** The pool of a function, by its serverless.yml key (`watchForwarder`, `reconcileNodeTaints`). */
  fn(key: string): FunctionPool {
    const pool = this.#pools.get(key);
    if (!pool) throw new Error(`No function ${JSON.stringify(key)} in ${this.template.templatePath}; functions: ${[...this.#pools.keys()].join(', ')}`);
    return pool;
  }

  /** The queue of a logical id (`EventQueue`). */
  queue(logicalId: string): RunnerQueue {
    const q = this.queues.get(logicalId);
    if (!q) throw new Error(`No queue ${JSON.stringify(logicalId)} in the template`);
    return q;
  }

  /** Counters of the SQS event source mappings, per function key. */
  eventSourceCounters(): Record<string, EventSourceCounters> {
    return Object.fromEntries(this.#eventSources.map((e) => [e.fnKey, e.source.counters]));
  }

  /**
   * A synchronous (RequestResponse) invocation, as `aws lambda invoke [--qualifier <alias|version>]` makes it.
   * Unqualified it runs `$LATEST`, which never uses the provisioned containers (those run the alias's version).
   */
  invoke(key: string, event: unknown, qualifier?: string): Promise<InvocationRecord> {
    return this.fn(key).invoke(event, 'direct', qualifier);
  }

  /**
   * One event of each of the function's schedules delivered now (what the next period would deliver; the forwarder has
   * one schedule per shard), as asynchronous invocations: retried while throttled until MaximumEventAgeInSeconds. For
   * tests that must not wait for the random point of the first period; the periodic firing goes on unchanged.
   */
  async fireSchedule(key: string): Promise<void> {
    const fn = this.fn(key).fn;
    if (fn.schedules.length === 0) throw new Error(`${key} has no schedule in the template`);
    await Promise.all(fn.schedules.map((rule) => this.#deliverAsync(key, rule.logicalId)));
  }

  /** Starts every enabled schedule and event source mapping of the template (idempotent). */
  startTriggers(): void {
    if (this.#triggersOn) return;
    this.#triggersOn = true;
    for (const [key, pool] of this.#pools) {
      for (const rule of pool.fn.schedules.filter((s) => s.enabled)) this.#schedules.push(this.#startSchedule(key, rule.logicalId, rule.periodMs));
    }
    for (const e of this.#eventSources) e.source.start();
  }

  /** Stops the schedules and event source mappings; waits for receives and invocations under way. */
  async stopTriggers(): Promise<void> {
    for (const s of this.#schedules) s.stop();
    this.#schedules = [];
    await Promise.all(this.#eventSources.map((e) => e.source.stop()));
    await Promise.all([...this.#asyncRuns]);
    this.#triggersOn = false;
  }

  /** Waits until the event queue holds nothing and no reconcile invocation runs. */
  async drain(timeoutMs = 60_000): Promise<void> {
    await Promise.all(this.#eventSources.map((e) => e.source.drain({ timeoutMs })));
  }

  /** Stops everything and kills every container; removes the work dir when the runner made it. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#abort.abort();
    for (const s of this.#schedules) s.stop();
    this.#schedules = [];
    for (const pool of this.#pools.values()) {
      pool.retire();
      pool.killAll();
    }
    await Promise.all(this.#eventSources.map((e) => e.source.stop()));
    await Promise.all([...this.#asyncRuns]);
    await Promise.all([...this.#pools.values()].map((p) => p.stop()));
    for (const e of this.#endpoints) await e.stop();
    await this.#stopFauxqs();
    if (this.#ownsWorkDir) rmSync(this.workDir, { recursive: true, force: true });
  }

  /**
   * Each function's credentials and role, with the groups of the role's EKS access entry in the packaged template
   * (`AWS::EKS::AccessEntry` whose `PrincipalArn` is the role's `Arn`; undefined groups: no entry), for the EKS stand-in.
   */
  eksPrincipals(): EksPrincipal[] {
    return [...this.template.functions.values()].map((fn) => ({
      ...functionCredentials(fn.key),
      roleArn: this.#roleArn(fn),
      sessionName: fn.functionName,
      groups: eksAccessEntryGroups(this.template, fn.roleLogicalId),
    }));
  }

  #roleArn(fn: TemplateFunction): string {
    return `arn:aws:iam::${this.accountId}:role/${this.template.roleNames.get(fn.roleLogicalId) ?? fn.roleLogicalId}`;
  }

  #caller(fn: TemplateFunction, kind: CallerKind): Caller {
    return { functionName: fn.functionName, principalArn: this.#roleArn(fn), kind };
  }

  /**
   * Stand-ins for the stack's resources: local ARNs for the functions, account ARNs for the call log. A queue's `Ref`
   * is its URL on the caller's SQS endpoint (`<endpoint>/<account>/<name>`), as in AWS where the queue URL's host is
   * the SQS endpoint (the SDK sends to the QueueUrl's host when the two differ).
   */
  #resolver(local: boolean, sqsEndpoint?: string): Resolver {
    return {
      accountId: this.accountId,
      region: this.region,
      ref: (id) => {
        const q = this.queues.get(id);
        if (q) return sqsEndpoint === undefined ? q.url : `${sqsEndpoint}/${this.accountId}/${q.name}`;
        const f = [...this.template.functions.values()].find((x) => x.logicalId === id);
        if (f) return f.functionName;
        throw new Error(`The runner cannot resolve Ref ${id}`);
      },
      getAtt: (id, attr) => {
        const q = this.queues.get(id);
        if (q && attr === 'Arn') return local ? q.localArn : q.accountArn;
        if (q && attr === 'QueueName') return q.name;
        const role = this.template.roleNames.get(id);
        if (role !== undefined && attr === 'Arn') return `arn:aws:iam::${this.accountId}:role/${role}`;
        const f = [...this.template.functions.values()].find((x) => x.logicalId === id);
        if (f && attr === 'Arn') return `arn:aws:lambda:${this.region}:${this.accountId}:function:${f.functionName}`;
        throw new Error(`The runner cannot resolve Fn::GetAtt ${id}.${attr}`);
      },
    };
  }

  async #startFunctions(o: LambdaRunnerOptions): Promise<void> {
    const sdkPath = runtimeSdkDir(this.workDir);
    const queueArnOf = (urlOrName: string): string => {
      const name = urlOrName.slice(urlOrName.lastIndexOf('/') + 1);
      return `arn:aws:sqs:${this.region}:${this.accountId}:${name}`;
    };
    for (const fn of this.template.functions.values()) {
      const taskRoot = join(this.workDir, 'task', fn.key);
      mkdirSync(taskRoot, { recursive: true });
      await run('unzip', ['-q', '-o', fn.zipPath, '-d', taskRoot]);
      const caller = this.#caller(fn, 'function');
      const onSuccess = o.onQueueMessage === undefined ? undefined : sendTap(fn.key, o.onQueueMessage);
      const sqsProxy = await startSqsRecorder({ upstream: this.sqs.endpoint, caller, log: this.callLog, queueArnOf, ...(onSuccess ? { onSuccess } : {}) });
      this.#endpoints.push(sqsProxy);
      const ssmEndpoint = await startSsmEndpoint({ caller, log: this.callLog, store: this.ssm, region: this.region, accountId: this.accountId });
      this.#endpoints.push(ssmEndpoint);
      const resolved = resolveValue(this.template.template, fn.environment, this.#resolver(true, sqsProxy.url)) as Record<string, Json>;
      const credentials = functionCredentials(fn.key);
      const env: Record<string, string> = {
        PATH: '/usr/local/bin:/usr/bin:/bin',
        LANG: 'en_US.UTF-8',
        TZ: ':UTC',
        ...Object.fromEntries(Object.entries(resolved).map(([k, v]) => [k, String(v)])),
        AWS_REGION: this.region,
        AWS_DEFAULT_REGION: this.region,
        AWS_EXECUTION_ENV: `AWS_Lambda_${fn.runtime}`,
        AWS_LAMBDA_FUNCTION_NAME: fn.functionName,
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(fn.memoryMiB),
        AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
        AWS_LAMBDA_INITIALIZATION_TYPE: 'on-demand',
        AWS_LAMBDA_LOG_GROUP_NAME: `/aws/lambda/${fn.functionName}`,
        LAMBDA_TASK_ROOT: taskRoot,
        _HANDLER: fn.handler,
        NODE_PATH: sdkPath,
        LOCAL_LAMBDA_FUNCTION_ARN: `arn:aws:lambda:${this.region}:${this.accountId}:function:${fn.functionName}`,
        AWS_ACCESS_KEY_ID: credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
        AWS_SESSION_TOKEN: credentials.sessionToken,
        AWS_ENDPOINT_URL_SQS: sqsProxy.url,
        AWS_ENDPOINT_URL_SSM: ssmEndpoint.url,
      };
      const logGroupArn = `arn:aws:logs:${this.region}:${this.accountId}:log-group:/aws/lambda/${fn.functionName}`;
      const lambdaCaller = this.#caller(fn, 'lambda-service');
      const pool = new FunctionPool({
        fn,
        env,
        taskRoot,
        logPath: join(this.workDir, `${fn.key}.log`),
        idleMs: o.idleContainerMs ?? DEFAULT_IDLE_MS,
        onLogStream: (stream) =>
          this.callLog.add({ time: new Date().toISOString(), functionName: fn.functionName, principalArn: lambdaCaller.principalArn, caller: 'lambda-service', service: 'logs', action: 'logs:CreateLogStream', resource: `${logGroupArn}:log-stream:${stream}`, status: 0 }),
        onInvocation: (r) => {
          this.callLog.add({ time: new Date().toISOString(), functionName: fn.functionName, principalArn: lambdaCaller.principalArn, caller: 'lambda-service', service: 'logs', action: 'logs:PutLogEvents', resource: `${logGroupArn}:log-stream:*`, status: 0 });
          o.onInvocation?.(r);
        },
      });
      this.#pools.set(fn.key, pool);

      for (const mapping of fn.sqsEventSources.filter((m) => m.enabled)) {
        const q = this.queue(mapping.queueLogicalId);
        const poller = await startSqsRecorder({ upstream: this.sqs.endpoint, caller: this.#caller(fn, 'event-source-mapping'), log: this.callLog, queueArnOf });
        this.#endpoints.push(poller);
        const concurrency = Math.min(fn.reservedConcurrency ?? 1000, mapping.maximumConcurrency ?? Number.POSITIVE_INFINITY);
        const source = new SqsEventSource({
          client: new SQSClient({ endpoint: poller.url, region: this.region, credentials: { accessKeyId: DUMMY_CREDENTIALS.AWS_ACCESS_KEY_ID, secretAccessKey: DUMMY_CREDENTIALS.AWS_SECRET_ACCESS_KEY } }),
          queue: { url: `${poller.url}/${this.accountId}/${q.name}`, arn: q.localArn },
          region: this.region,
          batchSize: mapping.batchSize,
          concurrency,
          functionName: fn.functionName,
          functionTimeoutSeconds: fn.timeoutSeconds,
          waitTimeSeconds: ESM_WAIT_SECONDS,
          handler: async (event) => {
            // The mapping's FunctionName: the function ($LATEST), or its alias (osls's `provisioned`) or a version.
            const r = await pool.invoke(event, 'sqs', mapping.qualifier);
            if (!r.result.ok) throw new Error(`${r.result.errorType}: ${r.result.errorMessage}`);
            // Without ReportBatchItemFailures Lambda ignores the response: a success deletes the whole batch.
            return mapping.reportBatchItemFailures ? (r.result.value as never) : undefined;
          },
        });
        this.#eventSources.push({ fnKey: fn.key, source });
      }
      // Provisioned concurrency: its containers are initialized before any trigger starts (startTriggers comes after).
      await pool.provision();
    }
  }

  #startSchedule(key: string, ruleId: string, periodMs: number): { stop: () => void } {
    let stopped = false;
    let timer: NodeJS.Timeout | undefined;
    const origin = Date.now();
    // Period k covers [origin + k P, origin + (k+1) P); its event comes at a random point within it.
    const arm = (k: number): void => {
      if (stopped) return;
      const at = origin + k * periodMs + Math.floor(this.#random() * periodMs);
      timer = setTimeout(() => {
        if (stopped) return;
        void this.#deliverAsync(key, ruleId);
        arm(k + 1);
      }, Math.max(0, at - Date.now()));
    };
    arm(0);
    return {
      stop: () => {
        stopped = true;
        clearTimeout(timer);
      },
    };
  }

  /**
   * An asynchronous invocation from EventBridge: throttled events are retried (1 s, doubling up to 60 s) until they are
   * older than MaximumEventAgeInSeconds; failed invocations are retried MaximumRetryAttempts times (1 then 2 minutes
   * apart), as Lambda's asynchronous queue does.
   */
  #deliverAsync(key: string, ruleId: string): Promise<void> {
    const pool = this.fn(key);
    const fn = pool.fn;
    const time = new Date();
    // A target with a constant Input gets it as the event (the forwarder's `{ "shard": i }`), as EventBridge does.
    const input = fn.schedules.find((s) => s.logicalId === ruleId)?.input;
    const event = input !== undefined ? input : {
      version: '0',
      id: randomUUID(),
      'detail-type': 'Scheduled Event',
      source: 'aws.events',
      account: this.accountId,
      time: time.toISOString().replace(/\.\d{3}Z$/, 'Z'),
      region: this.region,
      resources: [`arn:aws:events:${this.region}:${this.accountId}:rule/${ruleId}`],
      detail: {},
    };
    const maxAgeMs = fn.asyncConfig.maximumEventAgeSeconds * 1000;
    const runOne = async (): Promise<void> => {
      let retries = 0;
      let backoff = 1000;
      for (;;) {
        if (this.#stopping) return;
        try {
          const r = await pool.invoke(event, 'schedule');
          if (r.result.ok || retries >= fn.asyncConfig.maximumRetryAttempts) {
            if (!r.result.ok) pool.countDropped();
            return;
          }
          retries += 1;
          await sleep(retries * 60_000, this.#abort.signal);
        } catch (error) {
          if (!(error instanceof ThrottledError)) throw error;
          pool.countThrottle();
          if (Date.now() - time.getTime() + backoff > maxAgeMs) {
            pool.countDropped();
            return;
          }
          await sleep(backoff, this.#abort.signal);
          backoff = Math.min(backoff * 2, 60_000);
        }
      }
    };
    const p = runOne().catch(() => undefined);
    this.#asyncRuns.add(p);
    void p.finally(() => this.#asyncRuns.delete(p));
    return p;
  }
}

/** Turns SendMessage / SendMessageBatch requests (AWS JSON 1.0) into QueueMessages. */
function sendTap(functionKey: string, onMessage: (m: QueueMessage) => void): (action: string, body: Buffer) => void {
  return (action, body) => {
    if (action !== 'SendMessage' && action !== 'SendMessageBatch') return;
    let input: { QueueUrl?: string; MessageBody?: string; MessageGroupId?: string; MessageDeduplicationId?: string; Entries?: { MessageBody?: string; MessageGroupId?: string; MessageDeduplicationId?: string }[] };
    try {
      input = JSON.parse(body.toString('utf8')) as typeof input;
    } catch {
      return;
    }
    const at = Date.now();
    const queueName = (input.QueueUrl ?? '').slice((input.QueueUrl ?? '').lastIndexOf('/') + 1);
    const entries = action === 'SendMessage' ? [input] : (input.Entries ?? []);
    for (const e of entries) onMessage({ at, functionKey, queueName, body: e.MessageBody ?? '', groupId: e.MessageGroupId, deduplicationId: e.MessageDeduplicationId });
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

/**
 * A directory that exposes the repository's `@aws-sdk/*` packages only, as the runtime's `/var/runtime/node_modules`
 * exposes the SDK v3 that Lambda provides: NODE_PATH points at it. Their own dependencies (`@smithy/*`, ...) resolve
 * from the packages' real location, as the runtime's do from its own node_modules.
 */
function runtimeSdkDir(workDir: string): string {
  const dir = join(workDir, 'runtime', 'node_modules');
  const link = join(dir, '@aws-sdk');
  if (!existsSync(link)) {
    mkdirSync(dir, { recursive: true });
    const sdk = dirname(dirname(createRequire(import.meta.url).resolve('@aws-sdk/client-sqs/package.json')));
    symlinkSync(sdk, link, 'dir');
  }
  return dir;
}

/** Creates the template's queues in fauxqs, dead-letter queues first (a redrive policy names its target's ARN). */
async function createQueues(client: SQSClient, t: PackagedTemplate, accountId: string): Promise<Map<string, RunnerQueue>> {
  const out = new Map<string, RunnerQueue>();
  const pending = [...t.queues.values()];
  const create = async (q: TemplateQueue): Promise<void> => {
    const p = q.properties;
    const attrs: Record<string, string> = {};
    const copy = ['FifoQueue', 'ContentBasedDeduplication', 'DeduplicationScope', 'FifoThroughputLimit', 'VisibilityTimeout', 'MessageRetentionPeriod', 'ReceiveMessageWaitTimeSeconds', 'DelaySeconds', 'MaximumMessageSize'];
    for (const name of copy) if (p[name] !== undefined) attrs[name] = String(p[name]);
    if (q.redrive) {
      const dlq = out.get(q.redrive.deadLetterLogicalId);
      if (!dlq) throw new Error(`${q.logicalId}: dead-letter queue ${q.redrive.deadLetterLogicalId} not created`);
      attrs['RedrivePolicy'] = JSON.stringify({ deadLetterTargetArn: dlq.localArn, maxReceiveCount: q.redrive.maxReceiveCount });
    }
    const created = await client.send(new CreateQueueCommand({ QueueName: q.queueName, Attributes: attrs }));
    const url = created.QueueUrl ?? '';
    const got = await client.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }));
    out.set(q.logicalId, { logicalId: q.logicalId, name: q.queueName, url, localArn: got.Attributes?.['QueueArn'] ?? '', accountArn: `arn:aws:sqs:${t.region}:${accountId}:${q.queueName}` });
  };
  while (pending.length > 0) {
    const i = pending.findIndex((q) => !q.redrive || out.has(q.redrive.deadLetterLogicalId));
    if (i < 0) throw new Error(`Queues with a redrive cycle: ${pending.map((q) => q.logicalId).join(', ')}`);
    const [q] = pending.splice(i, 1);
    if (q) await create(q);
  }
  return out;
}
