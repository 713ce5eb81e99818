import type { ChangeKind, ClusterRef } from '#shared/contract/cloud-event.ts';
import type { ClusterFacts, MachineFacts, MachinePoolFacts, NodeFacts, ScalableFacts, WatchedFacts } from '#shared/model/views.ts';

/**
 * What a watch stream delivers, in order. A `change` carries the relevance decision; `checkpoint` is
 * the resourceVersion it is safe to resume from once this and every earlier item has been handled
 * (absent for changes synthesised by a relist, whose resume point is the `progress` that follows).
 */
export type StreamEvent<T extends WatchedFacts> =
  | {
      readonly type: 'change';
      readonly change: ChangeKind;
      readonly facts: T;
      /**
       * The last state of the same object the stream saw (a watch modification); absent for additions, deletions
       * and changes announced by a relist, which are always forwarded.
       */
      readonly previous?: T;
      readonly observedAt: Date;
      readonly checkpoint?: string;
    }
  | { readonly type: 'progress'; readonly resourceVersion: string }
  /**
   * A list put these objects into the stream's state without announcing them all (a resume exactly at the checkpoint,
   * a relist that announces only what changed since): for indexes of the consumer's own. It comes before the list's
   * announcements. `unannounced` (a stream started with `quietLists`: its first list without a checkpoint, a periodic
   * resync): the listed objects the stream does not announce itself, for the consumer to judge — it announces those
   * that may need work as `resynced` changes of its own, seen at `observedAt`.
   */
  | { readonly type: 'listed'; readonly items: readonly T[]; readonly unannounced?: readonly T[]; readonly observedAt?: Date }
  /**
   * The stream's health changed: `failing` once per run of failed attempts, at the first (a 410 or a very short watch
   * only when repeated), while the stream keeps retrying; `recovered` when it delivers again (a list alone is not
   * enough). One failed attempt is the threshold on purpose: an API server that does not answer costs a 30 s request
   * deadline per attempt, so a higher count would report it late; blips are filtered by the alarm's periods.
   * (docs/watch-layer.md, "Retry policy".)
   */
  | StreamHealthEvent;

/** A change of a stream's health (see StreamEvent). `reason` is a safe description: never a credential, never a raw response body. */
export type StreamHealthEvent =
  | {
      readonly type: 'failing';
      readonly reason: string;
      /** When the first failed attempt of this run of failures ended. */
      readonly since: Date;
    }
  | {
      readonly type: 'recovered';
      /** When the stream started failing (the `since` of its `failing`). */
      readonly since: Date;
      readonly at: Date;
    };

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
