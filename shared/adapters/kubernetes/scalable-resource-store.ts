/**
 * ScalableResourceStore over the management cluster: MachineDeployments, MachineSets and MachinePools in the Cluster
 * API group version discovery chose, read at their REST paths, and a JSON merge patch of annotations carrying
 * `metadata.resourceVersion` (the API server answers 409 when anyone wrote the resource since it was read).
 */
import { capiApiVersionString, CAPI_GROUP, type CapiApiVersion } from '#shared/domain/capi-api.ts';
import type { ScalableKind, ScalableResourceSnapshot } from '#shared/domain/autoscaler.ts';
import { PatchConflictError } from '#shared/errors.ts';
import { CLUSTER_NAME_LABEL, FIELD_MANAGER } from '#shared/domain/taint.ts';
import { obj, objectParts, str, stringMap } from '#shared/model/json.ts';
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

  async get(kind: ScalableKind, namespace: string, name: string): Promise<ScalableResourceSnapshot | undefined> {
    const version = await this.#capi.version();
    try {
      const obj = await kubeCall<unknown>(this.#endpoint, { method: 'GET', path: pathOf(kind, version, namespace, name) });
      return toScalableSnapshot(kind, obj, version);
    } catch (error) {
      // Not found, or the kind not served in this version: nothing to annotate (a later event names it again).
      if (statusOf(error) === 404) return undefined;
      throw toProductError(`Reading ${kind} ${namespace}/${name}`, error);
    }
  }

  async patchAnnotations(resource: ScalableResourceSnapshot, annotations: Readonly<Record<string, string | null>>): Promise<string> {
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

/** The custom object (read in `version`) as the reconcile reads it. */
export function toScalableSnapshot(kind: ScalableKind, resource: unknown, version: CapiApiVersion): ScalableResourceSnapshot {
  const { spec, metadata, ...p } = objectParts(resource);
  const template = obj(spec.template);
  const templateMeta = obj(template.metadata);
  const owners: unknown[] = Array.isArray(metadata.ownerReferences) ? metadata.ownerReferences : [];
  // spec.clusterName is required by Cluster API; the label (which Cluster API sets too) covers an object without it.
  const clusterName = str(spec.clusterName) ?? str(p.labels[CLUSTER_NAME_LABEL]);
  return {
    kind,
    apiVersion: capiApiVersionString(version),
    namespace: p.namespace,
    name: p.name,
    uid: p.uid,
    resourceVersion: p.resourceVersion,
    annotations: p.annotations,
    templateAnnotations: stringMap(templateMeta.annotations),
    templateLabels: stringMap(templateMeta.labels),
    specTaints: obj(template.spec).taints,
    ownedByMachineDeployment: owners.some((o) => obj(o).kind === 'MachineDeployment'),
    ...(clusterName ? { clusterName } : {}),
    deleting: p.deleting,
  };
}
