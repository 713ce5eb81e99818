/**
 * The management cluster's RestConfig, from the source MANAGEMENT_AUTH names; a kubeconfig, stored or in a file, is
 * untrusted (untrusted-kubeconfig.ts). Stored kubeconfigs are re-read after {@link RELOAD_AFTER_MS} so that a rotated
 * one is picked up (the previous one is kept if the re-read fails). No credential, token or kubeconfig content is ever
 * logged or put in an error message; the SDK clients load only when a stored kubeconfig is read (runtime-sdk.ts).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { ClusterAccessConfig, ManagementAccess } from '#shared/config/cluster-access-config.ts';
import { ClusterCredentialsError } from '#shared/errors.ts';
import { logger as defaultLogger } from '#shared/observability/logger.ts';
import type { Clock } from '#shared/ports/clock.ts';
import { createEksTokenSource, type AwsCredentialsProvider, type EksToken } from '../aws/eks-token.ts';
import { RestConfig } from './rest-config.ts';
import { kubeConfigFromUntrusted } from './untrusted-kubeconfig.ts';
import { runtimeSdk } from '#shared/adapters/aws/runtime-sdk.ts';

const MANAGEMENT_CLUSTER = 'management';
const RELOAD_AFTER_MS = 300_000;

type KubeConfigLog = Pick<Logger, 'debug' | 'info' | 'warn'>;

export interface ManagementKubeConfigDeps {
  readonly clock?: Clock;
  /** AWS credentials for the EKS token (default: the SDK's default chain, i.e. the function role). */
  readonly credentials?: AwsCredentialsProvider;
  readonly logger?: KubeConfigLog;
}

/** A loader with its own cache, cheap to call per invocation; `load()` throws ClusterCredentialsError on failure. */
export function createManagementKubeConfigLoader(config: ClusterAccessConfig, deps: ManagementKubeConfigDeps = {}): { load(): Promise<RestConfig> } {
  const access = config.management;
  const clock = deps.clock ?? { now: () => new Date() };
  const log = deps.logger ?? defaultLogger;
  let cached: RestConfig | undefined;
  let reloadAt = 0;
  let pending: Promise<RestConfig> | undefined;

  const loadFresh = async (): Promise<RestConfig> => {
    switch (access.auth) {
      case 'kubeconfig':
        log.info('Loading management kubeconfig', { source: 'kubeconfig', path: access.kubeconfigPath ?? 'default' });
        return fromKubeconfigFile(access.kubeconfigPath);
      case 'eks': {
        const tokens = createEksTokenSource({ ...access, clock, credentials: deps.credentials });
        log.info('Loading management kubeconfig', { source: 'eks', cluster: access.clusterName, endpoint: access.endpoint });
        const getToken = tokenGetter(tokens, access.clusterName, log);
        // Mint the first token now, so that a credentials problem surfaces at load time.
        await getToken();
        return new RestConfig({ server: access.endpoint, caData: access.caData, token: getToken });
      }
      case 'ssm':
      case 'secretsmanager':
        return fromStoredKubeconfig(access, log);
    }
  };

  const refresh = async (): Promise<RestConfig> => {
    try {
      cached = await loadFresh();
      const stored = access.auth === 'ssm' || access.auth === 'secretsmanager';
      reloadAt = stored ? clock.now().getTime() + RELOAD_AFTER_MS : Number.POSITIVE_INFINITY;
    } catch (err) {
      if (!cached) throw err;
      log.warn('Reloading management kubeconfig failed, keeping the previous one', { source: access.auth, reason: err instanceof Error ? err.message : 'unknown error' });
      reloadAt = clock.now().getTime() + 60_000;
    }
    return cached;
  };

  return {
    async load() {
      if (cached && clock.now().getTime() < reloadAt) return cached;
      return (pending ??= refresh().finally(() => (pending = undefined)));
    },
  };
}

/**
 * The file KUBECONFIG names (the first that exists when it lists several), else `~/.kube/config`, read as a stored
 * kubeconfig is: inline credentials only. Contexts are not merged across files.
 */
function fromKubeconfigFile(path: string | undefined): RestConfig {
  const candidates = path ? path.split(delimiter).filter((p) => p !== '') : [join(homedir(), '.kube', 'config')];
  for (const candidate of candidates) {
    let text: string;
    try {
      text = readFileSync(candidate, 'utf8');
    } catch {
      continue;
    }
    return kubeConfigFromUntrusted(text, { cluster: MANAGEMENT_CLUSTER, source: `kubeconfig file ${candidate}` });
  }
  const named = path ?? '~/.kube/config';
  throw new ClusterCredentialsError(MANAGEMENT_CLUSTER, `kubeconfig file ${named} could not be read`);
}

type StoredAccess = Extract<ManagementAccess, { auth: 'ssm' | 'secretsmanager' }>;
async function fromStoredKubeconfig(access: StoredAccess, log: KubeConfigLog): Promise<RestConfig> {
  const source = access.auth === 'ssm' ? `SSM parameter ${access.parameterName}` : `secret ${access.secretId}`;
  const region = access.region ? { region: access.region } : {};
  let value: string | undefined;
  try {
    if (access.auth === 'ssm') {
      log.info('Loading management kubeconfig', { source: 'ssm', parameter: access.parameterName });
      const { GetParameterCommand, SSMClient } = runtimeSdk('@aws-sdk/client-ssm');
      value = (await new SSMClient(region).send(new GetParameterCommand({ Name: access.parameterName, WithDecryption: true }))).Parameter?.Value;
    } else {
      log.info('Loading management kubeconfig', { source: 'secretsmanager', secretId: access.secretId });
      const { GetSecretValueCommand, SecretsManagerClient } = runtimeSdk('@aws-sdk/client-secrets-manager');
      const out = await new SecretsManagerClient(region).send(new GetSecretValueCommand({ SecretId: access.secretId }));
      value = out.SecretString ?? (out.SecretBinary ? Buffer.from(out.SecretBinary).toString('utf8') : undefined);
    }
  } catch (err) {
    // AWS error names and messages carry names and ARNs, never the value; the raw error (with the response
    // metadata) is not kept as cause, and the message is capped.
    const name = err instanceof Error ? err.name : 'Error';
    const message = err instanceof Error ? err.message.slice(0, 300) : 'unknown error';
    throw new ClusterCredentialsError(MANAGEMENT_CLUSTER, `reading ${source} failed: ${name}: ${message}`);
  }
  if (!value) throw new ClusterCredentialsError(MANAGEMENT_CLUSTER, `${source} is empty`);
  return kubeConfigFromUntrusted(value, { cluster: MANAGEMENT_CLUSTER, source });
}

/** Wraps the token source: logs when a new token is in use (its expiry only) and hides failure details. */
function tokenGetter(tokens: () => Promise<EksToken>, clusterName: string, log: KubeConfigLog): () => Promise<string> {
  let lastExpiry = 0;
  return async () => {
    try {
      const { token, expiresAt } = await tokens();
      if (expiresAt.getTime() !== lastExpiry) {
        lastExpiry = expiresAt.getTime();
        log.debug('Using a new EKS token', { cluster: clusterName, expiresAt: expiresAt.toISOString() });
      }
      return token;
    } catch (err) {
      const name = err instanceof Error ? err.name : 'Error';
      throw new ClusterCredentialsError(MANAGEMENT_CLUSTER, `minting an EKS token for ${clusterName} failed: ${name}`);
    }
  };
}
