/**
 * `npx serverless package` offline, without AWS credentials (test/support/serverless-package.ts, shared with
 * template-validation.test.ts), then assertions on the generated CloudFormation template. Metric names are
 * cross-checked against shared/observability/metric-names.ts.
 */
import { existsSync, readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { readdir, rm, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { lambdaBundleOptions, lambdaHandlerFile } from '#infra/lambda-bundle.ts';
import { ForwarderMetric, METRIC_NAMESPACE, ReconcileMetric } from '#shared/observability/metric-names.ts';
import { PACKAGE_VARIANTS, PackageError, evaluateCondition, packagedService, type Json, type Packaged } from '#test/support/serverless-package.ts';
import { headingAnchors } from '#test/support/markdown.ts';

const root = resolve(import.meta.dirname, '../../..');
const run = promisify(execFile);

function resourcesOfType(template: Json, type: string): [string, Json][] {
  return Object.entries(template.Resources as Record<string, Json>).filter(([, r]) => r.Type === type);
}

function functionByHandler(template: Json, handler: string): [string, Json] {
  const found = resourcesOfType(template, 'AWS::Lambda::Function').find(([, r]) => r.Properties.Handler === handler);
  if (!found) throw new Error(`no function with handler ${handler}`);
  return found;
}

/** The IAM statements in effect for this stage's parameters (Fn::If resolved, AWS::NoValue dropped). */
function statementsOf(template: Json, policyDocument: Json): Json[] {
  const out: Json[] = [];
  const visit = (s: Json): void => {
    if (s && typeof s === 'object' && 'Fn::If' in s) {
      const [condition, whenTrue, whenFalse] = s['Fn::If'] as [string, Json, Json];
      visit(evaluateCondition(template, condition) ? whenTrue : whenFalse);
    } else if (s && typeof s === 'object' && !('Ref' in s && s.Ref === 'AWS::NoValue')) out.push(s);
  };
  for (const s of policyDocument.Statement) visit(s);
  return out;
}

const asArray = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);

const CUSTOM_METRICS = new Set<string>([...Object.values(ReconcileMetric), ...Object.values(ForwarderMetric)]);
const AWS_METRICS: Record<string, Set<string>> = {
  'AWS/SQS': new Set(['ApproximateNumberOfMessagesVisible', 'ApproximateAgeOfOldestMessage']),
  'AWS/Lambda': new Set(['Errors', 'Throttles', 'Duration', 'Invocations']),
};

interface MetricRef {
  namespace: string;
  name: string;
  where: string;
}

/** Metric references in a metric-math / Metrics Insights / SEARCH expression. */
function metricsInExpression(expression: string, where: string): MetricRef[] {
  const refs: MetricRef[] = [];
  const select = /^\s*SELECT\s+\w+\((\w+)\)\s+FROM\s+(?:SCHEMA\(\s*"?([\w/]+)"?[^)]*\)|"?([\w/]+)"?)/i.exec(expression);
  if (select) refs.push({ name: select[1] ?? '', namespace: select[2] ?? select[3] ?? '', where });
  for (const m of expression.matchAll(/SEARCH\(\s*'([^']*)'/g)) {
    const query = m[1] ?? '';
    refs.push({
      namespace: /Namespace="([^"]+)"/.exec(query)?.[1] ?? '',
      name: /MetricName="([^"]+)"/.exec(query)?.[1] ?? '',
      where,
    });
  }
  return refs;
}

function expectKnownMetric(ref: MetricRef): void {
  const known = ref.namespace === METRIC_NAMESPACE ? CUSTOM_METRICS : AWS_METRICS[ref.namespace];
  expect(known, `${ref.where}: unknown namespace ${ref.namespace}`).toBeDefined();
  expect(known?.has(ref.name), `${ref.where}: ${ref.namespace}/${ref.name} is not a metric the code emits`).toBe(true);
}

/** Renders the dashboard's Fn::Sub body with placeholders and parses it. */
function dashboardBody(resource: Json): Json {
  const body = resource.Properties.DashboardBody;
  const text: string = typeof body === 'string' ? body : body['Fn::Sub'];
  return JSON.parse(text.replace(/\$\{([^}!]+)\}/g, (_m, name: string) => `sub-${name.replace(/[^\w]/g, '-')}`));
}

const REDRIVE_ROLE = 'arn:aws:iam::111122223333:role/ops-dlq-redrive';


let eks: Packaged;
let ssm: Packaged;
let secretsManager: Packaged;
/** The secretsmanager set with three forwarder shards. */
let sharded: Packaged;
let refused: { code: number | string | undefined; output: string; templateWritten: boolean };

beforeAll(async () => {
  // The three worked parameter files (infra/params/*.yml, wired as stages of serverless.yml), packaged side by side,
  // and serverless.yml's eks, which the parameter check must refuse.
  [eks, ssm, secretsManager, sharded, refused] = await Promise.all([
    packagedService(PACKAGE_VARIANTS.eks),
    packagedService(PACKAGE_VARIANTS.ssm),
    packagedService(PACKAGE_VARIANTS.secretsmanager),
    packagedService([...PACKAGE_VARIANTS.secretsmanager, '--param=forwarderShards=3', '--param=forwarderReservedConcurrency=15']),
    packagedService([]).then(
      () => ({ code: 0, output: '', templateWritten: true }),
      (e: unknown) => {
        if (!(e instanceof PackageError)) throw e;
        return { code: e.code, output: e.output, templateWritten: e.templateWritten };
      },
    ),
  ]);
}, 480_000);

