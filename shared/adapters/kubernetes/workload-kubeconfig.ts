/**
 * Workload-cluster credentials by Cluster API's convention: the Secret `<cluster>-kubeconfig` in the
 * Cluster's namespace (type `cluster.x-k8s.io/secret`, label `cluster.x-k8s.io/cluster-name`), whose
 * key `value` holds a kubeconfig — or, when it exists, the product's own `<cluster>-taint-propagator-kubeconfig` next to
 * it (a dedicated, non-admin credential; 404 or 403 on it falls back to CAPI's). The kubeconfig is untrusted (anyone who may create a Secret in that namespace
 * could have written it): it goes through `kubeConfigFromUntrusted` — inline credentials only, no exec plugin,
 * auth provider or file path — before any client sees any of it. RestConfigs are cached per Secret
 * resourceVersion, so rotated credentials are picked up on the next `get` without rebuilding clients for
 * unchanged Secrets. The Secret is read through the product's HTTP client (kube-http.ts); its `data` is base64 text
 * on the wire, decoded here.
 */
import type { V1Secret } from '@kubernetes/client-node';
import { clusterKey, type ClusterRef } from '#shared/contract/cloud-event.ts';
import { ClusterCredentialsError } from '#shared/errors.ts';
import { statusOf } from './api-errors.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';
import type { RestConfig } from './rest-config.ts';
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

/** Hands out the credentials of each cluster: a workload cluster's RestConfig, or the management cluster's endpoint. */
export interface WorkloadKubeConfigs<E extends ClusterEndpoint = ClusterEndpoint> {
  /**
   * Returns the credentials of the cluster (the management cluster's endpoint in `self` mode); the same
   * instance while the Secret is unchanged, a new one after rotation. Throws ClusterCredentialsError
   * when the Secret is missing, unreadable or holds no usable kubeconfig, and RefusedKubeconfigError
   * when the kubeconfig uses a refused feature.
   */
  get(cluster: ClusterRef): Promise<E>;
}

/** Reads a Secret (a GET on the management cluster by default; replaceable in unit tests). */
export type SecretReader = (namespace: string, name: string) => Promise<V1Secret>;

/** Creates the per-cluster credentials cache over the management cluster's Secrets. */
export function workloadKubeConfigs<M extends ClusterEndpoint>(management: M, options: { readonly readSecret?: SecretReader } = {}): WorkloadKubeConfigs<M | RestConfig> {
  const read: SecretReader =
    options.readSecret ?? ((namespace, name) => kubeCall<V1Secret>(management, { method: 'GET', path: `/api/v1/namespaces/${seg(namespace)}/secrets/${seg(name)}` }));
  const cache = new Map<string, { resourceVersion: string; kc: RestConfig }>();
  return {
    async get(cluster: ClusterRef): Promise<M | RestConfig> {
      if (cluster.mode === 'self') return management;
      const key = clusterKey(cluster);
      const describeFailure = (name: string, err: unknown): ClusterCredentialsError => {
        // The API error holds the response body: report the status only, keep no cause.
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
