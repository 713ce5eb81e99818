/**
 * Least privilege, evaluated offline: every recorded AWS call (test/support/aws-calls.ts) is put to an IAM policy
 * simulator (`@cloud-copilot/iam-simulate`) with the policies of one packaged template — the identity policies of the
 * calling function's role, the SQS queue policies, and the key
 * policy of an external KMS key — and every Allow the roles hold is matched against the calls that exercised it.
 *
 * The template is the one `serverless package` wrote (test/support/serverless-package.ts); its CloudFormation
 * intrinsics are resolved here for a fixed example account (111122223333) in the packaged region.
 */
import { runSimulation, type Simulation } from '@cloud-copilot/iam-simulate';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RecordedCall } from './aws-calls.ts';
import { evaluateCondition, type Json } from './serverless-package.ts';

export const ACCOUNT = '111122223333';
const PARTITION = 'aws';

/**
 * The key policy assumed for a customer managed KMS key named by `managementKubeconfigKmsKeyArn`: the template does
 * not create the key, so its policy is not ours to read. This is the default key policy (the account may grant use
 * of the key with IAM policies); a key whose policy does not delegate to IAM must name the function roles itself
 * (docs/deploying.md, parameters).
 */
export function defaultKeyPolicy(account: string): Json {
  return {
    Version: '2012-10-17',
    Statement: [{ Sid: 'Enable IAM User Permissions', Effect: 'Allow', Principal: { AWS: `arn:aws:iam::${account}:root` }, Action: 'kms:*', Resource: '*' }],
  };
}

/** One packaged parameter set, ready to evaluate calls against. */
export interface Deployment {
  readonly name: string;
  readonly template: Json;
  readonly region: string;
  readonly stage: string;
  readonly service: string;
  readonly params: Readonly<Record<string, string>>;
  /** Serverless function key → its deployed form. */
  readonly functions: ReadonlyMap<string, DeployedFunction>;
}

export interface DeployedFunction {
  readonly key: string;
  readonly logicalId: string;
  readonly name: string;
  readonly roleLogicalId: string;
  readonly roleArn: string;
  readonly env: Readonly<Record<string, string>>;
  /** Name of the queue of its SQS event source, if any. */
  readonly eventSourceQueue?: string;
}

/** Reads a packaged service (template + the framework's resolved state) as a Deployment. */
export async function loadDeployment(name: string, serviceDir: string, template: Json): Promise<Deployment> {
  const state = JSON.parse(await readFile(join(serviceDir, '.serverless', 'serverless-state.json'), 'utf8')) as Json;
  const params = Object.fromEntries(Object.entries(state.service.custom.deployParameters as Record<string, unknown>).map(([k, v]) => [k, String(v)]));
  return deploymentOf(name, template, { region: state.service.provider.region, stage: state.service.provider.stage, service: state.service.service, params, functionNames: Object.fromEntries(Object.entries(state.service.functions as Record<string, Json>).map(([k, f]) => [k, f.name as string])) });
}

/** Builds a Deployment from a template and the packaging's facts (also used on modified copies of a template). */
export function deploymentOf(
  name: string,
  template: Json,
  facts: { region: string; stage: string; service: string; params: Record<string, string>; functionNames: Record<string, string> },
): Deployment {
  const partial = { name, template, region: facts.region, stage: facts.stage, service: facts.service, params: facts.params, functions: new Map() };
  const functions = new Map<string, DeployedFunction>();
  for (const [key, fnName] of Object.entries(facts.functionNames)) {
    const entry = Object.entries(template.Resources as Record<string, Json>).find(([, r]) => r.Type === 'AWS::Lambda::Function' && r.Properties.FunctionName === fnName);
    if (!entry) throw new Error(`${name}: no AWS::Lambda::Function named ${fnName}`);
    const [logicalId, fn] = entry;
    const roleLogicalId = fn.Properties.Role?.['Fn::GetAtt']?.[0] as string | undefined;
    if (!roleLogicalId) throw new Error(`${name}: ${logicalId} has no role of the template (Role: ${JSON.stringify(fn.Properties.Role)})`);
    const env = Object.fromEntries(
      Object.entries((fn.Properties.Environment?.Variables ?? {}) as Record<string, unknown>).map(([k, v]) => [k, String(resolve(partial, v))]),
    );
    const mapping = Object.values(template.Resources as Record<string, Json>).find(
      (r) => r.Type === 'AWS::Lambda::EventSourceMapping' && JSON.stringify(r.Properties.FunctionName).includes(`"${logicalId}"`),
    );
    const eventSourceArn = mapping ? String(resolve(partial, mapping.Properties.EventSourceArn)) : undefined;
    functions.set(key, {
      key,
      logicalId,
      name: fnName,
      roleLogicalId,
      roleArn: String(resolve(partial, { 'Fn::GetAtt': [roleLogicalId, 'Arn'] })),
      env,
      ...(eventSourceArn ? { eventSourceQueue: eventSourceArn.split(':').at(-1) as string } : {}),
    });
  }
  return { ...partial, functions };
}

