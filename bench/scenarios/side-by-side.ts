/**
 * Scenario 10: side by side with Cluster API's own propagation, on one control plane, in one run (issue 29 item 1,
 * issue 32 item 3). A control plane of its own, with the upstream Cluster API manager (gate MachineTaintPropagation on)
 * and the local provider; one workload cluster with an API server of its own that writes an audit log; the product's
 * pipeline as `npm start -- --capi` runs it. Two MachineDeployments in that cluster: "capi" declares its taint in
 * `spec.template.spec.taints` (Cluster API propagates it; its Nodes register with `node.cluster.x-k8s.io/uninitialized`),
 * "product" through the product's template annotation (the product propagates it; its Nodes register with the product's
 * startup gate). Each has a key of its own.
 *
 * For each size step (`sideBySideN`, e.g. 100 then 500 replicas per side):
 * - **join**: both MachineDeployments scale up at once (0 → 100, then 100 → 500: 100 and 400 Nodes joining per side).
 *   Per Node: from its appearance (the bench's Node watch) to its carrying its side's taint without its startup gate;
 *   the product's reconciles and workload API calls on the "capi" side's joining Nodes; and, for the product's Nodes,
 *   where the time goes (appearance → Cluster API's `nodeRef` on the Machine → Cluster API's first Node write → ready).
 * - **change**: one declaration change per side at once (a new value). Per Machine: from the Machine showing the new
 *   value (the bench's Machine watch) to its Node showing it; the whole fleet's convergence from the edit; requests to
 *   the workload API server per changed Node, per client, counted at the API server (its audit log: the product is the
 *   User-Agent `capi-taint-propagator`, Cluster API the `capi-admin` user with any other agent).
 * - **foreign change**: only the "capi" side's value changes; what the product spends on it (reconciles, workload
 *   requests), once every one of those Machine and Node changes reached the forwarder (its filter counters).
 */
