/**
 * Reads what the Lambda runner needs from the PACKAGED service (`npx serverless package`): the generated
 * `.serverless/cloudformation-template-update-stack.json`, the zips beside it and the region of `serverless-state.json`.
 * Every setting the runner applies comes from here (handler, runtime, timeout, memory, reserved and provisioned
 * concurrency, environment, schedule, event source mapping, queues): there is no second copy of them in the runner.
 *
 * Intrinsics are resolved the way CloudFormation would for this stack, with the local resources standing in for the
 * deployed ones: `Ref` / `Fn::GetAtt` of a queue give its local URL / ARN (see {@link Resolver}), pseudo parameters
 * give the account and region the runner plays, `Fn::Sub`, `Fn::If` (conditions evaluated), `Fn::Join`, `Fn::Split`.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a CloudFormation template is untyped JSON
export type Json = any;

/** A queue of the template (`AWS::SQS::Queue`). */
export interface TemplateQueue {
  readonly logicalId: string;
  readonly queueName: string;
  readonly fifo: boolean;
  /** CreateQueue attributes as the template declares them (RedrivePolicy resolved against the local queues later). */
  readonly properties: Readonly<Record<string, Json>>;
  readonly visibilityTimeoutSeconds: number;
  /** The redrive policy: dead-letter queue logical id and receives before a message moves there. */
  readonly redrive?: { readonly deadLetterLogicalId: string; readonly maxReceiveCount: number } | undefined;
}

/** An `AWS::Lambda::EventSourceMapping` from an SQS queue of the template. */
export interface TemplateSqsEventSource {
  readonly logicalId: string;
  readonly queueLogicalId: string;
  readonly batchSize: number;
  readonly reportBatchItemFailures: boolean;
  /** `ScalingConfig.MaximumConcurrency`, when set. */
  readonly maximumConcurrency?: number | undefined;
  readonly enabled: boolean;
  /** The alias (or version number) the mapping invokes; undefined: the unqualified function (`$LATEST`). */
  readonly qualifier?: string | undefined;
}

/** An `AWS::Lambda::Version` of the function. */
export interface TemplateVersion {
  readonly logicalId: string;
  /**
   * The version number the stack publishes: `1`, `2`, ... in template order (a new stack publishes each version
   * resource once; the runner always plays a new stack).
   */
  readonly version: string;
  /** Its own `ProvisionedConcurrencyConfig.ProvisionedConcurrentExecutions` (0 when none). */
  readonly provisionedConcurrency: number;
}

/** An `AWS::Lambda::Alias` of the function. */
export interface TemplateAlias {
  readonly logicalId: string;
  /** `Name`: the qualifier that invokes it (osls names its provisioned-concurrency alias `provisioned`). */
  readonly name: string;
  /** The version it points at (`FunctionVersion`: a version resource's `Version`, or a literal). */
  readonly version: string;
  /** `ProvisionedConcurrencyConfig.ProvisionedConcurrentExecutions` (0 when none). */
  readonly provisionedConcurrency: number;
}

/** An `AWS::Events::Rule` with a `rate(...)` schedule targeting the function. */
export interface TemplateSchedule {
  readonly logicalId: string;
  readonly expression: string;
  readonly periodMs: number;
  readonly enabled: boolean;
  /**
   * The target's constant `Input` (JSON), which EventBridge delivers as the event instead of the Scheduled Event: the
   * forwarder's `{ "shard": i }`, one rule per shard. Undefined when the target has none.
   */
  readonly input?: unknown;
}

