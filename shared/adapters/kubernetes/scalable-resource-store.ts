/** ScalableResourceStore in the Cluster API group version discovery chose; the write is a JSON merge patch. */
import { CAPI_GROUP, type CapiApiVersion } from '#shared/domain/capi-api.ts';
import type { ScalableKind } from '#shared/domain/autoscaler.ts';
import { PatchConflictError, TransientError } from '#shared/errors.ts';
import { FIELD_MANAGER } from '#shared/domain/taint.ts';
import { toScalableResourceFacts, type ScalableResourceFacts } from '#shared/model/views.ts';
import type { ScalableResourceStore } from '#shared/ports/scalable-resource-store.ts';
import { statusOf, toProductError } from './api-errors.ts';
import type { CapiApi } from './capi-discovery.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';

const PLURALS: Readonly<Record<ScalableKind, string>> = { MachineDeployment: 'machinedeployments', MachineSet: 'machinesets', MachinePool: 'machinepools' };

export class KubernetesScalableResourceStore implements ScalableResourceStore {
  readonly #endpoint: ClusterEndpoint;
  readonly #capi: CapiApi;

  constructor(endpoint: ClusterEndpoint, capi: CapiApi) {
    this.#endpoint = endpoint;
    this.#capi = capi;
  }

  async get(kind: ScalableKind, namespace: string, name: string): Promise<ScalableResourceFacts | undefined> {
    const version = await this.#capi.version();
    const operation = `Reading ${kind} ${namespace}/${name}`;
    let answer: unknown;
    try {
      answer = await kubeCall<unknown>(this.#endpoint, { method: 'GET', path: pathOf(kind, version, namespace, name) });
    } catch (error) {
      // Not found, or the kind not served in this version: nothing to annotate (a later event names it again).
      if (statusOf(error) === 404) return undefined;
      throw toProductError(operation, error);
    }
    // A 2xx that is no such object (a broken proxy, a hostile server) is no answer: transient, as in machine-store.ts.
    const resource = toScalableResourceFacts(kind, answer);
    if (!resource) throw new TransientError(operation, `the answer is not the ${kind}`);
    return resource;
  }

  async patchAnnotations(resource: ScalableResourceFacts, annotations: Readonly<Record<string, string | null>>): Promise<string> {
    const version = await this.#capi.version();
    const what = `${resource.kind} ${resource.namespace}/${resource.name}`;
    try {
      const written = await kubeCall<{ metadata?: { resourceVersion?: string } }>(this.#endpoint, {
        method: 'PATCH',
        path: pathOf(resource.kind, version, resource.namespace, resource.name),
        query: { fieldManager: FIELD_MANAGER },
        body: { metadata: { resourceVersion: resource.resourceVersion, annotations } },
        contentType: 'application/merge-patch+json',
      });
      return written.metadata?.resourceVersion ?? '';
    } catch (error) {
      const status = statusOf(error);
      if (status === 409 || status === 404) throw new PatchConflictError({ nodeName: what, object: what, resourceVersion: resource.resourceVersion, cause: error });
      throw toProductError(`Patching ${what}`, error);
    }
  }
}

function pathOf(kind: ScalableKind, version: CapiApiVersion, namespace: string, name: string): string {
  return `/apis/${CAPI_GROUP}/${version}/namespaces/${seg(namespace)}/${PLURALS[kind]}/${seg(name)}`;
}
