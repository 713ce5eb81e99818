/**
 * The product in its deployed form for the `deployed` tier: the zips and template of `npx serverless package` (the
 * worked SSM parameter set), run by the Lambda runner (local/lambda/) against the control plane with the Cluster API
 * manager (test/support/capi-control-plane-setup.ts), with the management kubeconfig in the runner's SSM endpoint.
 *
 * Kubernetes identity as deployed: the product's RBAC (infra/rbac/*.yaml, plus the kubeconfig-Secret Roles that
 * `npm run rbac:kubeconfig-secrets` prints) bound to one client certificate in both function groups, since the SSM
 * parameter set gives both functions one stored kubeconfig.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeConfig, KubernetesObject } from '@kubernetes/client-node';
import { applyObjects, applyYamlFile } from '#local/rbac/apply-objects.ts';
import { mintClientKubeconfig } from '#local/control-plane/pki.ts';
import { FUNCTION_GROUPS, kubeconfigSecretRbac, type ClusterName } from '#local/rbac/kubeconfig-secret-rbac.ts';
import { LambdaRunner, type LambdaRunnerOptions } from '#local/lambda/runner.ts';
import { decryptKeyArns, functionsEnvironmentValue } from '#local/lambda/template.ts';
import type { AvailableCapiControlPlane } from './capi.ts';
import { packagedService, PACKAGE_VARIANTS } from '#local/lambda/serverless-package.ts';

const ROOT = join(import.meta.dirname, '..', '..');

export { applyObjects };

/**
 * The worked SSM parameter set with settings changed for the tier's time budget, each at the smallest value the deploy
 * check (infra/deploy-parameters.ts) accepts: a reconcile timeout of 5 s and the queue's visibility timeout at 6 x that
 * (30 s), so that a batch lost with its container comes back within 30 s instead of 180 s; and the forwarder's rota
 * windows at 270 s (overlap 150 s = 2 x the 1-minute schedule + 30; window = overlap + 2 x the schedule; timeout =
 * window + 15) instead of 885 s, so that a member hands over within the tier. Everything else is serverless.yml's
 * defaults, the schedule included (rate(1 minute), real time).
 */
export const DEPLOYED_TIER_PACKAGE = [
  ...PACKAGE_VARIANTS.ssm,
  '--param=reconcileTimeoutSeconds=5',
  '--param=queueVisibilityTimeoutSeconds=30',
  '--param=watchOverlapSeconds=150',
  '--param=watchWindowSeconds=270',
  '--param=forwarderTimeoutSeconds=285',
] as const;

/** Creates the objects of a YAML file of the repository (path relative to its root). */
export async function applyFile(kc: KubeConfig, path: string): Promise<void> {
  await applyYamlFile(kc, join(ROOT, path));
}

/** Grants both function groups `get` on the kubeconfig Secrets of these Clusters (what the rbac script prints). */
export async function grantKubeconfigSecrets(kc: KubeConfig, clusters: readonly ClusterName[]): Promise<void> {
  await applyObjects(kc, kubeconfigSecretRbac(clusters) as KubernetesObject[]);
}

export interface Deployed {
  readonly runner: LambdaRunner;
  /** The function identity's kubeconfig, as stored in the SSM parameter. */
  readonly kubeconfig: string;
}

/**
 * Packages (or reuses the packaging of) {@link DEPLOYED_TIER_PACKAGE}, applies the product's RBAC, stores a kubeconfig
 * of the function identity in the SSM parameter the template names, and starts the runner with the template's
 * triggers.
 */
export async function startDeployed(admin: KubeConfig, cp: AvailableCapiControlPlane, options: Partial<LambdaRunnerOptions> = {}, args: readonly string[] = DEPLOYED_TIER_PACKAGE): Promise<Deployed> {
  const packaged = await packagedService(args);
  await applyFile(admin, 'infra/rbac/management-cluster.yaml');
  await applyFile(admin, 'infra/rbac/workload-cluster.yaml');
  const kubeconfigPath = await mintClientKubeconfig({ dir: join(cp.dir, 'users'), caCertPath: cp.caCertPath, caKeyPath: cp.caKeyPath, server: cp.server, name: 'capi-taint-propagator-lambda', groups: [...FUNCTION_GROUPS] });
  const kubeconfig = readFileSync(kubeconfigPath, 'utf8');
  const runner = await LambdaRunner.start({ serviceDir: packaged.serviceDir, startTriggers: false, ...options });
  try {
    const parameter = functionsEnvironmentValue(runner.template, 'MANAGEMENT_KUBECONFIG_PARAMETER');
    // The parameter is encrypted with the key the template lets the roles decrypt with (the customer managed key of
    // the parameter set), or the AWS managed key when there is none.
    const [keyId] = decryptKeyArns(runner.template, runner.fn('watchForwarder').fn.roleLogicalId, { accountId: runner.accountId, region: runner.region, ref: (id) => id, getAtt: (id) => id });
    runner.ssm.put(parameter, { value: kubeconfig, type: 'SecureString', ...(keyId ? { keyId } : {}) });
    if (options.startTriggers ?? true) runner.startTriggers();
    return { runner, kubeconfig };
  } catch (error) {
    await runner.stop();
    throw error;
  }
}
