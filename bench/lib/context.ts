/**
 * What every scenario receives: where the API server is, the sizes of the chosen profile, and a log line writer.
 */

/** `full`: the sizes (< 20 min); `quick`: every scenario small (< 3 min); `smoke`: tiny, seconds (npm test). */
export type Profile = 'full' | 'quick' | 'smoke';

export interface Sizes {
  /** Scenario 1: Machine/Node pairs per run; the ratio target is judged at 1 000. */
  readonly throughputN: readonly number[];
  /** Scenario 2: changed, unchanged and conflicting Nodes. */
  readonly apiCostN: number;
  /** Scenario 3: edits per second and duration of the steady phase. */
  readonly e2eRate: number;
  readonly e2eSeconds: number;
  /**
   * Scenario 4: the sizes (Nodes = Machines; the figures are judged at 5 000, `forwarderPeakMiB20k` at 20 000),
   * heartbeat writes per second, real changes, measuring window (each size; the fleet's forwarder too).
   */
  readonly forwarderObjects: readonly number[];
  readonly heartbeatRate: number;
  readonly forwarderSeconds: number;
  readonly forwarderRealChanges: number;
  /** Scenario 5: Nodes and the foreign writer's target rates (writes/s). */
  readonly stormNodes: number;
  readonly stormRates: readonly number[];
  /** Scenario 6: fresh processes per bundle. */
  readonly coldStartRuns: number;
  /** Scenario 7: Nodes that get a foreign NoExecute taint at once (plus a label change, and their Machines noise). */
  readonly incidentNodes: number;
  /** Scenario 8: workload clusters (each an API server of its own) and Nodes (= Machines) per cluster. */
  readonly fleetClusters: number;
  readonly fleetNodesPerCluster: number;
  /** `--deployed` (scenarios 3 and 8 through the packaged functions): edits per second and measured duration, real time. */
  readonly deployedRate: number;
  readonly deployedSeconds: number;
  /** Scenario 9: stand-in workload clusters, Nodes (= Machines) per cluster, real changes in its window. */
  readonly fleet100Clusters: number;
  readonly fleet100NodesPerCluster: number;
  readonly fleet100Changes: number;
  /**
   * Scenario 9: the product's shard counts (FORWARDER_SHARDS) the fleet is split into, each a layout measured on the
   * same fleet, every shard's forwarder alone, one after the other; the peak target is per forwarder (the first
   * layout's figures are the scenario's).
   */
  readonly fleet100Shards: readonly number[];
  /**
   * Scenario fleet1000 (issue 52): fleets of growing size, each split at the shard counts given and measured as
   * scenario 9; Nodes (= Machines) per cluster, and real changes per layout over the whole fleet.
   */
  readonly fleet1000Fleets: ReadonlyArray<{ readonly clusters: number; readonly shards: readonly number[] }>;
  readonly fleet1000NodesPerCluster: number;
  readonly fleet1000Changes: number;
  /**
   * Scenario 9 (side by side with Cluster API): replicas per MachineDeployment at each step, growing; each step joins
   * the difference at once, then changes one declaration per side (the figures are judged at 500 / 400 joining).
   */
  readonly sideBySideN: readonly number[];
  /**
   * Scenario 10: seconds between a machine being provisioned and its Node registering (LocalMachine `bootSeconds`), as
   * an instance boots; far shorter than a real boot, long enough for Cluster API to record the Machine's provider ID.
   */
  readonly sideBySideBootSeconds: number;
  /**
   * Scenario noexecute: seconds from a replacement pod's creation (the benchmark standing in for a ReplicaSet, the
   * scheduler and a kubelet) until it is marked Ready; 0: at once (`--noexecute-ready-seconds`).
   */
  readonly noExecuteReplacementReadySeconds: number;
}

