/**
 * Watch sources a unit test drives, faked at the port level (WatchSources): each stream hands the consumer exactly the
 * events the test emits (changes, progress, and the health events a WatchSession emits); Node streams record where
 * they were asked to start. The real streams are exercised by the integration tests.
 */
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import { nodeStreamKey } from '#shared/contract/streams.ts';
import { objectKeyOf, type ClusterFacts, type MachineFacts, type MachinePoolFacts, type NodeFacts, type ScalableFacts, type WatchedFacts } from '#shared/model/views.ts';
import type { StreamEvent, StreamStart, WatchSources, WatchStream } from '#shared/ports/watch-source.ts';

/** A stream the test drives: `emit` hands one event to the consumer once the forwarder runs the stream. */
export class ScriptedStream<T extends WatchedFacts> implements WatchStream<T> {
  private consumer: ((e: StreamEvent<T>) => Promise<void>) | undefined;
  /** The last state of each object emitted, as a WatchSession keeps it. */
  private readonly known = new Map<string, T>();
  private readonly started: Promise<void>;
  private markStarted!: () => void;
  stopped = false;

  constructor() {
    this.started = new Promise((resolve) => (this.markStarted = resolve));
  }

  async run(signal: AbortSignal, onEvent: (e: StreamEvent<T>) => Promise<void>): Promise<void> {
    this.consumer = onEvent;
    this.markStarted();
    await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
    this.stopped = true;
  }

  latest(key: string): T | undefined {
    return this.known.get(key);
  }

  objects(): Iterable<T> {
    return this.known.values();
  }

  /** Whether the stream holds its collection (a WatchSession's first list); the test sets it false to play one still listing. */
  synced = true;

  hasSynced(): boolean {
    return this.synced;
  }

  async emit(e: StreamEvent<T>): Promise<void> {
    await this.started;
    if (e.type === 'change' && e.change === 'deleted') this.known.delete(objectKeyOf(e.facts));
    else if (e.type === 'change') this.known.set(objectKeyOf(e.facts), e.facts);
    else if (e.type === 'listed') for (const facts of e.items) this.known.set(objectKeyOf(facts), facts);
    await this.consumer?.(e);
  }
}

/** Machines, MachinePools, MachineDeployments, MachineSets, Clusters and per-cluster Node streams, each a ScriptedStream. */
export class ScriptedSources implements WatchSources {
  readonly machineStream = new ScriptedStream<MachineFacts>();
  readonly machinePoolStream = new ScriptedStream<MachinePoolFacts>();
  readonly machineDeploymentStream = new ScriptedStream<ScalableFacts>();
  readonly machineSetStream = new ScriptedStream<ScalableFacts>();
  readonly clusterStream = new ScriptedStream<ClusterFacts>();
  readonly nodeStreams = new Map<string, ScriptedStream<NodeFacts>>();
  /** Where each Node stream was asked to start, by stream key (the last start of a restarted one). */
  readonly nodeStarts = new Map<string, StreamStart>();

  machines(_start: StreamStart): WatchStream<MachineFacts> {
    return this.machineStream;
  }
  machinePools(_start: StreamStart): WatchStream<MachinePoolFacts> {
    return this.machinePoolStream;
  }
  machineDeployments(_start: StreamStart): WatchStream<ScalableFacts> {
    return this.machineDeploymentStream;
  }
  machineSets(_start: StreamStart): WatchStream<ScalableFacts> {
    return this.machineSetStream;
  }
  clusters(_start: StreamStart): WatchStream<ClusterFacts> {
    return this.clusterStream;
  }
  nodes(cluster: ClusterRef, start: StreamStart): WatchStream<NodeFacts> {
    const stream = new ScriptedStream<NodeFacts>();
    this.nodeStreams.set(nodeStreamKey(cluster), stream);
    this.nodeStarts.set(nodeStreamKey(cluster), start);
    return stream;
  }
  /** The Node stream of a cluster, once the forwarder started it. */
  async nodesOf(cluster: ClusterRef): Promise<ScriptedStream<NodeFacts>> {
    return await until(() => this.nodeStreams.get(nodeStreamKey(cluster)));
  }
}

/** Polls `probe` every 5 ms until it returns a value (not undefined or false); throws after `timeoutMs`. */
export async function until<T>(probe: () => T | undefined, timeoutMs = 5_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
