/** The runner's reading of a packaged template (local/lambda/template.ts), on a small template written here. */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { decryptKeyArns, eksAccessEntryGroups, functionsEnvironmentValue, ratePeriodMs, readPackagedTemplate, resolveValue, type Resolver } from '#local/lambda/template.ts';

const dir = mkdtempSync(join(tmpdir(), 'lambda-template-test-'));
mkdirSync(join(dir, '.serverless'));
const template = {
  Conditions: { UseKey: { 'Fn::Not': [{ 'Fn::Equals': ['arn:aws:kms:eu-west-1:111122223333:key/k', ''] }] }, Never: { 'Fn::Equals': ['a', 'b'] } },
  Resources: {
    Dlq: { Type: 'AWS::SQS::Queue', Properties: { QueueName: 's-dlq.fifo', FifoQueue: true } },
    Queue: { Type: 'AWS::SQS::Queue', Properties: { QueueName: 's.fifo', FifoQueue: true, VisibilityTimeout: 30, RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': ['Dlq', 'Arn'] }, maxReceiveCount: 5 } } },
    Role: { Type: 'AWS::IAM::Role', Properties: { RoleName: 's-role', Policies: [{ PolicyDocument: { Statement: [{ 'Fn::If': ['UseKey', { Effect: 'Allow', Action: ['kms:Decrypt'], Resource: ['arn:aws:kms:eu-west-1:111122223333:key/k'] }, { Ref: 'AWS::NoValue' }] }, { 'Fn::If': ['Never', { Effect: 'Allow', Action: 'kms:Decrypt', Resource: 'x' }, { Ref: 'AWS::NoValue' }] }] } }] } },
    FnLambdaFunction: {
      Type: 'AWS::Lambda::Function',
      Properties: {
        Code: { S3Bucket: 'b', S3Key: 'serverless/s/dev/123/fn.zip' },
        Handler: 'functions/fn/handler.handler',
        Runtime: 'nodejs22.x',
        FunctionName: 's-fn',
        MemorySize: 256,
        Timeout: 20,
        ReservedConcurrentExecutions: 3,
        Role: { 'Fn::GetAtt': ['Role', 'Arn'] },
        Environment: { Variables: { QUEUE_URL: { Ref: 'Queue' }, ARN: { 'Fn::GetAtt': ['Queue', 'Arn'] }, SUB: { 'Fn::Sub': 'arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:x' }, PLAIN: '45' } },
      },
    },
    Rule: { Type: 'AWS::Events::Rule', Properties: { ScheduleExpression: 'rate(2 minutes)', State: 'ENABLED', Targets: [{ Arn: { 'Fn::GetAtt': ['FnLambdaFunction', 'Arn'] }, Id: 't' }] } },
    // A second schedule with a constant input (the forwarder's shard): delivered as the event.
    Rule2: { Type: 'AWS::Events::Rule', Properties: { ScheduleExpression: 'rate(2 minutes)', State: 'ENABLED', Targets: [{ Input: '{"shard":1}', Arn: { 'Fn::GetAtt': ['FnLambdaFunction', 'Arn'] }, Id: 't' }] } },
    Mapping: { Type: 'AWS::Lambda::EventSourceMapping', Properties: { BatchSize: 7, EventSourceArn: { 'Fn::GetAtt': ['Queue', 'Arn'] }, FunctionName: { 'Fn::GetAtt': ['FnLambdaFunction', 'Arn'] }, FunctionResponseTypes: ['ReportBatchItemFailures'], ScalingConfig: { MaximumConcurrency: 2 } } },
    EvConf: { Type: 'AWS::Lambda::EventInvokeConfig', Properties: { FunctionName: { Ref: 'FnLambdaFunction' }, MaximumEventAgeInSeconds: 60, MaximumRetryAttempts: 0 } },
  },
};
writeFileSync(join(dir, '.serverless', 'cloudformation-template-update-stack.json'), JSON.stringify(template));
writeFileSync(join(dir, '.serverless', 'serverless-state.json'), JSON.stringify({ service: { provider: { region: 'eu-west-1' } } }));
const resolver: Resolver = { accountId: '111122223333', region: 'eu-west-1', ref: (id) => `url-of-${id}`, getAtt: (id, attr) => `${attr}-of-${id}` };

describe('readPackagedTemplate', () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads every setting of a function and what drives it from the template', () => {
    const t = readPackagedTemplate(dir);
    const fn = t.functions.get('fn');
    expect(fn).toMatchObject({ functionName: 's-fn', handler: 'functions/fn/handler.handler', runtime: 'nodejs22.x', timeoutSeconds: 20, memoryMiB: 256, reservedConcurrency: 3, roleLogicalId: 'Role', zipPath: join(dir, '.serverless', 'fn.zip') });
    expect(fn?.schedules).toEqual([
      { logicalId: 'Rule', expression: 'rate(2 minutes)', periodMs: 120_000, enabled: true },
      { logicalId: 'Rule2', expression: 'rate(2 minutes)', periodMs: 120_000, enabled: true, input: { shard: 1 } },
    ]);
    expect(fn?.sqsEventSources).toEqual([{ logicalId: 'Mapping', queueLogicalId: 'Queue', batchSize: 7, reportBatchItemFailures: true, maximumConcurrency: 2, enabled: true }]);
    expect(fn?.sqsEventSources[0]?.qualifier).toBeUndefined();
    expect(fn?.versions).toEqual([]);
    expect(fn?.aliases).toEqual([]);
    expect(fn?.provisionedConcurrency.size).toBe(0);
    expect(fn?.asyncConfig).toEqual({ maximumEventAgeSeconds: 60, maximumRetryAttempts: 0 });
    expect(t.queues.get('Queue')).toMatchObject({ queueName: 's.fifo', fifo: true, visibilityTimeoutSeconds: 30, redrive: { deadLetterLogicalId: 'Dlq', maxReceiveCount: 5 } });
    expect(t.roleNames.get('Role')).toBe('s-role');
    expect(t.region).toBe('eu-west-1');
  });

  it('resolves Ref, Fn::GetAtt, Fn::Sub and pseudo parameters of the environment', () => {
    const t = readPackagedTemplate(dir);
    expect(resolveValue(t.template, t.functions.get('fn')?.environment, resolver)).toEqual({ QUEUE_URL: 'url-of-Queue', ARN: 'Arn-of-Queue', SUB: 'arn:aws:logs:eu-west-1:111122223333:x', PLAIN: '45' });
  });

  it("gives a plain environment value the functions set, and names the template when none or two values are set", () => {
    const t = readPackagedTemplate(dir);
    expect(functionsEnvironmentValue(t, 'PLAIN')).toBe('45');
    // An intrinsic is not a plain value (it names a resource of the stack).
    expect(() => functionsEnvironmentValue(t, 'QUEUE_URL')).toThrow(`${t.templatePath}: no function sets QUEUE_URL`);
    expect(() => functionsEnvironmentValue(t, 'MANAGEMENT_KUBECONFIG_PARAMETER')).toThrow('no function sets MANAGEMENT_KUBECONFIG_PARAMETER');
    const two = { ...t, functions: new Map([...t.functions, ['other', { ...t.functions.get('fn'), environment: { PLAIN: '46' } } as never]]) };
    expect(() => functionsEnvironmentValue(two, 'PLAIN')).toThrow('the functions set PLAIN differently (45, 46)');
  });

  it('finds the KMS keys a role may decrypt with, conditions evaluated', () => {
    expect(decryptKeyArns(readPackagedTemplate(dir), 'Role', resolver)).toEqual(['arn:aws:kms:eu-west-1:111122223333:key/k']);
  });

  it('reads rate schedules and refuses what it cannot run', () => {
    expect(ratePeriodMs('rate(1 minute)')).toBe(60_000);
    expect(ratePeriodMs('rate(3 hours)')).toBe(10_800_000);
    expect(() => ratePeriodMs('cron(0 * * * ? *)')).toThrow('Only rate(...) schedules are supported by the runner, got "cron(0 * * * ? *)"');
    expect(() => ratePeriodMs('rate(0 minutes)')).toThrow('positive');
  });
});

