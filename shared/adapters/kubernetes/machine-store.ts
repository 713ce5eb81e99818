/**
 * MachineStore over the management cluster: Cluster API Machines, read as custom objects in the group version that
 * discovery chose (v1beta2, else v1beta1; see `capi-discovery.ts`). Both map to the same MachineSnapshot. A 404 for the
 * whole collection (the version is no longer served: Cluster API upgraded or removed) makes discovery ask again and
 * the read is retried once in the new version; a 404 for one Machine means it is gone. Reads go through the product's
 * HTTP client (kube-http.ts), at the custom objects' REST paths.
 */
import { capiApiVersionString, CAPI_GROUP, type CapiApiVersion } from '#shared/domain/capi-api.ts';
import type { ClusterView } from '#shared/domain/pause.ts';
import type { MachinePoolSnapshot, MachineSnapshot } from '#shared/domain/snapshots.ts';
import { CLUSTER_NAME_LABEL } from '#shared/domain/taint.ts';
import type { MachineStore } from '#shared/ports/machine-store.ts';
import { statusOf, toProductError } from './api-errors.ts';
import { isCollectionNotServed, type CapiApi } from './capi-discovery.ts';
import { KubeApiError, kubeCall, kubeList, seg, type ClusterEndpoint } from './kube-http.ts';

/** Group and plural of Machines; the version comes from discovery. */
export const MACHINES = { group: CAPI_GROUP, plural: 'machines' } as const;
/** Group and plural of Clusters (read for their `spec.paused`). */
export const CLUSTERS = { group: CAPI_GROUP, plural: 'clusters' } as const;
/** Group and plural of MachinePools (the same group version as Machines, `exp` API included). */
export const MACHINE_POOLS = { group: CAPI_GROUP, plural: 'machinepools' } as const;

interface MachinePoolObject {
  metadata?: MachineObject['metadata'];
  spec?: { clusterName?: string; template?: { metadata?: { annotations?: Record<string, string> }; spec?: { taints?: unknown } } };
  status?: { nodeRefs?: { name?: string }[] };
}

interface MachineObject {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  spec?: { clusterName?: string; taints?: unknown; providerID?: string };
  /** v1beta2: `{name}`; v1beta1: a full ObjectReference (`{apiVersion, kind, name, uid}`). Only the name is read. */
  status?: { nodeRef?: { name?: string } };
}

/** Objects per list page: every answer stays far below kube-http's cap on an answer (MAX_RESPONSE_BYTES). */
export const LIST_PAGE_SIZE = 500;

export class KubernetesMachineStore implements MachineStore {
  readonly #endpoint: ClusterEndpoint;
  readonly #capi: CapiApi;
  readonly #pageSize: number;

  constructor(endpoint: ClusterEndpoint, capi: CapiApi, options: { readonly listPageSize?: number } = {}) {
    this.#endpoint = endpoint;
    this.#capi = capi;
    this.#pageSize = options.listPageSize ?? LIST_PAGE_SIZE;
  }