/** An `AWS::Lambda::Function` of the template and everything that drives it. */
export interface TemplateFunction {
  readonly logicalId: string;
  /** The serverless.yml key (`watchForwarder`), which names the zip. */
  readonly key: string;
  readonly functionName: string;
  /** `functions/watch-forwarder/handler.handler`: file (without `.js`) and export. */
  readonly handler: string;
  readonly runtime: string;
  readonly architectures: readonly string[];
  readonly timeoutSeconds: number;
  readonly memoryMiB: number;
  readonly reservedConcurrency?: number | undefined;
  /** Its published versions and aliases (osls adds one of each when `provisionedConcurrency` is set). */
  readonly versions: readonly TemplateVersion[];
  readonly aliases: readonly TemplateAlias[];
  /**
   * Execution environments kept initialized, per version: the provisioned concurrency of each alias and version (an
   * alias's applies to the version it points at). Empty when the function has none.
   */
  readonly provisionedConcurrency: ReadonlyMap<string, number>;
  /** Environment variables, still with their intrinsics (resolve with {@link Resolver.value}). */
  readonly environment: Readonly<Record<string, Json>>;
  /** Logical id of the execution role. */
  readonly roleLogicalId: string;
  readonly zipPath: string;
  readonly schedules: readonly TemplateSchedule[];
  readonly sqsEventSources: readonly TemplateSqsEventSource[];
  /** `AWS::Lambda::EventInvokeConfig` of an asynchronous (scheduled) invocation. */
  readonly asyncConfig: { readonly maximumEventAgeSeconds: number; readonly maximumRetryAttempts: number };
}

export interface PackagedTemplate {
  readonly serviceDir: string;
  readonly templatePath: string;
  readonly template: Json;
  readonly region: string;
  readonly functions: ReadonlyMap<string, TemplateFunction>;
  readonly queues: ReadonlyMap<string, TemplateQueue>;
  /** IAM role name per logical id (`RoleName`). */
  readonly roleNames: ReadonlyMap<string, string>;
}

/**
 * The value the template's functions give an environment variable that is a plain string (no intrinsic), as a
 * deployment reads it before its stack exists: the management kubeconfig parameter or secret, the state namespace.
 * Throws, naming the template, when no function sets it, or when two set it differently.
 */
export function functionsEnvironmentValue(t: PackagedTemplate, name: string): string {
  const values = new Set([...t.functions.values()].map((fn) => fn.environment[name]).filter((v): v is string => typeof v === 'string' && v !== ''));
  if (values.size !== 1) throw new Error(`${t.templatePath}: ${values.size === 0 ? `no function sets ${name}` : `the functions set ${name} differently (${[...values].join(', ')})`}`);
  return [...values][0] as string;
}

/** Lambda async invocations default to 6 h / 2 retries when no EventInvokeConfig says otherwise. */
const DEFAULT_ASYNC = { maximumEventAgeSeconds: 21_600, maximumRetryAttempts: 2 };