import { readFileSync, statSync } from 'node:fs';
import os from 'node:os';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import type { WorkloadApiServer } from '#local/control-plane/workload-servers.ts';
import { LOCAL_BOOTSTRAP_CONFIG_TEMPLATE, LOCAL_CLUSTER, LOCAL_CONTROL_PLANE, LOCAL_MACHINE_TEMPLATE, type KindApi } from '#local/infrastructure/crds.ts';
import { startPipeline, type Pipeline } from '#local/pipeline.ts';
import type { PipelineCounters } from '#local/pipeline-report.ts';
import { STARTUP_GATE_TAINT_KEY, TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';
import { PRODUCT_NAME } from '#shared/adapters/kubernetes/user-agent.ts';
import type { BenchContext } from '../lib/context.ts';
import { MACHINES_PATH, RawKube, loadKubeConfig, runId } from '../lib/kube.ts';
import { quantile, round, sleep } from '../lib/stats.ts';

const DECLARE = 'taints.capi-taint-propagator.dev/machine';
const CAPI_KEY = 'bench.example.com/capi-owned';
const PRODUCT_KEY = 'bench.example.com/product-owned';
const KUBERNETES_VERSION = 'v1.34.3';
type Side = 'capi' | 'product';
const SIDES: readonly Side[] = ['capi', 'product'];

/** Latency figures of one side. */
export interface SideLatency {
  readonly n: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** From the edit (or the scale-up) to the last Node of the side done. */
  readonly convergeMs: number;
}

export interface ChangeRun {
  /** Machines (= Nodes) per side. */
  readonly replicas: number;
  /** Machine update → Node update, per side. */
  readonly capi: SideLatency & { readonly workloadCallsPerChangedNode: number };
  readonly product: SideLatency & { readonly workloadCallsPerChangedNode: number };
  /** product / Cluster API. */
  readonly ratioP99: number;
  readonly ratioConverge: number;
  /** Requests to the workload API server during the change, by client and verb (both sides' Nodes). */
  readonly workloadRequests: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** The "capi" side alone changes again: what the product spent on it. */
  readonly foreign: { readonly productReconciles: number; readonly productWorkloadCalls: number; readonly callsPerForeignChange: number; readonly filteredMachineChanges: number; readonly filteredNodeChanges: number };
}

export interface JoinRun {
  /** Nodes joining per side, and the replicas per side after. */
  readonly joining: number;
  readonly replicas: number;
  /** Node appearance → its taint on and its startup gate off. */
  readonly capi: SideLatency;
  readonly product: SideLatency;
  readonly ratioP99: number;
  /** The product's cost on the "capi" side's joining Nodes (changes Cluster API owns). */
  readonly productOnCapiNodes: { readonly workloadCallsPerNode: number };
  /** The product's reconciles during the join, by outcome. */
  readonly productReconciles: Readonly<Record<string, number>>;
  /** Where a product Node's time goes: p50/p99 of each step, in ms from its appearance. */
  readonly productProfile: Readonly<Record<string, { readonly p50Ms: number; readonly p99Ms: number }>>;
}

export interface SideBySideResult {
  readonly sizes: readonly number[];
  readonly clusterApiVersion: string;
  readonly joins: readonly JoinRun[];
  readonly changes: readonly ChangeRun[];
  /** 1-minute load average before and after the scenario (the machine is shared). */
  readonly loadAverage: { readonly before: number; readonly after: number };
  /** The keys of results.json, from the largest size. */
  readonly vsCapiRatioP99: number;
  readonly vsCapiRatioConverge: number;
  readonly workloadCallsPerChangedNode: number;
  readonly joinP99RatioVsCapi: number;
  readonly callsPerForeignChange: number;
}

/** What the bench's watches saw, per object, with the time it saw it first. */
class Observed {
  /** Node name → state and first-seen times. */
  readonly nodes = new Map<string, { appearedAt: number; taints: Map<string, string>; capiInitAt?: number; readyAt?: number; valueAt: Map<string, number> }>();
  /** Machine name → side, nodeRef time, and the first time each declared value was seen. */
  readonly machines = new Map<string, { side: Side; providerIdAt?: number; nodeRefAt?: number; nodeName?: string; valueAt: Map<string, number> }>();

  node(obj: RawObj, now: number): void {
    const name = obj.metadata.name;
    const taints = new Map((obj.spec?.['taints'] as { key: string; value?: string; effect: string }[] | undefined ?? []).map((t) => [t.key, t.value ?? '']));
    let n = this.nodes.get(name);
    if (!n) {
      n = { appearedAt: now, taints, valueAt: new Map() };
      this.nodes.set(name, n);
    }
    n.taints = taints;
    if (n.capiInitAt === undefined && obj.metadata.annotations?.[TRACKING_ANNOTATION] !== undefined) n.capiInitAt = now;
    const side = sideOfName(name);
    if (side === 'other') return;
    const key = side === 'capi' ? CAPI_KEY : PRODUCT_KEY;
    const gate = side === 'capi' ? UNINITIALIZED_TAINT_KEY : STARTUP_GATE_TAINT_KEY;
    const value = taints.get(key);
    if (value !== undefined && !taints.has(gate)) {
      n.readyAt ??= now;
      if (!n.valueAt.has(value)) n.valueAt.set(value, now);
    }
  }

  machine(obj: RawObj, now: number): void {
    const side = obj.metadata.labels?.['cluster.x-k8s.io/deployment-name'] === 'capi' ? 'capi' : 'product';
    let m = this.machines.get(obj.metadata.name);
    if (!m) {
      m = { side, valueAt: new Map() };
      this.machines.set(obj.metadata.name, m);
    }
    if (m.providerIdAt === undefined && typeof obj.spec?.['providerID'] === 'string') m.providerIdAt = now;
    const nodeName = (obj.status?.['nodeRef'] as { name?: string } | undefined)?.name;
    if (nodeName && m.nodeRefAt === undefined) {
      m.nodeRefAt = now;
      m.nodeName = nodeName;
    }
    const value = side === 'capi'
      ? (obj.spec?.['taints'] as { key: string; value?: string }[] | undefined)?.find((t) => t.key === CAPI_KEY)?.value
      : /=([^:]*):/.exec(obj.metadata.annotations?.[DECLARE] ?? '')?.[1];
    if (value !== undefined && !m.valueAt.has(value)) m.valueAt.set(value, now);
  }
}

interface RawObj {
  metadata: { name: string; resourceVersion: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

/** The side of a Machine's Node by its name (the provider names it after the Machine, which starts with its MachineDeployment's). */
function sideOfName(name: string): Side | 'other' {
  return name.startsWith('capi-') ? 'capi' : name.startsWith('product-') ? 'product' : 'other';
}

/** A watch that resumes from the last resourceVersion until `signal` aborts (a watch ends every few minutes). */
async function keepWatching(raw: RawKube, listPath: string, onObject: (o: RawObj) => void, signal: AbortSignal): Promise<void> {
  const list = await raw.get<{ metadata: { resourceVersion: string }; items: RawObj[] }>(listPath);
  for (const o of list.items) onObject(o);
  let rv = list.metadata.resourceVersion;
  const sep = listPath.includes('?') ? '&' : '?';
  while (!signal.aborted) {
    try {
      await raw.watch(`${listPath}${sep}watch=1&allowWatchBookmarks=true&resourceVersion=${rv}&timeoutSeconds=240`, (type, object) => {
        const o = object as unknown as RawObj;
        rv = o.metadata.resourceVersion;
        if (type === 'ADDED' || type === 'MODIFIED') onObject(o);
      }, signal);
    } catch {
      if (!signal.aborted) await sleep(200);
    }
  }
}

/** The audit log of the workload API server, read from an offset: requests by client, verb and the side of the Node. */
class AuditLog {
  private readonly path: string;
  constructor(path: string) {
    this.path = path;
  }
  offset(): number {
    try {
      return statSync(this.path).size;
    } catch {
      return 0;
    }
  }
  /** Requests since `from` (watches excluded: one long request each), keyed `<client>` → `<verb> <side|->` → count. */
  since(from: number): Record<string, Record<string, number>> {
    const text = readFileSync(this.path).subarray(from).toString('utf8');
    const out: Record<string, Record<string, number>> = {};
    for (const line of text.split('\n')) {
      if (line === '') continue;
      const e = JSON.parse(line) as { stage?: string; verb?: string; userAgent?: string; user?: { username?: string }; objectRef?: { resource?: string; name?: string } };
      if (e.stage !== 'ResponseComplete' || e.verb === 'watch') continue;
      const client = e.userAgent?.startsWith(`${PRODUCT_NAME}/`) ? 'product' : e.user?.username === 'capi-admin' ? 'clusterApi' : 'other';
      const side = e.objectRef?.resource === 'nodes' && e.objectRef.name ? sideOfName(e.objectRef.name) : '-';
      const key = `${e.verb} ${side}`;
      (out[client] ??= {})[key] = (out[client]?.[key] ?? 0) + 1;
    }
    return out;
  }
}

function count(requests: Record<string, Record<string, number>>, client: string, side: Side | '-' | '*'): number {
  return Object.entries(requests[client] ?? {}).reduce((a, [k, v]) => (side === '*' || k.endsWith(` ${side}`) ? a + v : a), 0);
}

function latency(values: readonly number[], convergeMs: number): SideLatency {
  return { n: values.length, p50Ms: round(quantile(values, 0.5), 0), p99Ms: round(quantile(values, 0.99), 0), maxMs: round(values.length ? Math.max(...values) : Number.NaN, 0), convergeMs: round(convergeMs, 0) };
}

async function waitUntil<T>(what: string, timeoutMs: number, probe: () => T | undefined | false | Promise<T | undefined | false>): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (performance.now() > deadline) throw new Error(`side-by-side: timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

const gvp = (k: KindApi): string => `/apis/${k.group}/${k.version}`;

export async function runSideBySide(ctx: BenchContext): Promise<SideBySideResult> {
  const sizes = ctx.sizes.sideBySideN;
  const loadBefore = round(os.loadavg()[0] ?? 0, 2);
  const timeoutMs = Math.max(120_000, sizes[sizes.length - 1]! * 2_000);
  const cp: ControlPlane = await startControlPlane({
    log: (line) => {
      if (!line.startsWith('[local-provider]')) ctx.log(`[side-by-side] ${line}`);
    },
    capi: { featureGates: { MachineTaintPropagation: true }, workloadClusters: 1, auditWorkloadServers: true },
  });
  const stop = new AbortController();
  let pipeline: Pipeline | undefined;
  const watches: Promise<void>[] = [];
  try {
    const mgmt = await RawKube.from(loadKubeConfig(cp.kubeconfigPath));
    const wc = cp.capi?.workloadServers[0] as WorkloadApiServer;
    if (!wc?.auditLogPath) throw new Error('side-by-side: the workload API server has no audit log');
    const workload = await RawKube.from(loadKubeConfig(wc.adminKubeconfigPath));
    const audit = new AuditLog(wc.auditLogPath);
    const ns = runId('sbs');
    await mgmt.post('/api/v1/namespaces', { metadata: { name: ns } });
    const cluster = 'wl';
    await createCluster(mgmt, ns, cluster, timeoutMs);

    const seen = new Observed();
    watches.push(keepWatching(workload, '/api/v1/nodes', (o) => seen.node(o, performance.now()), stop.signal));
    watches.push(keepWatching(mgmt, `${MACHINES_PATH}/namespaces/${ns}/machines`, (o) => seen.machine(o, performance.now()), stop.signal));

    // 10 reconcile invocations at once: the deployed reconcile function's reserved concurrency (serverless.yml
    // reconcileReservedConcurrency; `npm start` runs 2), as Cluster API's Machine controller runs 10 workers.
    pipeline = await startPipeline({ kubeconfig: cp.kubeconfigPath, mode: 'capi', stateNamespace: ns, machineNamespace: ns, leaseName: 'side-by-side', concurrency: 10 });
    await pipeline.waitForForwarder(60_000);
    const p = pipeline;
    const drained = async (): Promise<PipelineCounters> => waitUntil('the product queue to drain', timeoutMs, async () => {
      const c = await p.freshCounters();
      return c.queueVisible === 0 && c.queueInFlight === 0 ? c : undefined;
    });

    let value = 1;
    await createDeployment(mgmt, ns, cluster, 'capi', { taints: [{ key: CAPI_KEY, value: `v${value}`, effect: 'NoSchedule', propagation: 'Always' }], startupTaints: [{ key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' }], bootSeconds: ctx.sizes.sideBySideBootSeconds });
    await createDeployment(mgmt, ns, cluster, 'product', { annotations: { [DECLARE]: `${PRODUCT_KEY}=v${value}:NoSchedule` }, startupTaints: [{ key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' }], bootSeconds: ctx.sizes.sideBySideBootSeconds });

    const joins: JoinRun[] = [];
    const changes: ChangeRun[] = [];
    let replicas = 0;
    for (const size of sizes) {
      // ---- join: both sides scale up at once
      const joining = size - replicas;
      const known = new Set(seen.nodes.keys());
      const before = await drained();
      const auditFrom = audit.offset();
      const t0 = performance.now();
      await Promise.all(SIDES.map((side) => mgmt.mergePatch(`${MACHINES_PATH}/namespaces/${ns}/machinedeployments/${side}`, { spec: { replicas: size } })));
      ctx.log(`[side-by-side] join: ${joining} Nodes per side (to ${size})`);
      const fresh = (side: Side) => [...seen.nodes.entries()].filter(([name]) => !known.has(name) && sideOfName(name) === side);
      await waitUntil(`${joining} joining Nodes per side to carry their taint`, timeoutMs, () => SIDES.every((side) => {
        const nodes = fresh(side);
        return nodes.length === joining && nodes.every(([, n]) => n.readyAt !== undefined);
      }));
      const after = await drained();
      const requests = audit.since(auditFrom);
      const joinLatency = (side: Side): SideLatency => {
        const nodes = fresh(side).map(([, n]) => n);
        return latency(nodes.map((n) => (n.readyAt as number) - n.appearedAt), Math.max(...nodes.map((n) => n.readyAt as number)) - t0);
      };
      const productNodes = fresh('product');
      const machineByNode = new Map([...seen.machines.values()].filter((m) => m.nodeName).map((m) => [m.nodeName as string, m]));
      const step = (f: (name: string, n: (typeof productNodes)[number][1]) => number | undefined) => {
        const values = productNodes.map(([name, n]) => f(name, n)).filter((v): v is number => v !== undefined);
        return { p50Ms: round(quantile(values, 0.5), 0), p99Ms: round(quantile(values, 0.99), 0) };
      };
      const capi = joinLatency('capi');
      const product = joinLatency('product');
      joins.push({
        joining,
        replicas: size,
        capi,
        product,
        ratioP99: round(product.p99Ms / capi.p99Ms, 2),
        productOnCapiNodes: { workloadCallsPerNode: round(count(requests, 'product', 'capi') / joining, 2) },
        productReconciles: Object.fromEntries(Object.entries(after.reconciles).map(([k, v]) => [k, v - (before.reconciles[k as keyof typeof before.reconciles] ?? 0)]).filter(([, v]) => (v as number) > 0)),
        productProfile: {
          machineProviderIdBeforeNode: step((name) => { const m = machineByNode.get(name); const n = seen.nodes.get(name); return m?.providerIdAt !== undefined && n ? n.appearedAt - m.providerIdAt : undefined; }),
          nodeRefByClusterApi: step((name) => { const m = machineByNode.get(name); return m?.nodeRefAt !== undefined ? m.nodeRefAt - (seen.nodes.get(name)?.appearedAt ?? 0) : undefined; }),
          firstClusterApiWrite: step((_, n) => (n.capiInitAt !== undefined ? n.capiInitAt - n.appearedAt : undefined)),
          taintedAndUngated: step((_, n) => (n.readyAt as number) - n.appearedAt),
        },
      });
      replicas = size;
      ctx.log(`[side-by-side] join ${joining}: p99 capi ${capi.p99Ms} ms, product ${product.p99Ms} ms`);

      // ---- change: one declaration change per side, at once
      value += 1;
      const v = `v${value}`;
      const changeFrom = audit.offset();
      const tEdit = performance.now();
      await Promise.all([
        mgmt.mergePatch(`${MACHINES_PATH}/namespaces/${ns}/machinedeployments/capi`, { spec: { template: { spec: { taints: [{ key: CAPI_KEY, value: v, effect: 'NoSchedule', propagation: 'Always' }] } } } }),
        mgmt.mergePatch(`${MACHINES_PATH}/namespaces/${ns}/machinedeployments/product`, { spec: { template: { metadata: { annotations: { [DECLARE]: `${PRODUCT_KEY}=${v}:NoSchedule` } } } } }),
      ]);
      const machinesOf = (side: Side) => [...seen.machines.values()].filter((m) => m.side === side && m.nodeName !== undefined);
      await waitUntil(`the new value on all ${size} Nodes per side`, timeoutMs, () => SIDES.every((side) => {
        const ms = machinesOf(side);
        return ms.length >= size && ms.every((m) => m.valueAt.has(v) && seen.nodes.get(m.nodeName as string)?.valueAt.has(v));
      }));
      await drained();
      const changeRequests = audit.since(changeFrom);
      const changeLatency = (side: Side) => {
        const ms = machinesOf(side);
        const nodeAt = ms.map((m) => seen.nodes.get(m.nodeName as string)?.valueAt.get(v) as number);
        return latency(ms.map((m, i) => (nodeAt[i] as number) - (m.valueAt.get(v) as number)), Math.max(...nodeAt) - tEdit);
      };
      const capiChange = { ...changeLatency('capi'), workloadCallsPerChangedNode: round(count(changeRequests, 'clusterApi', 'capi') / size, 2) };
      const productChange = { ...changeLatency('product'), workloadCallsPerChangedNode: round(count(changeRequests, 'product', 'product') / size, 2) };

      // ---- foreign change: only Cluster API's side changes; what does the product spend on it?
      value += 1;
      const fv = `v${value}`;
      const foreignBefore = await drained();
      const foreignFrom = audit.offset();
      await mgmt.mergePatch(`${MACHINES_PATH}/namespaces/${ns}/machinedeployments/capi`, { spec: { template: { spec: { taints: [{ key: CAPI_KEY, value: fv, effect: 'NoSchedule', propagation: 'Always' }] } } } });
      await waitUntil(`Cluster API's new value on all ${size} of its Nodes`, timeoutMs, () => machinesOf('capi').every((m) => seen.nodes.get(m.nodeName as string)?.valueAt.has(fv)));
      // Every Machine and Node change of it reached the forwarder, or was forwarded (then the product reconciled it).
      const foreignAfter = await waitUntil('the forwarder to see every Machine and Node change of the capi side', timeoutMs, async () => {
        const c = await drained();
        const filtered = (c.foreignDeclarationChangesFiltered - foreignBefore.foreignDeclarationChangesFiltered) + (c.foreignTaintChangesFiltered - foreignBefore.foreignTaintChangesFiltered);
        const forwarded = c.eventsForwarded - foreignBefore.eventsForwarded;
        return filtered + forwarded >= 2 * size ? c : undefined;
      });
      const foreignRequests = audit.since(foreignFrom);
      const productReconciles = Object.values(foreignAfter.reconciles).reduce((a, b) => a + b, 0) - Object.values(foreignBefore.reconciles).reduce((a, b) => a + b, 0);
      const productWorkloadCalls = count(foreignRequests, 'product', '*');
      changes.push({
        replicas: size,
        capi: capiChange,
        product: productChange,
        ratioP99: round(productChange.p99Ms / capiChange.p99Ms, 2),
        ratioConverge: round(productChange.convergeMs / capiChange.convergeMs, 2),
        workloadRequests: changeRequests,
        foreign: {
          productReconciles,
          productWorkloadCalls,
          // Each reconcile reads its Machine from the management cluster first (one call), plus what reached the workload API server.
          callsPerForeignChange: round((productReconciles + productWorkloadCalls) / size, 2),
          filteredMachineChanges: foreignAfter.foreignDeclarationChangesFiltered - foreignBefore.foreignDeclarationChangesFiltered,
          filteredNodeChanges: foreignAfter.foreignTaintChangesFiltered - foreignBefore.foreignTaintChangesFiltered,
        },
      });
      ctx.log(`[side-by-side] change at ${size}: p99 capi ${capiChange.p99Ms} ms, product ${productChange.p99Ms} ms; foreign: ${productReconciles} reconciles, ${productWorkloadCalls} workload calls`);
    }
    const lastChange = changes[changes.length - 1] as ChangeRun;
    const lastJoin = joins[joins.length - 1] as JoinRun;
    mgmt.close();
    workload.close();
    return {
      sizes,
      clusterApiVersion: cp.clusterApiVersion,
      joins,
      changes,
      loadAverage: { before: loadBefore, after: round(os.loadavg()[0] ?? 0, 2) },
      vsCapiRatioP99: lastChange.ratioP99,
      vsCapiRatioConverge: lastChange.ratioConverge,
      workloadCallsPerChangedNode: lastChange.product.workloadCallsPerChangedNode,
      joinP99RatioVsCapi: lastJoin.ratioP99,
      callsPerForeignChange: lastChange.foreign.callsPerForeignChange,
    };
  } finally {
    stop.abort();
    await pipeline?.stop();
    await Promise.allSettled(watches);
    await cp.stop();
  }
}

/** LocalCluster + LocalControlPlane + Cluster; waits until Cluster API is connected to its workload API server. */
async function createCluster(mgmt: RawKube, ns: string, name: string, timeoutMs: number): Promise<void> {
  const ref = (k: KindApi) => ({ apiGroup: k.group, kind: k.kind, name });
  await mgmt.post(`${gvp(LOCAL_CLUSTER)}/namespaces/${ns}/${LOCAL_CLUSTER.plural}`, { apiVersion: `${LOCAL_CLUSTER.group}/${LOCAL_CLUSTER.version}`, kind: LOCAL_CLUSTER.kind, metadata: { name } });
  await mgmt.post(`${gvp(LOCAL_CONTROL_PLANE)}/namespaces/${ns}/${LOCAL_CONTROL_PLANE.plural}`, { apiVersion: `${LOCAL_CONTROL_PLANE.group}/${LOCAL_CONTROL_PLANE.version}`, kind: LOCAL_CONTROL_PLANE.kind, metadata: { name }, spec: { version: KUBERNETES_VERSION } });
  await mgmt.post(`${MACHINES_PATH}/namespaces/${ns}/clusters`, { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Cluster', metadata: { name }, spec: { controlPlaneRef: ref(LOCAL_CONTROL_PLANE), infrastructureRef: ref(LOCAL_CLUSTER) } });
  await waitUntil(`Cluster ${ns}/${name} to be initialized and connected`, timeoutMs, async () => {
    const c = await mgmt.get<{ status?: { conditions?: { type: string; status: string }[] } }>(`${MACHINES_PATH}/namespaces/${ns}/clusters/${name}`);
    const ok = (type: string) => c.status?.conditions?.some((x) => x.type === type && x.status === 'True') ?? false;
    return ok('ControlPlaneInitialized') && ok('RemoteConnectionProbe');
  });
}

/** LocalMachineTemplate + LocalBootstrapConfigTemplate + a MachineDeployment of 0 replicas named `name`. */
async function createDeployment(
  mgmt: RawKube,
  ns: string,
  cluster: string,
  name: string,
  o: { readonly taints?: readonly Record<string, string>[]; readonly annotations?: Record<string, string>; readonly startupTaints: readonly { key: string; effect: string }[]; readonly bootSeconds: number },
): Promise<void> {
  const ref = (k: KindApi) => ({ apiGroup: k.group, kind: k.kind, name });
  await mgmt.post(`${gvp(LOCAL_MACHINE_TEMPLATE)}/namespaces/${ns}/${LOCAL_MACHINE_TEMPLATE.plural}`, { apiVersion: `${LOCAL_MACHINE_TEMPLATE.group}/${LOCAL_MACHINE_TEMPLATE.version}`, kind: LOCAL_MACHINE_TEMPLATE.kind, metadata: { name }, spec: { template: { spec: { startupTaints: o.startupTaints, bootSeconds: o.bootSeconds } } } });
  await mgmt.post(`${gvp(LOCAL_BOOTSTRAP_CONFIG_TEMPLATE)}/namespaces/${ns}/${LOCAL_BOOTSTRAP_CONFIG_TEMPLATE.plural}`, { apiVersion: `${LOCAL_BOOTSTRAP_CONFIG_TEMPLATE.group}/${LOCAL_BOOTSTRAP_CONFIG_TEMPLATE.version}`, kind: LOCAL_BOOTSTRAP_CONFIG_TEMPLATE.kind, metadata: { name }, spec: { template: { spec: {} } } });
  await mgmt.post(`${MACHINES_PATH}/namespaces/${ns}/machinedeployments`, {
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    kind: 'MachineDeployment',
    metadata: { name },
    spec: {
      clusterName: cluster,
      replicas: 0,
      template: {
        metadata: o.annotations ? { annotations: o.annotations } : {},
        spec: { clusterName: cluster, version: KUBERNETES_VERSION, bootstrap: { configRef: ref(LOCAL_BOOTSTRAP_CONFIG_TEMPLATE) }, infrastructureRef: ref(LOCAL_MACHINE_TEMPLATE), ...(o.taints ? { taints: o.taints } : {}) },
      },
    },
  });
}