const NO_VALUE = Symbol('AWS::NoValue');

function sqsQueueName(d: Pick<Deployment, 'template' | 'name'>, logicalId: string): string {
  const q = d.template.Resources[logicalId];
  if (q?.Type !== 'AWS::SQS::Queue') throw new Error(`${d.name}: ${logicalId} is not an SQS queue`);
  return String(q.Properties.QueueName);
}

/** Resolves the CloudFormation intrinsics a packaged template of this service uses, for the example account. */
export function resolve(d: Pick<Deployment, 'template' | 'region' | 'name'>, node: unknown): unknown {
  const pseudo: Record<string, string> = { 'AWS::Partition': PARTITION, 'AWS::Region': d.region, 'AWS::AccountId': ACCOUNT, 'AWS::URLSuffix': 'amazonaws.com' };
  const ref = (id: string): unknown => {
    if (id === 'AWS::NoValue') return NO_VALUE;
    if (id in pseudo) return pseudo[id];
    const r = d.template.Resources[id];
    if (r?.Type === 'AWS::SQS::Queue') return `https://sqs.${d.region}.amazonaws.com/${ACCOUNT}/${sqsQueueName(d, id)}`;
    throw new Error(`${d.name}: cannot resolve Ref ${id}`);
  };
  const getAtt = (id: string, attr: string): string => {
    const r = d.template.Resources[id];
    if (r?.Type === 'AWS::IAM::Role' && attr === 'Arn') return `arn:${PARTITION}:iam::${ACCOUNT}:role/${String(r.Properties.RoleName)}`;
    if (r?.Type === 'AWS::SQS::Queue' && attr === 'Arn') return `arn:${PARTITION}:sqs:${d.region}:${ACCOUNT}:${sqsQueueName(d, id)}`;
    throw new Error(`${d.name}: cannot resolve Fn::GetAtt ${id}.${attr}`);
  };
  const visit = (n: unknown): unknown => {
    if (Array.isArray(n)) return n.map(visit).filter((x) => x !== NO_VALUE);
    if (!n || typeof n !== 'object') return n;
    const o = n as Record<string, unknown>;
    const keys = Object.keys(o);
    if (keys.length === 1) {
      const [k] = keys as [string];
      const v = o[k] as Json;
      if (k === 'Ref') return ref(v);
      if (k === 'Fn::GetAtt') return getAtt(...((typeof v === 'string' ? v.split('.') : v) as [string, string]));
      if (k === 'Fn::If') return visit(evaluateCondition(d.template, v[0]) ? v[1] : v[2]);
      if (k === 'Fn::Join') return (visit(v[1]) as unknown[]).join(v[0]);
      if (k === 'Fn::Split') return String(visit(v[1])).split(v[0]);
      if (k === 'Fn::Sub') {
        const [text, vars] = typeof v === 'string' ? [v, {}] : [v[0] as string, visit(v[1]) as Record<string, unknown>];
        return text.replace(/\$\{([^}!]+)\}/g, (_, name: string) => {
          if (name in vars) return String(vars[name]);
          if (name.includes('.')) return getAtt(...(name.split('.') as [string, string]));
          return String(ref(name));
        });
      }
    }
    return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, visit(v)] as const).filter(([, v]) => v !== NO_VALUE));
  };
  return visit(node);
}

