import type { ChangeKind, ClusterRef } from '#shared/domain/cloud-event.ts';
import type { ClusterFacts, MachineFacts, MachinePoolFacts, NodeFacts, WatchedFacts } from '#shared/domain/watch-event.ts';

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
   * The stream's health changed. `failing`: an attempt (a list, a watch's connect or its stream, the credentials)
   * failed after the stream's last success (or before any); it is told once per run of failures, at the first one,
   * while the stream keeps retrying with backoff. `recovered`: the next list or watch connect succeeded.
   * One failed attempt is the threshold on purpose: an API server that does not answer costs one request deadline
   * (30 s) per attempt, so a higher count would report it late or, in a short window, never; brief blips (an API
   * server restart) are filtered by the alarm's periods, not here.
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
}

/** Where a stream starts: from a checkpointed resourceVersion (exact resume) or, when absent, a fresh list announcing every object. */
export interface StreamStart {
  readonly resumeFrom?: string;
}

/** The collections the watch-forwarder watches. */
export interface WatchSources {
  machines(start: StreamStart): WatchStream<MachineFacts>;
  /** MachinePools (their declarations and `status.nodeRefs`); absent where a source has none. */
  machinePools?(start: StreamStart): WatchStream<MachinePoolFacts>;
  clusters(start: StreamStart): WatchStream<ClusterFacts>;
  /** Nodes of a workload cluster (or of the one cluster in `self` mode); credentials are resolved at each (re)connect. */
  nodes(cluster: ClusterRef, start: StreamStart): WatchStream<NodeFacts>;
}
