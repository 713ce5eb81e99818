import type { MachineSnapshot } from '#shared/domain/snapshots.ts';

/** Reads Cluster API Machines from the management cluster. */
export interface MachineStore {
  /** Returns the Machine, or undefined when it does not exist. */
  getMachine(namespace: string, name: string): Promise<MachineSnapshot | undefined>;
  /** Returns the Machine whose `status.nodeRef.name` is `nodeName` in the given cluster, if exactly one. */
  findMachineByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachineSnapshot | undefined>;
}
