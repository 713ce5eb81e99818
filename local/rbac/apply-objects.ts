/**
 * Creates Kubernetes objects as `kubectl create` would, leaving any that already exists as it is: the product's RBAC
 * (infra/rbac/*.yaml) and its kubeconfig Secret grants, for the deployed-form tests and benchmarks.
 */
import { readFileSync } from 'node:fs';
import { KubernetesObjectApi, loadAllYaml, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';

/** Creates the objects in order (an existing one, 409, is left as it is). */
export async function applyObjects(kc: KubeConfig, docs: readonly KubernetesObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const doc of docs) {
    if (!doc) continue;
    try {
      await api.create(doc);
    } catch (e) {
      if ((e as { code?: number }).code !== 409) throw e;
    }
  }
}

/** Creates the objects of a YAML file (every document of it). */
export async function applyYamlFile(kc: KubeConfig, path: string | URL): Promise<void> {
  await applyObjects(kc, loadAllYaml(readFileSync(path, 'utf8')) as KubernetesObject[]);
}
