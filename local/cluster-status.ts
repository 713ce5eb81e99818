/**
 * Reads every Machine and its Node and computes their taint status (`local/taint-status.ts`).
 * Used by `npm run status`, by `npm start` (Nodes out of sync) and by the demo's summary.
 */
import { ApiException, CustomObjectsApi, type KubeConfig, type V1Node, type V1Pod } from '@kubernetes/client-node';
import { kubeList, type ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { KubernetesCapiDiscovery } from '#shared/adapters/kubernetes/capi-discovery.ts';
import { CLUSTERS, MACHINES, MACHINE_POOLS } from '#shared/adapters/kubernetes/machine-store.ts';
import type { CapiApiVersion } from '#shared/domain/capi-api.ts';
import type { ClusterView } from '#shared/domain/pause.ts';
import { machinePoolOf } from '#shared/domain/machine-pool.ts';
import { toPodOnNode } from '#shared/adapters/kubernetes/pod-store.ts';
import { workloadKubeConfigs, type WorkloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { describeApiError, statusOf } from '#shared/adapters/kubernetes/api-errors.ts';
import { declaredTaintsOf, type Override } from '#shared/domain/declarations.ts';
import { clusterNameOf, toMachineFacts, toMachinePoolFacts, toNodeFacts, type MachineFacts, type NodeWithTaints, type OwnerFacts } from '#shared/model/views.ts';
import type { TaintId } from '#shared/domain/taint.ts';
import type { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { needsPods, SyncState, taintStatusOf, type PodsRead, type TaintStatus, type TaintStatusInput } from './taint-status.ts';
import { ClusterBackoff, describeHeldBack } from './cluster-backoff.ts';

export interface ReadStatusOptions {
  readonly kubeConfig: KubeConfig;
  readonly mode: 'self' | 'capi';
  /** Only Machines of this namespace (default all). */
  readonly machineNamespace?: string;
  /** Only this Machine (needs `machineNamespace`). */
  readonly machineName?: string;
  /** Only Machines matching this label selector. */
  readonly machineLabelSelector?: string;
  readonly startupTaint?: TaintId;
  /** Who propagates `spec.taints` (as the reconcile function is configured; default upstream CAPI). */
  readonly specTaintsOwner?: SpecTaintsOwner;
  readonly workload?: WorkloadKubeConfigs;
  /**
   * Which clusters' Node lists failed and may not be called yet; default one backoff for the whole process, so that
   * `npm start`'s report, which reads every few seconds, leaves a failing cluster alone until its backoff has passed.
   */
  readonly backoff?: ClusterBackoff;
  /**
   * Why a workload cluster (`<namespace>/<name>`) is known to be failing, e.g. by the forwarder running in this process
   * (`npm start`), or undefined: such a cluster's Nodes are not listed, and its Machines show that reason.
   */
  readonly knownFailing?: (cluster: string) => string | undefined;
}

/**
 * Most pages of one list of a cluster's Nodes (500 each): 5 000 Nodes, Kubernetes' published envelope per cluster. A
 * list whose pages never end costs a display read this many requests, not the list pager's 200.
 */
export const STATUS_NODE_LIST_MAX_PAGES = 10;

/** The backoff shared by every status read of this process that brings none of its own. */
const processBackoff = new ClusterBackoff({ now: () => new Date() });

/** A workload cluster whose Nodes could not be listed, and why (a description without credentials or response bodies). */
export interface UnreachableCluster {
  /** `<namespace>/<name>`, or `self`. */
  readonly cluster: string;
  readonly reason: string;
}

/**
 * A Machine's status as read; `nodeListError` (`cluster <key>: <reason>`) and `unreachableCluster` are set when its
 * cluster's Nodes could not be listed (state unknown, not missing).
 */
export type ReadTaintStatus = TaintStatus & { readonly nodeListError?: string; readonly unreachableCluster?: UnreachableCluster };

/** Thrown when the one Machine asked for does not exist; the message reads like kubectl's. */
export class MachineNotFoundError extends Error {
  constructor(namespace: string, name: string) {
    super(`machines.cluster.x-k8s.io "${name}" not found in namespace "${namespace}"`);
    this.name = 'MachineNotFoundError';
  }
}

/** A Machine's status with the declarations that a higher source overrode or cancelled (for the detailed view). */
export interface MachineStatusView {
  readonly status: ReadTaintStatus;
  readonly overrides: readonly Override[];
}

/**
 * Returns the status of every Machine (sorted by namespace/name). When a cluster's Nodes cannot be
 * listed, its Machines carry `nodeListError` (and the reason) instead of a claim about their Nodes.
 */
export async function readTaintStatuses(o: ReadStatusOptions): Promise<ReadTaintStatus[]> {
  return (await readStatusViews(o)).map((v) => v.status);
}

/** Like readTaintStatuses, with each Machine's overridden and cancelled declarations. Throws MachineNotFoundError for a missing `machineName`. */
export async function readStatusViews(o: ReadStatusOptions): Promise<MachineStatusView[]> {
  const { machines, clusters } = await retryThrottled(() => readMachines(o));
  const statuses = await statusesOf(o, machines, clusters);
  return statuses.map((status, i) => {
    const declared = declaredTaintsOf(machines[i] as OwnerFacts, startup(o));
    return { status, overrides: declared.valid ? declared.declaration.overrides : [] };
  });
}


/**
 * Retries a read answered HTTP 429 (throttled, or a resource's storage still (re)initializing just after its CRD
 * changed) after the answer's Retry-After (1 s when absent, at most 5 s), up to 5 attempts — as kubectl (client-go)
 * does; client-node does not.
 */
export async function retryThrottled<T>(read: () => Promise<T>, wait: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms))): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      if (statusOf(error) !== 429 || attempt >= 5) throw error;
      const after = error instanceof ApiException ? Number((error.headers as Record<string, string> | undefined)?.['retry-after']) : 0;
      await wait(Math.min(5, after > 0 ? after : 1) * 1000);
    }
  }
}

