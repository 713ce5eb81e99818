/**
 * NodeStore over a cluster's API server. The write is one JSON merge patch that carries the
 * complete `spec.taints` (an atomic list), the changed annotations, and `metadata.resourceVersion`
 * as an optimistic-concurrency precondition: the API server answers 409 when anyone wrote the Node
 * since we read it, and we never overwrite their change. Calls go through the product's HTTP client
 * (kube-http.ts); the Node's JSON comes back as the server wrote it (times as RFC 3339 strings).
 */
import type { V1Node, V1NodeList } from '@kubernetes/client-node';
import type { NodeSnapshot, NodeTaintPatch } from '#shared/domain/snapshots.ts';
import { FIELD_MANAGER, type Taint } from '#shared/domain/taint.ts';
import { NodeNotFoundError, PatchConflictError } from '#shared/errors.ts';
import type { NodeStore } from '#shared/ports/node-store.ts';
import { statusOf, toKubeTime, toProductError } from './api-errors.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';

/** Field manager recorded in managedFields for our writes (the forwarder recognises its echo by it). */
export { FIELD_MANAGER } from '#shared/domain/taint.ts';

export class KubernetesNodeStore implements NodeStore {
  readonly #endpoint: ClusterEndpoint;

  constructor(endpoint: ClusterEndpoint) {
    this.#endpoint = endpoint;
  }

  async getNode(name: string): Promise<NodeSnapshot | undefined> {
    try {
      return toNodeSnapshot(await kubeCall<V1Node>(this.#endpoint, { method: 'GET', path: nodePath(name) }));
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw toProductError(`Reading Node ${name}`, error);
    }
  }

  async patchNodeTaints(name: string, patch: NodeTaintPatch): Promise<NodeSnapshot> {
    const body = {
      metadata: {
        resourceVersion: patch.resourceVersion,
        ...(Object.keys(patch.annotations).length > 0 ? { annotations: patch.annotations } : {}),
        ...(patch.labels && Object.keys(patch.labels).length > 0 ? { labels: patch.labels } : {}),
      },
      spec: { taints: patch.taints.map(toWireTaint) },
    };
    try {
      const written = await kubeCall<V1Node>(this.#endpoint, { method: 'PATCH', path: nodePath(name), query: { fieldManager: FIELD_MANAGER }, body, contentType: 'application/merge-patch+json' });
      return toNodeSnapshot(written);
    } catch (error) {
      const status = statusOf(error);
      if (status === 409) throw new PatchConflictError({ nodeName: name, resourceVersion: patch.resourceVersion, cause: error });
      if (status === 404) throw new NodeNotFoundError(name, error);
      throw toProductError(`Patching Node ${name}`, error);
    }
  }

  async listNodes(labelSelector: string): Promise<readonly NodeSnapshot[]> {
    try {
      const list = await kubeCall<V1NodeList>(this.#endpoint, { method: 'GET', path: '/api/v1/nodes', query: { labelSelector, limit: '500' } });
      return (list.items ?? []).map(toNodeSnapshot);
    } catch (error) {
      throw toProductError(`Listing Nodes with ${labelSelector}`, error);
    }
  }
}

function nodePath(name: string): string {
  return `/api/v1/nodes/${seg(name)}`;
}

/** Maps a V1Node to the domain's view. Its times are strings in the API's JSON (client-node's model says Date: both are accepted). */
export function toNodeSnapshot(node: V1Node): NodeSnapshot {
  const creationTimestamp = toKubeTime(node.metadata?.creationTimestamp);
  return {
    name: node.metadata?.name ?? '',
    uid: node.metadata?.uid ?? '',
    resourceVersion: node.metadata?.resourceVersion ?? '',
    ...(creationTimestamp ? { creationTimestamp } : {}),
    labels: node.metadata?.labels ?? {},
    annotations: node.metadata?.annotations ?? {},
    taints: (node.spec?.taints ?? []).map((t) => {
      const timeAdded = toKubeTime(t.timeAdded as Date | string | undefined);
      return { key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect, ...(timeAdded ? { timeAdded } : {}) };
    }),
    ...(node.spec?.providerID ? { providerID: node.spec.providerID } : {}),
  };
}

function toWireTaint(t: Taint): Record<string, string> {
  return { key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect, ...(t.timeAdded ? { timeAdded: t.timeAdded } : {}) };
}
