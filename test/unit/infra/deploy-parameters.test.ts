/**
 * The package-time parameter check (infra/deploy-parameters.ts) on serverless.yml's own defaults and worked
 * parameter files, and on each kind of mistake. The same check run by `serverless package` is in
 * serverless-package.test.ts.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadYaml } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { checkDeployParameters, checkFunctionNames, formatParameterProblems, PARAMETER_OF_VARIABLE, scheduleIntervalSeconds, type DeployParameters } from '#infra/deploy-parameters.ts';

const root = resolve(import.meta.dirname, '../../..');
const yaml = <T>(path: string): T => loadYaml<T>(readFileSync(resolve(root, path), 'utf8'));

interface ServerlessYml {
  params: Record<string, DeployParameters | string>;
  provider: { environment: Record<string, unknown> };
  functions: Record<string, { environment: Record<string, unknown> }>;
  custom: { deployParameters: Record<string, string> };
}
const sls = yaml<ServerlessYml>('serverless.yml');
const defaults = sls.params['default'] as DeployParameters;
const worked = (name: string): DeployParameters => ({ ...defaults, ...yaml<DeployParameters>(`infra/params/${name}.yml`) });
const parameters = (problems: { parameter: string }[]): string[] => problems.map((p) => p.parameter);

describe('Function: checkDeployParameters()', () => {
  it("refuses serverless.yml's defaults (managementAuth=eks without a cluster), naming each missing parameter", () => {
    // Act
    const problems = checkDeployParameters(defaults);

    // Assess
    expect(problems).toEqual([
      { parameter: 'eksClusterName', problem: 'is required when managementAuth=eks (the management cluster name)' },
      { parameter: 'eksEndpoint', problem: "is required when managementAuth=eks (aws eks describe-cluster --name <cluster> --query 'cluster.endpoint')" },
      { parameter: 'eksCaData', problem: "is required when managementAuth=eks (aws eks describe-cluster --name <cluster> --query 'cluster.certificateAuthority.data')" },
    ]);
  });

  it.each(['eks', 'ssm', 'secretsmanager'])('accepts the worked parameter file infra/params/%s.yml', (name) => {
    expect(checkDeployParameters(worked(name))).toEqual([]);
  });

  it.each([
    ['eks', 'example-eks'],
    ['ssm', 'example-ssm'],
    ['secretsmanager', 'example-secrets'],
  ])('wires infra/params/%s.yml as stage %s of serverless.yml', (name, stage) => {
    expect(sls.params[stage]).toBe(`\${file(infra/params/${name}.yml)}`);
  });

  it.each<{ name: string; change: DeployParameters; want: { parameter: string; problem: string } }>([
    // Auth modes
    { name: 'kubeconfig is local only', change: { managementAuth: 'kubeconfig' }, want: { parameter: 'managementAuth', problem: 'kubeconfig is for local runs only; deploy with eks, ssm or secretsmanager' } },
    { name: 'unknown auth quoted', change: { managementAuth: 'iam' }, want: { parameter: 'managementAuth', problem: 'must be one of eks, ssm, secretsmanager, got "iam"' } },
    { name: 'a parameter of another mode', change: { eksClusterName: 'mgmt' }, want: { parameter: 'eksClusterName', problem: 'is set but only used when managementAuth=eks (managementAuth is ssm); remove it' } },
    { name: 'SSM name without /', change: { managementKubeconfigParameter: 'kubeconfig' }, want: { parameter: 'managementKubeconfigParameter', problem: 'must start with "/" (a full parameter name), got "kubeconfig"' } },
    { name: 'KMS key that is not an ARN', change: { managementKubeconfigKmsKeyArn: 'alias/mine' }, want: { parameter: 'managementKubeconfigKmsKeyArn', problem: 'must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>), got "alias/mine"' } },
    { name: 'boolean spelled otherwise', change: { createEksAccessEntries: 'yes' }, want: { parameter: 'createEksAccessEntries', problem: `must be 'true' or 'false', got "yes"` } },
    // The functions' own config loaders
    { name: 'first enablement not a time', change: { firstEnabledAt: 'yesterday' }, want: { parameter: 'firstEnabledAt', problem: 'must be an RFC 3339 time, got "yesterday"' } },
    { name: 'retry bounds reversed', change: { retryBaseSeconds: 60, retryMaxSeconds: 30 }, want: { parameter: 'retryMaxSeconds', problem: 'must not be below retryBaseSeconds' } },
    { name: 'cluster mode', change: { clusterMode: 'both' }, want: { parameter: 'clusterMode', problem: 'must be one of capi, self, got "both"' } },
    // Numbers that must agree
    { name: 'visibility below 6x timeout', change: { queueVisibilityTimeoutSeconds: 90 }, want: { parameter: 'queueVisibilityTimeoutSeconds', problem: 'must be at least 6 x reconcileTimeoutSeconds (180), got 90' } },
    { name: 'FIFO batch size', change: { reconcileBatchSize: 11 }, want: { parameter: 'reconcileBatchSize', problem: 'must be an integer between 1 and 10, got "11"' } },
    { name: 'provisioned concurrency above the reserved concurrency', change: { reconcileReservedConcurrency: 10, reconcileProvisionedConcurrency: 11 }, want: { parameter: 'reconcileProvisionedConcurrency', problem: "must be at most reconcileReservedConcurrency (10): Lambda refuses provisioned concurrency above a function's reserved concurrency, got 11" } },
    { name: 'provisioned concurrency not a count', change: { reconcileProvisionedConcurrency: -1 }, want: { parameter: 'reconcileProvisionedConcurrency', problem: 'must be an integer between 0 and 1000, got "-1"' } },
    { name: 'reconcile reserved concurrency of none', change: { reconcileReservedConcurrency: 0 }, want: { parameter: 'reconcileReservedConcurrency', problem: 'must be an integer between 1 and 1000, got "0"' } },
    { name: 'forwarder timeout below window + 15', change: { forwarderTimeoutSeconds: 880 }, want: { parameter: 'forwarderTimeoutSeconds', problem: 'must be at least watchWindowSeconds + 15 (900), got 880' } },
    { name: 'rota overlap shorter than two schedule intervals + a start', change: { forwarderSchedule: 'rate(2 minutes)' }, want: { parameter: 'watchOverlapSeconds', problem: 'must be at least 2 x the forwarderSchedule interval + 30 (270 for rate(2 minutes)), got 150' } },
    { name: 'rota window too short to count across two runs', change: { watchWindowSeconds: 200, forwarderTimeoutSeconds: 215 }, want: { parameter: 'watchWindowSeconds', problem: 'must be at least watchOverlapSeconds + 2 x the forwarderSchedule interval (270), got 200' } },
    { name: 'reserved concurrency below the rota', change: { forwarderReservedConcurrency: 1 }, want: { parameter: 'forwarderReservedConcurrency', problem: 'must be at least forwarderShards x (2 x watchMembers + 1) (5: per shard the members, their successors while they hand over, one run deciding), got 1' } },
    { name: 'reserved concurrency below every shard rota', change: { forwarderShards: 4, forwarderReservedConcurrency: 19 }, want: { parameter: 'forwarderReservedConcurrency', problem: 'must be at least forwarderShards x (2 x watchMembers + 1) (20: per shard the members, their successors while they hand over, one run deciding), got 19' } },
    { name: 'no shard', change: { forwarderShards: 0 }, want: { parameter: 'forwarderShards', problem: 'must be between 1 and 64, got 0' } },
    { name: 'too many shards', change: { forwarderShards: 65, forwarderReservedConcurrency: 1000 }, want: { parameter: 'forwarderShards', problem: 'must be between 1 and 64, got 65' } },
    { name: 'a shard count that is not a number', change: { forwarderShards: 'many' }, want: { parameter: 'forwarderShards', problem: 'must be an integer, got "many"' } },
    { name: 'shards of one cluster', change: { clusterMode: 'self', forwarderShards: 2, forwarderReservedConcurrency: 10 }, want: { parameter: 'forwarderShards', problem: 'must be 1 with clusterMode=self (one cluster), got 2' } },
    { name: 'a Lease name with no room for the shard suffix', change: { leaseName: 'l'.repeat(250), forwarderShards: 2, forwarderReservedConcurrency: 10 }, want: { parameter: 'leaseName', problem: `must leave room for the shard suffix: "${'l'.repeat(250)}-1-of-2" is longer than a Lease name may be (253)` } },
    { name: 'rota of no member', change: { watchMembers: 0 }, want: { parameter: 'watchMembers', problem: 'must be between 1 and 5, got 0' } },
    { name: 'schedule syntax', change: { forwarderSchedule: 'every minute' }, want: { parameter: 'forwarderSchedule', problem: 'must be rate(<n> minute|minutes|hour|hours) or cron(...), got "every minute"' } },
    // Private networks
    { name: 'subnets without security groups', change: { vpcSubnetIds: 'subnet-0123456789abcdef0' }, want: { parameter: 'vpcSecurityGroupIds', problem: 'is required when vpcSubnetIds is set (a function in a VPC needs both)' } },
    { name: 'security groups without subnets', change: { vpcSecurityGroupIds: 'sg-0123456789abcdef0' }, want: { parameter: 'vpcSubnetIds', problem: 'is required when vpcSecurityGroupIds is set (a function in a VPC needs both)' } },
    { name: 'a subnet id that is not one', change: { vpcSubnetIds: 'subnet-0123456789abcdef0, private-a', vpcSecurityGroupIds: 'sg-0123456789abcdef0' }, want: { parameter: 'vpcSubnetIds', problem: 'must be comma-separated subnet ids (subnet-0123abcd...), got "private-a"' } },
    { name: 'endpoints without a VPC id', change: { vpcSubnetIds: 'subnet-0123456789abcdef0', vpcSecurityGroupIds: 'sg-0123456789abcdef0', createVpcEndpoints: 'true', vpcCidr: '10.0.0.0/16' }, want: { parameter: 'vpcId', problem: 'is required when createVpcEndpoints=true (vpc-0123abcd...), got ""' } },
    { name: 'endpoints without subnets', change: { createVpcEndpoints: 'true', vpcId: 'vpc-0123456789abcdef0', vpcCidr: '10.0.0.0/16' }, want: { parameter: 'vpcSubnetIds', problem: 'is required when createVpcEndpoints=true (the endpoints go into these subnets)' } },
    { name: 'a VPC id without endpoints', change: { vpcId: 'vpc-0123456789abcdef0' }, want: { parameter: 'vpcId', problem: 'is set but only used when createVpcEndpoints=true; remove it' } },
  ])('reports $name', ({ change, want }) => {
    // Prepare: a complete ssm set, then one mistake
    const params = { ...worked('ssm'), ...change };

    // Act
    const problems = checkDeployParameters(params);

    // Assess
    expect(problems).toContainEqual(want);
    expect(parameters(problems).filter((p) => p === want.parameter)).toHaveLength(1);
  });

  it('accepts provisioned concurrency from 0 (off, the default) up to the reserved concurrency', () => {
    expect(defaults['reconcileProvisionedConcurrency']).toBe(0);
    for (const provisioned of [0, 1, 10]) expect(checkDeployParameters({ ...worked('ssm'), reconcileReservedConcurrency: 10, reconcileProvisionedConcurrency: provisioned }), String(provisioned)).toEqual([]);
    // --param gives strings
    expect(checkDeployParameters({ ...worked('ssm'), reconcileReservedConcurrency: '4', reconcileProvisionedConcurrency: '4' })).toEqual([]);
    expect(parameters(checkDeployParameters({ ...worked('ssm'), reconcileReservedConcurrency: '4', reconcileProvisionedConcurrency: '5' }))).toEqual(['reconcileProvisionedConcurrency']);
  });

  it('accepts shards with the reserved concurrency of every shard rota; one shard by default', () => {
    expect(defaults['forwarderShards']).toBe(1);
    expect(checkDeployParameters({ ...worked('ssm'), forwarderShards: 4, forwarderReservedConcurrency: 20 })).toEqual([]);
    expect(checkDeployParameters({ ...worked('ssm'), forwarderShards: '64', forwarderReservedConcurrency: '320' })).toEqual([]);
  });

  it('checks the EKS values with the functions own loader once all are present', () => {
    const problems = checkDeployParameters({ ...worked('eks'), eksEndpoint: 'http://api.mgmt.example' });
    expect(problems).toEqual([{ parameter: 'eksEndpoint', problem: 'must be an https URL, got "http://api.mgmt.example"' }]);
  });

  it('never quotes the CA bundle back', () => {
    const problems = checkDeployParameters({ ...worked('eks'), eksCaData: 'bm90IGEgY2VydGlmaWNhdGU=' });
    expect(problems).toEqual([{ parameter: 'eksCaData', problem: 'must be the base64 of a PEM certificate bundle (certificateAuthority.data)' }]);
  });
});

describe('Function: checkFunctionNames()', () => {
  // Found by AWS's validator (F3031) on the first name of the Secrets Manager example stage: 66 characters.
  it('refuses a stage that makes a function name longer than 64 characters, naming the longest stage that fits', () => {
    const names = (stage: string): string[] => [`capi-taint-propagator-${stage}-reconcile-node-taints`, `capi-taint-propagator-${stage}-watch-forwarder`];
    expect(checkFunctionNames('example-secrets', names('example-secrets'))).toEqual([]);
    expect(checkFunctionNames('example-secretsmanager', names('example-secretsmanager'))).toEqual([
      {
        parameter: 'stage',
        problem:
          'makes function names longer than 64 characters ("capi-taint-propagator-example-secretsmanager-reconcile-node-taints": 66); use a stage of at most 20 characters',
      },
    ]);
    expect(checkFunctionNames('x'.repeat(20), names('x'.repeat(20)))).toEqual([]);
    expect(checkFunctionNames('x'.repeat(21), names('x'.repeat(21)))).toHaveLength(1);
  });
});

describe('Function: formatParameterProblems()', () => {
  it('says the stage, every problem and where to set a parameter, in one message', () => {
    expect(formatParameterProblems('prod', [{ parameter: 'eksClusterName', problem: 'is required when managementAuth=eks' }]).split('\n')).toEqual([
      'Deploy parameters of stage "prod" are incomplete or inconsistent (nothing was packaged):',
      '  - eksClusterName is required when managementAuth=eks',
      'Set them in params.prod of serverless.yml or with --param="<name>=<value>". Worked examples, one per',
      'managementAuth: infra/params/eks.yml, ssm.yml, secretsmanager.yml (docs/deploying.md, "Parameters").',
    ]);
  });
});

describe('Function: scheduleIntervalSeconds()', () => {
  it.each([
    ['rate(1 minute)', 60],
    ['rate(15 minutes)', 900],
    ['rate(2 hours)', 7200],
    ['cron(0/5 * * * ? *)', undefined],
    ['rate(1 fortnight)', null],
  ])('%s → %s', (expression, seconds) => {
    expect(scheduleIntervalSeconds(expression)).toBe(seconds);
  });
});

describe('serverless.yml and the check agree', () => {
  const fromParam = (v: unknown): string | undefined => (typeof v === 'string' ? /^\$\{param:(\w+)\}$/.exec(v)?.[1] : undefined);

  it('maps every environment variable that comes from one parameter to that parameter', () => {
    const environments = [sls.provider.environment, ...Object.values(sls.functions).map((f) => f.environment)];
    for (const env of environments) {
      for (const [variable, value] of Object.entries(env)) {
        const parameter = fromParam(value);
        if (parameter) expect(PARAMETER_OF_VARIABLE[variable], variable).toBe(parameter);
      }
    }
  });

  it('passes every parameter the check reads through custom.deployParameters, each with a default', () => {
    const read = new Set([...Object.values(PARAMETER_OF_VARIABLE), 'createVpcEndpoints', 'vpcSubnetIds', 'vpcSecurityGroupIds', 'vpcId', 'vpcCidr', 'forwarderSchedule', 'forwarderTimeoutSeconds', 'queueVisibilityTimeoutSeconds', 'reconcileTimeoutSeconds', 'reconcileBatchSize', 'maxReceiveCount', 'managementKubeconfigKmsKeyArn', 'createEksAccessEntries', 'forwarderEnabled', 'reconcileReservedConcurrency', 'reconcileProvisionedConcurrency']);
    for (const name of read) {
      expect(fromParam(sls.custom.deployParameters[name]), name).toBe(name);
      expect(defaults, name).toHaveProperty(name);
    }
  });
});
