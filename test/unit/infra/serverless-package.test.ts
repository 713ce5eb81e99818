/**
 * `npx serverless package` offline, without AWS credentials (no AWS_* variables, an empty HOME), in a copy of the
 * service in a temp dir (so that parallel runs never share .serverless/ or .esbuild/), then assertions on the
 * generated CloudFormation template. Metric names are cross-checked against shared/observability/metric-names.ts.
 */
import { execFile } from 'node:child_process';
import { cp, mkdir, mkdtemp, readFile, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForwarderMetric, METRIC_NAMESPACE, ReconcileMetric } from '#shared/observability/metric-names.ts';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../../..');

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a CloudFormation template is untyped JSON
type Json = any;

interface Packaged {
  template: Json;
  dir: string;
  seconds: number;
}

async function packageService(args: string[]): Promise<Packaged> {
  const dir = await mkdtemp(join(tmpdir(), 'ctp-sls-'));
  const service = join(dir, 'service');
  await mkdir(service);
  for (const entry of ['serverless.yml', 'package.json', 'tsconfig.json', 'infra', 'functions', 'shared']) {
    await cp(join(root, entry), join(service, entry), { recursive: true });
  }
  await symlink(join(root, 'node_modules'), join(service, 'node_modules'), 'dir');
  const home = join(dir, 'home');
  await mkdir(home);
  // No AWS_* variables, no ~/.aws: proves packaging needs no account.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: home,
    NPM_CONFIG_UPDATE_NOTIFIER: 'false',
    SLS_TELEMETRY_DISABLED: '1',
  };
  const started = Date.now();
  try {
    await run('npx', ['--no-install', 'serverless', 'package', ...args], { cwd: service, env, timeout: 240_000, maxBuffer: 16 * 1024 * 1024 });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`serverless package failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
  const seconds = (Date.now() - started) / 1000;
  const template = JSON.parse(await readFile(join(service, '.serverless', 'cloudformation-template-update-stack.json'), 'utf8')) as Json;
  return { template, dir, seconds };
}

function resourcesOfType(template: Json, type: string): [string, Json][] {
  return Object.entries(template.Resources as Record<string, Json>).filter(([, r]) => r.Type === type);
}

function functionByHandler(template: Json, handler: string): [string, Json] {
  const found = resourcesOfType(template, 'AWS::Lambda::Function').find(([, r]) => r.Properties.Handler === handler);
  if (!found) throw new Error(`no function with handler ${handler}`);
  return found;
}

/** Evaluates a CloudFormation condition whose parameters were already resolved by the framework. */
function evaluateCondition(template: Json, c: Json): boolean {
  if (typeof c === 'string') return evaluateCondition(template, template.Conditions[c]);
  if ('Condition' in c) return evaluateCondition(template, c.Condition);
  if ('Fn::Equals' in c) return String(c['Fn::Equals'][0]) === String(c['Fn::Equals'][1]);
  if ('Fn::Not' in c) return !evaluateCondition(template, c['Fn::Not'][0]);
  if ('Fn::And' in c) return (c['Fn::And'] as Json[]).every((x) => evaluateCondition(template, x));
  if ('Fn::Or' in c) return (c['Fn::Or'] as Json[]).some((x) => evaluateCondition(template, x));
  throw new Error(`cannot evaluate condition ${JSON.stringify(c)}`);
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

let defaults: Packaged;
let ssm: Packaged;

beforeAll(async () => {
  defaults = await packageService([]);
  ssm = await packageService([
    '--stage',
    'prod',
    '--param=managementAuth=ssm',
    '--param=managementKubeconfigParameter=/capi-taint-propagator/management-kubeconfig',
    '--param=managementKubeconfigKmsKeyArn=arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab',
    '--param=alarmEmail=oncall@example.com',
  ]);
}, 480_000);

afterAll(async () => {
  for (const p of [defaults, ssm]) if (p) await rm(p.dir, { recursive: true, force: true });
});

describe('npx serverless package (offline, no credentials)', () => {
  it('produces a template and one zip per function', async () => {
    const zips = ['reconcileNodeTaints.zip', 'watchForwarder.zip'].map((z) => join(defaults.dir, 'service', '.serverless', z));
    for (const zip of zips) expect((await stat(zip)).size).toBeGreaterThan(1000);
    console.info(`serverless package: ${defaults.seconds.toFixed(1)} s (defaults), ${ssm.seconds.toFixed(1)} s (ssm)`);
  });

  it('runs on nodejs22.x or newer, arm64, with source maps and the documented environment', () => {
    const functions = resourcesOfType(defaults.template, 'AWS::Lambda::Function');
    expect(functions).toHaveLength(2);
    for (const [id, fn] of functions) {
      const version = Number(/^nodejs(\d+)\.x$/.exec(fn.Properties.Runtime)?.[1]);
      expect(version, id).toBeGreaterThanOrEqual(22);
      expect(fn.Properties.Architectures, id).toEqual(['arm64']);
      expect(fn.Properties.Environment.Variables.NODE_OPTIONS, id).toBe('--enable-source-maps');
      for (const name of ['CLUSTER_MODE', 'MANAGEMENT_AUTH', 'EKS_CLUSTER_NAME', 'EKS_ENDPOINT', 'EKS_CA_DATA', 'MANAGEMENT_KUBECONFIG_PARAMETER', 'MANAGEMENT_KUBECONFIG_SECRET_ID', 'STATE_NAMESPACE', 'POWERTOOLS_LOG_LEVEL', 'POWERTOOLS_SERVICE_NAME', 'QUEUE_URL']) {
        expect(fn.Properties.Environment.Variables, `${id} ${name}`).toHaveProperty(name);
      }
    }
    const [, reconcile] = functionByHandler(defaults.template, 'functions/reconcile-node-taints/handler.handler');
    for (const name of ['DEAD_LETTER_QUEUE_URL', 'DRY_RUN', 'STARTUP_TAINT_KEY', 'RETRY_BASE_SECONDS', 'RETRY_MAX_SECONDS', 'FIRST_ENABLED_AT']) {
      expect(reconcile.Properties.Environment.Variables).toHaveProperty(name);
    }
    expect(reconcile.Properties.Environment.Variables.STARTUP_TAINT_KEY).toBe('node.cluster.x-k8s.io/uninitialized');
    expect(reconcile.Properties.ReservedConcurrentExecutions).toBeGreaterThan(0);
    const [, forwarder] = functionByHandler(defaults.template, 'functions/watch-forwarder/handler.handler');
    for (const name of ['WATCH_WINDOW_SECONDS', 'RESYNC_INTERVAL_SECONDS', 'WATCH_IDLE_SECONDS', 'LEASE_NAME']) {
      expect(forwarder.Properties.Environment.Variables).toHaveProperty(name);
    }
  });

  it('has a FIFO queue with a FIFO dead-letter queue, redrive after >= 5 receives, long DLQ retention', () => {
    const r = defaults.template.Resources;
    expect(r.EventQueue.Properties.FifoQueue).toBe(true);
    expect(r.EventDeadLetterQueue.Properties.FifoQueue).toBe(true);
    expect(r.EventQueue.Properties.RedrivePolicy.deadLetterTargetArn).toEqual({ 'Fn::GetAtt': ['EventDeadLetterQueue', 'Arn'] });
    expect(Number(r.EventQueue.Properties.RedrivePolicy.maxReceiveCount)).toBeGreaterThanOrEqual(5);
    expect(Number(r.EventDeadLetterQueue.Properties.MessageRetentionPeriod)).toBeGreaterThan(Number(r.EventQueue.Properties.MessageRetentionPeriod));
    expect(Number(r.EventDeadLetterQueue.Properties.MessageRetentionPeriod)).toBe(14 * 24 * 3600);
  });

  it('sizes the visibility timeout at >= 6x the reconcile timeout', () => {
    const [, reconcile] = functionByHandler(defaults.template, 'functions/reconcile-node-taints/handler.handler');
    const visibility = Number(defaults.template.Resources.EventQueue.Properties.VisibilityTimeout);
    expect(visibility).toBeGreaterThanOrEqual(6 * Number(reconcile.Properties.Timeout));
  });

  it('triggers reconcile from the queue with ReportBatchItemFailures, batch size <= 10, no batching window', () => {
    const [reconcileId] = functionByHandler(defaults.template, 'functions/reconcile-node-taints/handler.handler');
    const mappings = resourcesOfType(defaults.template, 'AWS::Lambda::EventSourceMapping');
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
    const [forwarderId, forwarder] = functionByHandler(defaults.template, 'functions/watch-forwarder/handler.handler');
    const rules = resourcesOfType(defaults.template, 'AWS::Events::Rule');
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
    expect(timeout).toBeLessThanOrEqual(intervalSeconds);
    // A quiet, healthy watch gets a bookmark about once a minute: the watchdog must not restart it.
    expect(Number(forwarder.Properties.Environment.Variables.WATCH_IDLE_SECONDS)).toBeGreaterThanOrEqual(70);
    expect(forwarder.Properties.ReservedConcurrentExecutions).toBe(1);
  });

  it('gives each function exactly one log group, with retention', () => {
    const groups = resourcesOfType(defaults.template, 'AWS::Logs::LogGroup');
    const functions = resourcesOfType(defaults.template, 'AWS::Lambda::Function');
    expect(groups).toHaveLength(functions.length);
    for (const [, fn] of functions) {
      const matching = groups.filter(([, g]) => g.Properties.LogGroupName === `/aws/lambda/${fn.Properties.FunctionName}`);
      expect(matching, fn.Properties.FunctionName).toHaveLength(1);
      expect(Number((matching[0] as [string, Json])[1].Properties.RetentionInDays)).toBeGreaterThan(0);
    }
  });

  it.each([
    ['defaults (eks)', () => defaults],
    ['ssm + customer KMS key', () => ssm],
  ])('holds IAM statements without wildcard actions or resources: %s', (_name, packaged) => {
    const { template } = packaged();
    expect(template.Resources.IamRoleLambdaExecution).toBeUndefined(); // one role per function, no shared default role
    const roles = resourcesOfType(template, 'AWS::IAM::Role');
    expect(roles.map(([id]) => id).sort()).toEqual(['ReconcileNodeTaintsRole', 'WatchForwarderRole']);
    for (const [roleId, role] of roles) {
      for (const policy of role.Properties.Policies ?? []) {
        for (const statement of statementsOf(template, policy.PolicyDocument)) {
          const where = `${roleId}/${statement.Sid ?? '?'}`;
          expect(statement.Effect, where).toBe('Allow');
          expect(statement.NotAction ?? statement.NotResource, where).toBeUndefined();
          for (const action of asArray(statement.Action as string | string[])) {
            expect(action, where).toMatch(/^[a-z0-9-]+:[A-Za-z]+$/); // service:Action, no * anywhere
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
    // With EKS auth (the default) there is nothing to read or decrypt.
    const eksActions = Object.keys(actions('ReconcileNodeTaintsRole', defaults.template));
    expect(eksActions.filter((a) => /^(ssm|secretsmanager|kms):/.test(a))).toEqual([]);
    expect(defaults.template.Resources.ReconcileNodeTaintsAccessEntry.Properties.KubernetesGroups).toEqual(['capi-taint-propagator-reconcile']);
    expect(defaults.template.Resources.WatchForwarderAccessEntry.Properties.KubernetesGroups).toEqual(['capi-taint-propagator-forwarder']);
  });

  it('builds every alarm on a metric the code emits (or on AWS/SQS, AWS/Lambda metrics)', () => {
    const alarms = resourcesOfType(defaults.template, 'AWS::CloudWatch::Alarm');
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
    const r = defaults.template.Resources;
    expect(r.DeadLetterQueueNotEmptyAlarm.Properties.Dimensions[0].Value).toEqual({ 'Fn::GetAtt': ['EventDeadLetterQueue', 'QueueName'] });
    expect(used).toContain('AWS/SQS/ApproximateAgeOfOldestMessage');
    expect(used).toContain('AWS/Lambda/Errors');
    expect(used).toContain(`${METRIC_NAMESPACE}/${ReconcileMetric.Conflicts}`);
    expect(r.ForwarderStalledAlarm.Properties.TreatMissingData).toBe('breaching');
  });

  it('builds every dashboard widget on metrics the code emits', () => {
    const dashboards = resourcesOfType(defaults.template, 'AWS::CloudWatch::Dashboard');
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
