/**
 * The deploy parameters of serverless.yml, checked before anything is packaged: the ones the chosen
 * `managementAuth` needs, the ones that contradict it, the numbers that must agree with each other, and the
 * private-network settings. Every function environment the template would carry is also run through the
 * functions' own config loaders (shared/config), so a stack that packages is a stack whose functions start.
 * Pure; used by the local osls plugin infra/check-parameters.ts.
 */
import { loadClusterAccessConfig } from '#shared/config/cluster-access-config.ts';
import type { Env } from '#shared/config/env.ts';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import { loadReconcileBehaviour } from '#shared/config/reconcile-config.ts';
import { ConfigError } from '#shared/errors.ts';

/** Parameter name → resolved value, as serverless.yml's `custom.deployParameters` lists them. */
export type DeployParameters = Readonly<Record<string, string | number | boolean | null | undefined>>;

/** The function environment variables that come straight from one parameter (serverless.yml `environment`). */
export const PARAMETER_OF_VARIABLE: Readonly<Record<string, string>> = {
  CLUSTER_MODE: 'clusterMode',
  MANAGEMENT_AUTH: 'managementAuth',
  EKS_CLUSTER_NAME: 'eksClusterName',
  EKS_ENDPOINT: 'eksEndpoint',
  EKS_CA_DATA: 'eksCaData',
  MANAGEMENT_KUBECONFIG_PARAMETER: 'managementKubeconfigParameter',
  MANAGEMENT_KUBECONFIG_SECRET_ID: 'managementKubeconfigSecretId',
  STATE_NAMESPACE: 'stateNamespace',
  AWS_REGION: 'region',
  DRY_RUN: 'dryRun',
  STARTUP_TAINT_KEY: 'startupTaintKey',
  SPEC_TAINTS_OWNER: 'specTaintsOwner',
  RETRY_BASE_SECONDS: 'retryBaseSeconds',
  RETRY_MAX_SECONDS: 'retryMaxSeconds',
  MAX_RECEIVE_COUNT: 'maxReceiveCount',
  FIRST_ENABLED_AT: 'firstEnabledAt',
  WATCH_WINDOW_SECONDS: 'watchWindowSeconds',
  WATCH_MEMBERS: 'watchMembers',
  WATCH_OVERLAP_SECONDS: 'watchOverlapSeconds',
  RESYNC_INTERVAL_SECONDS: 'resyncIntervalSeconds',
  WATCH_IDLE_SECONDS: 'watchIdleSeconds',
  LEASE_NAME: 'leaseName',
  FORWARDER_SHARDS: 'forwarderShards',
  MACHINE_NAMESPACE: 'machineNamespace',
  POWERTOOLS_LOG_LEVEL: 'logLevel',
};

/** Which parameters each deployable `managementAuth` needs. */
const REQUIRED_FOR_AUTH: Readonly<Record<string, readonly string[]>> = {
  eks: ['eksClusterName', 'eksEndpoint', 'eksCaData'],
  ssm: ['managementKubeconfigParameter'],
  secretsmanager: ['managementKubeconfigSecretId'],
};

/** What to put there, said once per parameter. */
const HINT: Readonly<Record<string, string>> = {
  eksClusterName: 'the management cluster name',
  eksEndpoint: "aws eks describe-cluster --name <cluster> --query 'cluster.endpoint'",
  eksCaData: "aws eks describe-cluster --name <cluster> --query 'cluster.certificateAuthority.data'",
  managementKubeconfigParameter: 'the SSM SecureString name holding the kubeconfig, starting with "/"',
  managementKubeconfigSecretId: 'the Secrets Manager secret name holding the kubeconfig',
};

/** A problem with one parameter. */
export interface ParameterProblem {
  readonly parameter: string;
  readonly problem: string;
}

/**
 * Returns every problem with the parameters (empty when they package and the functions would start).
 * @example checkDeployParameters({ managementAuth: 'eks', eksClusterName: '' })[0]
 * // { parameter: 'eksClusterName', problem: 'is required when managementAuth=eks (the management cluster name)' }
 */
