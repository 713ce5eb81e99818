import type { ClusterView } from '#shared/domain/pause.ts';
import type { MachineFacts, MachinePoolFacts } from '#shared/model/views.ts';

/** Reads Cluster API Clusters, Machines and MachinePools from the management cluster. */
export interface MachineStore {
  /** Returns the Machine, or undefined when it does not exist. */
  getMachine(namespace: string, name: string): Promise<MachineFacts | undefined>;
  /** Returns the Machine whose `status.nodeRef.name` is `nodeName` in the given cluster, if exactly one. */
  findMachineByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachineFacts | undefined>;
  /** Returns the MachinePool, or undefined when it does not exist (or MachinePools are not served). */
  getMachinePool(namespace: string, name: string): Promise<MachinePoolFacts | undefined>;
  /** Returns the MachinePool whose `status.nodeRefs` holds `nodeName` in the given cluster, if exactly one. */
  findMachinePoolByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachinePoolFacts | undefined>;
  /** The number of Machines of a namespace with a label selector (a node group's size, for a percentage bound). */
  countMachines(namespace: string, labelSelector: string): Promise<number>;
  /** Returns the Cluster (for its pause), or undefined when it does not exist. */
  getCluster(namespace: string, name: string): Promise<ClusterView | undefined>;
}