/** Reads the packaged template of a service directory (the one that holds `.serverless/`). */
export function readPackagedTemplate(serviceDir: string): PackagedTemplate {
  const dir = join(serviceDir, '.serverless');
  const templatePath = join(dir, 'cloudformation-template-update-stack.json');
  const template = JSON.parse(readFileSync(templatePath, 'utf8')) as Json;
  const state = JSON.parse(readFileSync(join(dir, 'serverless-state.json'), 'utf8')) as Json;
  const region = String(state?.service?.provider?.region ?? '');
  if (region === '') throw new Error(`${join(dir, 'serverless-state.json')} names no provider region`);
  const resources = (template.Resources ?? {}) as Record<string, Json>;
  const of = (type: string): [string, Json][] => Object.entries(resources).filter(([, r]) => r.Type === type);

  const queues = new Map<string, TemplateQueue>();
  for (const [id, r] of of('AWS::SQS::Queue')) {
    const p = r.Properties ?? {};
    const redrive = p.RedrivePolicy as Json;
    const dlqId = redrive?.deadLetterTargetArn?.['Fn::GetAtt']?.[0] as string | undefined;
    queues.set(id, {
      logicalId: id,
      queueName: String(p.QueueName ?? id),
      fifo: p.FifoQueue === true || p.FifoQueue === 'true',
      properties: p,
      visibilityTimeoutSeconds: Number(p.VisibilityTimeout ?? 30),
      redrive: dlqId === undefined ? undefined : { deadLetterLogicalId: dlqId, maxReceiveCount: Number(redrive.maxReceiveCount) },
    });
  }
  const roleNames = new Map<string, string>(of('AWS::IAM::Role').map(([id, r]) => [id, String(r.Properties?.RoleName ?? id)]));

  const functions = new Map<string, TemplateFunction>();
  for (const [id, r] of of('AWS::Lambda::Function')) {
    const p = r.Properties ?? {};
    const created = ([, res]: [string, Json]): boolean => res.Condition === undefined || evaluateCondition(template, res.Condition);
    const versions = of('AWS::Lambda::Version')
      .filter((v) => created(v) && v[1].Properties?.FunctionName?.Ref === id)
      .map(([vId, v], i): TemplateVersion => ({ logicalId: vId, version: String(i + 1), provisionedConcurrency: provisionedOf(v.Properties) }));
    const aliases = of('AWS::Lambda::Alias')
      .filter((a) => created(a) && a[1].Properties?.FunctionName?.Ref === id)
      .map(([aId, a]): TemplateAlias => {
        const target = a.Properties.FunctionVersion as Json;
        const versionId = target?.['Fn::GetAtt']?.[0] as string | undefined;
        const version = versionId === undefined ? String(target) : versions.find((v) => v.logicalId === versionId)?.version;
        if (version === undefined) throw new Error(`Alias ${aId} points at ${versionId}, which is no version of ${id}`);
        return { logicalId: aId, name: String(a.Properties.Name), version, provisionedConcurrency: provisionedOf(a.Properties) };
      });
    const provisionedConcurrency = new Map<string, number>();
    for (const x of [...versions, ...aliases].filter((v) => v.provisionedConcurrency > 0)) {
      if (x.version === '$LATEST') throw new Error(`${x.logicalId}: Lambda has no provisioned concurrency on $LATEST`);
      provisionedConcurrency.set(x.version, (provisionedConcurrency.get(x.version) ?? 0) + x.provisionedConcurrency);
    }
    /**
     * The qualifier an ARN of this function invokes (undefined: unqualified), or null when it names something else:
     * `Fn::GetAtt [fn, Arn]` / `Ref fn`, `Fn::Join [':', [<fn ARN>, <qualifier>]]` (how osls targets its alias), or
     * `Ref` of one of its aliases or versions (their ARN).
     */
    const qualifierOf = (arn: Json): string | undefined | null => {
      if (arn?.['Fn::GetAtt']?.[0] === id || arn?.Ref === id) return undefined;
      const join = arn?.['Fn::Join'] as Json;
      if (join?.[0] === ':' && Array.isArray(join[1]) && join[1].length === 2 && typeof join[1][1] === 'string' && qualifierOf(join[1][0]) === undefined) return String(join[1][1]);
      const alias = aliases.find((a) => a.logicalId === arn?.Ref);
      if (alias) return alias.name;
      const version = versions.find((v) => v.logicalId === arn?.Ref);
      if (version) return version.version;
      return null;
    };
    const targets = (arn: Json): boolean => qualifierOf(arn) !== null;
    const schedules = of('AWS::Events::Rule')
      .filter(([, rule]) => (rule.Properties?.Targets ?? []).some((t: Json) => targets(t.Arn)) && typeof rule.Properties?.ScheduleExpression === 'string')
      .map(([ruleId, rule]) => {
        const input = ((rule.Properties.Targets ?? []) as Json[]).find((t) => targets(t.Arn))?.Input;
        return {
          logicalId: ruleId,
          expression: String(rule.Properties.ScheduleExpression),
          periodMs: ratePeriodMs(String(rule.Properties.ScheduleExpression)),
          enabled: (rule.Properties.State ?? 'ENABLED') === 'ENABLED',
          ...(typeof input === 'string' ? { input: JSON.parse(input) as unknown } : {}),
        };
      });
    const sqsEventSources = of('AWS::Lambda::EventSourceMapping')
      .filter(([, m]) => targets(m.Properties?.FunctionName))
      .flatMap(([mId, m]): TemplateSqsEventSource[] => {
        const mp = m.Properties;
        const queueId = mp.EventSourceArn?.['Fn::GetAtt']?.[0] as string | undefined;
        if (queueId === undefined || !queues.has(queueId)) return [];
        const max = mp.ScalingConfig?.MaximumConcurrency;
        return [
          {
            logicalId: mId,
            queueLogicalId: queueId,
            batchSize: Number(mp.BatchSize ?? 10),
            reportBatchItemFailures: ((mp.FunctionResponseTypes ?? []) as string[]).includes('ReportBatchItemFailures'),
            maximumConcurrency: max === undefined ? undefined : Number(max),
            enabled: mp.Enabled !== false,
            qualifier: qualifierOf(mp.FunctionName) ?? undefined,
          },
        ];
      });
    const evConf = of('AWS::Lambda::EventInvokeConfig').find(([, c]) => targets(c.Properties?.FunctionName))?.[1]?.Properties;
    const handler = String(p.Handler);
    const key = zipKeyOf(p.Code, id);
    functions.set(key, {
      logicalId: id,
      key,
      functionName: String(p.FunctionName ?? id),
      handler,
      runtime: String(p.Runtime),
      architectures: (p.Architectures ?? ['x86_64']) as string[],
      timeoutSeconds: Number(p.Timeout ?? 3),
      memoryMiB: Number(p.MemorySize ?? 128),
      reservedConcurrency: p.ReservedConcurrentExecutions === undefined ? undefined : Number(p.ReservedConcurrentExecutions),
      versions,
      aliases,
      provisionedConcurrency,
      environment: (p.Environment?.Variables ?? {}) as Record<string, Json>,
      roleLogicalId: String(p.Role?.['Fn::GetAtt']?.[0] ?? ''),
      zipPath: join(dir, `${key}.zip`),
      schedules,
      sqsEventSources,
      asyncConfig: evConf
        ? { maximumEventAgeSeconds: Number(evConf.MaximumEventAgeInSeconds ?? DEFAULT_ASYNC.maximumEventAgeSeconds), maximumRetryAttempts: Number(evConf.MaximumRetryAttempts ?? DEFAULT_ASYNC.maximumRetryAttempts) }
        : DEFAULT_ASYNC,
    });
  }
  return { serviceDir, templatePath, template, region, functions, queues, roleNames };
}

