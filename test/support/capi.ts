/**
 * Harness for tests with Cluster API in the loop (the `e2e-capi` tier): the upstream core manager and the local
 * infrastructure provider run against the control plane started by `test/support/capi-control-plane-setup.ts`.
 *
 * A test works in its own namespace: `createSelfHostedCluster` (LocalCluster + LocalControlPlane + Cluster; the
 * provider writes its labelled `<name>-kubeconfig` Secret), then `createMachineDeployment` (LocalMachineTemplate with
 * startup taints, LocalBootstrapConfigTemplate, MachineDeployment with annotations and/or `spec.taints`), then
 * `waitForMachineNodes` until Cluster API has set each Machine's `status.nodeRef` to its Node; or `createMachinePool`
 * (LocalMachinePool with startup taints, LocalBootstrapConfig, MachinePool) and `waitForMachinePoolNodes` until Cluster
 * API has set the MachinePool's `status.nodeRefs`. Nothing here writes a Machine or a nodeRef: Cluster API does.
 */
import { describe, inject } from 'vitest';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Node } from '@kubernetes/client-node';
import {
  LOCAL_BOOTSTRAP_CONFIG,
  LOCAL_BOOTSTRAP_CONFIG_TEMPLATE,
  LOCAL_CLUSTER,
  LOCAL_CONTROL_PLANE,
  LOCAL_MACHINE_POOL,
  LOCAL_MACHINE_TEMPLATE,
  type KindApi,
} from '#local/infrastructure/crds.ts';
import { MERGE_PATCH, uniqueName, waitFor, type MachineTaint } from './control-plane.ts';
import { startPipeline, type Pipeline, type PipelineCounters, type PipelineOptions } from '#local/pipeline.ts';
import type { ProvidedCapiControlPlane } from './capi-control-plane-setup.ts';
import type { CapiApiVersion } from '#shared/domain/capi-api.ts';

export const CAPI = { group: 'cluster.x-k8s.io', version: 'v1beta2' } as const;
export const CLUSTERS = { ...CAPI, plural: 'clusters' } as const;
export const MACHINE_DEPLOYMENTS = { ...CAPI, plural: 'machinedeployments' } as const;
export const MACHINES = { ...CAPI, plural: 'machines' } as const;
export const MACHINE_POOLS = { ...CAPI, plural: 'machinepools' } as const;

/** The Cluster API objects in one group version (v1beta1 for releases up to v1.10). */
export function capiResources(version: CapiApiVersion = 'v1beta2') {
  const gv = { group: CAPI.group, version };
  return {
    clusters: { ...gv, plural: 'clusters' },
    machineDeployments: { ...gv, plural: 'machinedeployments' },
    machines: { ...gv, plural: 'machines' },
    machinePools: { ...gv, plural: 'machinepools' },
  } as const;
}

/** A reference to a provider object as the version spells it: v1beta2 `{apiGroup, kind, name}`, v1beta1 `{apiVersion, kind, name}`. */
function providerRef(k: KindApi, name: string, version: CapiApiVersion): Record<string, string> {
  return version === 'v1beta2' ? { apiGroup: k.group, kind: k.kind, name } : { apiVersion: `${k.group}/${k.version}`, kind: k.kind, name };
}
/** Label Cluster API puts on the Machines of a MachineDeployment. */
export const DEPLOYMENT_NAME_LABEL = 'cluster.x-k8s.io/deployment-name';
/** Kubernetes version the Machines "run" (the local API server's). */
export const KUBERNETES_VERSION = 'v1.34.3';

export type AvailableCapiControlPlane = Extract<ProvidedCapiControlPlane, { available: true }>;

/** The provided control plane with Cluster API, or why there is none. */
export function capiControlPlane(): ProvidedCapiControlPlane {
  return inject('capiControlPlane');
}

/** `describe`, skipped when the control plane with Cluster API cannot run here (never with `CI=true`: setup fails). */
export function describeWithCapi(name: string, fn: () => void): void {
  describe.skipIf(!capiControlPlane().available)(name, fn);
}

/** Admin KubeConfig of the control plane with Cluster API. */
export function capiKubeConfig(): KubeConfig {
  const cp = capiControlPlane();
  if (!cp.available) throw new Error(`No control plane with Cluster API: ${cp.reason}`);
  const kc = new KubeConfig();
  kc.loadFromFile(cp.kubeconfigPath);
  return kc;
}

/** A Kubernetes object as CustomObjectsApi returns it (the parts the tests look at). */
export interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata: { name: string; namespace?: string; uid?: string; labels?: Record<string, string>; annotations?: Record<string, string>; deletionTimestamp?: string; finalizers?: string[] };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown> & { conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

const gvp = (k: KindApi): { group: string; version: string; plural: string } => ({ group: k.group, version: k.version, plural: k.plural });

async function create(kc: KubeConfig, api: { group: string; version: string; plural: string }, kind: string, namespace: string, body: Omit<Obj, 'apiVersion' | 'kind'>): Promise<Obj> {
  return (await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    ...api,
    namespace,
    body: { apiVersion: `${api.group}/${api.version}`, kind, ...body, metadata: { ...body.metadata, namespace } },
  })) as Obj;
}

