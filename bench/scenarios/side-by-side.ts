/**
 * Scenario 10: side by side with Cluster API's own propagation, on one control plane, in one run (issue 29 item 1,
 * issue 32 item 3). A control plane of its own, with the upstream Cluster API manager (gate MachineTaintPropagation on)
 * and the local provider, in a child process (bench/lib/control-plane-process.ts) as `npm run control-plane` runs
 * beside the product; one workload cluster with an API server of its own that writes an audit log; the product's
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
 *   requests), once every one of those Machine and Node changes reached the forwarder (its filter counters; in the
 *   deployed form, its checkpoint).
 *
 * Two forms of the product's side (`form`): `local`, the pipeline of `npm start -- --capi` in this process (forwarder,
 * in-memory queue and reconcile event source); `deployed` (`npm run bench -- --deployed --only=side-by-side`), the zips
 * of `npx serverless package` under local/lambda/'s runner as bench/scenarios/deployed.ts runs them (the forwarder's
 * rota of scheduled windows, the FIFO queue in fauxqs, the reconcile function on its event source mapping). Everything
 * else is the same; where the deployed form reads a figure differently is said at {@link DeployedProduct}.
 */
import { closeSync, fstatSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { GetQueueAttributesCommand, type QueueAttributeName } from '@aws-sdk/client-sqs';
import { LOCAL_BOOTSTRAP_CONFIG_TEMPLATE, LOCAL_CLUSTER, LOCAL_CONTROL_PLANE, LOCAL_MACHINE_TEMPLATE, type KindApi } from '#local/infrastructure/crds.ts';
import { functionsEnvironmentValue, readPackagedTemplate } from '#local/lambda/template.ts';
import { LambdaRunner } from '#local/lambda/runner.ts';
import { startEksAuthenticator, type EksAuthenticator } from '#local/lambda/eks-authenticator.ts';
import { kubeconfigSecretRbac } from '#local/rbac/kubeconfig-secret-rbac.ts';
import type { KubernetesObject } from '@kubernetes/client-node';
import { applyObjects, applyYamlFile } from '#local/rbac/apply-objects.ts';
import { packagedService } from '#local/lambda/serverless-package.ts';
import { startPipeline } from '#local/pipeline.ts';
import { CHECKPOINT_ANNOTATION } from '#shared/adapters/kubernetes/lease.ts';
import { STARTUP_GATE_TAINT_KEY, TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY, type TaintId } from '#shared/domain/taint.ts';
import { PRODUCT_NAME } from '#shared/adapters/kubernetes/user-agent.ts';
import type { BenchContext } from '../lib/context.ts';
import { startControlPlaneProcess, type ControlPlaneProcess } from '../lib/control-plane-process.ts';
import { MACHINES_PATH, RawKube, loadKubeConfig, runId } from '../lib/kube.ts';
import { quantile, round, sleep } from '../lib/stats.ts';
import { BENCH_PACKAGE_SHORT_WINDOWS } from './deployed.ts';

const DECLARE = 'taints.capi-taint-propagator.dev/machine';
const CAPI_KEY = 'bench.example.com/capi-owned';
const PRODUCT_KEY = 'bench.example.com/product-owned';
const KUBERNETES_VERSION = 'v1.34.3';
type Side = 'capi' | 'product';
const SIDES: readonly Side[] = ['capi', 'product'];

/**
 * The size steps of `--side-by-side-sizes` (replicas per side after each scale-up, comma-separated, increasing), e.g.
 * `100` for the 100-joining step alone. Throws on anything else, quoting it.
 * @example parseSideBySideSizes('100,500') // [100, 500]
 */
export function parseSideBySideSizes(text: string): number[] {
  const sizes = text.split(',').map((s) => (s.trim() === '' ? Number.NaN : Number(s)));
  const valid = sizes.every((n, i) => Number.isInteger(n) && n > 0 && (i === 0 || n > (sizes[i - 1] ?? 0)));
  if (!valid) throw new Error(`--side-by-side-sizes must be increasing positive integers (replicas per side after each scale-up, comma-separated), got ${JSON.stringify(text)}`);
  return sizes;
}

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
  /**
   * Machine update → Node update, per side; a Node that carried the new value before its Machine did counts 0 (the
   * product reads a MachineSet's template ahead of Cluster API's copy), and `nodeFirst` counts those Nodes.
   */
  readonly capi: SideLatency & { readonly workloadCallsPerChangedNode: number; readonly nodeFirst: number; readonly machinesFirstMs: number; readonly machinesConvergeMs: number };
  readonly product: SideLatency & { readonly workloadCallsPerChangedNode: number; readonly nodeFirst: number; readonly machinesFirstMs: number; readonly machinesConvergeMs: number };
  /** product / Cluster API. */
  readonly ratioP99: number;
  readonly ratioConverge: number;
  /** Requests to the workload API server during the change, by client and verb (both sides' Nodes). */
  readonly workloadRequests: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /**
   * The "capi" side alone changes again: what the product spent on it. The filter counters live in the forwarder's
   * process: the deployed form has them only when a window ends, so there they are left out (undefined); its wait
   * for the forwarder reads the Lease's checkpoint instead ({@link DeployedProduct}).
   */
  readonly foreign: { readonly productReconciles: number; readonly productWorkloadCalls: number; readonly productWorkloadRequests: Readonly<Record<string, number>>; readonly callsPerForeignChange: number; readonly forwardedMessages: number; readonly filteredMachineChanges: number | undefined; readonly filteredNodeChanges: number | undefined };
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
  /**
   * The three slowest product Nodes, each with its time from appearance to tainted and ungated (`ms`) and the
   * pipeline stages of its last write (the stage p99s above are each stage's own, often of different Nodes).
   */
  readonly productSlowest: readonly { readonly node: string; readonly ms: number; readonly stages: Readonly<Record<string, number>> }[];
  /**
   * Deployed form: the reconcile function's cold starts of the step (each counted at the start of its init), before its
   * first Node appeared (readied by the Machines' provider IDs) and from then until its last Node was done.
   */
  readonly productColdStarts?: { readonly beforeFirstNode: number; readonly whileJoining: number };
}

