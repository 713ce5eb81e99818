/**
 * MachineStore over the management cluster: Cluster API Machines, v1beta2 (the first version with
 * `spec.taints`), read as custom objects.
 */
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import type { MachineSnapshot } from '#shared/domain/snapshots.ts';
import { CLUSTER_NAME_LABEL } from '#shared/domain/taint.ts';
import type { MachineStore } from '#shared/ports/machine-store.ts';
import { statusOf, toProductError } from './api-errors.ts';

export const MACHINE_API = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'machines' } as const;

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
  spec?: { clusterName?: string; taints?: unknown };
  status?: { nodeRef?: { name?: string } };
}

export class KubernetesMachineStore implements MachineStore {
  readonly #api: CustomObjectsApi;

  constructor(kubeConfig: KubeConfig) {
    this.#api = kubeConfig.makeApiClient(CustomObjectsApi);
  }

  async getMachine(namespace: string, name: string): Promise<MachineSnapshot | undefined> {
    try {
      const machine = (await this.#api.getNamespacedCustomObject({ ...MACHINE_API, namespace, name })) as MachineObject;
      return toMachineSnapshot(machine);
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw toProductError(`Reading Machine ${namespace}/${name}`, error);
    }
  }

  async findMachineByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachineSnapshot | undefined> {
    const labelSelector = clusterName ? `${CLUSTER_NAME_LABEL}=${clusterName}` : undefined;
    try {
      const list = (clusterNamespace === ''
        ? await this.#api.listClusterCustomObject({ ...MACHINE_API, ...(labelSelector ? { labelSelector } : {}) })
        : await this.#api.listNamespacedCustomObject({ ...MACHINE_API, namespace: clusterNamespace, ...(labelSelector ? { labelSelector } : {}) })) as { items?: MachineObject[] };
      const matches = (list.items ?? []).filter((m) => m.status?.nodeRef?.name === nodeName);
      return matches.length === 1 ? toMachineSnapshot(matches[0] as MachineObject) : undefined;
    } catch (error) {
      throw toProductError(`Listing Machines for Node ${nodeName}`, error);
    }
  }
}

/** Maps the Machine custom object to the domain's view. */
export function toMachineSnapshot(machine: MachineObject): MachineSnapshot {
  const m = machine.metadata ?? {};
  return {
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
    deleting: m.deletionTimestamp !== undefined && m.deletionTimestamp !== null,
  };
}