/** `ProvisionedConcurrencyConfig.ProvisionedConcurrentExecutions` of an alias's or version's properties, 0 when none. */
function provisionedOf(properties: Json): number {
  const n = properties?.ProvisionedConcurrencyConfig?.ProvisionedConcurrentExecutions;
  return n === undefined ? 0 : Number(n);
}

/** The zip's name: the last path segment of `Code.S3Key` without `.zip` (serverless names it after the function key). */
function zipKeyOf(code: Json, logicalId: string): string {
  const s3Key = code?.S3Key;
  if (typeof s3Key !== 'string' || !s3Key.endsWith('.zip')) throw new Error(`Function ${logicalId}: Code.S3Key ${JSON.stringify(s3Key)} names no zip`);
  return s3Key.slice(s3Key.lastIndexOf('/') + 1, -'.zip'.length);
}

/** The period of an EventBridge `rate(<n> minute|minutes|hour|hours|day|days)` expression, in ms. */
export function ratePeriodMs(expression: string): number {
  const m = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression.trim());
  if (!m) throw new Error(`Only rate(...) schedules are supported by the runner, got ${JSON.stringify(expression)}`);
  const n = Number(m[1]);
  const unit = (m[2] ?? '').replace(/s$/, '');
  if (n < 1) throw new Error(`A rate schedule needs a positive value, got ${JSON.stringify(expression)}`);
  return n * ({ minute: 60_000, hour: 3_600_000, day: 86_400_000 } as Record<string, number>)[unit]!;
}

/** Stand-ins for what CloudFormation would return for this stack's resources and pseudo parameters. */
export interface Resolver {
  readonly accountId: string;
  readonly region: string;
  /** `Ref` of a resource (a queue's URL). */
  ref(logicalId: string): string;
  /** `Fn::GetAtt` of a resource (a queue's or role's `Arn`). */
  getAtt(logicalId: string, attribute: string): string;
}