export interface SideBySideResult {
  /** The product's side: `local` (the pipeline in this process) or `deployed` (the packaged functions under the Lambda runner). */
  readonly form: SideBySideForm;
  /** Deployed form: the arguments of `npx serverless package`, and the functions' invocations over the scenario. */
  readonly packageArgs?: readonly string[];
  readonly deployedFunctions?: Record<string, unknown>;
  /** Deployed form with `MANAGEMENT_AUTH=eks`: the EKS stand-in's token reviews over the scenario. */
  readonly eksTokenReviews?: { readonly authenticated: number; readonly refused: number; readonly lastRefusal?: string };
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
  /** The latest resourceVersion seen on each watch (the deployed form compares the forwarder's checkpoint with them). */
  nodesRv = '0';
  machinesRv = '0';

  node(obj: RawObj, now: number): void {
    const name = obj.metadata.name;
    this.nodesRv = laterRv(this.nodesRv, obj.metadata.resourceVersion);
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
    this.machinesRv = laterRv(this.machinesRv, obj.metadata.resourceVersion);
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

/**
 * A watch that resumes from the last resourceVersion until `signal` aborts (a watch ends every few minutes); a deleted
 * object goes to `onDeleted` (under load a MachineSet can overshoot a scale-up and delete the extra Machine and Node).
 */
async function keepWatching(raw: RawKube, listPath: string, onObject: (o: RawObj) => void, signal: AbortSignal, onDeleted: (o: RawObj) => void = () => undefined): Promise<void> {
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
        else if (type === 'DELETED') onDeleted(o);
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
  /** The product's requests since `from` (watches excluded), keyed `<component> <verb> <resource>` (the component from its User-Agent). */
  productSince(from: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const line of readFileSync(this.path).subarray(from).toString('utf8').split('\n')) {
      if (line === '') continue;
      const e = JSON.parse(line) as { stage?: string; verb?: string; userAgent?: string; objectRef?: { resource?: string } };
      if (e.stage !== 'ResponseComplete' || e.verb === 'watch' || !e.userAgent?.startsWith(`${PRODUCT_NAME}/`)) continue;
      // `capi-taint-propagator/<version> (<form>; <component>)`
      const component = /; ([^)]+)\)/.exec(e.userAgent)?.[1] ?? 'unknown';
      const key = `${component} ${e.verb} ${e.objectRef?.resource ?? '-'}`;
      out[key] = (out[key] ?? 0) + 1;
    }
    return out;
  }
}

function count(requests: Record<string, Record<string, number>>, client: string, side: Side | '-' | '*'): number {
  return Object.entries(requests[client] ?? {}).reduce((a, [k, v]) => (side === '*' || k.endsWith(` ${side}`) ? a + v : a), 0);
}

function difference(after: number | undefined, before: number | undefined): number | undefined {
  return after === undefined || before === undefined ? undefined : after - before;
}

function latency(values: readonly number[], convergeMs: number): SideLatency {
  return { n: values.length, p50Ms: round(quantile(values, 0.5), 0), p99Ms: round(quantile(values, 0.99), 0), maxMs: round(values.length ? Math.max(...values) : Number.NaN, 0), convergeMs: round(convergeMs, 0) };
}

async function waitUntil<T>(what: string, timeoutMs: number, probe: () => T | undefined | false | Promise<T | undefined | false>, state?: () => string): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (performance.now() > deadline) throw new Error(`side-by-side: timed out after ${timeoutMs} ms waiting for ${what}${state ? ` (${state()})` : ''}`);
    await sleep(100);
  }
}

