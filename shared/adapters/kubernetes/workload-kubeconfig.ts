/**
 * Workload-cluster credentials: key `value` of the Secret `<cluster>-taint-propagator-kubeconfig`, else CAPI's
 * `<cluster>-kubeconfig` (docs/security.md), read as untrusted. Cached per Secret resourceVersion, so that rotated
 * credentials are picked up on the next `get` without rebuilding clients for unchanged Secrets.
 */
import type { V1Secret } from '@kubernetes/client-node';
import { clusterKey, type ClusterRef } from '#shared/contract/cloud-event.ts';
import { ClusterCredentialsError } from '#shared/errors.ts';
import { statusOf } from './api-errors.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';
import type { RestConfig } from './rest-config.ts';
import { kubeConfigFromUntrusted } from './untrusted-kubeconfig.ts';

const KUBECONFIG_SECRET_KEY = 'value';

/** Hands out the credentials of each cluster: a workload cluster's RestConfig, or the management cluster's endpoint. */
export interface WorkloadKubeConfigs<E extends ClusterEndpoint = ClusterEndpoint> {
  /**
   * Returns the credentials of the cluster (the management cluster's endpoint in `self` mode), the same instance while
   * the Secret is unchanged. Throws ClusterCredentialsError or RefusedKubeconfigError (untrusted-kubeconfig.ts).
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
      const readOrFail = (name: string, tolerated: readonly number[]): Promise<V1Secret | undefined> =>
        read(cluster.namespace, name).catch((err: unknown) => {
          // The API error holds the response body: report the status only, keep no cause.
          const status = statusOf(err);
          if (status !== undefined && tolerated.includes(status)) return undefined;
          const where = `Secret ${cluster.namespace}/${name}`;
          throw new ClusterCredentialsError(key, status === 404 ? `${where} not found` : status !== undefined ? `reading ${where}: HTTP ${status}` : `reading ${where} failed`);
        });
      // The dedicated Secret first; 404 or 403 on it falls back to CAPI's.
      let secretName = `${cluster.name}-taint-propagator-kubeconfig`;
      let secret = await readOrFail(secretName, [404, 403]);
      if (!secret) secret = await readOrFail((secretName = `${cluster.name}-kubeconfig`), []);
      if (!secret) throw new ClusterCredentialsError(key, `Secret ${cluster.namespace}/${secretName} not found`);
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