/** Resolves intrinsics of a template value; conditions are evaluated with the (already resolved) parameters. */
export function resolveValue(template: Json, value: Json, r: Resolver): Json {
  if (Array.isArray(value)) return value.map((v) => resolveValue(template, v, r)).filter((v) => v !== undefined);
  if (value === null || typeof value !== 'object') return value;
  const keys = Object.keys(value);
  if (keys.length === 1) {
    const [k] = keys as [string];
    const arg = value[k];
    switch (k) {
      case 'Ref':
        if (arg === 'AWS::AccountId') return r.accountId;
        if (arg === 'AWS::Region') return r.region;
        if (arg === 'AWS::Partition') return 'aws';
        if (arg === 'AWS::URLSuffix') return 'amazonaws.com';
        if (arg === 'AWS::NoValue') return undefined;
        return r.ref(String(arg));
      case 'Fn::GetAtt':
        return r.getAtt(String(arg[0]), String(arg[1]));
      case 'Fn::Sub': {
        const [text, vars] = typeof arg === 'string' ? [arg, {}] : [String(arg[0]), arg[1] ?? {}];
        return text.replace(/\$\{([^}]+)\}/g, (_, name: string) => {
          if (name in vars) return String(resolveValue(template, vars[name], r));
          if (name.includes('.')) {
            const [id, attr] = name.split('.') as [string, string];
            return r.getAtt(id, attr);
          }
          return String(resolveValue(template, { Ref: name }, r));
        });
      }
      case 'Fn::If':
        return resolveValue(template, evaluateCondition(template, arg[0]) ? arg[1] : arg[2], r);
      case 'Fn::Join':
        return (resolveValue(template, arg[1], r) as Json[]).join(String(arg[0]));
      case 'Fn::Split':
        return String(resolveValue(template, arg[1], r)).split(String(arg[0]));
      default:
        break;
    }
  }
  return Object.fromEntries(keys.map((k) => [k, resolveValue(template, value[k], r)]));
}

/** Evaluates a condition of the packaged template (its parameters are already resolved by the framework). */
export function evaluateCondition(template: Json, c: Json): boolean {
  if (typeof c === 'string') return evaluateCondition(template, template.Conditions?.[c]);
  if (c === undefined || c === null) throw new Error('undefined condition');
  if ('Condition' in c) return evaluateCondition(template, c.Condition);
  if ('Fn::Equals' in c) return String(c['Fn::Equals'][0]) === String(c['Fn::Equals'][1]);
  if ('Fn::Not' in c) return !evaluateCondition(template, c['Fn::Not'][0]);
  if ('Fn::And' in c) return (c['Fn::And'] as Json[]).every((x) => evaluateCondition(template, x));
  if ('Fn::Or' in c) return (c['Fn::Or'] as Json[]).some((x) => evaluateCondition(template, x));
  throw new Error(`cannot evaluate condition ${JSON.stringify(c)}`);
}

/** KMS key ARNs the template lets a role decrypt with (`kms:Decrypt` statements that are created). */
export function decryptKeyArns(t: PackagedTemplate, roleLogicalId: string, r: Resolver): string[] {
  const policies = (t.template.Resources?.[roleLogicalId]?.Properties?.Policies ?? []) as Json[];
  const out: string[] = [];
  for (const policy of policies) {
    const statements = resolveValue(t.template, policy.PolicyDocument?.Statement ?? [], r) as Json[];
    for (const s of statements) {
      if (!s || typeof s !== 'object' || s.Effect !== 'Allow') continue;
      const actions = ([] as string[]).concat(s.Action ?? []);
      if (actions.includes('kms:Decrypt')) out.push(...([] as string[]).concat(s.Resource ?? []));
    }
  }
  return out;
}

/**
 * The `KubernetesGroups` of the EKS access entry (`AWS::EKS::AccessEntry`, created in this template) whose
 * `PrincipalArn` is the role's `Arn`; undefined when the role has none (EKS then refuses its tokens).
 */
export function eksAccessEntryGroups(t: PackagedTemplate, roleLogicalId: string): string[] | undefined {
  const entry = Object.values((t.template.Resources ?? {}) as Record<string, Json>).find((r) => {
    if (r.Type !== 'AWS::EKS::AccessEntry' || (r.Condition !== undefined && !evaluateCondition(t.template, r.Condition))) return false;
    const arn = r.Properties?.PrincipalArn as Json;
    return Array.isArray(arn?.['Fn::GetAtt']) && arn['Fn::GetAtt'][0] === roleLogicalId && arn['Fn::GetAtt'][1] === 'Arn';
  });
  return entry ? ((entry.Properties?.KubernetesGroups ?? []) as Json[]).map(String) : undefined;
}