async function readMachines(o: ReadStatusOptions): Promise<{ machines: OwnerFacts[]; clusters: ReadonlyMap<string, ClusterView> }> {
  const custom = o.kubeConfig.makeApiClient(CustomObjectsApi);
  const version = await new KubernetesCapiDiscovery(o.kubeConfig).version();
  const MACHINE_API = { ...MACHINES, version };
  if (o.machineName !== undefined) {
    const namespace = o.machineNamespace ?? 'default';
    try {
      const one = await custom.getNamespacedCustomObject({ ...MACHINE_API, namespace, name: o.machineName });
      return { machines: [toMachineFacts(one)].filter((m) => m !== undefined), clusters: await readClusters(custom, version, namespace) };
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) throw new MachineNotFoundError(namespace, o.machineName);
      throw error;
    }
  }
  const selector = o.machineLabelSelector ? { labelSelector: o.machineLabelSelector } : {};
  const list = (o.machineNamespace
    ? await custom.listNamespacedCustomObject({ ...MACHINE_API, namespace: o.machineNamespace, ...selector })
    : await custom.listClusterCustomObject({ ...MACHINE_API, ...selector })) as { items?: unknown[] };
  // A MachinePool's Machines are no declaration source of their own: their Nodes are listed under the pool.
  const machines: OwnerFacts[] = (list.items ?? []).map(toMachineFacts).filter((m): m is MachineFacts => m !== undefined && machinePoolOf(m) === undefined);
  machines.push(...(await readPoolMembers(custom, version, o)));
  machines.sort((a, b) => `${a.namespace}/${a.name}/${a.nodeName ?? ''}`.localeCompare(`${b.namespace}/${b.name}/${b.nodeName ?? ''}`));
  return { machines, clusters: machines.length === 0 ? new Map() : await readClusters(custom, version, o.machineNamespace) };
}

/**
 * The Clusters of the namespace (all namespaces without one), for their `spec.paused`; none where Clusters are not
 * served. Read with the client that reads the Machines.
 */
async function readClusters(custom: CustomObjectsApi, version: CapiApiVersion, namespace: string | undefined): Promise<Map<string, ClusterView>> {
  const API = { ...CLUSTERS, version };
  let items: unknown[];
  try {
    const list = (namespace !== undefined ? await custom.listNamespacedCustomObject({ ...API, namespace }) : await custom.listClusterCustomObject(API)) as { items?: unknown[] };
    items = list.items ?? [];
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return new Map();
    throw error;
  }
  const clusters = new Map<string, ClusterView>();
  for (const item of items as { metadata?: { namespace?: string; name?: string }; spec?: { paused?: unknown } }[]) {
    const view = { namespace: item.metadata?.namespace ?? '', name: item.metadata?.name ?? '', paused: item.spec?.paused === true };
    clusters.set(`${view.namespace}/${view.name}`, view);
  }
  return clusters;
}

/**
 * Every Node of every MachinePool (one entry per Node, the pool as its declaration owner), and each pool's own
 * annotations (its pause); none where pools are not served.
 */
async function readPoolMembers(custom: CustomObjectsApi, version: CapiApiVersion, o: ReadStatusOptions): Promise<OwnerFacts[]> {
  const API = { ...MACHINE_POOLS, version };
  const selector = o.machineLabelSelector ? { labelSelector: o.machineLabelSelector } : {};
  let items: unknown[];
  try {
    const list = (o.machineNamespace
      ? await custom.listNamespacedCustomObject({ ...API, namespace: o.machineNamespace, ...selector })
      : await custom.listClusterCustomObject({ ...API, ...selector })) as { items?: unknown[] };
    items = list.items ?? [];
  } catch (error) {
    if (error instanceof ApiException && error.code === 404) return [];
    throw error;
  }
  return items.flatMap((p) => {
    const pool = toMachinePoolFacts(p);
    return pool ? pool.nodeNames.map((node) => ({ ...pool, nodeName: node })) : [];
  });
}

