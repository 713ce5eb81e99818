/** Every CloudWatch metric the code emits; a test checks infra/alarms.yml and infra/dashboards.yml against them. */
export const METRIC_NAMESPACE = 'CapiTaintPropagator';

/** Metrics of the reconcile function. `Reconciles` carries the dimension `Outcome`. */
export const ReconcileMetric = {
  Reconciles: 'Reconciles',
  NodeWrites: 'NodeWrites',
  Conflicts: 'Conflicts',
  TransientErrors: 'TransientErrors',
  InvalidDeclarations: 'InvalidDeclarations',
  MalformedTrackingAnnotations: 'MalformedTrackingAnnotations',
  DeadLettered: 'DeadLettered',
  Reissued: 'Reissued',
  EventToWriteLatency: 'EventToWriteLatency',
  /** A workload cluster skipped because its kubeconfig is missing, broken or refused (exec, auth provider, file path). */
  UnusableKubeconfigs: 'UnusableKubeconfigs',
  /** The management cluster serves neither cluster.x-k8s.io/v1beta2 nor v1beta1 with Machines and Clusters. */
  UnsupportedClusterApi: 'UnsupportedClusterApi',
  /** Reconciles of Nodes whose declaration comes from a MachinePool (dimension Outcome, as Reconciles). */
  MachinePoolReconciles: 'MachinePoolReconciles',
  /** Staged NoExecute rollout: evictions the Eviction API accepted (201). */
  PodEvictions: 'PodEvictions',
  /** Staged NoExecute rollout: evictions a PodDisruptionBudget refused (429), waited out. */
  PodEvictionsRefused: 'PodEvictionsRefused',
} as const;
export type ReconcileMetric = (typeof ReconcileMetric)[keyof typeof ReconcileMetric];

/** Metrics of the watch-forwarder. */
export const ForwarderMetric = {
  EventsSeen: 'EventsSeen',
  EventsForwarded: 'EventsForwarded',
  EventsFiltered: 'EventsFiltered',
  MalformedWatchEvents: 'MalformedWatchEvents',
  SendFailures: 'SendFailures',
  Relists: 'Relists',
  WatchRestarts: 'WatchRestarts',
  ForwarderLag: 'ForwarderLag',
  /** Foreign taint writes on Nodes whose owned taints are intact (e.g. node-lifecycle taints): no message sent. */
  ForeignTaintChangesFiltered: 'ForeignTaintChangesFiltered',
  /** Machine changes of Cluster API's own `spec.taints` that cannot change the product's decision: no message sent. */
  ForeignDeclarationChangesFiltered: 'ForeignDeclarationChangesFiltered',
  /** As ReconcileMetric's: a Node watch skipped, Cluster API not served. */
  UnusableKubeconfigs: 'UnusableKubeconfigs',
  UnsupportedClusterApi: 'UnsupportedClusterApi',
  /**
   * A gauge: workload clusters whose Node watches are failing, sampled every minute and at each window's end. No
   * per-cluster dimension (one custom metric per cluster would cost hundreds); the forwarder's logs name the clusters.
   */
  UnreachableClusters: 'UnreachableClusters',
} as const;
export type ForwarderMetric = (typeof ForwarderMetric)[keyof typeof ForwarderMetric];

/** Dimension names. */
export const MetricDimension = { Outcome: 'Outcome' } as const;