export function checkDeployParameters(params: DeployParameters): ParameterProblem[] {
  const p = (name: string): string => {
    const v = params[name];
    return v === undefined || v === null ? '' : String(v).trim();
  };
  const problems: ParameterProblem[] = [];
  const add = (parameter: string, problem: string): void => {
    if (!problems.some((x) => x.parameter === parameter)) problems.push({ parameter, problem });
  };

  // Credentials of the management cluster.
  const auth = p('managementAuth');
  const required = REQUIRED_FOR_AUTH[auth];
  if (auth === 'kubeconfig') add('managementAuth', 'kubeconfig is for local runs only; deploy with eks, ssm or secretsmanager');
  else if (!required) add('managementAuth', `must be one of eks, ssm, secretsmanager, got ${JSON.stringify(auth)}`);
  else {
    for (const name of required) if (p(name) === '') add(name, `is required when managementAuth=${auth} (${HINT[name]})`);
    for (const [otherAuth, names] of Object.entries(REQUIRED_FOR_AUTH)) {
      if (otherAuth === auth) continue;
      for (const name of names) if (p(name) !== '') add(name, `is set but only used when managementAuth=${otherAuth} (managementAuth is ${auth}); remove it`);
    }
  }
  if (auth === 'ssm' && p('managementKubeconfigParameter') !== '' && !p('managementKubeconfigParameter').startsWith('/')) {
    add('managementKubeconfigParameter', `must start with "/" (a full parameter name), got ${JSON.stringify(p('managementKubeconfigParameter'))}`);
  }
  if (auth === 'secretsmanager' && p('managementKubeconfigSecretId').startsWith('arn:')) {
    add('managementKubeconfigSecretId', 'must be the secret name, not its ARN (the IAM policy allows secret:<name>-??????)');
  }
  const kmsKey = p('managementKubeconfigKmsKeyArn');
  if (kmsKey !== '') {
    if (auth !== 'ssm' && auth !== 'secretsmanager') add('managementKubeconfigKmsKeyArn', `is set but only used when managementAuth=ssm or secretsmanager (managementAuth is ${auth || 'empty'}); remove it`);
    else if (!/^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/.test(kmsKey)) add('managementKubeconfigKmsKeyArn', `must be a KMS key ARN (arn:aws:kms:<region>:<account>:key/<id>), got ${JSON.stringify(kmsKey)}`);
  }
  flag(p, add, 'createEksAccessEntries');

  // The functions' own config loaders, on the environment the template gives them (first problem of each).
  const env: Record<string, string> = {};
  for (const [variable, parameter] of Object.entries(PARAMETER_OF_VARIABLE)) env[variable] = p(parameter);
  const fromLoader = (load: (env: Env) => unknown): void => {
    try {
      load(env);
    } catch (e) {
      if (!(e instanceof ConfigError)) throw e;
      const parameter = PARAMETER_OF_VARIABLE[e.variable] ?? e.variable;
      add(parameter, e.message.replace(/^Invalid configuration \S+: /, '').replaceAll(/\b[A-Z][A-Z_]+[A-Z]\b/g, (v) => PARAMETER_OF_VARIABLE[v] ?? v));
    }
  };
  if (required && required.every((name) => p(name) !== '')) fromLoader(loadClusterAccessConfig);
  fromLoader((e) => loadReconcileBehaviour(e));
  fromLoader(loadForwarderConfig);
  flag(p, add, 'dryRun');
  flag(p, add, 'forwarderEnabled');

  // Numbers that must agree with each other (AWS rules and the documented margins).
  const n = (name: string, min: number, max: number): number | undefined => {
    const raw = p(name);
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      add(name, `must be an integer between ${min} and ${max}, got ${JSON.stringify(raw)}`);
      return undefined;
    }
    return Number(raw);
  };
  const reconcileTimeout = n('reconcileTimeoutSeconds', 1, 900);
  const visibility = n('queueVisibilityTimeoutSeconds', 0, 43_200);
  if (reconcileTimeout !== undefined && visibility !== undefined && visibility < 6 * reconcileTimeout) {
    add('queueVisibilityTimeoutSeconds', `must be at least 6 x reconcileTimeoutSeconds (${6 * reconcileTimeout}), got ${visibility}`);
  }
  n('reconcileBatchSize', 1, 10);
  // Lambda refuses provisioned concurrency above the function's reserved concurrency (the stack would fail to deploy).
  const reconcileReserved = n('reconcileReservedConcurrency', 1, 1000);
  const reconcileProvisioned = n('reconcileProvisionedConcurrency', 0, 1000);
  if (reconcileReserved !== undefined && reconcileProvisioned !== undefined && reconcileProvisioned > reconcileReserved) {
    add('reconcileProvisionedConcurrency', `must be at most reconcileReservedConcurrency (${reconcileReserved}): Lambda refuses provisioned concurrency above a function's reserved concurrency, got ${reconcileProvisioned}`);
  }
  n('maxReceiveCount', 5, 1000);
  const forwarderTimeout = n('forwarderTimeoutSeconds', 1, 900);
  const window = Number(p('watchWindowSeconds'));
  if (forwarderTimeout !== undefined && Number.isInteger(window) && forwarderTimeout < window + 15) {
    add('forwarderTimeoutSeconds', `must be at least watchWindowSeconds + 15 (${window + 15}), got ${forwarderTimeout}`);
  }
  const schedule = p('forwarderSchedule');
  const interval = scheduleIntervalSeconds(schedule);
  if (interval === null) add('forwarderSchedule', `must be rate(<n> minute|minutes|hour|hours) or cron(...), got ${JSON.stringify(schedule)}`);
  // The rota (functions/watch-forwarder/README.md, "Deployed form"): a schedule fires anywhere in its interval, so the
  // next run may come two intervals after a member stops counting; the member must still watch until its successor
  // watches (plus 30 s for a cold start and the list), and count across at least two runs.
  const overlap = Number(p('watchOverlapSeconds'));
  if (typeof interval === 'number' && Number.isInteger(overlap)) {
    if (overlap < 2 * interval + 30) add('watchOverlapSeconds', `must be at least 2 x the forwarderSchedule interval + 30 (${2 * interval + 30} for ${schedule}), got ${overlap}`);
    else if (Number.isInteger(window) && window < overlap + 2 * interval) {
      add('watchWindowSeconds', `must be at least watchOverlapSeconds + 2 x the forwarderSchedule interval (${overlap + 2 * interval}), got ${window}`);
    }
  }
  // Each shard is a rota of its own (docs/fleets-and-sizing.md, "Shards"): its members, their successors while they
  // hand over, and one run deciding, all at once in the worst minute.
  const reserved = n('forwarderReservedConcurrency', 1, 1000);
  const members = Number(p('watchMembers'));
  const shards = Number(p('forwarderShards'));
  if (reserved !== undefined && Number.isInteger(members) && Number.isInteger(shards) && shards >= 1 && reserved < shards * (2 * members + 1)) {
    add('forwarderReservedConcurrency', `must be at least forwarderShards x (2 x watchMembers + 1) (${shards * (2 * members + 1)}: per shard the members, their successors while they hand over, one run deciding), got ${reserved}`);
  }
  // The last shard's Lease has the longest name (<leaseName>-<index>-of-<count>); a Lease name is a DNS subdomain.
  const longestLease = Number.isInteger(shards) && shards > 1 ? `${p('leaseName')}-${shards - 1}-of-${shards}` : p('leaseName');
  if (longestLease.length > 253) add('leaseName', `must leave room for the shard suffix: ${JSON.stringify(longestLease)} is longer than a Lease name may be (253)`);

  // Private networks.
  const subnets = ids(p('vpcSubnetIds'));
  const groups = ids(p('vpcSecurityGroupIds'));
  const badSubnet = subnets.find((s) => !/^subnet-[0-9a-f]{8,17}$/.test(s));
  const badGroup = groups.find((s) => !/^sg-[0-9a-f]{8,17}$/.test(s));
  if (badSubnet !== undefined) add('vpcSubnetIds', `must be comma-separated subnet ids (subnet-0123abcd...), got ${JSON.stringify(badSubnet)}`);
  if (badGroup !== undefined) add('vpcSecurityGroupIds', `must be comma-separated security group ids (sg-0123abcd...), got ${JSON.stringify(badGroup)}`);
  if (subnets.length > 16) add('vpcSubnetIds', `at most 16 subnets, got ${subnets.length}`);
  if (groups.length > 5) add('vpcSecurityGroupIds', `at most 5 security groups, got ${groups.length}`);
  if (subnets.length > 0 && groups.length === 0) add('vpcSecurityGroupIds', 'is required when vpcSubnetIds is set (a function in a VPC needs both)');
  if (groups.length > 0 && subnets.length === 0) add('vpcSubnetIds', 'is required when vpcSecurityGroupIds is set (a function in a VPC needs both)');
  if (flag(p, add, 'createVpcEndpoints') === true) {
    if (subnets.length === 0) add('vpcSubnetIds', 'is required when createVpcEndpoints=true (the endpoints go into these subnets)');
    if (!/^vpc-[0-9a-f]{8,17}$/.test(p('vpcId'))) add('vpcId', `is required when createVpcEndpoints=true (vpc-0123abcd...), got ${JSON.stringify(p('vpcId'))}`);
    if (!/^\d{1,3}(\.\d{1,3}){3}\/\d{1,2}$/.test(p('vpcCidr'))) add('vpcCidr', `is required when createVpcEndpoints=true (the endpoints accept HTTPS from it, e.g. 10.0.0.0/16), got ${JSON.stringify(p('vpcCidr'))}`);
  } else {
    for (const name of ['vpcId', 'vpcCidr']) if (p(name) !== '') add(name, 'is set but only used when createVpcEndpoints=true; remove it');
  }
  return problems;
}