/** The listed Nodes by name. A Node whose spec.taints cannot be read makes the list no answer, as for the reconcile (node-store.ts). */
function nodesByName(items: readonly unknown[]): Map<string, NodeWithTaints> {
  const nodes = new Map<string, NodeWithTaints>();
  for (const n of items.map(toNodeFacts)) {
    if (!n) continue;
    if (!n.taints) throw new Error('a Node has a spec.taints that is not a list of taints');
    nodes.set(n.name, { ...n, taints: n.taints });
  }
  return nodes;
}

async function statusesOf(o: ReadStatusOptions, machines: readonly OwnerFacts[], clusters: ReadonlyMap<string, ClusterView>): Promise<ReadTaintStatus[]> {
  const workload = o.workload ?? workloadKubeConfigs(o.kubeConfig);
  const backoff = o.backoff ?? processBackoff;
  const nodesByCluster = new Map<string, Promise<Map<string, NodeWithTaints> | UnreachableCluster>>();
  /** The endpoint each reachable cluster's Nodes were listed with, for the pods of its NoExecute previews. */
  const endpoints = new Map<string, ClusterEndpoint>();
  const nodesOf = (machine: OwnerFacts): Promise<Map<string, NodeWithTaints> | UnreachableCluster> => {
    const clusterName = clusterNameOf(machine) ?? '';
    const key = clusterKeyOf(o, machine);
    let nodes = nodesByCluster.get(key);
    if (!nodes) {
      // The management cluster's address is part of the key: one process may read several (tests, the demo).
      const backoffKey = `${o.kubeConfig.getCurrentCluster()?.server ?? ''} ${key}`;
      nodes = (async () => {
        const held = backoff.heldBack(backoffKey);
        if (held) return { cluster: key, reason: describeHeldBack(held) };
        const failing = o.knownFailing?.(key);
        if (failing !== undefined) return { cluster: key, reason: `${failing} (the forwarder's Node watch is failing; not called)` };
        try {
          const kc = o.mode === 'self' ? o.kubeConfig : await workload.get({ mode: 'capi', namespace: machine.namespace, name: clusterName });
          // 500 per page (a cluster's credentials may be a RestConfig: the product's own HTTP client).
          const items = await retryThrottled(() => kubeList<V1Node>(kc, '/api/v1/nodes', {}, 500, { maxPages: STATUS_NODE_LIST_MAX_PAGES }));
          backoff.succeeded(backoffKey);
          endpoints.set(key, kc);
          return nodesByName(items);
        } catch (error) {
          const reason = error instanceof Error ? describeApiError(error) : 'unknown error';
          backoff.failed(backoffKey, reason);
          return { cluster: key, reason };
        }
      })();
      nodesByCluster.set(key, nodes);
    }
    return nodes;
  };

  const statuses: ReadTaintStatus[] = [];
  for (const machine of machines) {
    const cluster = clusters.get(`${machine.namespace}/${clusterNameOf(machine) ?? ''}`);
    const settings = { ...startup(o), ...(cluster ? { cluster } : {}) };
    if (!machine.nodeName) {
      statuses.push(taintStatusOf({ machine, node: undefined, ...settings }));
      continue;
    }
    const nodes = await nodesOf(machine);
    if (!(nodes instanceof Map)) {
      const message = `cluster ${nodes.cluster}: ${nodes.reason}`;
      statuses.push({ ...taintStatusOf({ machine, node: undefined, ...settings }), state: SyncState.nodeMissing, reason: message, nodeListError: message, unreachableCluster: nodes });
      continue;
    }
    const input: TaintStatusInput = { machine, node: nodes.get(machine.nodeName), ...settings };
    const status = taintStatusOf(input);
    // The pods are read only for a Node that a NoExecute taint is about to be added to or previewed on.
    statuses.push(needsPods(status) ? taintStatusOf({ ...input, pods: await podsOn(endpoints.get(clusterKeyOf(o, machine)), machine.nodeName) }) : status);
  }
  return statuses;
}

function clusterKeyOf(o: ReadStatusOptions, machine: OwnerFacts): string {
  return o.mode === 'self' ? 'self' : `${machine.namespace}/${clusterNameOf(machine) ?? ''}`;
}

/** The pods bound to a Node (field selector `spec.nodeName`), or why they could not be read. */
async function podsOn(kc: ClusterEndpoint | undefined, nodeName: string): Promise<PodsRead> {
  if (kc === undefined) return { error: 'the cluster was not reached' };
  try {
    const items = await retryThrottled(() => kubeList<V1Pod>(kc, '/api/v1/pods', { fieldSelector: `spec.nodeName=${nodeName}` }, 500));
    return items.map(toPodOnNode);
  } catch (error) {
    return { error: error instanceof Error ? describeApiError(error) : 'unknown error' };
  }
}

/** The reconcile settings the planner needs, as configured. */
function startup(o: ReadStatusOptions): { startupTaint?: TaintId; specTaintsOwner?: SpecTaintsOwner } {
  return { ...(o.startupTaint ? { startupTaint: o.startupTaint } : {}), ...(o.specTaintsOwner ? { specTaintsOwner: o.specTaintsOwner } : {}) };
}
