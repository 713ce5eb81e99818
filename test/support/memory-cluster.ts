/**
 * In-memory adapters of the reconcile ports, for unit tests and handler tests. They keep the
 * semantics that matter: every write bumps the Node's resourceVersion, and a write planned from an
 * older resourceVersion fails with PatchConflictError, as the API server's precondition does.
 */
import type { ClusterView } from '#shared/domain/pause.ts';
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import type { NodeTaintPatch } from '#shared/domain/taint-plan.ts';
import { pick } from '#shared/model/json.ts';
import { NODE_ANNOTATIONS, NODE_LABELS, type MachineFacts, type MachinePoolFacts, type NodeWithTaints } from '#shared/model/views.ts';
import { NodeNotFoundError, PatchConflictError } from '#shared/errors.ts';
import type { ClusterConnections } from '#shared/ports/cluster-connections.ts';
import type { EventRecorder, InvolvedObject } from '#shared/ports/event-recorder.ts';
import type { MachineStore } from '#shared/ports/machine-store.ts';
import type { NodeStore } from '#shared/ports/node-store.ts';
import type { PodStore } from '#shared/ports/pod-store.ts';

/** A Node as stored: the view's fields, with whole label and annotation maps (what the cluster holds). */
type StoredNode = NodeWithTaints;

/** Nodes of one cluster, kept in memory; reads return the view (its annotations and labels narrowed, as toNodeFacts does). */
export class MemoryNodeStore implements NodeStore {
  readonly #nodes = new Map<string, StoredNode>();
  #version = 1;
  /** Number of reads and writes served, for assertions on API cost. */
  reads = 0;
  writes = 0;
  /** Called before each write; lets a test change the Node "concurrently" (another writer). */
  beforeWrite: ((name: string) => void) | undefined;

  /** Adds or replaces a Node; assigns a fresh resourceVersion. */
  put(node: Omit<StoredNode, 'kind' | 'resourceVersion' | 'uid' | 'labels'> & Partial<Pick<StoredNode, 'uid' | 'labels'>>): StoredNode {
    const stored: StoredNode = { kind: 'Node', uid: `uid-${node.name}`, labels: {}, ...node, resourceVersion: String(++this.#version) };
    this.#nodes.set(node.name, stored);
    return stored;
  }

  /** Returns the stored Node (whole maps) without counting a read. */
  peek(name: string): StoredNode | undefined {
    return this.#nodes.get(name);
  }

  async getNode(name: string): Promise<NodeWithTaints | undefined> {
    this.reads++;
    const node = this.#nodes.get(name);
    return node && viewOf(node);
  }

  async patchNodeTaints(name: string, patch: NodeTaintPatch): Promise<NodeWithTaints> {
    this.beforeWrite?.(name);
    this.writes++;
    const current = this.#nodes.get(name);
    if (!current) throw new NodeNotFoundError(name);
    if (current.resourceVersion !== patch.resourceVersion) throw new PatchConflictError({ nodeName: name, resourceVersion: patch.resourceVersion });
    const annotations: Record<string, string> = { ...current.annotations };
    for (const [k, v] of Object.entries(patch.annotations)) {
      if (v === null) delete annotations[k];
      else annotations[k] = v;
    }
    const labels: Record<string, string> = { ...current.labels };
    for (const [k, v] of Object.entries(patch.labels ?? {})) {
      if (v === null) delete labels[k];
      else labels[k] = v;
    }
    return viewOf(this.put({ ...current, taints: [...patch.taints], annotations, labels }));
  }

  /** Equality selectors only (`key=value`, comma-separated), as the reconcile uses them. */
  async listNodes(labelSelector: string): Promise<readonly NodeWithTaints[]> {
    this.reads++;
    const wanted = labelSelector.split(',').map((term) => term.split('=') as [string, string]);
    return [...this.#nodes.values()].filter((n) => wanted.every(([k, v]) => n.labels[k] === v)).map(viewOf);
  }
}

function viewOf(node: StoredNode): NodeWithTaints {
  return { ...node, labels: pick(node.labels, NODE_LABELS), annotations: pick(node.annotations, NODE_ANNOTATIONS) };
}

/** Machines of the management cluster, kept in memory. */
export class MemoryMachineStore implements MachineStore {
  readonly #machines = new Map<string, MachineFacts>();
  reads = 0;

  put(machine: MachineFacts): void {
    this.#machines.set(`${machine.namespace}/${machine.name}`, machine);
  }

  delete(namespace: string, name: string): void {
    this.#machines.delete(`${namespace}/${name}`);
  }

  async getMachine(namespace: string, name: string): Promise<MachineFacts | undefined> {
    this.reads++;
    return this.#machines.get(`${namespace}/${name}`);
  }

  async findMachineByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachineFacts | undefined> {
    this.reads++;
    const matches = [...this.#machines.values()].filter(
      (m) => (clusterNamespace === '' || m.namespace === clusterNamespace) && (clusterName === undefined || m.clusterName === clusterName) && m.nodeName === nodeName,
    );
    return matches.length === 1 ? matches[0] : undefined;
  }

  readonly #pools = new Map<string, MachinePoolFacts>();
  readonly #clusters = new Map<string, ClusterView>();

  putCluster(cluster: ClusterView): void {
    this.#clusters.set(`${cluster.namespace}/${cluster.name}`, cluster);
  }

  async getCluster(namespace: string, name: string): Promise<ClusterView | undefined> {
    this.reads++;
    return this.#clusters.get(`${namespace}/${name}`);
  }

  putPool(pool: MachinePoolFacts): void {
    this.#pools.set(`${pool.namespace}/${pool.name}`, pool);
  }

  async getMachinePool(namespace: string, name: string): Promise<MachinePoolFacts | undefined> {
    this.reads++;
    return this.#pools.get(`${namespace}/${name}`);
  }

  async findMachinePoolByNodeName(clusterNamespace: string, clusterName: string | undefined, nodeName: string): Promise<MachinePoolFacts | undefined> {
    this.reads++;
    const matches = [...this.#pools.values()].filter(
      (p) => (clusterNamespace === '' || p.namespace === clusterNamespace) && (clusterName === undefined || p.clusterName === clusterName) && p.nodeNames.includes(nodeName),
    );
    return matches.length === 1 ? matches[0] : undefined;
  }

  async countMachines(): Promise<number> {
    throw new Error('countMachines is not served by MemoryMachineStore');
  }
}

/** Records Events in memory. */
export class MemoryEventRecorder implements EventRecorder {
  readonly events: { object: InvolvedObject; type: 'Normal' | 'Warning'; reason: string; message: string }[] = [];
  async record(object: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    this.events.push({ object, type, reason, message });
  }
}

/** One MemoryNodeStore per cluster key (`self` or `<namespace>/<name>`). */
export class MemoryClusterConnections implements ClusterConnections {
  readonly clusters = new Map<string, MemoryNodeStore>();

  /** Returns (creating on first use) the store of a cluster. */
  cluster(key: string): MemoryNodeStore {
    let store = this.clusters.get(key);
    if (!store) this.clusters.set(key, (store = new MemoryNodeStore()));
    return store;
  }

  async nodesOf(cluster: ClusterRef): Promise<NodeStore> {
    return this.cluster(cluster.mode === 'self' ? 'self' : `${cluster.namespace}/${cluster.name}`);
  }

  async podsOf(): Promise<PodStore> {
    throw new Error('podsOf is not served by MemoryClusterConnections');
  }
}
