/**
 * NodeStore over a cluster's API server. The write is one JSON merge patch that carries the
 * complete `spec.taints` (an atomic list), the changed annotations, and `metadata.resourceVersion`
 * as an optimistic-concurrency precondition: the API server answers 409 when anyone wrote the Node
 * since we read it, and we never overwrite their change. A write planned from a claimed state is a
 * JSON patch (RFC 6902) whose `test` operations make the API server check the claim first: it
 * answers 422 and writes nothing when any tested field differs. Calls go through the product's HTTP client
 * (kube-http.ts); the Node's JSON comes back as the server wrote it (times as RFC 3339 strings).
 */
import type { V1Node } from '@kubernetes/client-node';
import type { ClaimedState } from '#shared/domain/node-state.ts';
import type { NodeSnapshot, NodeTaintPatch } from '#shared/domain/snapshots.ts';
import { FIELD_MANAGER, OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION, type Taint } from '#shared/domain/taint.ts';
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
      metadata: { resourceVersion: patch.resourceVersion, ...(Object.keys(patch.annotations).length > 0 ? { annotations: patch.annotations } : {}) },
      spec: { taints: patch.taints.map(toWireTaint) },
    };
    try {
      const written = await this.#patch(name, body, 'application/merge-patch+json');
      return toNodeSnapshot(written);
    } catch (error) {
      const status = statusOf(error);
      if (status === 409) throw new PatchConflictError({ nodeName: name, resourceVersion: patch.resourceVersion, cause: error });
      if (status === 404) throw new NodeNotFoundError(name, error);
      throw toProductError(`Patching Node ${name}`, error);
    }
  }

  async patchClaimedNode(name: string, claim: ClaimedState, patch: NodeTaintPatch): Promise<NodeSnapshot | undefined> {
    try {
      const written = await this.#patch(name, claimedPatch(claim, patch), 'application/json-patch+json');
      return toNodeSnapshot(written);
    } catch (error) {
      const status = statusOf(error);
      // A failed `test` operation: the Node is not as claimed, and nothing was written.
      if (status === 422) return undefined;
      if (status === 409) throw new PatchConflictError({ nodeName: name, resourceVersion: claim.resourceVersion, cause: error });
      if (status === 404) throw new NodeNotFoundError(name, error);
      throw toProductError(`Patching Node ${name}`, error);
    }
  }

  #patch(name: string, body: unknown, contentType: 'application/merge-patch+json' | 'application/json-patch+json'): Promise<V1Node> {
    return kubeCall<V1Node>(this.#endpoint, { method: 'PATCH', path: nodePath(name), query: { fieldManager: FIELD_MANAGER }, body, contentType });
  }
}

function nodePath(name: string): string {
  return `/api/v1/nodes/${seg(name)}`;
}

/**
 * The JSON patch of a write planned from `claim`: first a `test` of every field the plan read (a field claimed absent
 * is tested against null, which holds only when it is absent), then the write. A Node without any annotation fails
 * the annotation tests (their parent is missing), so it is read and written the ordinary way, unless the claim comes
 * from a read that found no annotation (`withoutAnnotations`): then the whole map is tested absent and added.
 */
export function claimedPatch(claim: ClaimedState, patch: NodeTaintPatch): Record<string, unknown>[] {
  const annotation = (key: string) => `/metadata/annotations/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
  const ops: Record<string, unknown>[] = [
    { op: 'test', path: '/metadata/resourceVersion', value: claim.resourceVersion },
    { op: 'test', path: '/metadata/creationTimestamp', value: claim.creationTimestamp ?? null },
    { op: 'test', path: '/spec/taints', value: claim.taints.length > 0 ? claim.taints : null },
  ];
  if (claim.withoutAnnotations) {
    const added = Object.fromEntries(Object.entries(patch.annotations).filter((e): e is [string, string] => e[1] !== null));
    ops.push({ op: 'test', path: '/metadata/annotations', value: null }, { op: 'add', path: '/spec/taints', value: patch.taints.map(toWireTaint) });
    if (Object.keys(added).length > 0) ops.push({ op: 'add', path: '/metadata/annotations', value: added });
    return ops;
  }
  ops.push(
    { op: 'test', path: annotation(TRACKING_ANNOTATION), value: claim.trackingAnnotation ?? null },
    { op: 'test', path: annotation(OWN_TRACKING_ANNOTATION), value: claim.ownTrackingAnnotation ?? null },
    { op: 'add', path: '/spec/taints', value: patch.taints.map(toWireTaint) },
  );
  for (const [key, value] of Object.entries(patch.annotations)) {
    ops.push(value === null ? { op: 'remove', path: annotation(key) } : { op: 'add', path: annotation(key), value });
  }
  return ops;
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
