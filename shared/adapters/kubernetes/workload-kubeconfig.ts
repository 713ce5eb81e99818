/**
 * Workload-cluster credentials by Cluster API's convention: the Secret `<cluster>-kubeconfig` in the
 * Cluster's namespace (type `cluster.x-k8s.io/secret`, label `cluster.x-k8s.io/cluster-name`), whose
 * key `value` holds a kubeconfig. KubeConfigs are cached per Secret resourceVersion, so rotated
 * credentials are picked up on the next `get` without rebuilding clients for unchanged Secrets.
 */
import { ApiException, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { clusterKey, type ClusterRef } from '#shared/domain/cloud-event.ts';
import { ClusterCredentialsError } from '#shared/errors.ts';

/** CAPI's kubeconfig Secret key. */
export const KUBECONFIG_SECRET_KEY = 'value';

/** The Secret name CAPI gives a Cluster's kubeconfig. */
export function kubeconfigSecretName(clusterName: string): string {
  return `${clusterName}-kubeconfig`;
}

/** Hands out a KubeConfig per cluster. */
export interface WorkloadKubeConfigs {
  /**
   * Returns the KubeConfig of the cluster (the management KubeConfig in `self` mode); the same
   * instance while the Secret is unchanged, a new one after rotation. Throws ClusterCredentialsError
   * when the Secret is missing, unreadable or holds no usable kubeconfig.
   */
  get(cluster: ClusterRef): Promise<KubeConfig>;
}

/** Creates the per-cluster KubeConfig cache over the management cluster's Secrets. */
export function workloadKubeConfigs(managementKc: KubeConfig): WorkloadKubeConfigs {
  const core = managementKc.makeApiClient(CoreV1Api);
  const cache = new Map<string, { resourceVersion: string; kc: KubeConfig }>();
  return {
    async get(cluster: ClusterRef): Promise<KubeConfig> {
      if (cluster.mode === 'self') return managementKc;
      const key = clusterKey(cluster);
      const secretName = kubeconfigSecretName(cluster.name);
      let secret;
      try {
        secret = await core.readNamespacedSecret({ name: secretName, namespace: cluster.namespace });
      } catch (err) {
        const detail = err instanceof ApiException ? (err.code === 404 ? `Secret ${cluster.namespace}/${secretName} not found` : `reading Secret ${cluster.namespace}/${secretName}: HTTP ${err.code}`) : `reading Secret ${cluster.namespace}/${secretName} failed`;
        throw new ClusterCredentialsError(key, detail, err);
      }
      const rv = secret.metadata?.resourceVersion ?? '';
      const cached = cache.get(key);
      if (cached && cached.resourceVersion === rv && rv !== '') return cached.kc;
      const encoded = secret.data?.[KUBECONFIG_SECRET_KEY];
      if (!encoded) throw new ClusterCredentialsError(key, `Secret ${cluster.namespace}/${secretName} has no key "${KUBECONFIG_SECRET_KEY}"`);
      const kc = new KubeConfig();
      try {
        kc.loadFromString(Buffer.from(encoded, 'base64').toString('utf8'));
      } catch (err) {
        throw new ClusterCredentialsError(key, `Secret ${cluster.namespace}/${secretName} does not hold a valid kubeconfig`, err);
      }
      if (!kc.getCurrentCluster()) throw new ClusterCredentialsError(key, `the kubeconfig in Secret ${cluster.namespace}/${secretName} has no current cluster`);
      cache.set(key, { resourceVersion: rv, kc });
      return kc;
    },
  };
}