  async getMachine(namespace: string, name: string): Promise<MachineSnapshot | undefined> {
    return this.#inServedVersion(`Reading Machine ${namespace}/${name}`, async (version) => {
      try {
        const machine = await kubeCall<MachineObject>(this.#endpoint, { method: 'GET', path: objectPath(MACHINES, version, namespace, name) });
        return toMachineSnapshot(machine, version);
      } catch (error) {
        if (statusOf(error) === 404 && !isCollectionNotServed(404, error instanceof KubeApiError ? error.body : undefined)) return undefined;
        throw error;
      }
    });
  }

  async getCluster(namespace: string, name: string): Promise<ClusterView | undefined> {
    return this.#inServedVersion(`Reading Cluster ${namespace}/${name}`, async (version) => {
      try {
        const cluster = await kubeCall<{ spec?: { paused?: unknown } }>(this.#endpoint, { method: 'GET', path: objectPath(CLUSTERS, version, namespace, name) });
        return { namespace, name, paused: cluster.spec?.paused === true };
      } catch (error) {
        if (statusOf(error) === 404 && !isCollectionNotServed(404, error instanceof KubeApiError ? error.body : undefined)) return undefined;
        throw error;
      }
    });
  }

  async findMachineByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachineSnapshot | undefined> {
    return this.#inServedVersion(`Listing Machines for Node ${nodeName}`, async (version) => {
      const items = await this.#listOfCluster<MachineObject>(MACHINES, version, clusterNamespace, clusterName);
      const matches = items.filter((m) => m.status?.nodeRef?.name === nodeName);
      return matches.length === 1 ? toMachineSnapshot(matches[0] as MachineObject, version) : undefined;
    });
  }

  async countMachines(namespace: string, labelSelector: string): Promise<number> {
    return this.#inServedVersion(`Counting Machines with ${labelSelector}`, async (version) => {
      const path = `/apis/${MACHINES.group}/${version}/namespaces/${seg(namespace)}/${MACHINES.plural}`;
      return (await kubeList<MachineObject>(this.#endpoint, path, { labelSelector }, this.#pageSize)).length;
    });
  }

  async getMachinePool(namespace: string, name: string): Promise<MachinePoolSnapshot | undefined> {
    return this.#inServedVersion(`Reading MachinePool ${namespace}/${name}`, async (version) => {
      try {
        const pool = await kubeCall<MachinePoolObject>(this.#endpoint, { method: 'GET', path: objectPath(MACHINE_POOLS, version, namespace, name) });
        return toMachinePoolSnapshot(pool, version);
      } catch (error) {
        // Not found, or MachinePools not served at all (a Cluster API without the CRD): no pool owns the Node.
        if (statusOf(error) === 404) return undefined;
        throw error;
      }
    });
  }

  async findMachinePoolByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachinePoolSnapshot | undefined> {
    return this.#inServedVersion(`Listing MachinePools for Node ${nodeName}`, async (version) => {
      let items: MachinePoolObject[];
      try {
        items = await this.#listOfCluster<MachinePoolObject>(MACHINE_POOLS, version, clusterNamespace, clusterName);
      } catch (error) {
        if (statusOf(error) === 404) return undefined; // MachinePools not served: no pool owns the Node
        throw error;
      }
      const matches = items.filter((p) => (p.status?.nodeRefs ?? []).some((r) => r.name === nodeName));
      return matches.length === 1 ? toMachinePoolSnapshot(matches[0] as MachinePoolObject, version) : undefined;
    });
  }

  /**
   * The objects of one Cluster (label `cluster.x-k8s.io/cluster-name`; every Cluster without a name) in a namespace
   * ('' = all), page by page: a cluster's thousands of Machines never come in one answer.
   */
  async #listOfCluster<T>(resource: { group: string; plural: string }, version: CapiApiVersion, namespace: string, clusterName: string | undefined): Promise<T[]> {
    const path = namespace === '' ? `/apis/${resource.group}/${version}/${resource.plural}` : `/apis/${resource.group}/${version}/namespaces/${seg(namespace)}/${resource.plural}`;
    return kubeList<T>(this.#endpoint, path, { labelSelector: clusterName ? `${CLUSTER_NAME_LABEL}=${clusterName}` : undefined }, this.#pageSize);
  }

  /** Runs `read` in the discovered version; after a 404 for the collection, once more in the re-discovered one. */
  async #inServedVersion<R>(operation: string, read: (version: CapiApiVersion) => Promise<R>): Promise<R> {
    let version = await this.#capi.version();
    for (let attempt = 1; ; attempt++) {
      try {
        return await read(version);
      } catch (error) {
        if (statusOf(error) !== 404 || attempt > 1) throw toProductError(operation, error);
        this.#capi.notServed(version);
        version = await this.#capi.version();
      }
    }
  }
}

/** The REST path of one namespaced custom object. */
function objectPath(resource: { group: string; plural: string }, version: CapiApiVersion, namespace: string, name: string): string {
  return `/apis/${resource.group}/${version}/namespaces/${seg(namespace)}/${resource.plural}/${seg(name)}`;
}

/** Maps the Machine custom object (read in `version`) to the domain's view. */
export function toMachineSnapshot(machine: MachineObject, version: CapiApiVersion): MachineSnapshot {
  const m = machine.metadata ?? {};
  return {
    apiVersion: capiApiVersionString(version),
    namespace: m.namespace ?? '',
    name: m.name ?? '',
    uid: m.uid ?? '',
    resourceVersion: m.resourceVersion ?? '',
    ...(m.creationTimestamp ? { creationTimestamp: String(m.creationTimestamp) } : {}),
    labels: m.labels ?? {},
    annotations: m.annotations ?? {},
    specTaints: machine.spec?.taints,
    ...(machine.spec?.clusterName ? { clusterName: machine.spec.clusterName } : {}),
    ...(machine.status?.nodeRef?.name ? { nodeName: machine.status.nodeRef.name } : {}),
    ...(machine.spec?.providerID ? { providerID: machine.spec.providerID } : {}),
    deleting: m.deletionTimestamp !== undefined && m.deletionTimestamp !== null,
  };
}

/** Maps the MachinePool custom object (read in `version`) to the domain's view. */
export function toMachinePoolSnapshot(pool: MachinePoolObject, version: CapiApiVersion): MachinePoolSnapshot {
  const m = pool.metadata ?? {};
  const nodeNames = (pool.status?.nodeRefs ?? []).map((r) => r.name).filter((n): n is string => typeof n === 'string' && n !== '');
  return {
    apiVersion: capiApiVersionString(version),
    namespace: m.namespace ?? '',
    name: m.name ?? '',
    uid: m.uid ?? '',
    resourceVersion: m.resourceVersion ?? '',
    labels: m.labels ?? {},
    annotations: m.annotations ?? {},
    templateAnnotations: pool.spec?.template?.metadata?.annotations ?? {},
    specTaints: pool.spec?.template?.spec?.taints,
    ...(pool.spec?.clusterName ? { clusterName: pool.spec.clusterName } : {}),
    nodeNames,
    deleting: m.deletionTimestamp !== undefined && m.deletionTimestamp !== null,
  };
}
