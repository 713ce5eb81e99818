/**
 * Kubernetes plumbing of the benchmarks: KubeConfigs whose every HTTP request is counted at the client, a fast
 * keep-alive client for setup and load generation (so that generating load costs the measured code as little as
 * possible), and bulk creation / cleanup of Nodes and Machines.
 */
import { createHash, randomBytes } from 'node:crypto';
import https from 'node:https';
import http from 'node:http';
import { KubeConfig } from '@kubernetes/client-node';
import type { ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { sleep } from './stats.ts';

// ---------------------------------------------------------------------------------------------------------------
// Counting API calls at the client

/** What a request touched, from its URL. */
export type CallTarget = 'node' | 'machine' | 'event' | 'configmap' | 'lease' | 'secret' | 'list-or-watch' | 'discovery' | 'other';

/** Counts of HTTP requests sent through one KubeConfig. GET is a read; POST, PUT, PATCH and DELETE are writes. */
export interface CallCounts {
  readonly reads: number;
  readonly writes: number;
  readonly total: number;
  /** `<METHOD> <target>`, e.g. `GET node`, `PATCH node`, `POST event`. */
  readonly byKind: Readonly<Record<string, number>>;
}

/** Running request counters; `snapshot()` then `since(before)` gives the calls of a phase. */
export class CallCounter {
  #byKind = new Map<string, number>();

  add(method: string, url: string): void {
    const key = `${method.toUpperCase()} ${targetOf(url)}`;
    this.#byKind.set(key, (this.#byKind.get(key) ?? 0) + 1);
  }

  snapshot(): CallCounts {
    const byKind = Object.fromEntries([...this.#byKind.entries()].sort(([a], [b]) => a.localeCompare(b)));
    let reads = 0;
    let writes = 0;
    for (const [key, n] of this.#byKind) {
      if (key.startsWith('GET ')) reads += n;
      else writes += n;
    }
    return { reads, writes, total: reads + writes, byKind };
  }

  /** The calls made since `before` was taken. */
  since(before: CallCounts): CallCounts {
    const now = this.snapshot();
    const byKind: Record<string, number> = {};
    for (const [k, n] of Object.entries(now.byKind)) {
      const d = n - (before.byKind[k] ?? 0);
      if (d !== 0) byKind[k] = d;
    }
    return { reads: now.reads - before.reads, writes: now.writes - before.writes, total: now.total - before.total, byKind };
  }
}

export function targetOf(url: string): CallTarget {
  const parsed = new URL(url, 'https://x');
  const path = parsed.pathname;
  // The forwarder's watch sessions: a list page (limit) or a watch connection.
  if (parsed.searchParams.has('watch') || parsed.searchParams.has('limit')) return 'list-or-watch';
  if (/\/api\/v1\/nodes(\/|$)/.test(path)) return 'node';
  if (/\/machines(\/|$)/.test(path)) return 'machine';
  if (/\/events(\/|$)/.test(path)) return 'event';
  if (/\/configmaps(\/|$)/.test(path)) return 'configmap';
  if (/\/leases(\/|$)/.test(path)) return 'lease';
  if (/\/secrets(\/|$)/.test(path)) return 'secret';
  // API discovery (`/apis`, `/apis/<group>/<version>`): the Cluster API version, once per process.
  if (/^\/apis(\/[^/]+\/[^/]+)?\/?$/.test(path)) return 'discovery';
  return 'other';
}

/**
 * A KubeConfig loaded from `kubeconfigPath` whose requests are all counted. Every request of the product's HTTP client
 * (kube-http.ts) applies its credentials through `applyToHTTPSOptions` once, with its method and path already set, so
 * that is where each call is counted (a watch session's list page or watch connection included).
 */
export function countingKubeConfig(kubeconfigPath: string, counter: CallCounter): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return countCalls(kc, counter);
}

/** Makes every request through `endpoint` (this instance, e.g. a workload cluster's from its Secret) count in `counter`; see {@link countingKubeConfig}. */
export function countCalls<E extends ClusterEndpoint>(endpoint: E, counter: CallCounter): E {
  const tlsOptions = endpoint.applyToHTTPSOptions.bind(endpoint);
  endpoint.applyToHTTPSOptions = async (opts) => {
    counter.add(opts.method ?? 'GET', opts.path ?? '/');
    return tlsOptions(opts);
  };
  return endpoint;
}

/**
 * Counts the requests sent to workload clusters: wraps a loader of workload KubeConfigs (the product's, reading
 * `<cluster>-kubeconfig` Secrets) so that every KubeConfig it hands out counts in `counter` (each instance once).
 */
export function countingWorkloadLoader<A extends unknown[], E extends ClusterEndpoint>(load: (...args: A) => Promise<E>, counter: CallCounter): (...args: A) => Promise<E> {
  const counted = new WeakSet<E>();
  return async (...args: A) => {
    const kc = await load(...args);
    if (!counted.has(kc)) {
      counted.add(kc);
      countCalls(kc, counter);
    }
    return kc;
  };
}

/** A plain KubeConfig (not counted), e.g. for a foreign writer or an observer. */
export function loadKubeConfig(kubeconfigPath: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  return kc;
}

// ---------------------------------------------------------------------------------------------------------------
// A fast keep-alive client for setup and load generation

/** HTTP error of {@link RawKube}. */
export class RawKubeError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.name = 'RawKubeError';
    this.status = status;
  }
}