/** AWS's limit on a Lambda function name (the template's FunctionName is `<service>-<stage>-<function>`). */
export const MAX_FUNCTION_NAME = 64;

/**
 * The stage name is part of every function name; a name over AWS's limit fails only at deploy time, so it is
 * refused here with the longest stage that fits.
 * @example checkFunctionNames('a-very-long-stage-name-indeed', ['capi-taint-propagator-a-very-long-stage-name-indeed-watch-forwarder'])
 */
export function checkFunctionNames(stage: string, functionNames: readonly string[]): ParameterProblem[] {
  const tooLong = functionNames.filter((n) => n.length > MAX_FUNCTION_NAME);
  if (tooLong.length === 0) return [];
  const longest = Math.max(...tooLong.map((n) => n.length));
  return [
    {
      parameter: 'stage',
      problem: `makes function names longer than ${MAX_FUNCTION_NAME} characters (${tooLong.map((n) => `${JSON.stringify(n)}: ${n.length}`).join(', ')}); use a stage of at most ${stage.length - (longest - MAX_FUNCTION_NAME)} characters`,
    },
  ];
}

/**
 * One message for all problems, naming the stage and how to set a parameter.
 * @example formatParameterProblems('dev', [{ parameter: 'eksClusterName', problem: 'is required when managementAuth=eks' }])
 */