/** Reads one object of a namespaced custom resource. */
export async function getObject(kc: KubeConfig, api: { group: string; version: string; plural: string }, namespace: string, name: string): Promise<Obj> {
  return (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ ...api, namespace, name })) as Obj;
}

/** Lists a namespaced custom resource, optionally by label selector. */
export async function listObjects(kc: KubeConfig, api: { group: string; version: string; plural: string }, namespace: string, labelSelector?: string): Promise<Obj[]> {
  const list = (await kc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({ ...api, namespace, ...(labelSelector ? { labelSelector } : {}) })) as { items: Obj[] };
  return list.items;
}

function conditionTrue(o: Obj, type: string): boolean {
  return o.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
}

/**
 * Creates a self-hosted Cluster (its Nodes live in this API server): LocalCluster + LocalControlPlane + Cluster.
 * Waits until the provider has written the `<name>-kubeconfig` Secret, the control plane counts as initialized and
 * Cluster API's connection to the Cluster is up (condition `RemoteConnectionProbe`), i.e. until Machines can get Nodes.
 */
export async function createSelfHostedCluster(kc: KubeConfig, namespace: string, name = uniqueName('cluster'), timeoutMs = 60_000, version: CapiApiVersion = 'v1beta2'): Promise<string> {
  await create(kc, gvp(LOCAL_CLUSTER), LOCAL_CLUSTER.kind, namespace, { metadata: { name } });
  await create(kc, gvp(LOCAL_CONTROL_PLANE), LOCAL_CONTROL_PLANE.kind, namespace, { metadata: { name }, spec: { version: KUBERNETES_VERSION } });
  await create(kc, capiResources(version).clusters, 'Cluster', namespace, {
    metadata: { name },
    spec: { controlPlaneRef: providerRef(LOCAL_CONTROL_PLANE, name, version), infrastructureRef: providerRef(LOCAL_CLUSTER, name, version) },
  });
  await waitForClusterConnected(kc, namespace, name, timeoutMs, version);
  return name;
}

/**
 * Waits until the Cluster's kubeconfig Secret exists and Cluster API reports the control plane initialized and (from
 * v1beta2) the remote connection up; v1beta1 has no such condition: there the infrastructure must be ready.
 */
export async function waitForClusterConnected(kc: KubeConfig, namespace: string, name: string, timeoutMs = 60_000, version: CapiApiVersion = 'v1beta2'): Promise<Obj> {
  const core = kc.makeApiClient(CoreV1Api);
  await waitFor(() => core.readNamespacedSecret({ namespace, name: `${name}-kubeconfig` }), { timeoutMs, description: `Secret ${namespace}/${name}-kubeconfig` });
  return waitFor(
    async () => {
      const c = await getObject(kc, capiResources(version).clusters, namespace, name);
      const connected = version === 'v1beta2' ? conditionTrue(c, 'RemoteConnectionProbe') : c.status?.['infrastructureReady'] === true;
      return conditionTrue(c, 'ControlPlaneInitialized') && connected ? c : undefined;
    },
    { timeoutMs, intervalMs: 200, description: `Cluster ${namespace}/${name} to be initialized and connected` },
  );
}

/** Options of {@link createMachineDeployment}. */
export interface MachineDeploymentOptions {
  readonly cluster: string;
  readonly name?: string;
  readonly replicas: number;
  /** `spec.template.metadata.annotations` (copied by Cluster API to every Machine, in place). */
  readonly annotations?: Readonly<Record<string, string>>;
  /** The MachineDeployment's own `metadata.annotations`, set at creation (e.g. the autoscaler's size annotations). */
  readonly metadataAnnotations?: Readonly<Record<string, string>>;
  /** `spec.template.spec.taints` (refused by the webhook unless the manager's MachineTaintPropagation gate is on). */
  readonly taints?: readonly MachineTaint[];
  /** Taints the Nodes register with (LocalMachineTemplate `spec.template.spec.startupTaints`). */
  readonly startupTaints?: readonly { key: string; value?: string; effect: string }[];
  /** LocalMachineTemplate `spec.template.spec.bootSeconds`: the machine is provisioned first, its Node registers this much later. */
  readonly bootSeconds?: number;
  /** The group version to write in (default v1beta2; v1beta1 for Cluster API v1.10 and older). */
  readonly capiVersion?: CapiApiVersion;
}