/**
 * Minimal JSON client over one keep-alive HTTPS agent, with the KubeConfig's certificates. The benchmarks use it to
 * create objects and to play kubelets and foreign writers; it is also the "keep-alive" reference floor.
 */
export class RawKube {
  readonly #server: URL;
  readonly #opts: https.RequestOptions;
  readonly #agent: https.Agent | http.Agent;

  private constructor(server: URL, opts: https.RequestOptions, maxSockets: number) {
    this.#server = server;
    this.#opts = opts;
    this.#agent = server.protocol === 'http:' ? new http.Agent({ keepAlive: true, maxSockets }) : new https.Agent({ keepAlive: true, maxSockets, ...pickTls(opts) });
  }

  static async from(kc: KubeConfig, maxSockets = 64): Promise<RawKube> {
    const cluster = kc.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    const opts: https.RequestOptions = {};
    await kc.applyToHTTPSOptions(opts);
    return new RawKube(new URL(cluster.server), opts, maxSockets);
  }

  async request<T = Record<string, unknown>>(method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<T> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const url = new URL(this.#server.pathname.replace(/\/+$/, '') + path, this.#server);
    const mod = url.protocol === 'http:' ? http : https;
    return new Promise<T>((resolve, reject) => {
      const req = mod.request(
        url,
        {
          method,
          agent: this.#agent,
          headers: {
            Accept: 'application/json',
            ...(this.#opts.headers ?? {}),
            ...(payload ? { 'Content-Type': contentType, 'Content-Length': payload.length } : {}),
          },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) resolve((text ? JSON.parse(text) : {}) as T);
            else reject(new RawKubeError(status, `${method} ${path}: HTTP ${status}: ${text.slice(0, 300)}`));
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      if (payload) req.write(payload);
      req.end();
    });
  }

  get<T = Record<string, unknown>>(path: string): Promise<T> {
    return this.request<T>('GET', path);
  }

  post<T = Record<string, unknown>>(path: string, body: unknown): Promise<T> {
    return this.request<T>('POST', path, body);
  }

  mergePatch<T = Record<string, unknown>>(path: string, body: unknown): Promise<T> {
    return this.request<T>('PATCH', path, body, 'application/merge-patch+json');
  }

  /**
   * Streams a watch (`path` with `watch=1` and a resourceVersion); calls `onEvent` per line until `signal` aborts.
   * Resolves when the stream ends.
   */
  async watch(path: string, onEvent: (type: string, object: RawNode) => void, signal: AbortSignal): Promise<void> {
    const url = new URL(this.#server.pathname.replace(/\/+$/, '') + path, this.#server);
    const mod = url.protocol === 'http:' ? http : https;
    await new Promise<void>((resolve, reject) => {
      const req = mod.request(url, { method: 'GET', agent: this.#agent, signal, headers: { Accept: 'application/json', ...(this.#opts.headers ?? {}) } }, (res) => {
        let buffer = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buffer += chunk;
          let i: number;
          while ((i = buffer.indexOf('\n')) >= 0) {
            const line = buffer.slice(0, i);
            buffer = buffer.slice(i + 1);
            if (line.trim() === '') continue;
            const e = JSON.parse(line) as { type: string; object: RawNode };
            onEvent(e.type, e.object);
          }
        });
        res.on('end', () => resolve());
        res.on('error', () => resolve());
      });
      req.on('error', (e) => (signal.aborted ? resolve() : reject(e)));
      req.end();
    });
  }

  close(): void {
    this.#agent.destroy();
  }
}

function pickTls(opts: https.RequestOptions): https.AgentOptions {
  const out: https.AgentOptions = {};
  if (opts.ca) out.ca = opts.ca;
  if (opts.cert) out.cert = opts.cert;
  if (opts.key) out.key = opts.key;
  if (opts.rejectUnauthorized !== undefined) out.rejectUnauthorized = opts.rejectUnauthorized;
  if (opts.servername) out.servername = opts.servername;
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Objects

export const MACHINES_PATH = '/apis/cluster.x-k8s.io/v1beta2';
/** Label on every object a benchmark creates: `capi-tp-bench=<run id>`, for selection and cleanup. */
export const BENCH_LABEL = 'capi-tp-bench';

/** A short random id, valid in names and label values. */
export function runId(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** Runs `fn` over `items` with at most `concurrency` at a time; resolves with the results in order. */
export async function mapConcurrent<T, R>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, async () => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      out[i] = await fn(items[i] as T, i);
    }
  });
  await Promise.all(workers);
  return out;
}