describe('npx serverless package (offline, no credentials)', () => {
  it('produces a template and one zip per function', async () => {
    const zips = ['reconcileNodeTaints.zip', 'watchForwarder.zip'].map((z) => join(eks.serviceDir, '.serverless', z));
    for (const zip of zips) expect((await stat(zip)).size).toBeGreaterThan(1000);
    const took = (p: Packaged): string => `${p.seconds.toFixed(1)} s${p.reused ? ', reused' : ''}`;
    console.info(`serverless package: ${took(eks)} (eks), ${took(ssm)} (ssm)`);
  });

  it("leaves nothing in the OS temp dir: serverless-esbuild's zip folders go into the packaging's own, which is removed", async () => {
    // Prepare: a parameter no one reads, unique to this run, so that the packaging is made now, not reused
    const leftovers = async (): Promise<Set<string>> =>
      new Set((await readdir(tmpdir())).filter((name) => /^(reconcileNodeTaints|watchForwarder)-\d+-\d+-[0-9a-f]{8}$/.test(name)));
    const before = await leftovers();

    // Act
    const packaged = await packagedService([...PACKAGE_VARIANTS.eks, `--param=tempDirCheck=${randomUUID()}`]);

    // Assess: packaged now, its zips there, and no zip folder of serverless-esbuild left behind
    expect(packaged.reused).toBe(false);
    for (const zip of ['reconcileNodeTaints.zip', 'watchForwarder.zip']) expect((await stat(join(packaged.serviceDir, '.serverless', zip))).size).toBeGreaterThan(1000);
    expect([...(await leftovers())].filter((name) => !before.has(name))).toEqual([]);
    await rm(resolve(packaged.serviceDir, '..'), { recursive: true, force: true });
  }, 300_000);

  it('packages the bundles that infra/lambda-bundle.ts builds (the benchmarks and bundle tests): under 2 MiB, without client-node or undici', async () => {
    const options = lambdaBundleOptions(root);
    for (const [zip, fn] of [['reconcileNodeTaints.zip', 'reconcile-node-taints'], ['watchForwarder.zip', 'watch-forwarder']] as const) {
      const file = lambdaHandlerFile(options);
      const { stdout: packaged } = await run('unzip', ['-p', join(eks.serviceDir, '.serverless', zip), `functions/${fn}/${file}`], { encoding: 'buffer', maxBuffer: 64 * 1024 * 1024 });
      const built = await build({ ...options, entryPoints: [join(root, 'functions', fn, 'handler.ts')], outdir: join(root, 'functions', fn), write: false, metafile: true, logLevel: 'silent' });
      const js = built.outputFiles.find((f) => f.path.endsWith(`/${file}`));
      expect(packaged.length, fn).toBe(js?.contents.length);
      expect(packaged.equals(Buffer.from(js?.contents ?? [])), fn).toBe(true);
      expect(packaged.length, fn).toBeLessThanOrEqual(2 * 1024 * 1024);
      const inputs = Object.keys(built.metafile.inputs);
      expect(inputs.filter((i) => /node_modules\/(@kubernetes\/client-node|undici)\//.test(i)), fn).toEqual([]);
      expect(inputs, fn).toContain('shared/adapters/kubernetes/kube-http.ts');
    }
  });

  it('runs on nodejs22.x or newer, arm64, without loading source maps at start, with the documented environment', () => {
    const functions = resourcesOfType(eks.template, 'AWS::Lambda::Function');
    expect(functions).toHaveLength(2);
    for (const [id, fn] of functions) {
      const version = Number(/^nodejs(\d+)\.x$/.exec(fn.Properties.Runtime)?.[1]);
      expect(version, id).toBeGreaterThanOrEqual(22);
      expect(fn.Properties.Architectures, id).toEqual(['arm64']);
      expect(fn.Properties.Environment.Variables.NODE_OPTIONS ?? '', id).not.toContain('--enable-source-maps');
      for (const name of ['CLUSTER_MODE', 'MANAGEMENT_AUTH', 'EKS_CLUSTER_NAME', 'EKS_ENDPOINT', 'EKS_CA_DATA', 'MANAGEMENT_KUBECONFIG_PARAMETER', 'MANAGEMENT_KUBECONFIG_SECRET_ID', 'STATE_NAMESPACE', 'POWERTOOLS_LOG_LEVEL', 'POWERTOOLS_SERVICE_NAME', 'QUEUE_URL']) {
        expect(fn.Properties.Environment.Variables, `${id} ${name}`).toHaveProperty(name);
      }
    }
    const [, reconcile] = functionByHandler(eks.template, 'functions/reconcile-node-taints/handler.handler');
    for (const name of ['DEAD_LETTER_QUEUE_URL', 'DRY_RUN', 'STARTUP_TAINT_KEY', 'RETRY_BASE_SECONDS', 'RETRY_MAX_SECONDS', 'FIRST_ENABLED_AT']) {
      expect(reconcile.Properties.Environment.Variables).toHaveProperty(name);
    }
    expect(reconcile.Properties.Environment.Variables.STARTUP_TAINT_KEY).toBe('taints.capi-taint-propagator.dev/uninitialized');
    expect(reconcile.Properties.Environment.Variables.SPEC_TAINTS_OWNER).toBe('upstream');
    expect(reconcile.Properties.ReservedConcurrentExecutions).toBeGreaterThan(0);
    // The forwarder alone has a small young generation (docs/benchmarks-history.md, forwarder memory; the benchmark runs it with this).
    expect(reconcile.Properties.Environment.Variables.NODE_OPTIONS).toBeUndefined();
    const [, forwarder] = functionByHandler(eks.template, 'functions/watch-forwarder/handler.handler');
    expect(forwarder.Properties.Environment.Variables.NODE_OPTIONS).toBe('--max-semi-space-size=2');
    for (const name of ['WATCH_WINDOW_SECONDS', 'WATCH_MEMBERS', 'WATCH_OVERLAP_SECONDS', 'RESYNC_INTERVAL_SECONDS', 'WATCH_IDLE_SECONDS', 'LEASE_NAME', 'MACHINE_NAMESPACE']) {
      expect(forwarder.Properties.Environment.Variables).toHaveProperty(name);
    }
  });

  it('has a FIFO queue with a FIFO dead-letter queue, redrive after >= 5 receives, long DLQ retention', () => {
    const r = eks.template.Resources;
    expect(r.EventQueue.Properties.FifoQueue).toBe(true);
    expect(r.EventDeadLetterQueue.Properties.FifoQueue).toBe(true);
    expect(r.EventQueue.Properties.RedrivePolicy.deadLetterTargetArn).toEqual({ 'Fn::GetAtt': ['EventDeadLetterQueue', 'Arn'] });
    expect(Number(r.EventQueue.Properties.RedrivePolicy.maxReceiveCount)).toBeGreaterThanOrEqual(5);
    expect(Number(r.EventDeadLetterQueue.Properties.MessageRetentionPeriod)).toBeGreaterThan(Number(r.EventQueue.Properties.MessageRetentionPeriod));
    expect(Number(r.EventDeadLetterQueue.Properties.MessageRetentionPeriod)).toBe(14 * 24 * 3600);
  });

  it('sizes the visibility timeout at >= 6x the reconcile timeout', () => {
    const [, reconcile] = functionByHandler(eks.template, 'functions/reconcile-node-taints/handler.handler');
    const visibility = Number(eks.template.Resources.EventQueue.Properties.VisibilityTimeout);
    expect(visibility).toBeGreaterThanOrEqual(6 * Number(reconcile.Properties.Timeout));
  });

  it('triggers reconcile from the queue with ReportBatchItemFailures, batch size <= 10, no batching window', () => {
    const [reconcileId] = functionByHandler(eks.template, 'functions/reconcile-node-taints/handler.handler');
    const mappings = resourcesOfType(eks.template, 'AWS::Lambda::EventSourceMapping');
    expect(mappings).toHaveLength(1);
    const [, mapping] = mappings[0] as [string, Json];
    expect(mapping.Properties.EventSourceArn).toEqual({ 'Fn::GetAtt': ['EventQueue', 'Arn'] });
    expect(mapping.Properties.FunctionName).toEqual({ 'Fn::GetAtt': [reconcileId, 'Arn'] });
    expect(mapping.Properties.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
    expect(Number(mapping.Properties.BatchSize)).toBeGreaterThanOrEqual(1);
    expect(Number(mapping.Properties.BatchSize)).toBeLessThanOrEqual(10);
    expect(mapping.Properties.MaximumBatchingWindowInSeconds).toBeUndefined();
  });

  it('schedules the forwarder with a timeout that covers the watch window and fits the schedule', () => {
    const [forwarderId, forwarder] = functionByHandler(eks.template, 'functions/watch-forwarder/handler.handler');
    const rules = resourcesOfType(eks.template, 'AWS::Events::Rule');
    expect(rules).toHaveLength(1);
    const [, rule] = rules[0] as [string, Json];
    expect(rule.Properties.State).toBe('ENABLED');
    expect(rule.Properties.Targets[0].Arn).toEqual({ 'Fn::GetAtt': [forwarderId, 'Arn'] });
    const rate = /^rate\((\d+) (minute|minutes|hour|hours)\)$/.exec(rule.Properties.ScheduleExpression);
    expect(rate, rule.Properties.ScheduleExpression).not.toBeNull();
    const intervalSeconds = Number(rate?.[1]) * (rate?.[2]?.startsWith('hour') ? 3600 : 60);
    const timeout = Number(forwarder.Properties.Timeout);
    const window = Number(forwarder.Properties.Environment.Variables.WATCH_WINDOW_SECONDS);
    expect(timeout).toBeGreaterThanOrEqual(window + 10);
    expect(timeout).toBeLessThanOrEqual(900);
    // The rota (functions/watch-forwarder/README.md, "Deployed form"): a member stops counting early enough for a
    // successor to start two schedule intervals later, and the reserved concurrency leaves room for the hand-over.
    const members = Number(forwarder.Properties.Environment.Variables.WATCH_MEMBERS);
    const overlap = Number(forwarder.Properties.Environment.Variables.WATCH_OVERLAP_SECONDS);
    expect(members).toBeGreaterThanOrEqual(2);
    expect(overlap).toBeGreaterThanOrEqual(2 * intervalSeconds + 30);
    expect(window).toBeGreaterThanOrEqual(overlap + 2 * intervalSeconds);
    // A quiet, healthy watch gets a bookmark about once a minute: the watchdog must not restart it.
    expect(Number(forwarder.Properties.Environment.Variables.WATCH_IDLE_SECONDS)).toBeGreaterThanOrEqual(70);
    expect(forwarder.Properties.ReservedConcurrentExecutions).toBeGreaterThanOrEqual(2 * members + 1);
    // One shard: the schedule says so, and the Lease keeps its plain name (an upgrade keeps its checkpoint).
    expect(rule.Properties.Targets[0].Input).toBe('{"shard":0}');
    expect(forwarder.Properties.Environment.Variables.FORWARDER_SHARDS).toBe('1');
  });

  it('runs every shard from one deployment: one schedule per shard with its index as input, the count in the environment', () => {
    const [forwarderId, forwarder] = functionByHandler(sharded.template, 'functions/watch-forwarder/handler.handler');
    const rules = resourcesOfType(sharded.template, 'AWS::Events::Rule').map(([, r]) => r);
    expect(rules.map((r) => JSON.parse(r.Properties.Targets[0].Input)).sort((a, b) => a.shard - b.shard)).toEqual([{ shard: 0 }, { shard: 1 }, { shard: 2 }]);
    for (const rule of rules) {
      expect(rule.Properties.ScheduleExpression).toBe('rate(1 minute)');
      expect(rule.Properties.State).toBe('ENABLED');
      expect(rule.Properties.Targets[0].Arn).toEqual({ 'Fn::GetAtt': [forwarderId, 'Arn'] });
    }
    // Shard 0 keeps the first rule's logical id: a deployment that had one schedule keeps its rule.
    expect(JSON.parse(sharded.template.Resources.WatchForwarderEventsRuleSchedule1.Properties.Targets[0].Input)).toEqual({ shard: 0 });
    const permissions = resourcesOfType(sharded.template, 'AWS::Lambda::Permission').filter(([, p]) => p.Properties.Principal === 'events.amazonaws.com');
    expect(permissions).toHaveLength(3);
    expect(forwarder.Properties.Environment.Variables.FORWARDER_SHARDS).toBe('3');
    expect(forwarder.Properties.ReservedConcurrentExecutions).toBeGreaterThanOrEqual(3 * (2 * Number(forwarder.Properties.Environment.Variables.WATCH_MEMBERS) + 1));
  });

  it('gives each function exactly one log group, with retention', () => {
    const groups = resourcesOfType(eks.template, 'AWS::Logs::LogGroup');
    const functions = resourcesOfType(eks.template, 'AWS::Lambda::Function');
    expect(groups).toHaveLength(functions.length);
    for (const [, fn] of functions) {
      const matching = groups.filter(([, g]) => g.Properties.LogGroupName === `/aws/lambda/${fn.Properties.FunctionName}`);
      expect(matching, fn.Properties.FunctionName).toHaveLength(1);
      expect(Number((matching[0] as [string, Json])[1].Properties.RetentionInDays)).toBeGreaterThan(0);
    }
  });

  it('updates the reconcile function before the forwarder (the forwarder\'s new event fields reach only new reconcile code), keeping the log group first', () => {
    const forwarder = eks.template.Resources.WatchForwarderLambdaFunction;
    expect(forwarder.DependsOn).toEqual(expect.arrayContaining(['ReconcileNodeTaintsLambdaFunction', 'WatchForwarderLogGroup']));
    expect(eks.template.Resources.ReconcileNodeTaintsLambdaFunction.DependsOn ?? []).not.toContain('WatchForwarderLambdaFunction');
  });

  it.each([
    ['eks', () => eks],
    ['secretsmanager', () => secretsManager],
    ['ssm + customer KMS key', () => ssm],
  ])('holds IAM statements without wildcard actions or resources: %s', (_name, packaged) => {
    const { template } = packaged();
    expect(template.Resources.IamRoleLambdaExecution).toBeUndefined(); // one role per function, no shared default role
    const roles = resourcesOfType(template, 'AWS::IAM::Role');
    expect(roles.map(([id]) => id).sort()).toEqual(['ReconcileNodeTaintsRole', 'WatchForwarderRole']);
    for (const [roleId, role] of roles) {
      for (const policy of resolveIfs(template, role.Properties.Policies ?? []) as Json[]) {
        for (const statement of statementsOf(template, policy.PolicyDocument)) {
          const where = `${roleId}/${statement.Sid ?? '?'}`;
          expect(statement.Effect, where).toBe('Allow');
          expect(statement.NotAction ?? statement.NotResource, where).toBeUndefined();
          for (const action of asArray(statement.Action as string | string[])) {
            expect(action, where).toMatch(/^[a-z0-9-]+:[A-Za-z]+$/); // service:Action, no * anywhere
          }
          // The one exception: the network interfaces Lambda manages for a function in a VPC (Resource "*" by AWS's
          // design; ec2:DescribeNetworkInterfaces works on nothing else), and only EC2 actions there.
          if (statement.Sid === 'ManageNetworkInterfaces') {
            expect(asArray(statement.Action as string | string[]).every((a) => a.startsWith('ec2:')), where).toBe(true);
            continue;
          }
          for (const resource of asArray(statement.Resource as Json)) {
            expect(resource, where).not.toBe('*');
            // Fn::GetAtt / Ref name a resource; ARN strings must name one after the account field.
            const arn: unknown = typeof resource === 'string' ? resource : resource['Fn::Sub'];
            if (typeof arn !== 'string') continue;
            const resourcePart = arn.replace(/\$\{[^}]+\}/g, 'x').split(':').slice(5).join(':');
            expect(resourcePart, `${where}: ${arn}`).toMatch(/^[A-Za-z0-9/_-]*[A-Za-z0-9_-]/);
          }
        }
      }
    }
    expect(resourcesOfType(template, 'AWS::IAM::ManagedPolicy')).toHaveLength(0);
    expect(resourcesOfType(template, 'AWS::IAM::Policy')).toHaveLength(0);
  });

  it('scopes each role to what its function calls', () => {
    const actions = (roleId: string, template: Json = ssm.template): Record<string, Json> =>
      Object.fromEntries(
        statementsOf(template, template.Resources[roleId].Properties.Policies[0].PolicyDocument).map((s: Json) => [asArray(s.Action).join(','), s.Resource]),
      );
    const reconcile = actions('ReconcileNodeTaintsRole');
    expect(reconcile['sqs:ReceiveMessage,sqs:DeleteMessage,sqs:GetQueueAttributes,sqs:ChangeMessageVisibility']).toEqual([{ 'Fn::GetAtt': ['EventQueue', 'Arn'] }]);
    expect(reconcile['sqs:SendMessage']).toEqual([{ 'Fn::GetAtt': ['EventDeadLetterQueue', 'Arn'] }, { 'Fn::GetAtt': ['EventQueue', 'Arn'] }]);
    expect(JSON.stringify(reconcile['ssm:GetParameter'])).toContain(':parameter/capi-taint-propagator/management-kubeconfig');
    expect(reconcile['kms:Decrypt']).toEqual(['arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab']);
    const forwarder = actions('WatchForwarderRole');
    expect(forwarder['sqs:SendMessage']).toEqual([{ 'Fn::GetAtt': ['EventQueue', 'Arn'] }]);
    expect(Object.keys(forwarder).some((a) => a.includes('ChangeMessageVisibility') || a.includes('ReceiveMessage'))).toBe(false);
    // With EKS auth there is nothing to read or decrypt.
    const eksActions = Object.keys(actions('ReconcileNodeTaintsRole', eks.template));
    expect(eksActions.filter((a) => /^(ssm|secretsmanager|kms):/.test(a))).toEqual([]);
    expect(eks.template.Resources.ReconcileNodeTaintsAccessEntry.Properties.KubernetesGroups).toEqual(['capi-taint-propagator-reconcile']);
    expect(eks.template.Resources.WatchForwarderAccessEntry.Properties.KubernetesGroups).toEqual(['capi-taint-propagator-forwarder']);
  });

  it('builds every alarm on a metric the code emits (or on AWS/SQS, AWS/Lambda metrics)', () => {
    const alarms = resourcesOfType(eks.template, 'AWS::CloudWatch::Alarm');
    expect(alarms.length).toBeGreaterThanOrEqual(5);
    const used = new Set<string>();
    for (const [id, alarm] of alarms) {
      const p = alarm.Properties;
      const refs: MetricRef[] = [];
      if (p.MetricName) refs.push({ namespace: p.Namespace, name: p.MetricName, where: id });
      for (const m of p.Metrics ?? []) {
        if (m.MetricStat) refs.push({ namespace: m.MetricStat.Metric.Namespace, name: m.MetricStat.Metric.MetricName, where: id });
        if (m.Expression) refs.push(...metricsInExpression(m.Expression, id));
      }
      expect(refs.length, `${id} refers to no metric`).toBeGreaterThan(0);
      for (const ref of refs) {
        expectKnownMetric(ref);
        used.add(`${ref.namespace}/${ref.name}`);
      }
      expect(p.AlarmActions, id).toEqual([{ Ref: 'AlarmTopic' }]);
    }
    // The alarms the issue asks for: DLQ not empty, old messages, error rate, conflict storm, stalled forwarder.
    const r = eks.template.Resources;
    expect(r.DeadLetterQueueNotEmptyAlarm.Properties.Dimensions[0].Value).toEqual({ 'Fn::GetAtt': ['EventDeadLetterQueue', 'QueueName'] });
    expect(used).toContain('AWS/SQS/ApproximateAgeOfOldestMessage');
    expect(used).toContain('AWS/Lambda/Errors');
    expect(used).toContain(`${METRIC_NAMESPACE}/${ReconcileMetric.Conflicts}`);
    expect(r.ForwarderStalledAlarm.Properties.TreatMissingData).toBe('breaching');
  });

  it('builds every dashboard widget on metrics the code emits', () => {
    const dashboards = resourcesOfType(eks.template, 'AWS::CloudWatch::Dashboard');
    expect(dashboards).toHaveLength(1);
    const body = dashboardBody((dashboards[0] as [string, Json])[1]);
    const used = new Set<string>();
    for (const widget of body.widgets as Json[]) {
      if (widget.type !== 'metric') continue;
      const where = widget.properties.title as string;
      const refs: MetricRef[] = [];
      for (const metric of widget.properties.metrics as Json[]) {
        if (typeof metric[0] === 'string') refs.push({ namespace: metric[0], name: metric[1], where });
        else if (metric[0]?.expression) refs.push(...metricsInExpression(metric[0].expression, where));
      }
      expect(refs.length, `${where} refers to no metric`).toBeGreaterThan(0);
      for (const ref of refs) {
        expectKnownMetric(ref);
        used.add(ref.name);
      }
    }
    // Throughput by outcome, conflicts and retries, dead-lettered, queue depth and age, latency, forwarder lag and
    // filtered ratio, errors.
    for (const name of [
      ReconcileMetric.Reconciles,
      ReconcileMetric.Conflicts,
      ReconcileMetric.TransientErrors,
      ReconcileMetric.DeadLettered,
      ReconcileMetric.EventToWriteLatency,
      ForwarderMetric.ForwarderLag,
      ForwarderMetric.EventsFiltered,
      ForwarderMetric.EventsSeen,
      'ApproximateNumberOfMessagesVisible',
      'ApproximateAgeOfOldestMessage',
      'Errors',
    ]) {
      expect(used, name).toContain(name);
    }
    expect(JSON.stringify(body)).toContain('GROUP BY Outcome');
  });
});

describe('queue security in the packaged template', () => {
  it.each([
    ['eks (no redrive role)', () => eks, []],
    ['with a DLQ redrive role', () => ssm, [REDRIVE_ROLE]],
  ])('encrypts both queues and lets only the forwarder (and the reconcile function, re-issuing) send, only the reconcile function consume and dead-letter: %s', (_name, packaged, redrive) => {
    const { template } = packaged();
    const r = template.Resources;
    const forwarderRole = { 'Fn::GetAtt': ['WatchForwarderRole', 'Arn'] };
    const reconcileRole = { 'Fn::GetAtt': ['ReconcileNodeTaintsRole', 'Arn'] };
    // Server-side encryption at rest on both queues.
    expect(r.EventQueue.Properties.SqsManagedSseEnabled).toBe(true);
    expect(r.EventDeadLetterQueue.Properties.SqsManagedSseEnabled).toBe(true);
    // One policy per queue; only Deny statements (grants stay in the roles), each with Principal '*'.
    const policies = resourcesOfType(template, 'AWS::SQS::QueuePolicy');
    expect(policies.map(([, p]) => JSON.stringify(p.Properties.Queues)).sort()).toEqual(['[{"Ref":"EventDeadLetterQueue"}]', '[{"Ref":"EventQueue"}]']);
    const statementsFor = (queue: string): Record<string, Json> => {
      const [, policy] = policies.find(([, p]) => p.Properties.Queues[0].Ref === queue) as [string, Json];
      const statements = resolveIfs(template, policy.Properties.PolicyDocument.Statement) as Json[];
      for (const st of statements) {
        expect(st.Effect, st.Sid).toBe('Deny');
        expect(st.Principal, st.Sid).toBe('*');
        expect(st.Resource, st.Sid).toEqual({ 'Fn::GetAtt': [queue, 'Arn'] });
      }
      return Object.fromEntries(statements.map((st) => [st.Sid, st]));
    };
    const events = statementsFor('EventQueue');
    expect(events.DenyInsecureTransport).toMatchObject({ Action: 'sqs:*', Condition: { Bool: { 'aws:SecureTransport': 'false' } } });
    expect(events.OnlyTheForwarderAndReissuesSend).toMatchObject({ Action: ['sqs:SendMessage'], Condition: { ArnNotEquals: { 'aws:PrincipalArn': [forwarderRole, reconcileRole, ...redrive] } } });
    expect(events.OnlyTheReconcileFunctionConsumes).toMatchObject({
      Action: ['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility'],
      Condition: { ArnNotEquals: { 'aws:PrincipalArn': [reconcileRole] } },
    });
    const dlq = statementsFor('EventDeadLetterQueue');
    expect(dlq.DenyInsecureTransport).toMatchObject({ Action: 'sqs:*' });
    expect(dlq.OnlyTheReconcileFunctionSendsDeadLetters).toMatchObject({ Action: ['sqs:SendMessage'], Condition: { ArnNotEquals: { 'aws:PrincipalArn': [reconcileRole] } } });
    // The roles agree with the policies: SendMessage on the event queue for the forwarder and reconcile (re-issue), on the DLQ only for reconcile.
    const sends = (queue: string): string[] =>
      resourcesOfType(template, 'AWS::IAM::Role')
        .filter(([, role]) =>
          (resolveIfs(template, role.Properties.Policies) as Json[]).some((policy) =>
            statementsOf(template, policy.PolicyDocument).some(
              (st) => asArray(st.Action as string | string[]).includes('sqs:SendMessage') && JSON.stringify(st.Resource).includes(`"${queue}"`),
            ),
          ),
        )
        .map(([id]) => id);
    expect(sends('EventQueue').sort()).toEqual(['ReconcileNodeTaintsRole', 'WatchForwarderRole']);
    expect(sends('EventDeadLetterQueue')).toEqual(['ReconcileNodeTaintsRole']);
  });
});

/** A property value with every Fn::If resolved for this stage's parameters (undefined for AWS::NoValue). */
function resolveIfs(template: Json, value: Json): Json {
  if (Array.isArray(value)) return value.map((v) => resolveIfs(template, v)).filter((v) => v !== undefined);
  if (!value || typeof value !== 'object') return value;
  if ('Fn::If' in value) {
    const [condition, whenTrue, whenFalse] = value['Fn::If'] as [string, Json, Json];
    return resolveIfs(template, evaluateCondition(template, condition) ? whenTrue : whenFalse);
  }
  if (value.Ref === 'AWS::NoValue') return undefined;
  return Object.fromEntries(Object.entries(value as Record<string, Json>).map(([k, v]) => [k, resolveIfs(template, v)]).filter(([, v]) => v !== undefined));
}

/** The resources CloudFormation would create for this stage's parameters. */
function createdResources(template: Json): Record<string, Json> {
  return Object.fromEntries(Object.entries(template.Resources as Record<string, Json>).filter(([, r]) => !r.Condition || evaluateCondition(template, r.Condition)));
}

describe('deploy parameters checked at package time', () => {
  it("refuses serverless.yml's defaults with one message naming every missing parameter, and writes no template", () => {
    expect(refused.code).not.toBe(0);
    expect(refused.templateWritten).toBe(false);
    expect(refused.output).toContain('Deploy parameters of stage "dev" are incomplete or inconsistent (nothing was packaged):');
    for (const name of ['eksClusterName', 'eksEndpoint', 'eksCaData']) expect(refused.output).toContain(`  - ${name} is required when managementAuth=eks`);
    expect(refused.output).toContain('infra/params/eks.yml, ssm.yml, secretsmanager.yml');
    expect(refused.output).not.toMatch(/\n\s+at /); // a message, not a stack trace
  });

  it('packages each worked parameter file with the values it sets', () => {
    const env = (p: Packaged): Json => functionByHandler(p.template, 'functions/reconcile-node-taints/handler.handler')[1].Properties.Environment.Variables;
    expect(env(eks)).toMatchObject({ MANAGEMENT_AUTH: 'eks', EKS_CLUSTER_NAME: 'mgmt' });
    expect(eks.template.Resources.ReconcileNodeTaintsAccessEntry.Properties.ClusterName).toBe('mgmt');
    expect(env(ssm)).toMatchObject({ MANAGEMENT_AUTH: 'ssm', MANAGEMENT_KUBECONFIG_PARAMETER: '/capi-taint-propagator/management-kubeconfig' });
    expect(env(secretsManager)).toMatchObject({ MANAGEMENT_AUTH: 'secretsmanager', MANAGEMENT_KUBECONFIG_SECRET_ID: 'capi-taint-propagator/management-kubeconfig' });
    for (const p of [ssm, secretsManager]) expect(createdResources(p.template)).not.toHaveProperty('ReconcileNodeTaintsAccessEntry');
  });
});

describe('private networks (infra/vpc.yml)', () => {
  const functions = (p: Packaged): [string, Json][] => resourcesOfType(p.template, 'AWS::Lambda::Function');

  it('puts both functions into the given subnets and security groups, with the ENI permissions', () => {
    for (const [id, fn] of functions(eks)) {
      expect(resolveIfs(eks.template, fn.Properties.VpcConfig), id).toEqual({
        SubnetIds: { 'Fn::Split': [',', 'subnet-0a1b2c3d4e5f60718,subnet-0f1e2d3c4b5a69788'] },
        SecurityGroupIds: { 'Fn::Split': [',', 'sg-0123456789abcdef0'] },
      });
    }
    for (const role of ['ReconcileNodeTaintsRole', 'WatchForwarderRole']) {
      const properties = resolveIfs(eks.template, eks.template.Resources[role].Properties);
      // Not the AWS managed policy AWSLambdaVPCAccessExecutionRole: it also grants logs:* on every log group.
      expect(properties.ManagedPolicyArns, role).toBeUndefined();
      const network = (properties.Policies as Json[]).filter((p) => String(p.PolicyName).endsWith('-vpc-network-interfaces'));
      expect(network.map((p) => p.PolicyDocument.Statement), role).toEqual([
        [
          {
            Sid: 'ManageNetworkInterfaces',
            Effect: 'Allow',
            Action: [
              'ec2:CreateNetworkInterface',
              'ec2:DescribeNetworkInterfaces',
              'ec2:DescribeSubnets',
              'ec2:DeleteNetworkInterface',
              'ec2:AssignPrivateIpAddresses',
              'ec2:UnassignPrivateIpAddresses',
            ],
            Resource: '*',
          },
        ],
      ]);
    }
  });

  it('creates the interface endpoints the functions call, on request: SQS, plus SSM or Secrets Manager when used', () => {
    const created = createdResources(eks.template);
    const endpoints = Object.values(created).filter((r) => r.Type === 'AWS::EC2::VPCEndpoint');
    expect(endpoints.map((e) => e.Properties.ServiceName['Fn::Sub'])).toEqual(['com.amazonaws.${AWS::Region}.sqs']);
    for (const e of endpoints) {
      expect(e.Properties).toMatchObject({ VpcEndpointType: 'Interface', PrivateDnsEnabled: true, VpcId: 'vpc-0123456789abcdef0', SecurityGroupIds: [{ Ref: 'VpcEndpointSecurityGroup' }] });
    }
    expect(created.VpcEndpointSecurityGroup.Properties.SecurityGroupIngress).toEqual([
      { IpProtocol: 'tcp', FromPort: 443, ToPort: 443, CidrIp: '10.0.0.0/16', Description: "HTTPS from the functions' subnets" },
    ]);
    // The same conditions with managementAuth=ssm / secretsmanager pick their endpoint.
    const conditionsWith = (auth: string): Json => JSON.parse(JSON.stringify(eks.template.Conditions).replaceAll('"eks"', `"${auth}"`));
    for (const [auth, id] of [['ssm', 'SsmVpcEndpoint'], ['secretsmanager', 'SecretsManagerVpcEndpoint']] as const) {
      const template = { ...eks.template, Conditions: conditionsWith(auth) };
      expect(evaluateCondition(template, eks.template.Resources[id].Condition), id).toBe(true);
    }
  });

  it.each([
    ['ssm', () => ssm],
    ['secretsmanager', () => secretsManager],
  ])('leaves the functions outside any VPC when no subnets are given: %s', (_name, packaged) => {
    const p = packaged();
    for (const [id, fn] of functions(p)) expect(resolveIfs(p.template, fn.Properties).VpcConfig, id).toBeUndefined();
    for (const role of ['ReconcileNodeTaintsRole', 'WatchForwarderRole']) {
      const properties = resolveIfs(p.template, p.template.Resources[role].Properties);
      expect(properties.ManagedPolicyArns, role).toBeUndefined();
      expect((properties.Policies as Json[]).map((x) => x.PolicyName), role).toEqual([role === 'WatchForwarderRole' ? 'forwarder' : 'reconcile']);
    }
    const created = Object.values(createdResources(p.template)).map((r) => r.Type);
    expect(created).not.toContain('AWS::EC2::VPCEndpoint');
    expect(created).not.toContain('AWS::EC2::SecurityGroup');
  });
});

describe('stack outputs', () => {
  it('outputs the dead-letter queue ARN and URL (a redrive needs the ARN)', () => {
    expect(eks.template.Outputs.EventDeadLetterQueueArn.Value).toEqual({ 'Fn::GetAtt': ['EventDeadLetterQueue', 'Arn'] });
    expect(eks.template.Outputs.EventDeadLetterQueueUrl.Value).toEqual({ Ref: 'EventDeadLetterQueue' });
  });
});

describe('alarms and the runbook (docs/runbook.md)', () => {
  /** An alarm description's runbook link: `Runbook <runbookUrl>#<section>` at its end. */
  const runbookLink = (description: string): { url: string; anchor: string } => {
    const m = / Runbook (\S+)#([a-z0-9-]+)$/.exec(description);
    if (!m) throw new Error(`no runbook link at the end of: ${description}`);
    return { url: m[1] as string, anchor: m[2] as string };
  };

  it('has one runbook section per alarm, named as the alarm, and each alarm description links its section', () => {
    const alarms = resourcesOfType(eks.template, 'AWS::CloudWatch::Alarm').map(([, a]) => a.Properties);
    const sections = alarms.map((p) => {
      const name: string = p.AlarmName;
      expect(name.startsWith('capi-taint-propagator-example-eks-'), name).toBe(true);
      return name.slice('capi-taint-propagator-example-eks-'.length);
    });
    const runbook = readFileSync(join(root, 'docs', 'runbook.md'), 'utf8');
    const alarmHeadings = [...runbook.matchAll(/^## (.+)$/gm)].map((m) => m[1] ?? '');
    expect(alarmHeadings.sort()).toEqual([...sections].sort());
    for (const [i, p] of alarms.entries()) expect(runbookLink(p.AlarmDescription)).toEqual({ url: 'docs/runbook.md', anchor: sections[i] });
  });

  it.each([
    ['eks', () => eks],
    ['ssm', () => ssm],
    ['secretsmanager', () => secretsManager],
  ])('resolves every alarm\'s runbook link to a heading that exists, by GitHub\'s anchor rules: %s', (_name, packaged) => {
    // The default runbookUrl is a path in this repository; each link must reach that file and one of its headings.
    const alarms = resourcesOfType(packaged().template, 'AWS::CloudWatch::Alarm').map(([, a]) => a.Properties);
    expect(alarms.length).toBeGreaterThan(10);
    const broken: string[] = [];
    for (const p of alarms) {
      const { url, anchor } = runbookLink(p.AlarmDescription);
      const file = join(root, url);
      if (!existsSync(file)) broken.push(`${p.AlarmName}: no file ${url}`);
      else if (!headingAnchors(readFileSync(file, 'utf8')).includes(anchor)) broken.push(`${p.AlarmName}: no heading #${anchor} in ${url}`);
    }
    expect(broken).toEqual([]);
  });
});