/** The function a recorded `function` field names (key, deployed name, or the end of the deployed name). */
export function functionOf(d: Deployment, name: string): DeployedFunction {
  for (const f of d.functions.values()) if (f.key === name || f.name === name || f.name.endsWith(`-${name}`)) return f;
  throw new Error(`${d.name}: no function ${JSON.stringify(name)} (known: ${[...d.functions.values()].map((f) => `${f.key} = ${f.name}`).join(', ')})`);
}

/** Fills a call's placeholders for this deployment; undefined when one resolves to '' (the call does not apply). */
export function fill(d: Deployment, fn: DeployedFunction, text: string): string | undefined {
  let empty = false;
  const value = text.replace(/\{([a-zA-Z]+)(?::([A-Za-z0-9_]+))?\}/g, (whole, kind: string, arg: string | undefined) => {
    let v: string | undefined;
    if (kind === 'partition') v = PARTITION;
    else if (kind === 'region') v = d.region;
    else if (kind === 'account') v = ACCOUNT;
    else if (kind === 'stage') v = d.stage;
    else if (kind === 'service') v = d.service;
    else if (kind === 'function') v = fn.name;
    else if (kind === 'eventSource') v = fn.eventSourceQueue ?? '';
    else if (kind === 'env' && arg) v = fn.env[arg] ?? '';
    else if (kind === 'queue' && arg) v = fn.env[arg] ? (fn.env[arg].split('/').at(-1) as string) : '';
    else if (kind === 'param' && arg) {
      if (!(arg in d.params)) throw new Error(`${d.name}: unknown deploy parameter in ${whole}`);
      v = d.params[arg];
    } else throw new Error(`unknown placeholder ${whole} in ${text}`);
    if (v === '') empty = true;
    return v as string;
  });
  return empty ? undefined : value;
}

export interface Evaluated {
  readonly call: RecordedCall;
  readonly function: DeployedFunction;
  readonly action: string;
  readonly resource: string;
  readonly context: Record<string, string>;
  readonly decision: string;
  /** Why not allowed (simulator errors or the decisive statements). */
  readonly detail?: string;
}

function policyStatements(policy: Json): Json[] {
  return Array.isArray(policy.Statement) ? policy.Statement : [policy.Statement];
}

/** The identity policies of a role (inline; a managed policy attached is an error). */
export function identityPolicies(d: Deployment, roleLogicalId: string): { name: string; policy: Json }[] {
  const role = resolve(d, d.template.Resources[roleLogicalId]) as Json;
  const policies: { name: string; policy: Json }[] = (role.Properties.Policies ?? []).map((p: Json) => ({ name: p.PolicyName, policy: p.PolicyDocument }));
  // A managed policy's text is not in the template; the roles hold inline policies only, and the check says so.
  for (const arn of (role.Properties.ManagedPolicyArns ?? []) as string[]) throw new Error(`${d.name}: ${roleLogicalId} attaches the managed policy ${arn}; the check evaluates inline policies only`);
  return policies;
}

/** The resource policy that applies to `resource`: a queue policy of the template, or the KMS key policy assumed. */
export function resourcePolicyFor(d: Deployment, resource: string): Json | undefined {
  if (resource.startsWith(`arn:${PARTITION}:sqs:`)) {
    const url = `https://sqs.${d.region}.amazonaws.com/${ACCOUNT}/${resource.split(':').at(-1)}`;
    const docs = Object.values(d.template.Resources as Record<string, Json>)
      .filter((r) => r.Type === 'AWS::SQS::QueuePolicy')
      .map((r) => resolve(d, r) as Json)
      .filter((r) => (r.Properties.Queues as string[]).includes(url))
      .map((r) => r.Properties.PolicyDocument);
    if (docs.length > 1) throw new Error(`${d.name}: more than one queue policy for ${resource}`);
    return docs[0];
  }
  if (resource.startsWith(`arn:${PARTITION}:kms:`)) return defaultKeyPolicy(resource.split(':')[4] as string);
  return undefined;
}