export interface BenchTaint {
  readonly key: string;
  readonly value?: string;
  readonly effect: 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';
}

/** One Machine and its Node, with the Machine's uid and resourceVersion after creation. */
export interface Pair {
  readonly machine: string;
  readonly node: string;
  readonly uid: string;
  readonly resourceVersion: string;
}

export async function createNamespace(raw: RawKube, name: string, run: string): Promise<void> {
  await raw.post('/api/v1/namespaces', { metadata: { name, labels: { [BENCH_LABEL]: run } } });
}

/**
 * Registers a workload cluster in `capi` mode as Cluster API would: a Cluster `<cluster>` whose control plane endpoint
 * is the workload API server's address (the spec must not be empty; no controller reads it here), and the Secret
 * `<cluster>-kubeconfig` holding `kubeconfigYaml` (type, label and key as Cluster API writes them).
 */
export async function registerWorkloadCluster(raw: RawKube, ns: string, run: string, cluster: string, server: string, kubeconfigYaml: string): Promise<void> {
  const endpoint = new URL(server);
  await raw.post(`${MACHINES_PATH}/namespaces/${ns}/clusters`, {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Cluster',
    metadata: { name: cluster, namespace: ns, labels: { [BENCH_LABEL]: run } },
    spec: { controlPlaneEndpoint: { host: endpoint.hostname, port: Number(endpoint.port) } },
  });
  await raw.post(`/api/v1/namespaces/${ns}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    type: 'cluster.x-k8s.io/secret',
    metadata: { name: `${cluster}-kubeconfig`, namespace: ns, labels: { 'cluster.x-k8s.io/cluster-name': cluster, [BENCH_LABEL]: run } },
    data: { value: Buffer.from(kubeconfigYaml).toString('base64') },
  });
}

/**
 * Creates `count` Node/Machine pairs: Node `<nodePrefix><i>` (default `<run>-n<i>`; no taints unless given, the CAPI
 * annotations naming its Machine and Cluster) and Machine `<namespace>/<machinePrefix><i>` (default `m<i>`) with
 * `spec.taints`, `spec.clusterName` and `status.nodeRef`, for i = `first` … `first + count − 1`. The Nodes go to
 * `nodeKube` (a workload cluster's API server) when given, else to `raw`. Three requests per pair, `concurrency`
 * pairs at a time, over the keep-alive clients.
 */
export async function createPairs(
  raw: RawKube,
  opts: {
    run: string;
    namespace: string;
    count: number;
    first?: number;
    machineTaints: readonly BenchTaint[];
    nodeTaints?: readonly BenchTaint[];
    nodeAnnotations?: Readonly<Record<string, string>>;
    /** Give each Node a kubelet-like status (conditions, capacity, node info, images), as it is created. */
    nodeStatus?: boolean;
    concurrency?: number;
    /** The Cluster the Machines belong to (default `bench`). */
    clusterName?: string;
    machinePrefix?: string;
    nodePrefix?: string;
    /** Where the Nodes live (default `raw`, the management cluster: `self` mode). */
    nodeKube?: RawKube;
  },
): Promise<Pair[]> {
  const first = opts.first ?? 0;
  const cluster = opts.clusterName ?? 'bench';
  const nodeKube = opts.nodeKube ?? raw;
  const indexes = Array.from({ length: opts.count }, (_, i) => first + i);
  return mapConcurrent(indexes, opts.concurrency ?? 32, async (i) => {
    const names = { machine: `${opts.machinePrefix ?? 'm'}${i}`, node: `${opts.nodePrefix ?? `${opts.run}-n`}${i}` };
    await nodeKube.post('/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: names.node,
        labels: { [BENCH_LABEL]: opts.run, 'kubernetes.io/hostname': names.node },
        annotations: {
          'cluster.x-k8s.io/machine': names.machine,
          'cluster.x-k8s.io/cluster-namespace': opts.namespace,
          'cluster.x-k8s.io/cluster-name': cluster,
          ...opts.nodeAnnotations,
        },
      },
      spec: opts.nodeTaints && opts.nodeTaints.length > 0 ? { taints: opts.nodeTaints } : {},
      // A Node keeps the status it is created with (a kubelet registers its Node that way).
      ...(opts.nodeStatus ? { status: kubeletStatus(names.node, new Date()) } : {}),
    });
    await createMachine(raw, opts.namespace, names.machine, opts.run, opts.machineTaints, cluster);
    const m = await raw.mergePatch<{ metadata: { uid: string; resourceVersion: string } }>(
      `${MACHINES_PATH}/namespaces/${opts.namespace}/machines/${names.machine}/status`,
      { status: { nodeRef: { name: names.node } } },
    );
    return { ...names, uid: m.metadata.uid, resourceVersion: m.metadata.resourceVersion };
  });
}

/**
 * A kubelet-like Node status (about 3 KB of JSON: four conditions, addresses, capacity, node info, ten images).
 * A heartbeat is this status with a new `lastHeartbeatTime`; nothing the reconcile function reads changes.
 */
export function kubeletStatus(node: string, heartbeat: Date): Record<string, unknown> {
  const t = heartbeat.toISOString().replace(/\.\d+Z$/, 'Z');
  const since = '2026-01-01T00:00:00Z';
  const condition = (type: string, status: string, reason: string, message: string) => ({ type, status, lastHeartbeatTime: t, lastTransitionTime: since, reason, message });
  return {
    conditions: [
      condition('MemoryPressure', 'False', 'KubeletHasSufficientMemory', 'kubelet has sufficient memory available'),
      condition('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
      condition('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
      condition('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
    ],
    addresses: [
      { type: 'InternalIP', address: '10.0.0.1' },
      { type: 'Hostname', address: node },
    ],
    capacity: { cpu: '8', memory: '32869004Ki', pods: '110', 'ephemeral-storage': '101430960Ki' },
    allocatable: { cpu: '7910m', memory: '31717004Ki', pods: '110', 'ephemeral-storage': '93478772582' },
    nodeInfo: {
      machineID: 'ec2d8f8a1f7b4a4c9a3e1f0b2c3d4e5f',
      systemUUID: 'ec2d8f8a-1f7b-4a4c-9a3e-1f0b2c3d4e5f',
      bootID: 'b6f1c2d3-e4f5-4a6b-8c7d-9e0f1a2b3c4d',
      kernelVersion: '6.1.0-18-cloud-amd64',
      osImage: 'Debian GNU/Linux 12 (bookworm)',
      containerRuntimeVersion: 'containerd://1.7.13',
      kubeletVersion: 'v1.34.3',
      kubeProxyVersion: 'v1.34.3',
      operatingSystem: 'linux',
      architecture: 'amd64',
    },
    images: Array.from({ length: 10 }, (_, i) => ({
      names: [`registry.example.com/platform/component-${i}@sha256:${String(i).repeat(64).slice(0, 64)}`, `registry.example.com/platform/component-${i}:v1.${i}.0`],
      sizeBytes: 10_000_000 + i * 1_000_003,
    })),
  };
}

/** Creates a Machine of `cluster` (`spec.taints` as given, propagation Always), controlled by the cluster's MachineSet. */
export async function createMachine(raw: RawKube, namespace: string, name: string, run: string, taints: readonly BenchTaint[], cluster: string): Promise<void> {
  const spec: Record<string, unknown> = {
    clusterName: cluster,
    bootstrap: { dataSecretName: `${name}-bootstrap` },
    infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine', name },
  };
  if (taints.length > 0) spec['taints'] = taints.map((t) => ({ ...t, propagation: 'Always' }));
  await raw.post(`${MACHINES_PATH}/namespaces/${namespace}/machines`, {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'Machine',
    metadata: {
      name,
      namespace,
      labels: { 'cluster.x-k8s.io/cluster-name': cluster, [BENCH_LABEL]: run },
      // As Cluster API's Machines of a MachineDeployment: controlled by a MachineSet (the forwarder indexes them by it).
      ownerReferences: [{ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineSet', name: `${cluster}-md-0`, uid: machineSetUid(cluster), controller: true, blockOwnerDeletion: true }],
    },
    spec,
  });
}

/** A stable uid for a workload cluster's (absent) MachineSet: the bench's control planes run no garbage collector. */
function machineSetUid(cluster: string): string {
  const hex = createHash('sha256').update(cluster).digest('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
}

/** Sets a Machine's `spec.taints` (merge patch: the list is replaced). Returns the Machine's new resourceVersion. */
export async function setMachineTaints(raw: RawKube, namespace: string, machine: string, taints: readonly BenchTaint[]): Promise<string> {
  const out = await raw.mergePatch<{ metadata: { resourceVersion: string; uid: string } }>(`${MACHINES_PATH}/namespaces/${namespace}/machines/${machine}`, {
    spec: { taints: taints.map((t) => ({ ...t, propagation: 'Always' })) },
  });
  return out.metadata.resourceVersion;
}

/** Reads a Machine's uid and resourceVersion (for building events). */
export async function machineMeta(raw: RawKube, namespace: string, machine: string): Promise<{ uid: string; resourceVersion: string }> {
  const m = await raw.get<{ metadata: { uid: string; resourceVersion: string } }>(`${MACHINES_PATH}/namespaces/${namespace}/machines/${machine}`);
  return { uid: m.metadata.uid, resourceVersion: m.metadata.resourceVersion };
}

export interface RawNode {
  metadata: { name: string; resourceVersion: string; uid?: string; annotations?: Record<string, string> };
  spec?: { taints?: Array<{ key: string; value?: string; effect: string }> };
}

/** Lists the Nodes of a run (one request). */
/**
 * Observes a benchmark taint on the run's Nodes of one workload cluster: lists them (for the version to watch from),
 * then watches until `signal` aborts, resumed from the last version seen when the API server ends the watch (it does
 * after 30–60 min, --min-request-timeout). For each modified Node whose taint `key` has the value `v<N>`, the highest N
 * seen goes to `values` under `<cluster>/<node>`, then to `onValue` with that key. Resolves once the list is made;
 * `done` settles when the watch stops.
 */
export async function observeTaintValues(
  o: { readonly raw: RawKube; readonly cluster: string; readonly run: string; readonly key: string; readonly values: Map<string, number>; readonly signal: AbortSignal },
  onValue: (node: string, v: number) => void,
): Promise<{ readonly done: Promise<void> }> {
  const selector = encodeURIComponent(`${BENCH_LABEL}=${o.run}`);
  const list = await o.raw.get<{ metadata: { resourceVersion: string } }>(`/api/v1/nodes?labelSelector=${selector}&limit=1`);
  let from = list.metadata.resourceVersion;
  const onNode = (type: string, node: RawNode): void => {
    if (node.metadata?.resourceVersion) from = node.metadata.resourceVersion;
    if (type !== 'MODIFIED') return;
    const v = Number(node.spec?.taints?.find((t) => t.key === o.key)?.value?.slice(1));
    if (!Number.isFinite(v)) return;
    const key = `${o.cluster}/${node.metadata.name}`;
    o.values.set(key, Math.max(o.values.get(key) ?? -1, v));
    onValue(key, v);
  };
  const done = (async () => {
    while (!o.signal.aborted) {
      await o.raw.watch(`/api/v1/nodes?watch=1&allowWatchBookmarks=true&labelSelector=${selector}&resourceVersion=${from}`, onNode, o.signal).catch(() => undefined);
      if (!o.signal.aborted) await sleep(100);
    }
  })();
  return { done };
}

export async function listNodes(raw: RawKube, run: string): Promise<RawNode[]> {
  const list = await raw.get<{ items: RawNode[] }>(`/api/v1/nodes?labelSelector=${encodeURIComponent(`${BENCH_LABEL}=${run}`)}`);
  return list.items;
}

/** Whether a Node carries a taint with this key, value and effect. */
export function hasTaint(node: RawNode, t: BenchTaint): boolean {
  return (node.spec?.taints ?? []).some((x) => x.key === t.key && (x.value ?? '') === (t.value ?? '') && x.effect === t.effect);
}

/** Deletes what a run created: its Nodes (one deletecollection) and its namespaces (Machines and Events go with them, eventually). */
export async function cleanup(raw: RawKube, run: string, namespaces: readonly string[]): Promise<void> {
  await raw.request('DELETE', `/api/v1/nodes?labelSelector=${encodeURIComponent(`${BENCH_LABEL}=${run}`)}`).catch(() => undefined);
  for (const ns of namespaces) {
    await raw.request('DELETE', `${MACHINES_PATH}/namespaces/${ns}/machines`).catch(() => undefined);
    await raw.request('DELETE', `/api/v1/namespaces/${ns}`).catch(() => undefined);
  }
}