/** Creates a LocalMachineTemplate, a LocalBootstrapConfigTemplate and a MachineDeployment using them; returns the name. */
export async function createMachineDeployment(kc: KubeConfig, namespace: string, o: MachineDeploymentOptions): Promise<string> {
  const name = o.name ?? uniqueName('md');
  await create(kc, gvp(LOCAL_MACHINE_TEMPLATE), LOCAL_MACHINE_TEMPLATE.kind, namespace, {
    metadata: { name },
    spec: { template: { spec: { ...(o.startupTaints && o.startupTaints.length > 0 ? { startupTaints: o.startupTaints } : {}), ...(o.bootSeconds ? { bootSeconds: o.bootSeconds } : {}) } } },
  });
  await create(kc, gvp(LOCAL_BOOTSTRAP_CONFIG_TEMPLATE), LOCAL_BOOTSTRAP_CONFIG_TEMPLATE.kind, namespace, { metadata: { name }, spec: { template: { spec: {} } } });
  const version = o.capiVersion ?? 'v1beta2';
  await create(kc, capiResources(version).machineDeployments, 'MachineDeployment', namespace, {
    metadata: { name, ...(o.metadataAnnotations ? { annotations: { ...o.metadataAnnotations } } : {}) },
    spec: {
      clusterName: o.cluster,
      replicas: o.replicas,
      template: {
        metadata: o.annotations ? { annotations: { ...o.annotations } } : {},
        spec: {
          clusterName: o.cluster,
          version: KUBERNETES_VERSION,
          bootstrap: { configRef: providerRef(LOCAL_BOOTSTRAP_CONFIG_TEMPLATE, name, version) },
          infrastructureRef: providerRef(LOCAL_MACHINE_TEMPLATE, name, version),
          ...(o.taints && o.taints.length > 0 ? { taints: o.taints.map((t) => ({ ...t, propagation: t.propagation ?? 'Always' })) } : {}),
        },
      },
    },
  });
  return name;
}

/** Sets `spec.replicas` of a MachineDeployment. */
export async function scaleMachineDeployment(kc: KubeConfig, namespace: string, name: string, replicas: number, version: CapiApiVersion = 'v1beta2'): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...capiResources(version).machineDeployments, namespace, name, body: { spec: { replicas } } }, MERGE_PATCH);
}

/** A Machine of a MachineDeployment and the Node Cluster API linked it to. */
export interface MachineNode {
  readonly machine: Obj;
  readonly node: V1Node;
}

/**
 * Waits until the MachineDeployment has exactly `replicas` Machines (none deleting), each with a `status.nodeRef`
 * written by Cluster API to an existing Node; returns them sorted by Machine name.
 */
export async function waitForMachineNodes(
  kc: KubeConfig,
  namespace: string,
  deployment: string,
  replicas: number,
  timeoutMs = 60_000,
  version: CapiApiVersion = 'v1beta2',
  /** Where the Nodes live (a workload API server); default the management cluster. */
  nodesKubeConfig: KubeConfig = kc,
): Promise<MachineNode[]> {
  const core = nodesKubeConfig.makeApiClient(CoreV1Api);
  return waitFor(
    async () => {
      const machines = await listObjects(kc, capiResources(version).machines, namespace, `${DEPLOYMENT_NAME_LABEL}=${deployment}`);
      if (machines.length !== replicas || machines.some((m) => m.metadata.deletionTimestamp)) return undefined;
      const pairs: MachineNode[] = [];
      for (const machine of machines) {
        const nodeName = (machine.status?.['nodeRef'] as { name?: string } | undefined)?.name;
        if (!nodeName) return undefined;
        pairs.push({ machine, node: await core.readNode({ name: nodeName }) });
      }
      return pairs.sort((a, b) => a.machine.metadata.name.localeCompare(b.machine.metadata.name));
    },
    { timeoutMs, intervalMs: 200, description: `${replicas} Machines of MachineDeployment ${namespace}/${deployment} with Nodes` },
  );
}

/** `key=value:effect` of a Node taint (value empty when absent). */
export function taintText(t: { key: string; value?: string; effect: string }): string {
  return `${t.key}=${t.value ?? ''}:${t.effect}`;
}

/** Options of {@link createMachinePool}. */
export interface MachinePoolOptions {
  readonly cluster: string;
  readonly name?: string;
  readonly replicas: number;
  /** `spec.template.metadata.annotations` of the MachinePool. */
  readonly annotations?: Readonly<Record<string, string>>;
  /** Taints the pool's Nodes register with (LocalMachinePool `spec.template.spec.startupTaints`). */
  readonly startupTaints?: readonly { key: string; value?: string; effect: string }[];
  /** The group version to write in (default v1beta2; v1beta1 for Cluster API v1.10 and older). */
  readonly capiVersion?: CapiApiVersion;
}