/** What osls writes for `provisionedConcurrency: 3` (serverless.yml's reconcileProvisionedConcurrency), trimmed. */
describe('readPackagedTemplate: provisioned concurrency', () => {
  const pcDir = mkdtempSync(join(tmpdir(), 'lambda-template-pc-test-'));
  mkdirSync(join(pcDir, '.serverless'));
  const fnArn = { 'Fn::GetAtt': ['RecLambdaFunction', 'Arn'] };
  const pcTemplate = {
    Conditions: { Never: { 'Fn::Equals': ['a', 'b'] } },
    Resources: {
      Queue: { Type: 'AWS::SQS::Queue', Properties: { QueueName: 's.fifo', FifoQueue: true } },
      Other: { Type: 'AWS::SQS::Queue', Properties: { QueueName: 'o.fifo', FifoQueue: true } },
      RecLambdaFunction: { Type: 'AWS::Lambda::Function', Properties: { Code: { S3Bucket: 'b', S3Key: 'serverless/s/dev/1/rec.zip' }, Handler: 'h.handler', Runtime: 'nodejs22.x', FunctionName: 's-rec', ReservedConcurrentExecutions: 5 } },
      RecLambdaVersionAbc: { Type: 'AWS::Lambda::Version', Properties: { FunctionName: { Ref: 'RecLambdaFunction' }, CodeSha256: 'x' } },
      RecProvConcLambdaAlias: {
        Type: 'AWS::Lambda::Alias',
        Properties: { FunctionName: { Ref: 'RecLambdaFunction' }, FunctionVersion: { 'Fn::GetAtt': ['RecLambdaVersionAbc', 'Version'] }, Name: 'provisioned', ProvisionedConcurrencyConfig: { ProvisionedConcurrentExecutions: 3 } },
        DependsOn: 'RecLambdaFunction',
      },
      // A conditional alias whose condition is false is not created.
      NeverAlias: { Type: 'AWS::Lambda::Alias', Condition: 'Never', Properties: { FunctionName: { Ref: 'RecLambdaFunction' }, FunctionVersion: { 'Fn::GetAtt': ['RecLambdaVersionAbc', 'Version'] }, Name: 'never', ProvisionedConcurrencyConfig: { ProvisionedConcurrentExecutions: 50 } } },
      // osls points the mapping at the alias with Fn::Join; a Ref of the alias (its ARN) is the same target.
      Mapping: { Type: 'AWS::Lambda::EventSourceMapping', DependsOn: ['RecProvConcLambdaAlias'], Properties: { BatchSize: 10, EventSourceArn: { 'Fn::GetAtt': ['Queue', 'Arn'] }, FunctionName: { 'Fn::Join': [':', [fnArn, 'provisioned']] } } },
      ByRef: { Type: 'AWS::Lambda::EventSourceMapping', Properties: { BatchSize: 1, EventSourceArn: { 'Fn::GetAtt': ['Other', 'Arn'] }, FunctionName: { Ref: 'RecProvConcLambdaAlias' } } },
    },
  };
  writeFileSync(join(pcDir, '.serverless', 'cloudformation-template-update-stack.json'), JSON.stringify(pcTemplate));
  writeFileSync(join(pcDir, '.serverless', 'serverless-state.json'), JSON.stringify({ service: { provider: { region: 'eu-west-1' } } }));
  afterAll(() => rmSync(pcDir, { recursive: true, force: true }));

  it("reads the alias's provisioned concurrency as the concurrency of the version it points at", () => {
    const fn = readPackagedTemplate(pcDir).functions.get('rec');
    expect(fn?.versions).toEqual([{ logicalId: 'RecLambdaVersionAbc', version: '1', provisionedConcurrency: 0 }]);
    expect(fn?.aliases).toEqual([{ logicalId: 'RecProvConcLambdaAlias', name: 'provisioned', version: '1', provisionedConcurrency: 3 }]);
    expect([...(fn?.provisionedConcurrency ?? [])]).toEqual([['1', 3]]);
  });

  it('resolves a mapping that targets the alias to the function, with the alias as qualifier', () => {
    const fn = readPackagedTemplate(pcDir).functions.get('rec');
    expect(fn?.sqsEventSources.map((m) => [m.logicalId, m.queueLogicalId, m.qualifier])).toEqual([
      ['Mapping', 'Queue', 'provisioned'],
      ['ByRef', 'Other', 'provisioned'],
    ]);
  });
});