const gvp = (k: KindApi): string => `/apis/${k.group}/${k.version}`;

/** The later of two resourceVersions (etcd revisions, compared as integers). */
function laterRv(a: string, b: string): string {
  return BigInt(b) > BigInt(a) ? b : a;
}

export type SideBySideForm = 'local' | 'deployed';
/** How the deployed form reaches the management cluster: `eks` (serverless.yml's default, through the EKS stand-in) or `ssm`. */
export type DeployedAuth = 'eks' | 'ssm';

/** What the scenario reads from the product's side, in either form. */
interface ProductCounters {
  /** Messages visible or delayed, and in flight (received, not yet deleted) in the product's queue. */
  readonly queueVisible: number;
  readonly queueInFlight: number;
  /** Reconciles by outcome, since the start. */
  readonly reconciles: Readonly<Record<string, number>>;
  /** Messages the forwarder sent, since the start. */
  readonly eventsForwarded: number;
  /** The forwarder's filter counters; undefined in the deployed form (see {@link DeployedProduct}). */
  readonly foreignTaintChangesFiltered: number | undefined;
  readonly foreignDeclarationChangesFiltered: number | undefined;
}

/** The product's side of the comparison: the local pipeline or the packaged functions under the Lambda runner. */
interface ProductSide {
  /** Resolves once the forwarder watches (holds the Lease); rejects after `timeoutMs`. */
  waitReady(timeoutMs: number): Promise<void>;
  /** Totals since the start, with the queue's depths read now. */
  counters(): Promise<ProductCounters>;
  /**
   * True once the forwarder has handled (forwarded or filtered) every Machine and Node change the bench's watches saw:
   * `changes` of them since `before`, the last at the resourceVersions `upTo`.
   */
  caughtUp(before: ProductCounters, now: ProductCounters, changes: number, upTo: { readonly machines: string; readonly nodes: string }): Promise<boolean>;
  /** Facts of the form worth keeping with the result (the deployed functions' invocations). */
  details(): Record<string, unknown> | undefined;
  /**
   * The latency stages the reconcile function logged with each Node write (`latencyMs`: forwarder, queue, invoke,
   * batch, reconcile), the last write of each Node; undefined where the form's logs are not read (the local form).
   */
  writeStages?(): ReadonlyMap<string, Readonly<Record<string, number>>>;
  /** When each cold start of the reconcile function began its init, in `performance.now()` time; undefined in the local form. */
  coldStarts?(): readonly number[];
  stop(): Promise<void>;
}

/** The local form: the pipeline of `npm start -- --capi`, watching the scenario's namespace only. */
async function localProduct(kubeconfig: string, ns: string): Promise<ProductSide> {
  // 10 reconcile invocations at once: the deployed reconcile function's reserved concurrency (serverless.yml
  // reconcileReservedConcurrency; `npm start` runs 2), as Cluster API's Machine controller runs 10 workers.
  const pipeline = await startPipeline({ kubeconfig, mode: 'capi', stateNamespace: ns, machineNamespace: ns, leaseName: 'side-by-side', concurrency: 10 });
  return {
    waitReady: (timeoutMs) => pipeline.waitForForwarder(timeoutMs),
    counters: () => pipeline.freshCounters(),
    // The forwarder's own counters: what it filtered plus what it forwarded covers every change.
    caughtUp: async (before, now, changes) => {
      const delta = (f: (c: ProductCounters) => number | undefined) => (f(now) ?? 0) - (f(before) ?? 0);
      return delta((c) => c.foreignDeclarationChangesFiltered) + delta((c) => c.foreignTaintChangesFiltered) + delta((c) => c.eventsForwarded) >= changes;
    },
    details: () => undefined,
    stop: () => pipeline.stop(),
  };
}

/**
 * The deployed form: the zips and template of `npx serverless package` (`packageArgs`) under local/lambda/'s runner,
 * as bench/scenarios/deployed.ts runs them: the management kubeconfig in the runner's SSM endpoint, the schedule's
 * first event fired at once, then the rota of windows on its own. As shipped, the forwarder watches the Machines of
 * every namespace (the template's `machineNamespace` parameter is empty by default) and keeps its Lease in the template's state
 * namespace; this control plane holds the scenario's Machines only.
 * - queue drained: GetQueueAttributes on the runner's queue (fauxqs, through the bench's own client, which is not in
 *   the call log) shows nothing visible, delayed or in flight, and no reconcile invocation runs;
 * - reconciles by outcome: the reconcile function's `Reconciles` metric lines (EMF, one single metric with the
 *   dimension `Outcome` per record, written during the invocation), read from its log;
 * - messages: the forwarder's sends that SQS accepted (the runner's tap);
 * - the forwarder caught up: its filter counters stay in its container until the window ends, so instead the
 *   checkpoint the Lease holder stores (every 5 s; it advances only over changes sent or filtered) must have passed the
 *   resourceVersions of the last Machine and Node change the bench's watches saw.
 */