export const SIZES: Readonly<Record<Profile, Sizes>> = {
  full: {
    throughputN: [100, 1000, 5000],
    apiCostN: 50,
    e2eRate: 50,
    e2eSeconds: 30,
    forwarderObjects: [1000, 5000, 20000],
    heartbeatRate: 200,
    forwarderSeconds: 30,
    forwarderRealChanges: 100,
    stormNodes: 50,
    stormRates: [0, 50, 200, 800],
    coldStartRuns: 11,
    incidentNodes: 5000,
    fleetClusters: 5,
    fleetNodesPerCluster: 1000,
    deployedRate: 2,
    deployedSeconds: 1500,
    fleet100Clusters: 100,
    fleet100NodesPerCluster: 200,
    fleet100Changes: 1000,
    // About 25 clusters (5 000 Nodes) per forwarder. From the single-forwarder runs at this size (docs/benchmarks.md):
    // one cluster of 5 000 Nodes peaked at 126.5 MiB, and each added cluster cost 0.5–0.7 MiB (100 × 20 Nodes: 158.8
    // MiB; 50 × 200: 175.2), so 25 clusters × 200 come to about 140–145 MiB and 34 (three shards) to about 150–155.
    // Smoke-size runs cannot tell: up to 25 clusters or 600 Nodes per forwarder all peak at 107–110 MiB (the heap's floor).
    fleet100Shards: [4],
    // The growth comparison of issue 52: 100 clusters on one forwarder and on 4 shards, 1 000 on 4 and on 8.
    fleet1000Fleets: [
      { clusters: 100, shards: [1, 4] },
      { clusters: 1000, shards: [4, 8] },
    ],
    fleet1000NodesPerCluster: 20,
    fleet1000Changes: 1000,
    sideBySideN: [100, 500],
    sideBySideBootSeconds: 10,
    noExecuteReplacementReadySeconds: 0,
  },
  quick: {
    throughputN: [100],
    apiCostN: 20,
    e2eRate: 50,
    e2eSeconds: 8,
    forwarderObjects: [100, 500],
    heartbeatRate: 100,
    forwarderSeconds: 8,
    forwarderRealChanges: 20,
    stormNodes: 20,
    stormRates: [0, 200],
    coldStartRuns: 5,
    incidentNodes: 200,
    fleetClusters: 3,
    fleetNodesPerCluster: 100,
    deployedRate: 2,
    deployedSeconds: 300,
    fleet100Clusters: 10,
    fleet100NodesPerCluster: 20,
    fleet100Changes: 100,
    fleet100Shards: [2],
    fleet1000Fleets: [
      { clusters: 10, shards: [1, 2] },
      { clusters: 40, shards: [2, 4] },
    ],
    fleet1000NodesPerCluster: 5,
    fleet1000Changes: 100,
    sideBySideN: [20, 50],
    sideBySideBootSeconds: 5,
    noExecuteReplacementReadySeconds: 0,
  },
  smoke: {
    throughputN: [4],
    apiCostN: 2,
    e2eRate: 10,
    e2eSeconds: 1,
    forwarderObjects: [3, 6],
    heartbeatRate: 20,
    forwarderSeconds: 1,
    forwarderRealChanges: 2,
    stormNodes: 3,
    stormRates: [0, 20],
    coldStartRuns: 1,
    incidentNodes: 4,
    fleetClusters: 2,
    fleetNodesPerCluster: 5,
    deployedRate: 2,
    deployedSeconds: 30,
    fleet100Clusters: 3,
    fleet100NodesPerCluster: 3,
    fleet100Changes: 6,
    fleet100Shards: [2],
    fleet1000Fleets: [
      { clusters: 2, shards: [1] },
      { clusters: 4, shards: [2] },
    ],
    fleet1000NodesPerCluster: 2,
    fleet1000Changes: 4,
    sideBySideN: [2, 3],
    sideBySideBootSeconds: 2,
    noExecuteReplacementReadySeconds: 0,
  },
};

export interface BenchContext {
  readonly profile: Profile;
  readonly sizes: Sizes;
  /** Admin kubeconfig of the API server under test. */
  readonly kubeconfigPath: string;
  /** etcd client URL of that API server's etcd (scenario 8 starts workload API servers on it); unknown with `--kubeconfig` alone. */
  readonly etcdEndpoint?: string;
  readonly log: (line: string) => void;
}
