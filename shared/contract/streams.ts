/** The forwarder's streams and their resume points, as the Lease stores them (shared/adapters/kubernetes/lease.ts). */
import { clusterKey, type ClusterRef } from './cloud-event.ts';

/** The streams' resume points, by stream key: the resourceVersion up to which every relevant change was sent. */
export type Checkpoint = Readonly<Record<string, string>>;

/** Stream key of the Machine watch. */
export const MACHINES_STREAM = 'machines';
/** Stream key of the MachinePool watch. */
export const MACHINE_POOLS_STREAM = 'machinepools';
/** Stream key of the MachineDeployment watch (scale from zero, docs/autoscaler.md). */
export const MACHINE_DEPLOYMENTS_STREAM = 'machinedeployments';
/** Stream key of the MachineSet watch. */
export const MACHINE_SETS_STREAM = 'machinesets';
/** Stream key of the Cluster watch (it has no resume point: it always starts from a fresh list). */
export const CLUSTERS_STREAM = 'clusters';

/** Stream key of the Node watch of a cluster: `nodes/self` or `nodes/<namespace>/<name>`. */
export function nodeStreamKey(cluster: ClusterRef): string {
  return `nodes/${clusterKey(cluster)}`;
}
