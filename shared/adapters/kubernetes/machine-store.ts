/**
 * MachineStore over the management cluster: Cluster API Machines, read as custom objects in the group version that
 * discovery chose (v1beta2, else v1beta1; see `capi-discovery.ts`), parsed into the views the forwarder's watches
 * return too (`#shared/model/views.ts`). A 404 for the
 * whole collection (the version is no longer served: Cluster API upgraded or removed) makes discovery ask again and
 * the read is retried once in the new version; a 404 for one Machine means it is gone. Reads go through the product's
 * HTTP client (kube-http.ts), at the custom objects' REST paths.
 */
import { CAPI_GROUP, type CapiApiVersion } from '#shared/domain/capi-api.ts';
import type { ClusterView } from '#shared/domain/pause.ts';
import { CLUSTER_NAME_LABEL } from '#shared/domain/taint.ts';
import { TransientError } from '#shared/errors.ts';
import { toClusterFacts, toMachineFacts, toMachinePoolFacts, type MachineFacts, type MachinePoolFacts } from '#shared/model/views.ts';
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

  async getMachine(namespace: string, name: string): Promise<MachineFacts | undefined> {
    const operation = `Reading Machine ${namespace}/${name}`;
    return this.#inServedVersion(operation, async (version) => {
      try {
        const machine = await kubeCall<unknown>(this.#endpoint, { method: 'GET', path: objectPath(MACHINES, version, namespace, name) });
        return toMachineFacts(machine) ?? notAnObject(operation, machine);
      } catch (error) {
        if (statusOf(error) === 404 && !isCollectionNotServed(404, error instanceof KubeApiError ? error.body : undefined)) return undefined;
        throw error;
      }
    });
  }

  async getCluster(namespace: string, name: string): Promise<ClusterView | undefined> {
    return this.#inServedVersion(`Reading Cluster ${namespace}/${name}`, async (version) => {
      try {
        const cluster = await kubeCall<unknown>(this.#endpoint, { method: 'GET', path: objectPath(CLUSTERS, version, namespace, name) });
        return toClusterFacts(cluster) ?? { namespace, name, paused: false };
      } catch (error) {
        if (statusOf(error) === 404 && !isCollectionNotServed(404, error instanceof KubeApiError ? error.body : undefined)) return undefined;
        throw error;
      }
    });
  }

  async findMachineByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachineFacts | undefined> {
    return this.#inServedVersion(`Listing Machines for Node ${nodeName}`, async (version) => {
      const items = await this.#listOfCluster<unknown>(MACHINES, version, clusterNamespace, clusterName);
      const matches = items.map(toMachineFacts).filter((m) => m?.nodeName === nodeName);
      return matches.length === 1 ? matches[0] : undefined;
    });
  }

  async countMachines(namespace: string, labelSelector: string): Promise<number> {
    return this.#inServedVersion(`Counting Machines with ${labelSelector}`, async (version) => {
      const path = `/apis/${MACHINES.group}/${version}/namespaces/${seg(namespace)}/${MACHINES.plural}`;
      return (await kubeList<unknown>(this.#endpoint, path, { labelSelector }, this.#pageSize)).length;
    });
  }

  async getMachinePool(namespace: string, name: string): Promise<MachinePoolFacts | undefined> {
    const operation = `Reading MachinePool ${namespace}/${name}`;
    return this.#inServedVersion(operation, async (version) => {
      try {
        const pool = await kubeCall<unknown>(this.#endpoint, { method: 'GET', path: objectPath(MACHINE_POOLS, version, namespace, name) });
        return toMachinePoolFacts(pool) ?? notAnObject(operation, pool);
      } catch (error) {
        // Not found, or MachinePools not served at all (a Cluster API without the CRD): no pool owns the Node.
        if (statusOf(error) === 404) return undefined;
        throw error;
      }
    });
  }

  async findMachinePoolByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachinePoolFacts | undefined> {
    return this.#inServedVersion(`Listing MachinePools for Node ${nodeName}`, async (version) => {
      let items: unknown[];
      try {
        items = await this.#listOfCluster<unknown>(MACHINE_POOLS, version, clusterNamespace, clusterName);
      } catch (error) {
        if (statusOf(error) === 404) return undefined; // MachinePools not served: no pool owns the Node
        throw error;
      }
      const matches = items.map(toMachinePoolFacts).filter((p) => p?.nodeNames.includes(nodeName));
      return matches.length === 1 ? matches[0] : undefined;
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

/**
 * A 2xx whose body is no object of the kind (no name, uid or resourceVersion: a broken proxy or a hostile server) is no
 * answer from the cluster: a transient failure, as in node-store.ts.
 */
function notAnObject(operation: string, answer: unknown): never {
  throw new TransientError(operation, `the answer is not the object (${answer === undefined ? 'an empty body' : 'a malformed one'})`);
}
