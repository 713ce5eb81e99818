import type { ChangeKind, ClusterRef } from '#shared/contract/cloud-event.ts';
import type { ClusterFacts, MachineFacts, MachinePoolFacts, NodeFacts, ScalableFacts, WatchedFacts } from '#shared/model/views.ts';

/**
 * What a watch stream delivers, in order. A change's `checkpoint` is the resourceVersion it is safe to resume from
 * once it and every earlier item is handled; absent after a relist, whose resume point is the `progress` that follows.
 */
export type StreamEvent<T extends WatchedFacts> =
  | {
      readonly type: 'change';
      readonly change: ChangeKind;
      readonly facts: T;
      /** The stream's last state of the object before this watch change; absent when it had none, or after a list. */
      readonly previous?: T;
      readonly observedAt: Date;
      readonly checkpoint?: string;
    }
  | { readonly type: 'progress'; readonly resourceVersion: string }
  /**
   * A list put these objects into the stream's state, before its announcements (for the consumer's own indexes);
   * `unannounced` (`quietLists`): those left for the consumer to judge, seen at `observedAt` (docs/watch-layer.md).
   */
  | { readonly type: 'listed'; readonly items: readonly T[]; readonly unannounced?: readonly T[]; readonly observedAt?: Date }
  /**
   * The stream's health changed (docs/watch-layer.md, "Retry policy"). One failed attempt is the `failing` threshold on
   * purpose: an API server that does not answer costs a 30 s request deadline per attempt, so a higher count would
   * report it late; blips are filtered by the alarm's periods.
   */
  | StreamHealthEvent;

/**
 * A change of a stream's health (see StreamEvent). `reason` is safe to log: never a credential or a raw response body.
 * `since` is when the run of failures began (the end of its first failed attempt); `at`, when it delivered again.
 */
export type StreamHealthEvent =
  | { readonly type: 'failing'; readonly reason: string; readonly since: Date }
  | { readonly type: 'recovered'; readonly since: Date; readonly at: Date };

/** A list+watch of one collection that runs until its signal aborts; it retries every failure itself. */
export interface WatchStream<T extends WatchedFacts> {
  run(signal: AbortSignal, onEvent: (event: StreamEvent<T>) => Promise<void>): Promise<void>;
  /** The last state of an object the stream holds, by its key (`objectKeyOf`); undefined when it holds none. */
  latest?(key: string): T | undefined;
  /** The last state of every object the stream holds (for a Cluster's pause, the objects of that Cluster). */
  objects(): Iterable<T>;
  /** True once the stream holds its collection (after a first list); absent: always. client-go's `HasSynced`. */
  hasSynced?(): boolean;
}

/** Where a stream starts: from a checkpointed resourceVersion (exact resume) or, when absent, a fresh list announcing every object. */
export interface StreamStart {
  /** Resume exactly here; without it the first list announces every object as `resynced` unless `quietLists`. */
  readonly resumeFrom?: string;
  /** The consumer judges what a list does not announce (`listed`'s `unannounced`; docs/watch-layer.md). */
  readonly quietLists?: boolean;
}

/** The collections the watch-forwarder watches. */
export interface WatchSources {
  machines(start: StreamStart): WatchStream<MachineFacts>;
  /** MachinePools (their declarations and `status.nodeRefs`); absent where a source has none. */
  machinePools?(start: StreamStart): WatchStream<MachinePoolFacts>;
  /** MachineDeployments and MachineSets, for the cluster-autoscaler annotation (docs/autoscaler.md); absent where a source has none. */
  machineDeployments?(start: StreamStart): WatchStream<ScalableFacts>;
  machineSets?(start: StreamStart): WatchStream<ScalableFacts>;
  clusters(start: StreamStart): WatchStream<ClusterFacts>;
  /** Nodes of a workload cluster (or of the one cluster in `self` mode); credentials are resolved at each (re)connect. */
  nodes(cluster: ClusterRef, start: StreamStart): WatchStream<NodeFacts>;
}