export function formatParameterProblems(stage: string, problems: readonly ParameterProblem[]): string {
  return [
    `Deploy parameters of stage "${stage}" are incomplete or inconsistent (nothing was packaged):`,
    ...problems.map((x) => `  - ${x.parameter} ${x.problem}`),
    `Set them in params.${stage} of serverless.yml or with --param="<name>=<value>". Worked examples, one per`,
    'managementAuth: infra/params/eks.yml, ssm.yml, secretsmanager.yml (docs/deploying.md, "Parameters").',
  ].join('\n');
}

/** `rate(5 minutes)` → 300; `cron(...)` → undefined (not checked); anything else → null. */
export function scheduleIntervalSeconds(expression: string): number | undefined | null {
  if (/^cron\(.+\)$/.test(expression)) return undefined;
  const rate = /^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$/.exec(expression);
  if (!rate) return null;
  const unit = rate[2]?.startsWith('minute') ? 60 : rate[2]?.startsWith('hour') ? 3600 : 86_400;
  return Number(rate[1]) * unit;
}

function ids(list: string): string[] {
  return list === '' ? [] : list.split(',').map((s) => s.trim());
}

function flag(p: (name: string) => string, add: (parameter: string, problem: string) => void, name: string): boolean | undefined {
  const v = p(name);
  if (v === 'true') return true;
  if (v === 'false') return false;
  add(name, `must be 'true' or 'false', got ${JSON.stringify(v)}`);
  return undefined;
}