class DeployedProduct implements ProductSide {
  readonly #runner: LambdaRunner;
  readonly #mgmt: RawKube;
  readonly #lease: string;
  readonly #nodesStream: string;
  readonly #queueUrl: string;
  readonly #log: ReconcileLog;
  #messages = 0;

  private constructor(runner: LambdaRunner, mgmt: RawKube, nodesStream: string) {
    this.#runner = runner;
    this.#mgmt = mgmt;
    const env = runner.fn('watchForwarder').env;
    this.#lease = `/apis/coordination.k8s.io/v1/namespaces/${env['STATE_NAMESPACE']}/leases/${env['LEASE_NAME']}`;
    this.#nodesStream = nodesStream;
    const reconcile = runner.fn('reconcileNodeTaints');
    const mapping = reconcile.fn.sqsEventSources[0];
    if (!mapping) throw new Error('side-by-side: the packaged reconcile function has no SQS event source');
    this.#queueUrl = runner.queue(mapping.queueLogicalId).url;
    this.#log = new ReconcileLog(join(runner.workDir, `${reconcile.fn.key}.log`));
  }

  /**
   * `eks`: the functions reach the management cluster as the shipped default does (`MANAGEMENT_AUTH=eks`), through the
   * EKS stand-in the control plane was started with, as the groups of their roles' access entries, with the product's
   * RBAC (infra/rbac/management-cluster.yaml and the kubeconfig Secret's grant). Otherwise the kubeconfig given is
   * stored in the SSM parameter of the `example-ssm` stage (`packageArgs` says so).
   */
  static async start(o: {
    readonly kubeconfigPath: string;
    readonly mgmt: RawKube;
    readonly packageArgs: readonly string[];
    readonly nodesStream: string;
    readonly log: (line: string) => void;
    readonly eks?: { readonly authenticator: EksAuthenticator; readonly region: string; readonly cluster: { readonly namespace: string; readonly name: string } };
  }): Promise<DeployedProduct> {
    const packaged = await packagedService(o.packageArgs);
    o.log(`[side-by-side] packaged (${packaged.reused ? 'reused' : `${packaged.seconds.toFixed(1)} s`}): ${shownArgs(o.packageArgs).join(' ')}`);
    let product: DeployedProduct | undefined;
    // As a deployment has them before its stack: the kubeconfig parameter (or the RBAC of the access entries' groups)
    // and the state namespace. A provisioned container's init (at the runner's start) sets itself up with them, as on AWS.
    const template = readPackagedTemplate(packaged.serviceDir);
    await o.mgmt.post('/api/v1/namespaces', { metadata: { name: functionsEnvironmentValue(template, 'STATE_NAMESPACE') } }).catch(() => undefined);
    if (o.eks) {
      const admin = loadKubeConfig(o.kubeconfigPath);
      await applyYamlFile(admin, new URL('../../infra/rbac/management-cluster.yaml', import.meta.url));
      await applyObjects(admin, kubeconfigSecretRbac([o.eks.cluster]) as KubernetesObject[]);
    }
    const runner = await LambdaRunner.start({
      serviceDir: packaged.serviceDir,
      startTriggers: false,
      ...(o.eks ? {} : { ssmParameters: { [functionsEnvironmentValue(template, 'MANAGEMENT_KUBECONFIG_PARAMETER')]: { value: readFileSync(o.kubeconfigPath, 'utf8') } } }),
      onQueueMessage: (m) => {
        if (m.functionKey === 'watchForwarder' && product) product.#messages += 1;
      },
    });
    try {
      if (o.eks) {
        if (runner.region !== o.eks.region) throw new Error(`side-by-side: the packaged region ${runner.region} is not the EKS stand-in's ${o.eks.region}`);
        o.eks.authenticator.setPrincipals(runner.eksPrincipals());
      }
      product = new DeployedProduct(runner, o.mgmt, o.nodesStream);
      runner.startTriggers();
      void runner.fireSchedule('watchForwarder');
      return product;
    } catch (error) {
      await runner.stop();
      throw error;
    }
  }

