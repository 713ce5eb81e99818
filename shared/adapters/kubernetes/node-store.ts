/**
 * NodeStore over a cluster's API server. The write is one JSON merge patch that carries the complete `spec.taints` (an
 * atomic list), the changed annotations, and `metadata.resourceVersion` as a precondition: the API server answers 409
 * when anyone wrote the Node since we read it, and we never overwrite their change.
 */
import type { V1NodeList } from '@kubernetes/client-node';
import type { NodeTaintPatch } from '#shared/domain/taint-plan.ts';
import { FIELD_MANAGER, type Taint } from '#shared/domain/taint.ts';
import { NodeNotFoundError, PatchConflictError, TransientError } from '#shared/errors.ts';
import { toNodeFacts, type NodeFacts, type NodeWithTaints } from '#shared/model/views.ts';
import type { NodeStore } from '#shared/ports/node-store.ts';
import { statusOf, toProductError } from './api-errors.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';

export class KubernetesNodeStore implements NodeStore {
  readonly #endpoint: ClusterEndpoint;

  constructor(endpoint: ClusterEndpoint) {
    this.#endpoint = endpoint;
  }

  async getNode(name: string): Promise<NodeWithTaints | undefined> {
    let answer: unknown;
    try {
      answer = await kubeCall<unknown>(this.#endpoint, { method: 'GET', path: nodePath(name) });
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw toProductError(`Reading Node ${name}`, error);
    }
    const node = answeredNode(`Reading Node ${name}`, name, answer);
    // Taints it cannot read are no answer either: the write carries the complete list, so nothing is planned from them.
    if (!node.taints) throw new TransientError(`Reading Node ${name}`, 'its spec.taints is not a list of taints');
    return { ...node, taints: node.taints };
  }

  async patchNodeTaints(name: string, patch: NodeTaintPatch): Promise<NodeFacts> {
    const body = {
      metadata: {
        resourceVersion: patch.resourceVersion,
        ...(Object.keys(patch.annotations).length > 0 ? { annotations: patch.annotations } : {}),
        ...(patch.labels && Object.keys(patch.labels).length > 0 ? { labels: patch.labels } : {}),
      },
      spec: { taints: patch.taints.map(toWireTaint) },
    };
    let written: unknown;
    try {
      written = await kubeCall<unknown>(this.#endpoint, { method: 'PATCH', path: nodePath(name), query: { fieldManager: FIELD_MANAGER }, body, contentType: 'application/merge-patch+json' });
    } catch (error) {
      const status = statusOf(error);
      if (status === 409) throw new PatchConflictError({ nodeName: name, resourceVersion: patch.resourceVersion, cause: error });
      if (status === 404) throw new NodeNotFoundError(name, error);
      throw toProductError(`Patching Node ${name}`, error);
    }
    return answeredNode(`Patching Node ${name}`, name, written);
  }

  async listNodes(labelSelector: string): Promise<readonly NodeFacts[]> {
    try {
      const list = await kubeCall<V1NodeList>(this.#endpoint, { method: 'GET', path: '/api/v1/nodes', query: { labelSelector, limit: '500' } });
      return (list.items ?? []).flatMap((n) => toNodeFacts(n) ?? []);
    } catch (error) {
      throw toProductError(`Listing Nodes with ${labelSelector}`, error);
    }
  }
}

/** The Node a GET or PATCH of `name` answered; any other 2xx is transient, for backoff (docs/hostile-clusters.md). */
function answeredNode(operation: string, name: string, answer: unknown): NodeFacts {
  const node = toNodeFacts(answer);
  if (node?.name !== name) throw new TransientError(operation, `the answer is not the Node ${JSON.stringify(name)} (${answer === undefined ? 'an empty body' : 'another object'})`);
  return node;
}

function nodePath(name: string): string {
  return `/api/v1/nodes/${seg(name)}`;
}

function toWireTaint(t: Taint): Record<string, string> {
  return { key: t.key, ...(t.value ? { value: t.value } : {}), effect: t.effect, ...(t.timeAdded ? { timeAdded: t.timeAdded } : {}) };
}