describe('eksAccessEntryGroups', () => {
  const eksDir = mkdtempSync(join(tmpdir(), 'lambda-template-eks-test-'));
  afterAll(() => rmSync(eksDir, { recursive: true, force: true }));

  it("reads the groups of the role's access entry that the template creates, and none for a role without one", () => {
    // Prepare: an entry for RoleA, one for RoleB under a false condition, none for RoleC.
    mkdirSync(join(eksDir, '.serverless'));
    const withEntries = {
      Conditions: { Off: { 'Fn::Equals': ['false', 'true'] } },
      Resources: {
        EntryA: { Type: 'AWS::EKS::AccessEntry', Properties: { ClusterName: 'mgmt', PrincipalArn: { 'Fn::GetAtt': ['RoleA', 'Arn'] }, Type: 'STANDARD', KubernetesGroups: ['group-a'] } },
        EntryB: { Type: 'AWS::EKS::AccessEntry', Condition: 'Off', Properties: { ClusterName: 'mgmt', PrincipalArn: { 'Fn::GetAtt': ['RoleB', 'Arn'] }, KubernetesGroups: ['group-b'] } },
      },
    };
    writeFileSync(join(eksDir, '.serverless', 'cloudformation-template-update-stack.json'), JSON.stringify(withEntries));
    writeFileSync(join(eksDir, '.serverless', 'serverless-state.json'), JSON.stringify({ service: { provider: { region: 'eu-west-1' } } }));
    const t = readPackagedTemplate(eksDir);

    // Act & Assess
    expect(eksAccessEntryGroups(t, 'RoleA')).toEqual(['group-a']);
    expect(eksAccessEntryGroups(t, 'RoleB')).toBeUndefined();
    expect(eksAccessEntryGroups(t, 'RoleC')).toBeUndefined();
  });
});