  async #leaseObject(): Promise<{ metadata?: { annotations?: Record<string, string> }; spec?: { holderIdentity?: string } } | undefined> {
    return this.#mgmt.get<{ metadata?: { annotations?: Record<string, string> }; spec?: { holderIdentity?: string } }>(this.#lease).catch(() => undefined);
  }

  waitReady(timeoutMs: number): Promise<void> {
    return waitUntil('a forwarder window to hold the Lease', timeoutMs, async () => ((await this.#leaseObject())?.spec?.holderIdentity ?? '') !== '').then(() => undefined);
  }

  async counters(): Promise<ProductCounters> {
    const out = await this.#runner.sqs.client.send(new GetQueueAttributesCommand({ QueueUrl: this.#queueUrl, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'] }));
    const n = (name: QueueAttributeName): number => Number(out.Attributes?.[name] ?? 0);
    const running = this.#runner.fn('reconcileNodeTaints').busy().length;
    // Read after the depths: every invocation that ended before them has written its outcome lines.
    const reconciles = this.#log.outcomes();
    return { queueVisible: n('ApproximateNumberOfMessages') + n('ApproximateNumberOfMessagesDelayed'), queueInFlight: n('ApproximateNumberOfMessagesNotVisible') + running, reconciles, eventsForwarded: this.#messages, foreignTaintChangesFiltered: undefined, foreignDeclarationChangesFiltered: undefined };
  }

  async caughtUp(_before: ProductCounters, _now: ProductCounters, _changes: number, upTo: { readonly machines: string; readonly nodes: string }): Promise<boolean> {
    const text = (await this.#leaseObject())?.metadata?.annotations?.[CHECKPOINT_ANNOTATION];
    if (text === undefined) return false;
    const checkpoint = JSON.parse(text) as Record<string, string>;
    const passed = (stream: string, rv: string) => checkpoint[stream] !== undefined && BigInt(checkpoint[stream]) >= BigInt(rv);
    return passed('machines', upTo.machines) && passed(this.#nodesStream, upTo.nodes);
  }

  writeStages(): ReadonlyMap<string, Readonly<Record<string, number>>> {
    this.#log.outcomes();
    return this.#log.stages;
  }

  coldStarts(): readonly number[] {
    return this.#runner.fn('reconcileNodeTaints').records.filter((r) => r.coldStart).map((r) => r.startedAt - r.initMs - performance.timeOrigin);
  }

  details(): Record<string, unknown> {
    const stats = (key: string) => {
      const s = this.#runner.fn(key).stats();
      return { invocations: s.invocations, coldStarts: s.coldStarts, errors: s.errors, timeouts: s.timeouts, throttles: s.throttles, peakRssMiB: s.peakRssMiB };
    };
    const records = this.#runner.eventSourceCounters()['reconcileNodeTaints'];
    // FunctionStats count ended invocations: the forwarder's windows still watching are counted apart.
    return { forwarder: { ...stats('watchForwarder'), running: this.#runner.fn('watchForwarder').busy().length }, reconcile: { ...stats('reconcileNodeTaints'), records: records?.records ?? 0, failedRecords: records?.failedRecords ?? 0 } };
  }

  stop(): Promise<void> {
    return this.#runner.stop();
  }
}

/** The join's cold starts (performance.now() times) split at its first Node's appearance; none for the local form. */
export function coldStartsOfJoin(starts: readonly number[] | undefined, t0: number, nodes: readonly { readonly appearedAt: number; readonly readyAt?: number }[]): Pick<JoinRun, 'productColdStarts'> {
  if (!starts || nodes.length === 0) return {};
  const first = Math.min(...nodes.map((n) => n.appearedAt));
  const last = Math.max(...nodes.map((n) => n.readyAt ?? n.appearedAt));
  return { productColdStarts: { beforeFirstNode: starts.filter((t) => t >= t0 && t < first).length, whileJoining: starts.filter((t) => t >= first && t <= last).length } };
}

/**
 * p50/p99 of each latency stage the reconcile function logged for the given Nodes' writes (deployed form only): where
 * the product's part of a joining Node's time goes, from the forwarder's observation to the write.
 */
function pipelineStages(stages: ReadonlyMap<string, Readonly<Record<string, number>>> | undefined, nodes: readonly string[]): Record<string, { p50Ms: number; p99Ms: number }> {
  if (!stages) return {};
  const out: Record<string, { p50Ms: number; p99Ms: number }> = {};
  // The stages add up to the write's time.
  for (const stage of ['forwarder', 'queue', 'invoke', 'batch', 'reconcile']) {
    const values = nodes.map((n) => stages.get(n)?.[stage]).filter((v): v is number => v !== undefined);
    if (values.length > 0) out[`pipeline.${stage}`] = { p50Ms: round(quantile(values, 0.5), 0), p99Ms: round(quantile(values, 0.99), 0) };
  }
  return out;
}

/** The three slowest of `nodes` (appearance → tainted and ungated), each with its last write's pipeline stages. */
export function slowest(
  nodes: readonly { readonly node: string; readonly ms: number }[],
  stages: ReadonlyMap<string, Readonly<Record<string, number>>> | undefined,
): JoinRun['productSlowest'] {
  return [...nodes]
    .sort((a, b) => b.ms - a.ms)
    .slice(0, 3)
    .map((n) => ({ node: n.node, ms: Math.round(n.ms), stages: { ...(stages?.get(n.node) ?? {}) } }));
}

/** The EKS stand-in's cluster name and region (serverless.yml's default region). */
const EKS_CLUSTER_NAME = 'local-management';
const EKS_REGION = 'eu-west-1';

/**
 * The deployed form's package arguments with `MANAGEMENT_AUTH=eks` (serverless.yml's default) for the local control
 * plane: the SSM stage and its parameters are dropped, the other parameters (the bench's short windows, variants) kept.
 */
export function eksPackageArgs(args: readonly string[], eks: { readonly clusterName: string; readonly server: string; readonly caData: string }): string[] {
  const kept: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === '--stage') {
      i++;
      continue;
    }
    if (/^--param=(managementAuth|managementKubeconfig\w*|queueRedriveRoleArn|eks\w+)=/.test(a)) continue;
    kept.push(a);
  }
  return ['--param=managementAuth=eks', `--param=eksClusterName=${eks.clusterName}`, `--param=eksEndpoint=${eks.server}`, `--param=eksCaData=${eks.caData}`, ...kept];
}

/** Package arguments as logged and recorded: the local CA's data is left out. */
function shownArgs(args: readonly string[]): string[] {
  return args.map((a) => (a.startsWith('--param=eksCaData=') ? '--param=eksCaData=<the local CA>' : a));
}

/** The reconcile function's log, read on from where it was last read: `Reconciles` metric lines, by `Outcome`. */
class ReconcileLog {
  readonly #path: string;
  #offset = 0;
  readonly #outcomes: Record<string, number> = {};
  /** The `latencyMs` of each Node's last write (`Patched Node taints` lines), by Node. */
  readonly stages = new Map<string, Readonly<Record<string, number>>>();

  constructor(path: string) {
    this.#path = path;
  }

  outcomes(): Record<string, number> {
    let bytes: Buffer;
    try {
      const fd = openSync(this.#path, 'r');
      try {
        bytes = Buffer.alloc(Math.max(0, fstatSync(fd).size - this.#offset));
        bytes = bytes.subarray(0, readSync(fd, bytes, 0, bytes.length, this.#offset));
      } finally {
        closeSync(fd);
      }
    } catch {
      return { ...this.#outcomes }; // no invocation yet
    }
    const end = bytes.lastIndexOf(0x0a);
    if (end >= 0) {
      this.#offset += end + 1;
      for (const line of bytes.subarray(0, end).toString('utf8').split('\n')) {
        if (line.includes('"Patched Node taints"') && line.includes('"latencyMs"')) {
          try {
            const doc = JSON.parse(line.slice(line.indexOf('] ') + 2)) as { Node?: string; latencyMs?: Record<string, number> };
            if (doc.Node !== undefined && doc.latencyMs !== undefined) this.stages.set(doc.Node, doc.latencyMs);
          } catch {
            // not a log line of ours
          }
          continue;
        }
        // `[<container>] <line>`: the metric lines are JSON with `_aws` (EMF).
        if (!line.includes('"_aws"') || !line.includes('"Reconciles"')) continue;
        try {
          const doc = JSON.parse(line.slice(line.indexOf('] ') + 2)) as { Outcome?: string; Reconciles?: number | number[] };
          if (doc.Outcome === undefined || doc.Reconciles === undefined) continue;
          const n = Array.isArray(doc.Reconciles) ? doc.Reconciles.reduce((a, b) => a + b, 0) : doc.Reconciles;
          this.#outcomes[doc.Outcome] = (this.#outcomes[doc.Outcome] ?? 0) + n;
        } catch {
          // not a metrics line after all
        }
      }
    }
    return { ...this.#outcomes };
  }
}

/** `form`: the product's side (module comment); `packageArgs`: the deployed form's `serverless package` arguments. */
export async function runSideBySide(ctx: BenchContext, o: { readonly form?: SideBySideForm; readonly packageArgs?: readonly string[]; readonly auth?: DeployedAuth } = {}): Promise<SideBySideResult> {
  const form = o.form ?? 'local';
  const packageArgs = o.packageArgs ?? BENCH_PACKAGE_SHORT_WINDOWS;
  const sizes = ctx.sizes.sideBySideN;
  const loadBefore = round(os.loadavg()[0] ?? 0, 2);
  const timeoutMs = Math.max(120_000, sizes[sizes.length - 1]! * 2_000);
  // The deployed form with EKS auth: the local kube-apiserver asks the EKS stand-in about bearer tokens.
  const eks = form === 'deployed' && o.auth === 'eks' ? await startEksAuthenticator({ clusterName: EKS_CLUSTER_NAME, region: EKS_REGION }) : undefined;
  const eksDir = eks ? mkdtempSync(join(os.tmpdir(), 'capi-tp-eks-')) : undefined;
  if (eks && eksDir) writeFileSync(join(eksDir, 'webhook.kubeconfig'), eks.webhookConfig());
  const closeEks = async (): Promise<void> => {
    await eks?.close();
    if (eksDir) rmSync(eksDir, { recursive: true, force: true });
  };
  // In a process of its own, as `npm run control-plane` runs beside the product (bench/lib/control-plane-process.ts).
  const cp: ControlPlaneProcess = await startControlPlaneProcess({
    log: (line) => {
      if (!line.startsWith('[local-provider]')) ctx.log(`[side-by-side] ${line}`);
    },
    capi: { featureGates: { MachineTaintPropagation: true }, workloadClusters: 1, auditWorkloadServers: true },
    ...(eksDir ? { extraApiserverArgs: [`--authentication-token-webhook-config-file=${join(eksDir, 'webhook.kubeconfig')}`, '--authentication-token-webhook-version=v1'] } : {}),
  }).catch(async (error: unknown) => {
    await closeEks();
    throw error;
  });
  const productArgs = eks ? eksPackageArgs(packageArgs, { clusterName: EKS_CLUSTER_NAME, server: cp.server, caData: readFileSync(cp.caCertPath).toString('base64') }) : packageArgs;
  const stop = new AbortController();
  let product: ProductSide | undefined;
  const watches: Promise<void>[] = [];
  try {
    const mgmt = await RawKube.from(loadKubeConfig(cp.kubeconfigPath));
    const wc = (await cp.workloadServers())[0];
    if (!wc?.auditLogPath) throw new Error('side-by-side: the workload API server has no audit log');
    const workload = await RawKube.from(loadKubeConfig(wc.adminKubeconfigPath));
    const audit = new AuditLog(wc.auditLogPath);
    const ns = runId('sbs');
    await mgmt.post('/api/v1/namespaces', { metadata: { name: ns } });
    const cluster = 'wl';
    await createCluster(mgmt, ns, cluster, timeoutMs);

    const seen = new Observed();
    watches.push(keepWatching(workload, '/api/v1/nodes', (o) => seen.node(o, performance.now()), stop.signal, (o) => seen.nodes.delete(o.metadata.name)));
    watches.push(keepWatching(mgmt, `${MACHINES_PATH}/namespaces/${ns}/machines`, (o) => seen.machine(o, performance.now()), stop.signal, (o) => seen.machines.delete(o.metadata.name)));

    product = form === 'deployed'
      ? await DeployedProduct.start({
        kubeconfigPath: cp.kubeconfigPath,
        mgmt,
        packageArgs: productArgs,
        nodesStream: `nodes/${ns}/${cluster}`,
        log: ctx.log,
        ...(eks ? { eks: { authenticator: eks, region: EKS_REGION, cluster: { namespace: ns, name: cluster } } } : {}),
      })
      : await localProduct(cp.kubeconfigPath, ns);
    // The deployed forwarder's first window starts a container and joins the rota first.
    await product.waitReady(form === 'deployed' ? 120_000 : 60_000);
    const p = product;
    const drained = async (): Promise<ProductCounters> => waitUntil('the product queue to drain', timeoutMs, async () => {
      const c = await p.counters();
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
      // On a timeout, say which Nodes were missing or not done, with their taints.
      const waiting = () => SIDES.map((side) => {
        const ms = [...seen.machines.values()].filter((m) => m.side === side);
        const notDone = fresh(side).filter(([, n]) => n.readyAt === undefined).map(([name, n]) => `${name} [${[...n.taints.keys()].join(', ')}]`);
        return `${side}: ${ms.length} Machines (${ms.filter((m) => m.providerIdAt !== undefined).length} with a provider ID, ${ms.filter((m) => m.nodeRefAt !== undefined).length} with a nodeRef), ${fresh(side).length} Nodes appeared, not done: ${notDone.join('; ') || 'none'}`;
      }).join(' | ');
      await waitUntil(`${joining} joining Nodes per side to carry their taint`, timeoutMs, () => SIDES.every((side) => {
        const nodes = fresh(side);
        return nodes.length === joining && nodes.every(([, n]) => n.readyAt !== undefined);
      }), waiting);
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
      // Each reads the reconcile function's log on from where it was last read: once per join.
      const stages = p.writeStages?.();
      joins.push({
        joining,
        replicas: size,
        capi,
        product,
        ratioP99: round(product.p99Ms / capi.p99Ms, 2),
        productOnCapiNodes: { workloadCallsPerNode: round(count(requests, 'product', 'capi') / joining, 2) },
        productReconciles: Object.fromEntries(Object.entries(after.reconciles).map(([k, v]): [string, number] => [k, v - (before.reconciles[k] ?? 0)]).filter(([, v]) => v > 0)),
        productProfile: {
          machineProviderIdBeforeNode: step((name) => { const m = machineByNode.get(name); const n = seen.nodes.get(name); return m?.providerIdAt !== undefined && n ? n.appearedAt - m.providerIdAt : undefined; }),
          nodeRefByClusterApi: step((name) => { const m = machineByNode.get(name); return m?.nodeRefAt !== undefined ? m.nodeRefAt - (seen.nodes.get(name)?.appearedAt ?? 0) : undefined; }),
          firstClusterApiWrite: step((_, n) => (n.capiInitAt !== undefined ? n.capiInitAt - n.appearedAt : undefined)),
          taintedAndUngated: step((_, n) => (n.readyAt as number) - n.appearedAt),
          ...pipelineStages(stages, productNodes.map(([name]) => name)),
        },
        productSlowest: slowest(productNodes.map(([name, n]) => ({ node: name, ms: (n.readyAt as number) - n.appearedAt })), stages),
        ...coldStartsOfJoin(p.coldStarts?.(), t0, SIDES.flatMap((side) => fresh(side).map(([, n]) => n))),
      });
      replicas = size;
      ctx.log(`[side-by-side] join ${joining}: p99 capi ${capi.p99Ms} ms, product ${product.p99Ms} ms`);
      const tail = joins.at(-1)?.productSlowest ?? [];
      const cold = joins.at(-1)?.productColdStarts;
      if (cold) ctx.log(`[side-by-side] join ${joining}: reconcile cold starts ${cold.beforeFirstNode} before the first Node appeared, ${cold.whileJoining} while Nodes joined`);
      if (tail.length > 0) ctx.log(`[side-by-side] join ${joining}: slowest product Nodes ${tail.map((t) => `${t.ms} ms (${Object.entries(t.stages).map(([k, v]) => `${k} ${v}`).join(', ') || 'no stages logged'})`).join('; ')}`);

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
        const deltas = ms.map((m, i) => (nodeAt[i] as number) - (m.valueAt.get(v) as number));
        // When Cluster API's MachineSet controller had copied the change onto the side's last Machine: the part of the
        // convergence that is Cluster API's on both sides (the product's Nodes follow their Machines).
        const machineAt = ms.map((m) => (m.valueAt.get(v) as number) - tEdit);
        const machinesFirstMs = round(Math.min(...machineAt), 0);
        const machinesConvergeMs = round(Math.max(...machineAt), 0);
        return { ...latency(deltas.map((d) => Math.max(0, d)), Math.max(...nodeAt) - tEdit), nodeFirst: deltas.filter((d) => d < 0).length, machinesFirstMs, machinesConvergeMs };
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
      const upTo = { machines: seen.machinesRv, nodes: seen.nodesRv };
      const foreignAfter = await waitUntil('the forwarder to see every Machine and Node change of the capi side', timeoutMs, async () => {
        const c = await drained();
        return (await p.caughtUp(foreignBefore, c, 2 * size, upTo)) ? c : undefined;
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
          productWorkloadRequests: audit.productSince(foreignFrom),
          // Each reconcile reads its Machine from the management cluster first (one call), plus what reached the workload API server.
          callsPerForeignChange: round((productReconciles + productWorkloadCalls) / size, 2),
          forwardedMessages: foreignAfter.eventsForwarded - foreignBefore.eventsForwarded,
          filteredMachineChanges: difference(foreignAfter.foreignDeclarationChangesFiltered, foreignBefore.foreignDeclarationChangesFiltered),
          filteredNodeChanges: difference(foreignAfter.foreignTaintChangesFiltered, foreignBefore.foreignTaintChangesFiltered),
        },
      });
      ctx.log(`[side-by-side] change at ${size}: p99 capi ${capiChange.p99Ms} ms, product ${productChange.p99Ms} ms; converged capi ${capiChange.convergeMs} ms (Machines ${capiChange.machinesFirstMs}–${capiChange.machinesConvergeMs} ms), product ${productChange.convergeMs} ms (Machines ${productChange.machinesFirstMs}–${productChange.machinesConvergeMs} ms); foreign: ${productReconciles} reconciles, ${productWorkloadCalls} workload calls`);
    }
    const lastChange = changes[changes.length - 1] as ChangeRun;
    const lastJoin = joins[joins.length - 1] as JoinRun;
    const details = product.details();
    mgmt.close();
    workload.close();
    return {
      form,
      ...(form === 'deployed' ? { packageArgs: shownArgs(productArgs) } : {}),
      ...(eks ? { eksTokenReviews: eks.reviews() } : {}),
      ...(details ? { deployedFunctions: details } : {}),
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
    await product?.stop();
    await Promise.allSettled(watches);
    await cp.stop();
    await closeEks();
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
  o: { readonly taints?: readonly Record<string, string>[]; readonly annotations?: Record<string, string>; readonly startupTaints: readonly TaintId[]; readonly bootSeconds: number },
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
