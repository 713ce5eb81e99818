/**
 * Helpers for integration and e2e tests that run against the real control plane started by
 * `test/support/control-plane-setup.ts` (one kube-apiserver + etcd per test run, shared by all files).
 *
 * Rules of the road, because only kube-apiserver and etcd run (no controller-manager, scheduler or kubelet; a file that
 * needs Kubernetes' taint-eviction or disruption controller starts its own control plane with `controllerManager`):
 * - Work in your own namespace (`createNamespace`) and with unique names for cluster-scoped objects (`uniqueName`):
 *   the server is shared by every test of the run.
 * - Never wait for a namespace deletion (no namespace controller: it stays Terminating) or for garbage collection.
 * - Nodes keep exactly the taints you write (the TaintNodesByCondition admission plugin is off); nothing writes
 *   Node or Machine status unless the test does (`setMachineNodeRef`).
 * - Node and Machine watches are served from the apiserver's watch cache, so an etcd compaction alone does not make
 *   them 410; see `compactEtcd`.
 */
import { KubeApiError } from '#shared/adapters/kubernetes/kube-http.ts';
import { describe, inject } from 'vitest';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import {
  ApiException,
  AuthorizationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from '@kubernetes/client-node';
import type { V1Node, V1Pod, V1ResourceAttributes, V1Taint } from '@kubernetes/client-node';
import { compactEtcdAt } from '#local/control-plane/etcd-maintenance.ts';
import { mintClientKubeconfig } from '#local/control-plane/pki.ts';
import type { ProvidedControlPlane } from './control-plane-setup.ts';

export type { ProvidedControlPlane } from './control-plane-setup.ts';

/** The provided control plane when it is available. */
export type AvailableControlPlane = Extract<ProvidedControlPlane, { available: true }>;

/** Group, version and plural of v1beta2 Machines, for CustomObjectsApi calls. */
export const MACHINES = { group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'machines' } as const;

/** Request options that make a client-node patch call send a JSON merge patch (its default is JSON Patch). */
export const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** What the global setup provided: the control plane's coordinates, or why there is none. */
export function controlPlane(): ProvidedControlPlane {
  return inject('controlPlane');
}

/** The available control plane; throws (failing the test) when there is none. Use inside `describeWithControlPlane`. */
export function requireControlPlane(): AvailableControlPlane {
  const cp = controlPlane();
  if (!cp.available) throw new Error(`No Kubernetes control plane: ${cp.reason}`);
  return cp;
}

/** `describe` that is skipped when no control plane is available (a developer machine without Go or binaries). */
export function describeWithControlPlane(name: string, fn: () => void): void {
  describe.skipIf(!controlPlane().available)(name, fn);
}

/** A KubeConfig loaded from a kubeconfig file (e.g. one returned by `mintUser`). */
export function kubeConfigFromFile(path: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return kc;
}

/** A KubeConfig for the admin identity (group `system:masters`, which bypasses RBAC). */
export function adminKubeConfig(): KubeConfig {
  return kubeConfigFromFile(requireControlPlane().kubeconfigPath);
}

/**
 * A name that is unique within the run and valid as a DNS-1123 label (lower case, at most 63 characters):
 * `<prefix>-<10 hex>`. Use it for every cluster-scoped object (Nodes, ClusterRoles) and for namespaces.
 */
export function uniqueName(prefix = 't'): string {
  const clean = prefix.toLowerCase().replace(/[^a-z0-9-]/g, '-').replace(/^-+|-+$/g, '').slice(0, 50) || 't';
  return `${clean}-${randomBytes(5).toString('hex')}`;
}

/** Creates a namespace with a unique name and returns the name. Never wait for its deletion (no namespace controller). */
export async function createNamespace(kc: KubeConfig, prefix = 'test'): Promise<string> {
  const name = uniqueName(prefix);
  await kc.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  return name;
}

/**
 * Mints a client-certificate identity (CN = `name`, one O per group) signed by the control plane's CA and returns
 * the path of a kubeconfig for it. It has no permissions beyond `system:authenticated` until RBAC grants some; after
 * creating a binding, use `waitForAccess` (RBAC propagation is not instant).
 */
export async function mintUser(name: string, groups: readonly string[] = []): Promise<string> {
  const cp = requireControlPlane();
  return mintClientKubeconfig({ dir: join(cp.dir, 'users'), caCertPath: cp.caCertPath, caKeyPath: cp.caKeyPath, server: cp.server, name, groups });
}

/**
 * Compacts etcd so that every resourceVersion handed out before this call is gone, and returns the compaction
 * revision. Afterwards requests for those resourceVersions that reach etcd get 410 Gone: watches and exact lists of
 * resources the apiserver does not cache (Events, by default), and everything on a control plane started with
 * `extraApiserverArgs: ['--watch-cache=false']`. Resources in the watch cache (Nodes, Machines, ConfigMaps, ...) keep
 * serving recent resourceVersions from memory, compaction or not.
 */
export async function compactEtcd(): Promise<string> {
  return compactEtcdAt(requireControlPlane().etcdEndpoint);
}

/** Options of {@link waitFor}. */
export interface WaitForOptions {
  /** Give up after this long (default 10 s). */
  readonly timeoutMs?: number;
  /** Poll interval (default 50 ms). */
  readonly intervalMs?: number;
  /** Named in the timeout error. */
  readonly description?: string;
}

/**
 * Polls `probe` until it returns a value other than `undefined`, `null` or `false`, and returns that value.
 * A probe that throws counts as "not yet" (the last error is reported on timeout).
 */
export async function waitFor<T>(probe: () => T | Promise<T>, opts: WaitForOptions | number = {}): Promise<Exclude<T, undefined | null | false>> {
  const o = typeof opts === 'number' ? { timeoutMs: opts } : opts;
  const timeoutMs = o.timeoutMs ?? 10_000;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v !== undefined && v !== null && v !== false) return v as Exclude<T, undefined | null | false>;
    } catch (e) {
      lastError = e;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${o.description ?? 'a condition'}${why}`, { cause: lastError });
    }
    await new Promise((r) => setTimeout(r, o.intervalMs ?? 50));
  }
}

/**
 * Polls a SelfSubjectAccessReview as the identity of `kc` until the answer for `attributes` equals `allowed`.
 * Use after creating or deleting an RBAC binding: the authorizer learns about it from an informer, a moment later.
 */
export async function waitForAccess(kc: KubeConfig, attributes: V1ResourceAttributes, allowed: boolean, timeoutMs = 10_000): Promise<void> {
  const api = kc.makeApiClient(AuthorizationV1Api);
  await waitFor(
    async () => {
      const review = await api.createSelfSubjectAccessReview({ body: { spec: { resourceAttributes: attributes } } });
      return (review.status?.allowed ?? false) === allowed;
    },
    { timeoutMs, description: `access ${JSON.stringify(attributes)} to become ${allowed ? 'allowed' : 'denied'}` },
  );
}

/** The HTTP status of a client-node error (`ApiException.code`) or of the product's client (`KubeApiError.code`), or undefined for other errors. */
export function statusOf(e: unknown): number | undefined {
  return e instanceof ApiException || e instanceof KubeApiError ? e.code : undefined;
}

/** The pod, or undefined once it is gone or terminating (what the taint-eviction controller's delete does). */
export async function livePod(core: CoreV1Api, namespace: string, name: string): Promise<V1Pod | undefined> {
  try {
    const p = await core.readNamespacedPod({ namespace, name });
    return p.metadata?.deletionTimestamp ? undefined : p;
  } catch (e) {
    if (statusOf(e) === 404) return undefined;
    throw e;
  }
}

/**
 * Creates a Cluster API Cluster (v1beta2) and its `<name>-kubeconfig` Secret holding `kubeconfig`, as a provider
 * writes it: what the product reads a workload cluster through in `capi` mode.
 */
export async function createClusterWithKubeconfig(kc: KubeConfig, namespace: string, name: string, kubeconfig: string): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: 'cluster.x-k8s.io', version: 'v1beta2', plural: 'clusters', namespace,
    body: { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name, namespace }, spec: { controlPlaneEndpoint: { host: '127.0.0.1', port: 6443 } } },
  });
  await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace,
    body: { metadata: { name: `${name}-kubeconfig`, labels: { 'cluster.x-k8s.io/cluster-name': name } }, type: 'cluster.x-k8s.io/secret', data: { value: Buffer.from(kubeconfig).toString('base64') } },
  });
}

/** Options of {@link createNode}. */
export interface NodeOptions {
  readonly taints?: readonly V1Taint[];
  readonly annotations?: Readonly<Record<string, string>>;
  readonly labels?: Readonly<Record<string, string>>;
}

/** Creates a Node (cluster-scoped: pass a `uniqueName`) with exactly the given taints, labels and annotations. */
export async function createNode(kc: KubeConfig, name: string, opts: NodeOptions = {}): Promise<V1Node> {
  const body: V1Node = {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name, labels: { ...opts.labels }, annotations: { ...opts.annotations } },
    spec: opts.taints && opts.taints.length > 0 ? { taints: [...opts.taints] } : {},
  };
  return kc.makeApiClient(CoreV1Api).createNode({ body });
}

/** A taint on a v1beta2 Machine (`spec.taints[]`); `propagation` defaults to `Always`. */
export interface MachineTaint {
  readonly key: string;
  readonly value?: string;
  readonly effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
  readonly propagation?: 'Always' | 'OnInitialization';
}

/** Options of {@link createMachine}. */
export interface MachineOptions {
  /** `spec.taints`; omitted when empty (the CRD requires at least one item when the list is present). */
  readonly specTaints?: readonly MachineTaint[];
  readonly annotations?: Readonly<Record<string, string>>;
  readonly labels?: Readonly<Record<string, string>>;
  /** `spec.clusterName` and the `cluster.x-k8s.io/cluster-name` label (default `test-cluster`). */
  readonly clusterName?: string;
  /** When set, `status.nodeRef.name` is written through the status subresource after creation. */
  readonly nodeName?: string;
}

/** A v1beta2 Machine as returned by the API (the parts tests look at). */
export interface MachineObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; resourceVersion: string; uid: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec: { clusterName: string; taints?: Array<Required<Pick<MachineTaint, 'key' | 'effect' | 'propagation'>> & { value?: string }> } & Record<string, unknown>;
  status?: { nodeRef?: { name: string } } & Record<string, unknown>;
}

/**
 * Creates a v1beta2 Machine with the required spec fields filled in (clusterName, `bootstrap.dataSecretName`, an
 * `infrastructureRef` to a DockerMachine of the same name), and optionally writes `status.nodeRef`.
 * Returns the Machine as last written.
 */
export async function createMachine(kc: KubeConfig, namespace: string, name: string, opts: MachineOptions = {}): Promise<MachineObject> {
  const clusterName = opts.clusterName ?? 'test-cluster';
  const spec: Record<string, unknown> = {
    clusterName,
    bootstrap: { dataSecretName: `${name}-bootstrap` },
    infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine', name },
  };
  if (opts.specTaints && opts.specTaints.length > 0) {
    spec['taints'] = opts.specTaints.map((t) => ({ ...t, propagation: t.propagation ?? 'Always' }));
  }
  const body = {
    apiVersion: `${MACHINES.group}/${MACHINES.version}`,
    kind: 'Machine',
    metadata: { name, namespace, labels: { 'cluster.x-k8s.io/cluster-name': clusterName, ...opts.labels }, annotations: { ...opts.annotations } },
    spec,
  };
  const created = (await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({ ...MACHINES, namespace, body })) as MachineObject;
  return opts.nodeName === undefined ? created : setMachineNodeRef(kc, namespace, name, opts.nodeName);
}

/** Writes `status.nodeRef.name` of a Machine through the status subresource (merge patch). Returns the Machine. */
export async function setMachineNodeRef(kc: KubeConfig, namespace: string, name: string, nodeName: string): Promise<MachineObject> {
  return (await kc
    .makeApiClient(CustomObjectsApi)
    .patchNamespacedCustomObjectStatus({ ...MACHINES, namespace, name, body: { status: { nodeRef: { name: nodeName } } } }, MERGE_PATCH)) as MachineObject;
}

/** Reads a v1beta2 Machine. */
export async function getMachine(kc: KubeConfig, namespace: string, name: string): Promise<MachineObject> {
  return (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({ ...MACHINES, namespace, name })) as MachineObject;
}

/** One event received by {@link watchUntil}. `object` is the raw JSON object (a Status for `ERROR`). */
export interface ReceivedWatchEvent {
  readonly type: string;
  readonly object: { metadata?: { name?: string; resourceVersion?: string }; code?: number; reason?: string } & Record<string, unknown>;
}

/** How a watch of {@link watchUntil} ended. */
export interface WatchOutcome {
  readonly events: readonly ReceivedWatchEvent[];
  /** The error passed to client-node's `done` (e.g. a non-200 answer), if any. */
  readonly error: unknown;
  /** True when the server said 410 Gone: a non-200 answer with status 410, or an `ERROR` event with code 410. */
  readonly gone: boolean;
  /** True when `timeoutMs` passed first. */
  readonly timedOut: boolean;
}

/**
 * Opens a watch on `path` (e.g. `/api/v1/nodes`) with `query` (e.g. `{ resourceVersion, allowWatchBookmarks: true }`)
 * and collects events until `until(events)` is true, an `ERROR` event arrives, the server ends the stream, or
 * `timeoutMs` passes (default 5 s). The watch is always closed before this returns.
 */
export async function watchUntil(
  kc: KubeConfig,
  path: string,
  query: Record<string, string | number | boolean | undefined>,
  until: (events: readonly ReceivedWatchEvent[]) => boolean = () => false,
  timeoutMs = 5_000,
): Promise<WatchOutcome> {
  const events: ReceivedWatchEvent[] = [];
  let controller: AbortController | undefined;
  let finish: (o: { error: unknown; timedOut: boolean }) => void = () => undefined;
  const ended = new Promise<{ error: unknown; timedOut: boolean }>((resolve) => {
    finish = resolve;
  });
  const timer = setTimeout(() => finish({ error: undefined, timedOut: true }), timeoutMs);
  try {
    controller = await new Watch(kc).watch(
      path,
      query,
      (type, object: ReceivedWatchEvent['object']) => {
        events.push({ type, object });
        if (type === 'ERROR' || until(events)) finish({ error: undefined, timedOut: false });
      },
      (error: unknown) => finish({ error: error ?? undefined, timedOut: false }),
    );
  } catch (error) {
    finish({ error, timedOut: false });
  }
  const { error, timedOut } = await ended;
  clearTimeout(timer);
  controller?.abort();
  const statusCode = (error as { statusCode?: number } | undefined)?.statusCode;
  const gone = statusCode === 410 || events.some((e) => e.type === 'ERROR' && e.object.code === 410);
  return { events, error, gone, timedOut };
}