/** Evaluates every call that applies to this deployment; calls whose placeholders are empty here are left out. */
export async function evaluateCalls(d: Deployment, calls: readonly RecordedCall[]): Promise<Evaluated[]> {
  const out: Evaluated[] = [];
  for (const call of calls) {
    const fn = functionOf(d, call.function);
    const resource = fill(d, fn, call.resource);
    if (resource === undefined) continue;
    const context: Record<string, string> = {};
    let applies = true;
    for (const [k, v] of Object.entries(call.context ?? {})) {
      const filled = fill(d, fn, v);
      if (filled === undefined) applies = false;
      else context[k] = filled;
    }
    if (!applies) continue;
    const roleName = fn.roleArn.split('/').at(-1) as string;
    const simulation: Simulation = {
      request: {
        principal: `arn:${PARTITION}:sts::${ACCOUNT}:assumed-role/${roleName}/${fn.name}`,
        action: call.action,
        resource: { resource, accountId: resource.split(':')[4] || ACCOUNT },
        contextVariables: {
          'aws:PrincipalArn': fn.roleArn,
          'aws:PrincipalAccount': ACCOUNT,
          'aws:SecureTransport': 'true',
          ...context,
        },
      },
      identityPolicies: identityPolicies(d, fn.roleLogicalId),
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      resourcePolicy: resourcePolicyFor(d, resource),
    };
    const result = await runSimulation(simulation, {});
    if (result.resultType === 'error') {
      out.push({ call, function: fn, action: call.action, resource, context, decision: 'Error', detail: JSON.stringify(result.errors) });
      continue;
    }
    const decision = result.overallResult;
    out.push({ call, function: fn, action: call.action, resource, context, decision, ...(decision === 'Allowed' ? {} : { detail: JSON.stringify(result.resultType === 'single' ? result.result.analysis?.result : result.overallResult) }) });
  }
  return out;
}

/** One Allow of a role: an action and a resource pattern of one statement (after resolving the template). */
export interface Grant {
  readonly role: string;
  readonly policy: string;
  readonly sid: string;
  readonly action: string;
  readonly resource: string;
  readonly conditional: boolean;
}

export const grantId = (g: Pick<Grant, 'role' | 'policy' | 'sid' | 'action'>): string => `${g.role} ${g.policy}/${g.sid} ${g.action}`;

export function grantsOf(d: Deployment): Grant[] {
  const roles = new Set([...d.functions.values()].map((f) => f.roleLogicalId));
  const grants: Grant[] = [];
  for (const role of roles) {
    for (const { name, policy } of identityPolicies(d, role)) {
      policyStatements(policy).forEach((s: Json, i: number) => {
        if (s.Effect !== 'Allow') return;
        if (s.NotAction || s.NotResource) throw new Error(`${d.name}: ${role} ${name}: NotAction/NotResource in an Allow is not least privilege`);
        const actions = ([] as string[]).concat(s.Action);
        const resources = ([] as string[]).concat(s.Resource);
        for (const action of actions) for (const resource of resources) grants.push({ role, policy: name, sid: s.Sid ?? String(i), action, resource, conditional: s.Condition !== undefined });
      });
    }
  }
  return grants;
}

const wildcard = (pattern: string, flags = ''): RegExp => new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replaceAll('*', '.*').replaceAll('?', '.')}$`, flags);

/** True when an allowed call of the grant's role falls under the grant (action and resource pattern). */
export function exercises(e: Evaluated, g: Grant): boolean {
  return e.decision === 'Allowed' && e.function.roleLogicalId === g.role && wildcard(g.action, 'i').test(e.action) && wildcard(g.resource).test(e.resource);
}

/** Grants no call exercised, one line each (`grantId` plus the resource pattern). */
export function unexercised(grants: readonly Grant[], evaluated: readonly Evaluated[]): Grant[] {
  return grants.filter((g) => !evaluated.some((e) => exercises(e, g)));
}

export function describeEvaluated(e: Evaluated): string {
  const ctx = Object.keys(e.context).length > 0 ? ` ${JSON.stringify(e.context)}` : '';
  return `${e.decision}: ${e.function.key} (${e.function.roleLogicalId}) ${e.action} on ${e.resource}${ctx} [${e.call.origin ?? ''}]${e.detail ? ` ${e.detail}` : ''}`;
}
