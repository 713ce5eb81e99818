/**
 * Workload-cluster credentials by Cluster API's convention: the Secret `<cluster>-kubeconfig` in the
 * Cluster's namespace (type `cluster.x-k8s.io/secret`, label `cluster.x-k8s.io/cluster-name`), whose
 * key `value` holds a kubeconfig — or, when it exists, the product's own `<cluster>-taint-propagator-kubeconfig` next to
 * it (a dedicated, non-admin credential; 404 or 403 on it falls back to CAPI's). The kubeconfig is untrusted (anyone who may create a Secret in that namespace
 * could have written it): it goes through `kubeConfigFromUntrusted` — inline credentials only, no exec plugin,
 * auth provider or file path — before client-node sees any of it. KubeConfigs are cached per Secret
 * resourceVersion, so rotated credentials are picked up on the next `get` without rebuilding clients for
 * unchanged Secrets.
 */
import { CoreV1Api } from './client-node.ts';
import type { KubeConfig, V1Secret } from '@kubernetes/client-node';
import { clusterKey, type ClusterRef } from '#shared/domain/cloud-event.ts';
import { ClusterCredentialsError } from '#shared/errors.ts';
import { statusOf } from './api-errors.ts';
import { kubeConfigFromUntrusted } from './untrusted-kubeconfig.ts';

/** CAPI's kubeconfig Secret key. */
export const KUBECONFIG_SECRET_KEY = 'value';

/** The Secret name CAPI gives a Cluster's kubeconfig. */
export function kubeconfigSecretName(clusterName: string): string {
  return `${clusterName}-kubeconfig`;
}

/**
 * The Secret a platform team may add next to CAPI's to give the product a dedicated, non-admin credential for that
 * workload cluster (same format: key `value` holds a kubeconfig). When it exists it is used instead of CAPI's.
 */
export function dedicatedKubeconfigSecretName(clusterName: string): string {
  return `${clusterName}-taint-propagator-kubeconfig`;
}

/** Hands out a KubeConfig per cluster. */
export interface WorkloadKubeConfigs {
  /**
   * Returns the KubeConfig of the cluster (the management KubeConfig in `self` mode); the same
   * instance while the Secret is unchanged, a new one after rotation. Throws ClusterCredentialsError
   * when the Secret is missing, unreadable or holds no usable kubeconfig, and RefusedKubeconfigError
   * when the kubeconfig uses a refused feature.
   */
  get(cluster: ClusterRef): Promise<KubeConfig>;
}

/** Reads a Secret (the management cluster's CoreV1Api by default; replaceable in unit tests). */
export type SecretReader = (namespace: string, name: string) => Promise<V1Secret>;

/** Creates the per-cluster KubeConfig cache over the management cluster's Secrets. */
export function workloadKubeConfigs(managementKc: KubeConfig, options: { readonly readSecret?: SecretReader } = {}): WorkloadKubeConfigs {
  let readSecret = options.readSecret;
  if (!readSecret) {
    const core = managementKc.makeApiClient(CoreV1Api);
    readSecret = (namespace, name) => core.readNamespacedSecret({ namespace, name });
  }
  const read = readSecret;
  const cache = new Map<string, { resourceVersion: string; kc: KubeConfig }>();
  return {
    async get(cluster: ClusterRef): Promise<KubeConfig> {
      if (cluster.mode === 'self') return managementKc;
      const key = clusterKey(cluster);
      const describeFailure = (name: string, err: unknown): ClusterCredentialsError => {
        // The API exception holds response headers and body: report the status only, keep no cause.
        const status = statusOf(err);
        const where = `Secret ${cluster.namespace}/${name}`;
        return new ClusterCredentialsError(key, status === 404 ? `${where} not found` : status !== undefined ? `reading ${where}: HTTP ${status}` : `reading ${where} failed`);
      };
      let secretName = dedicatedKubeconfigSecretName(cluster.name);
      let secret: V1Secret;
      try {
        secret = await read(cluster.namespace, secretName);
      } catch (err) {
        const status = statusOf(err);
        if (status !== 404 && status !== 403) throw describeFailure(secretName, err);
        secretName = kubeconfigSecretName(cluster.name);
        try {
          secret = await read(cluster.namespace, secretName);
        } catch (fallbackErr) {
          throw describeFailure(secretName, fallbackErr);
        }
      }
      const where = `Secret ${cluster.namespace}/${secretName}`;
      const rv = secret.metadata?.resourceVersion ?? '';
      const cached = cache.get(key);
      if (cached && cached.resourceVersion === `${secretName}@${rv}` && rv !== '') return cached.kc;
      cache.delete(key);
      const encoded = secret.data?.[KUBECONFIG_SECRET_KEY];
      if (!encoded) throw new ClusterCredentialsError(key, `${where} has no key "${KUBECONFIG_SECRET_KEY}"`);
      const kc = kubeConfigFromUntrusted(Buffer.from(encoded, 'base64').toString('utf8'), { cluster: key, source: `the kubeconfig in ${where}` });
      cache.set(key, { resourceVersion: `${secretName}@${rv}`, kc });
      return kc;
    },
  };
}
