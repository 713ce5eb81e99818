/**
 * Developer convenience for local runs: creates the product's state namespace when the cluster lacks it
 * (an installation creates it with the RBAC manifests; the deployed functions never create namespaces).
 */
import { ApiException, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';

/** Creates `namespace` unless it exists; returns true when it was created. */
export async function ensureNamespace(kc: KubeConfig, namespace: string): Promise<boolean> {
  const api = kc.makeApiClient(CoreV1Api);
  try {
    await api.readNamespace({ name: namespace });
    return false;
  } catch (error) {
    if (!(error instanceof ApiException) || error.code !== 404) throw error;
  }
  try {
    await api.createNamespace({ body: { metadata: { name: namespace } } });
    return true;
  } catch (error) {
    if (error instanceof ApiException && error.code === 409) return false;
    throw error;
  }
}
