/**
 * PodStore over a workload cluster's API server: the pods of one Node by field selector (`spec.nodeName`, served from
 * the API server's index, one page of at most 500: a Node holds at most 110 pods by default), and an eviction through
 * the `pods/eviction` subresource, the one path on which the API server consults PodDisruptionBudgets.
 */
import type { V1Pod, V1PodList } from '@kubernetes/client-node';
import type { PodOnNode } from '#shared/domain/eviction-preview.ts';
import type { EvictionAnswer, PodStore } from '#shared/ports/pod-store.ts';
import { statusOf, toKubeTime, toProductError } from './api-errors.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';

export class KubernetesPodStore implements PodStore {
  readonly #endpoint: ClusterEndpoint;

  constructor(endpoint: ClusterEndpoint) {
    this.#endpoint = endpoint;
  }

  async listPodsOnNode(nodeName: string): Promise<readonly PodOnNode[]> {
    try {
      const list = await kubeCall<V1PodList>(this.#endpoint, { method: 'GET', path: '/api/v1/pods', query: { fieldSelector: `spec.nodeName=${nodeName}`, limit: '500' } });
      return (list.items ?? []).map(toPodOnNode);
    } catch (error) {
      throw toProductError(`Listing the pods of Node ${nodeName}`, error);
    }
  }

  async evictPod(namespace: string, name: string): Promise<EvictionAnswer> {
    const body = { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace } };
    try {
      await kubeCall(this.#endpoint, { method: 'POST', path: `/api/v1/namespaces/${seg(namespace)}/pods/${seg(name)}/eviction`, body });
      return 'evicted';
    } catch (error) {
      const status = statusOf(error);
      if (status === 404) return 'gone';
      if (status === 429) return 'refused';
      throw toProductError(`Evicting pod ${namespace}/${name}`, error);
    }
  }
}

/** Maps a V1Pod to what the eviction rules read. Times are strings in the API's JSON. */
export function toPodOnNode(pod: V1Pod): PodOnNode {
  const deletionTimestamp = toKubeTime(pod.metadata?.deletionTimestamp as Date | string | undefined);
  const owner = pod.metadata?.ownerReferences?.find((o) => o.controller === true);
  return {
    namespace: pod.metadata?.namespace ?? '',
    name: pod.metadata?.name ?? '',
    tolerations: (pod.spec?.tolerations ?? []).map((t) => ({ ...t })),
    ...(pod.status?.phase ? { phase: pod.status.phase } : {}),
    ...(deletionTimestamp ? { deletionTimestamp } : {}),
    ...(owner ? { ownerKind: owner.kind } : {}),
  };
}
