/**
 * How the functions reach their clusters (CLUSTER_MODE, MANAGEMENT_AUTH). Workload clusters always use CAPI's
 * `<cluster>-kubeconfig` Secrets (mode `capi`).
 */
import { ConfigError } from '#shared/errors.ts';
import { oneOf, optionalString, requiredString, type Env } from './env.ts';

/** `capi`: Machines in the management cluster, Nodes in the workload clusters. `self`: one cluster holds both. */
export const ClusterMode = { Capi: 'capi', Self: 'self' } as const;
export type ClusterMode = (typeof ClusterMode)[keyof typeof ClusterMode];

/**
 * Where the management cluster's credentials come from (MANAGEMENT_AUTH): `kubeconfig` for local runs only
 * (docs/local-development.md), the others in AWS Lambda (docs/deploying.md, "Steps" 3).
 */
export type ManagementAccess =
  | { readonly auth: 'kubeconfig'; readonly kubeconfigPath: string | undefined }
  | {
      readonly auth: 'eks';
      readonly clusterName: string;
      readonly endpoint: string;
      /** Base64 of the cluster CA bundle (PEM), as in `aws eks describe-cluster` certificateAuthority.data. */
      readonly caData: string;
      readonly region: string;
    }
  | { readonly auth: 'ssm'; readonly parameterName: string; readonly region: string | undefined }
  | { readonly auth: 'secretsmanager'; readonly secretId: string; readonly region: string | undefined };

const MANAGEMENT_AUTHS: readonly ManagementAccess['auth'][] = ['kubeconfig', 'eks', 'ssm', 'secretsmanager'];

export interface ClusterAccessConfig {
  readonly clusterMode: ClusterMode;
  readonly management: ManagementAccess;
}

/** Reads CLUSTER_MODE, MANAGEMENT_AUTH and the variables the chosen auth mode needs (others are ignored). */
export function loadClusterAccessConfig(env: Env): ClusterAccessConfig {
  const clusterMode = oneOf(env, 'CLUSTER_MODE', Object.values(ClusterMode), ClusterMode.Capi);
  const auth = oneOf(env, 'MANAGEMENT_AUTH', MANAGEMENT_AUTHS, 'kubeconfig');
  // The deploy check refuses it too (infra/deploy-parameters.ts); this catches an environment changed after deployment.
  if (auth === 'kubeconfig' && optionalString(env, 'AWS_LAMBDA_FUNCTION_NAME') !== undefined) {
    throw new ConfigError('MANAGEMENT_AUTH', 'kubeconfig is for local runs only; in AWS Lambda use eks, ssm or secretsmanager');
  }
  return Object.freeze({ clusterMode, management: Object.freeze(loadManagementAccess(env, auth)) });
}

function loadManagementAccess(env: Env, auth: ManagementAccess['auth']): ManagementAccess {
  const when = `when MANAGEMENT_AUTH=${auth}`;
  switch (auth) {
    case 'kubeconfig':
      return { auth, kubeconfigPath: optionalString(env, 'KUBECONFIG') };
    case 'eks':
      return {
        auth,
        clusterName: requiredString(env, 'EKS_CLUSTER_NAME', when),
        endpoint: httpsUrl(requiredString(env, 'EKS_ENDPOINT', when), 'EKS_ENDPOINT'),
        caData: base64Pem(requiredString(env, 'EKS_CA_DATA', when), 'EKS_CA_DATA'),
        region: requiredString(env, 'AWS_REGION', when),
      };
    case 'ssm':
      return {
        auth,
        parameterName: requiredString(env, 'MANAGEMENT_KUBECONFIG_PARAMETER', when),
        region: optionalString(env, 'AWS_REGION'),
      };
    case 'secretsmanager':
      return {
        auth,
        secretId: requiredString(env, 'MANAGEMENT_KUBECONFIG_SECRET_ID', when),
        region: optionalString(env, 'AWS_REGION'),
      };
  }
}

function httpsUrl(value: string, name: string): string {
  if (URL.parse(value)?.protocol !== 'https:') throw new ConfigError(name, `must be an https URL, got ${JSON.stringify(value)}`);
  return value.replace(/\/+$/, '');
}

/** Checks the shape only; the value is public (a CA certificate), but is still never echoed back in full. */
function base64Pem(value: string, name: string): string {
  const compact = value.replace(/\s+/g, '');
  const decoded = /^[A-Za-z0-9+/]+={0,2}$/.test(compact) ? Buffer.from(compact, 'base64').toString('utf8') : '';
  if (!decoded.includes('-----BEGIN CERTIFICATE-----')) {
    throw new ConfigError(name, 'must be the base64 of a PEM certificate bundle (certificateAuthority.data)');
  }
  return compact;
}
