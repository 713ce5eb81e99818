/**
 * MachineStore over the management cluster: Machines, Clusters and MachinePools, read in the group version discovery
 * chose (capi-discovery.ts) and parsed into the views the forwarder's watches return too (`#shared/model/views.ts`).
 */
import { CAPI_GROUP, type CapiApiVersion } from '#shared/domain/capi-api.ts';
import type { ClusterView } from '#shared/domain/pause.ts';
import { CLUSTER_NAME_LABEL } from '#shared/domain/taint.ts';
import { TransientError } from '#shared/errors.ts';
import { toClusterFacts, toMachineFacts, toMachinePoolFacts, type MachineFacts, type MachinePoolFacts } from '#shared/model/views.ts';
import type { MachineStore } from '#shared/ports/machine-store.ts';
import { statusOf, toProductError } from './api-errors.ts';
import { isCollectionNotServed, type CapiApi } from './capi-discovery.ts';
import { kubeCall, kubeList, seg, type ClusterEndpoint } from './kube-http.ts';

/** Group, plural and kind of Machines; the version comes from discovery. */
export const MACHINES = { group: CAPI_GROUP, plural: 'machines', kind: 'Machine' } as const;
/** Group, plural and kind of Clusters (read for their `spec.paused`). */
export const CLUSTERS = { group: CAPI_GROUP, plural: 'clusters', kind: 'Cluster' } as const;
/** Group, plural and kind of MachinePools (the same group version as Machines, `exp` API included). */
export const MACHINE_POOLS = { group: CAPI_GROUP, plural: 'machinepools', kind: 'MachinePool' } as const;

type Resource = { readonly group: string; readonly plural: string; readonly kind: string };
type Parse<T> = (answer: unknown) => T | undefined;

/** Objects per list page: every answer stays far below kube-http's cap on an answer (MAX_RESPONSE_BYTES). */
const LIST_PAGE_SIZE = 500;

export class KubernetesMachineStore implements MachineStore {
  readonly #endpoint: ClusterEndpoint;
  readonly #capi: CapiApi;

  constructor(endpoint: ClusterEndpoint, capi: CapiApi) {
    this.#endpoint = endpoint;
    this.#capi = capi;
  }

  getMachine(namespace: string, name: string): Promise<MachineFacts | undefined> {
    return this.#get(MACHINES, namespace, name, toMachineFacts);
  }

  getCluster(namespace: string, name: string): Promise<ClusterView | undefined> {
    return this.#get(CLUSTERS, namespace, name, (o) => toClusterFacts(o) ?? { namespace, name, paused: false });
  }

  getMachinePool(namespace: string, name: string): Promise<MachinePoolFacts | undefined> {
    return this.#get(MACHINE_POOLS, namespace, name, toMachinePoolFacts);
  }

  async findMachineByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachineFacts | undefined> {
    const operation = `Listing Machines for Node ${nodeName}`;
    const items = await this.#listOfCluster(operation, MACHINES, clusterNamespace, clusterName);
    const matches = items.map(toMachineFacts).filter((m) => m?.nodeName === nodeName);
    return matches.length === 1 ? matches[0] : undefined;
  }

  async findMachinePoolByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachinePoolFacts | undefined> {
    const operation = `Listing MachinePools for Node ${nodeName}`;
    const items = await this.#listOfCluster(operation, MACHINE_POOLS, clusterNamespace, clusterName);
    const matches = items.map(toMachinePoolFacts).filter((p) => p?.nodeNames.includes(nodeName));
    return matches.length === 1 ? matches[0] : undefined;
  }

  async countMachines(namespace: string, labelSelector: string): Promise<number> {
    return this.#inServedVersion(`Counting Machines with ${labelSelector}`, async (version) => {
      const path = collectionPath(MACHINES, version, namespace);
      return (await kubeList<unknown>(this.#endpoint, path, { labelSelector }, LIST_PAGE_SIZE)).length;
    });
  }

  /** A 2xx that `parse` rejects (a broken proxy or a hostile server) is no answer: transient, as in node-store.ts. */
  async #get<T>(resource: Resource, namespace: string, name: string, parse: Parse<T>): Promise<T | undefined> {
    const operation = `Reading ${resource.kind} ${namespace}/${name}`;
    const object = await this.#inServedVersion(operation, async (version) => {
      const path = `${collectionPath(resource, version, namespace)}/${seg(name)}`;
      try {
        return await kubeCall<unknown>(this.#endpoint, { method: 'GET', path });
      } catch (error) {
        if (statusOf(error) === 404 && (resource === MACHINE_POOLS || !isCollectionNotServed(error))) return undefined;
        throw error;
      }
    });
    if (object === undefined) return undefined;
    const parsed = parse(object);
    if (parsed === undefined) {
      throw new TransientError(operation, `the answer is not the ${resource.kind} (a malformed one)`);
    }
    return parsed;
  }

  /** The objects of one Cluster (all Clusters' without a name) in a namespace ('' = all), page by page. */
  #listOfCluster(operation: string, resource: Resource, namespace: string, cluster?: string): Promise<unknown[]> {
    const query = { labelSelector: cluster ? `${CLUSTER_NAME_LABEL}=${cluster}` : undefined };
    return this.#inServedVersion(operation, async (version) => {
      const path = collectionPath(resource, version, namespace);
      try {
        return await kubeList<unknown>(this.#endpoint, path, query, LIST_PAGE_SIZE);
      } catch (error) {
        if (resource === MACHINE_POOLS && statusOf(error) === 404) return []; // MachinePools not served: no pool
        throw error;
      }
    });
  }

  /** Runs `read` in the discovered version; after a 404 for the collection (CAPI upgraded or removed), once more. */
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

/** The REST path of a custom resource's collection in a namespace ('' = all namespaces). */
function collectionPath(resource: Resource, version: CapiApiVersion, namespace: string): string {
  const scope = namespace === '' ? '' : `/namespaces/${seg(namespace)}`;
  return `/apis/${resource.group}/${version}${scope}/${resource.plural}`;
}