/** Creates a LocalMachinePool, a LocalBootstrapConfig and a MachinePool using them (all named alike); returns the name. */
export async function createMachinePool(kc: KubeConfig, namespace: string, o: MachinePoolOptions): Promise<string> {
  const name = o.name ?? uniqueName('mp');
  await create(kc, gvp(LOCAL_MACHINE_POOL), LOCAL_MACHINE_POOL.kind, namespace, {
    metadata: { name },
    spec: { template: { spec: o.startupTaints && o.startupTaints.length > 0 ? { startupTaints: o.startupTaints } : {} } },
  });
  await create(kc, gvp(LOCAL_BOOTSTRAP_CONFIG), LOCAL_BOOTSTRAP_CONFIG.kind, namespace, { metadata: { name }, spec: {} });
  const version = o.capiVersion ?? 'v1beta2';
  await create(kc, capiResources(version).machinePools, 'MachinePool', namespace, {
    metadata: { name },
    spec: {
      clusterName: o.cluster,
      replicas: o.replicas,
      template: {
        // The MachinePool CRD refuses an empty template metadata (minProperties 1), unlike the MachineDeployment's.
        ...(o.annotations ? { metadata: { annotations: { ...o.annotations } } } : {}),
        spec: {
          clusterName: o.cluster,
          version: KUBERNETES_VERSION,
          bootstrap: { configRef: providerRef(LOCAL_BOOTSTRAP_CONFIG, name, version) },
          infrastructureRef: providerRef(LOCAL_MACHINE_POOL, name, version),
        },
      },
    },
  });
  return name;
}

/** Sets `spec.replicas` of a MachinePool. */
export async function scaleMachinePool(kc: KubeConfig, namespace: string, name: string, replicas: number, version: CapiApiVersion = 'v1beta2'): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...capiResources(version).machinePools, namespace, name, body: { spec: { replicas } } }, MERGE_PATCH);
}

/** A MachinePool as Cluster API left it, and the Nodes its `status.nodeRefs` name. */
export interface MachinePoolNodes {
  readonly pool: Obj;
  /** In the order of `status.nodeRefs`. */
  readonly nodes: V1Node[];
}

/**
 * Waits until Cluster API's `status.nodeRefs` of the MachinePool lists exactly `replicas` Nodes, each existing with
 * the referenced UID; returns the MachinePool and those Nodes.
 */
export async function waitForMachinePoolNodes(kc: KubeConfig, namespace: string, pool: string, replicas: number, timeoutMs = 60_000, version: CapiApiVersion = 'v1beta2'): Promise<MachinePoolNodes> {
  const core = kc.makeApiClient(CoreV1Api);
  return waitFor(
    async () => {
      const mp = await getObject(kc, capiResources(version).machinePools, namespace, pool);
      const refs = (mp.status?.['nodeRefs'] as { name?: string; uid?: string }[] | undefined) ?? [];
      if (refs.length !== replicas) return undefined;
      const nodes: V1Node[] = [];
      for (const ref of refs) {
        const node = await core.readNode({ name: ref.name ?? '' }).catch(() => undefined);
        if (!node || node.metadata?.uid !== ref.uid) return undefined;
        nodes.push(node);
      }
      return { pool: mp, nodes };
    },
    { timeoutMs, intervalMs: 200, description: `status.nodeRefs of MachinePool ${namespace}/${pool} to list ${replicas} existing Nodes` },
  );
}

/** The pipeline's counters once its queue is empty (nothing visible, nothing in flight): what it did so far. */
export async function drained(p: Pipeline): Promise<PipelineCounters> {
  return waitFor(
    async () => {
      const c = await p.freshCounters();
      return c.queueVisible === 0 && c.queueInFlight === 0 ? c : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 100, description: 'the queue to be empty' },
  );
}

/**
 * The product's pipeline as `npm start` runs it (spec.taints owned by upstream, the product's startup gate, enablement
 * recorded by the first reconcile), watching one namespace, with short retry and lease timings for tests; `overrides`
 * win (e.g. `mode: 'capi'` for workload clusters behind their Secrets). Resolves once the forwarder holds its Lease.
 */
export async function startProductPipeline(kc: KubeConfig, namespace: string, overrides: Partial<PipelineOptions> = {}): Promise<Pipeline> {
  const pipeline = await startPipeline({
    kubeconfig: kc,
    mode: 'self',
    stateNamespace: namespace,
    leaseName: uniqueName('forwarder'),
    machineNamespace: namespace,
    visibilityTimeoutSeconds: 5,
    maxReceiveCount: 50,
    retryBaseSeconds: 0,
    retryMaxSeconds: 1,
    forwarderOptions: { renewIntervalMs: 1000, acquireRetryMs: 200, flushIntervalMs: 20 },
    ...overrides,
  });
  await pipeline.waitForForwarder(20_000);
  return pipeline;
}
