/**
 * Scenario 4, the watch-forwarder under kubelet-like heartbeat churn: N Nodes (kubelet-like status, ~3 KB) and N
 * Machines; the forwarder runs alone in a child process (its memory and CPU are its own) against the API server.
 * After its initial sync (every Node announced once), a measuring window: this process plays the kubelets,
 * writing Node status heartbeats (new `lastHeartbeatTime` only) at a steady rate over all Nodes, and makes a known
 * number of real changes (half Machine `spec.taints` edits, half foreign Node taint edits).
 * - filteredShare = 1 − (messages whose resourceVersion is one a heartbeat wrote) / heartbeats written;
 * - messagesPerChange = messages sent in the window / real changes made;
 * - CPU of the forwarder in the window and in the initial sync; peak memory = VmHWM of the child.
 * It runs at each size of the profile (full: 1 000, 5 000 and 20 000 Nodes, each with as many Machines), smallest
 * first, creating only the objects the next size adds; each size gets a fresh child process and a Lease of its own,
 * so that it lists and announces everything from scratch.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { load } from 'js-yaml';
import type { BenchContext } from '../lib/context.ts';
import { BENCH_LABEL, RawKube, cleanup, createNamespace, createPairs, kubeletStatus, loadKubeConfig, mapConcurrent, runId, setMachineTaints, type BenchTaint, type CallCounts, type Pair } from '../lib/kube.ts';
import { quantile, round, sleep, since } from '../lib/stats.ts';

/** The forwarder at one size. */
export interface ForwarderRun {
  readonly nodes: number;
  readonly machines: number;
  /** Workload clusters holding the Nodes (0: `self` mode, the Nodes are in the management cluster). */
  readonly clusters: number;
  /** Time to create the objects this size added to the previous one's. */
  readonly setupMs: number;
  /** Process start → every Node announced once (N messages): Lease, discovery, list pages, announcements. */
  readonly initialSyncMs: number;
  readonly initialSyncCpuMs: number;
  readonly initialMessages: number;
  readonly windowMs: number;
  readonly heartbeatsWritten: number;
  readonly heartbeatRatePerSec: number;
  readonly heartbeatMessages: number;
  readonly realChanges: number;
  readonly realChangesForwarded: number;
  readonly windowMessages: number;
  readonly windowEventsSeen: number;
  readonly windowEventsFiltered: number;
  readonly filteredShare: number;
  readonly messagesPerChange: number;
  readonly windowCpuMs: number;
  /** CPU of the forwarder in the window as a share of one core. */
  readonly windowCpuShare: number;
  readonly cpuMsPerThousandEvents: number;
  readonly peakMiB: number;
  readonly maxSampledRssMiB: number;
  readonly heapUsedMiB: number;
  /** RSS of the child once its modules were loaded, before the forwarder started. */
  readonly baselineRssMiB: number;
  /** The child's NODE_OPTIONS: the forwarder function's, as serverless.yml deploys it. */
  readonly nodeOptions: string;
  /** The forwarder's own API calls to the management cluster (list pages, watches, Lease; Secrets in `capi` mode). */
  readonly forwarderCalls: CallCounts;
  /**
   * Requests the forwarder sent to the management API server (counted in its KubeConfig: every list page, watch
   * connection, Lease read or write, Secret and discovery read), in the initial sync and in the window, and per second
   * of each.
   */
  readonly managementRequests: { readonly initialSync: number; readonly window: number; readonly initialSyncPerSec: number; readonly windowPerSec: number };
  /** `capi` mode: its calls to the workload clusters (Node list pages and watches). */
  readonly workloadCalls?: CallCounts;
  /**
   * Each real change's latency: its write sent → the forwarder hands the message carrying its resourceVersion to the
   * queue (both clocks are this machine's). `lost`: changes no message carried (a later change to the same object may
   * have superseded it before the forwarder saw it).
   */
  readonly changeLatency: { readonly observed: number; readonly lost: number; readonly p50Ms: number; readonly p90Ms: number; readonly p99Ms: number; readonly maxMs: number };
}

export interface ForwarderResult {
  /** One run per size, smallest first. */
  readonly runs: readonly ForwarderRun[];
}

export const DECLARED: BenchTaint = { key: 'bench.capi-tp/pool', value: 'gpu', effect: 'NoSchedule' };

interface ChildReport {
  windowMs: number;
  windowCpuMs: number;
  windowCounts: Record<string, number>;
  windowMessages: number;
  windowIds: string[];
  windowTimes: number[];
  calls: CallCounts;
  workloadCalls: CallCounts;
  windowCalls: number;
  peakMiB: number;
  maxSampledRssMiB: number;
  heapUsedMiB: number;
  baselineRssMiB: number;
}

export async function runForwarder(ctx: BenchContext): Promise<ForwarderResult> {
  const sizes = [...new Set(ctx.sizes.forwarderObjects)].sort((a, b) => a - b);
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 64);
  const run = runId('fw');
  const ns = run;
  let childScript: string | undefined;
  try {
    await createNamespace(raw, ns, run);
    childScript = await bundleChild();
    const pairs: Pair[] = [];
    const runs: ForwarderRun[] = [];
    for (const n of sizes) {
      const setupStart = performance.now();
      const added = await createPairs(raw, { run, namespace: ns, first: pairs.length, count: n - pairs.length, machineTaints: [DECLARED], nodeTaints: [DECLARED], nodeStatus: true, concurrency: 48 });
      pairs.push(...added);
      const setupMs = since(setupStart);
      ctx.log(`  ${n} Nodes (with kubelet-like status) + ${n} Machines: ${added.length} of each created in ${(setupMs / 1000).toFixed(1)} s`);
      const measured = await measureForwarder(ctx, {
        run,
        namespace: ns,
        leaseName: `forwarder-${run}-${n}`,
        mode: 'self',
        childScript,
        management: raw,
        targets: pairs.map((pair) => ({ nodeKube: raw, pair })),
      });
      runs.push({ ...measured, clusters: 0, setupMs: round(setupMs, 0) });
    }
    return { runs };
  } finally {
    if (childScript) rmSync(childScript, { force: true });
    await cleanup(raw, run, [ns]);
    raw.close();
  }
}

/** A Node (and its Machine) the forwarder watches, with the API server holding the Node. */
export interface ForwarderTarget {
  readonly nodeKube: RawKube;
  readonly pair: Pair;
  /** The Machine's namespace (default: the measurement's `namespace`). */
  readonly namespace?: string;
}

export interface MeasureForwarderOptions {
  readonly run: string;
  /** The Machines' namespace (also the Lease's, and in `capi` mode the Clusters' and kubeconfig Secrets'). */
  readonly namespace: string;
  /** A Lease nobody used yet: the forwarder starts from scratch (a used one would make it resume from its checkpoint). */
  readonly leaseName: string;
  readonly mode: 'self' | 'capi';
  /** The bundle of `forwarder-child.ts` ({@link bundleChild}). */
  readonly childScript: string;
  /** The management cluster (Machines). */
  readonly management: RawKube;
  /** Every watched Node; heartbeats go through them in turn (interleave clusters for an even spread). */
  readonly targets: readonly ForwarderTarget[];
  /** Real changes in the window (default: the profile's `forwarderRealChanges`). */
  readonly realChanges?: number;
  /** Where the k-th real change goes: `changeTargets[k mod length]` (default: target (i × 7 + 3) mod n at heartbeat i). */
  readonly changeTargets?: readonly ForwarderTarget[];
  /** Share of the real changes made to Nodes (foreign taint edits; the rest are Machine edits; default 0.5). */
  readonly nodeChangeShare?: number;
  /** The forwarder's MACHINE_NAMESPACE (default `namespace`; '' every namespace, as a product shard watches). */
  readonly machineNamespace?: string;
  /** The product's shards: FORWARDER_SHARDS = count, FORWARDER_SHARD = index (0-based); the Lease becomes `<leaseName>-<index>-of-<count>` when count > 1. */
  readonly shard?: { readonly count: number; readonly index: number };
}

/**
 * Runs the forwarder alone in a child process until its initial sync is complete (N messages), then the measuring
 * window (heartbeats at the profile's rate over `targets`, real changes spread evenly), and reports.
 */
export async function measureForwarder(ctx: BenchContext, o: MeasureForwarderOptions): Promise<Omit<ForwarderRun, 'clusters' | 'setupMs'>> {
  const { heartbeatRate, forwarderSeconds } = ctx.sizes;
  const forwarderRealChanges = o.realChanges ?? ctx.sizes.forwarderRealChanges;
  const nodeEvery = o.nodeChangeShare === undefined ? 2 : o.nodeChangeShare >= 1 ? 1 : Math.round(1 / Math.max(0.01, o.nodeChangeShare));
  const n = o.targets.length;
  const ns = o.namespace;
  const raw = o.management;
  // The child runs as one esbuild bundle, as the forwarder runs on Lambda: running the .ts sources directly would
  // add Node's type-stripping compiler (WebAssembly, tens of MB) to the measured memory. Its V8 flags are the
  // deployed ones (the young generation's size alone moves the peak by tens of MiB).
  const nodeOptions = deployedForwarderNodeOptions();
  let child: ChildProcess | undefined = fork(o.childScript, [], {
    execArgv: [],
    env: {
      ...process.env,
      NODE_OPTIONS: nodeOptions,
      POWERTOOLS_LOG_LEVEL: 'SILENT',
      POWERTOOLS_METRICS_DISABLED: 'true',
      BENCH_KUBECONFIG: ctx.kubeconfigPath,
      BENCH_NAMESPACE: ns,
      BENCH_LEASE: o.leaseName,
      BENCH_CLUSTER_MODE: o.mode,
      BENCH_LABEL_SELECTOR: `${BENCH_LABEL}=${o.run}`,
      ...(o.machineNamespace !== undefined ? { BENCH_MACHINE_NAMESPACE: o.machineNamespace } : {}),
      ...(o.shard ? { BENCH_SHARDS: String(o.shard.count), BENCH_SHARD: String(o.shard.index) } : {}),
    },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  try {
    const ipc = new ChildChannel(child);
    await ipc.next('started', 30_000);

    // Initial sync: every Node is announced once (its Machine declares a taint it does not track yet; a first list
    // announces only what may need a write, and judges Machines from their Nodes' side).
    const syncDeadline = Date.now() + Math.max(60_000, n * 30);
    for (;;) {
      const s = await ipc.ask<{ messages: number }>('status');
      if (s.messages >= n) break;
      if (Date.now() > syncDeadline) throw new Error(`initial sync incomplete: ${s.messages}/${n} messages`);
      await sleep(100);
    }
    const marked = await ipc.ask<{ syncCpuMs: number; syncMs: number; messages: number; syncCalls: number }>('mark', 'marked');
    ctx.log(`  forwarder initial sync: ${marked.messages} messages in ${(marked.syncMs / 1000).toFixed(1)} s (CPU ${(marked.syncCpuMs / 1000).toFixed(1)} s)`);

    // Measuring window: heartbeats at a steady rate, real changes spread evenly.
    const heartbeatRvs = new Set<string>();
    // A heartbeat within the same second as the previous write to its Node changes nothing (times are stored to the
    // second) and returns the Node's current resourceVersion, which may be a real change's: those are not heartbeats.
    const changeRvs = new Set<string>();
    /** Each real change's resourceVersion → when its write was sent (epoch ms). */
    const changeSentAt = new Map<string, number>();
    const total = Math.round(heartbeatRate * forwarderSeconds);
    const changeEvery = Math.max(1, Math.floor(total / Math.max(1, forwarderRealChanges)));
    let realChanges = 0;
    // Values unique to this measurement: an earlier size's change to the same object must not make this one a no-op.
    const tag = randomBytes(3).toString('hex');
    const start = performance.now();
    await mapConcurrent(
      Array.from({ length: total }, (_, i) => i),
      32,
      async (i) => {
        const due = start + (i * 1000) / heartbeatRate;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const t = o.targets[i % n];
        if (!t) return;
        const hb = await t.nodeKube.mergePatch<{ metadata: { resourceVersion: string } }>(`/api/v1/nodes/${t.pair.node}/status`, { status: kubeletStatus(t.pair.node, new Date()) });
        heartbeatRvs.add(hb.metadata.resourceVersion);
        if (i % changeEvery === 0 && realChanges < forwarderRealChanges) {
          const k = realChanges++;
          const target = (o.changeTargets ? o.changeTargets[k % o.changeTargets.length] : o.targets[(i * 7 + 3) % n]) ?? t;
          const sentAt = performance.timeOrigin + performance.now();
          if (nodeEvery === 1 ? false : k % nodeEvery !== nodeEvery - 1) {
            changeSentAt.set(await setMachineTaints(raw, target.namespace ?? ns, target.pair.machine, [DECLARED, { key: 'bench.capi-tp/change', value: `c${k}-${tag}`, effect: 'NoSchedule' }]), sentAt);
          } else {
            const changed = await target.nodeKube.mergePatch<{ metadata: { resourceVersion: string } }>(`/api/v1/nodes/${target.pair.node}`, {
              spec: { taints: [DECLARED, { key: 'bench.capi-tp/foreign', value: `c${k}-${tag}`, effect: 'NoSchedule' }] },
            });
            changeRvs.add(changed.metadata.resourceVersion);
            changeSentAt.set(changed.metadata.resourceVersion, sentAt);
          }
        }
      },
    );
    const generateMs = since(start);
    for (const rv of changeRvs) heartbeatRvs.delete(rv);
    // Let the forwarder catch up: until its message count is stable for a second (at most 10 s).
    let last = -1;
    for (let waited = 0; waited < 10_000; waited += 500) {
      const s = await ipc.ask<{ messages: number }>('status');
      if (s.messages === last) break;
      last = s.messages;
      await sleep(500);
    }
    const report = await ipc.ask<ChildReport>('report');
    ipc.send('stop');
    await ipc.exited(20_000);
    child = undefined;

    // Workload API servers sharing the control plane's etcd share its revisions: a resourceVersion is unique across them.
    const ids = report.windowIds;
    const rvOf = (id: string): string => id.split(':')[1] ?? '';
    const heartbeatMessages = ids.filter((id) => heartbeatRvs.has(rvOf(id))).length;
    const changeMessages = ids.length - heartbeatMessages;
    const latencies: number[] = [];
    const firstSeen = new Map<string, number>();
    ids.forEach((id, i) => {
      const rv = rvOf(id);
      const at = report.windowTimes[i];
      if (at !== undefined && changeSentAt.has(rv) && !firstSeen.has(rv)) firstSeen.set(rv, at);
    });
    for (const [rv, sentAt] of changeSentAt) {
      const at = firstSeen.get(rv);
      if (at !== undefined) latencies.push(at - sentAt);
    }
    latencies.sort((a, b) => a - b);
    const changeLatency = {
      observed: latencies.length,
      lost: changeSentAt.size - latencies.length,
      p50Ms: round(quantile(latencies, 0.5), 1),
      p90Ms: round(quantile(latencies, 0.9), 1),
      p99Ms: round(quantile(latencies, 0.99), 1),
      maxMs: round(latencies[latencies.length - 1] ?? Number.NaN, 1),
    };
    const seen = report.windowCounts['EventsSeen'] ?? 0;
    const result = {
      nodes: n,
      machines: n,
      initialSyncMs: round(marked.syncMs, 0),
      initialSyncCpuMs: round(marked.syncCpuMs, 0),
      initialMessages: marked.messages,
      windowMs: round(report.windowMs, 0),
      heartbeatsWritten: heartbeatRvs.size,
      heartbeatRatePerSec: round((heartbeatRvs.size * 1000) / generateMs, 1),
      heartbeatMessages,
      realChanges,
      realChangesForwarded: changeMessages,
      windowMessages: report.windowMessages,
      windowEventsSeen: seen,
      windowEventsFiltered: report.windowCounts['EventsFiltered'] ?? 0,
      filteredShare: round(heartbeatRvs.size === 0 ? Number.NaN : 1 - heartbeatMessages / heartbeatRvs.size, 4),
      messagesPerChange: round(realChanges === 0 ? Number.NaN : report.windowMessages / realChanges, 3),
      windowCpuMs: round(report.windowCpuMs, 0),
      windowCpuShare: round(report.windowCpuMs / Math.max(1, report.windowMs), 3),
      cpuMsPerThousandEvents: round((report.windowCpuMs * 1000) / Math.max(1, seen), 1),
      peakMiB: round(report.peakMiB, 1),
      maxSampledRssMiB: round(report.maxSampledRssMiB, 1),
      heapUsedMiB: round(report.heapUsedMiB, 1),
      baselineRssMiB: round(report.baselineRssMiB, 1),
      nodeOptions,
      forwarderCalls: report.calls,
      managementRequests: {
        initialSync: marked.syncCalls,
        window: report.windowCalls,
        initialSyncPerSec: round((marked.syncCalls * 1000) / Math.max(1, marked.syncMs), 2),
        windowPerSec: round((report.windowCalls * 1000) / Math.max(1, report.windowMs), 2),
      },
      ...(o.mode === 'capi' ? { workloadCalls: report.workloadCalls } : {}),
      changeLatency,
    };
    ctx.log(
      `  window ${(result.windowMs / 1000).toFixed(1)} s: ${result.heartbeatsWritten} heartbeats (${result.heartbeatRatePerSec}/s), ${realChanges} real changes, ` +
        `${result.windowMessages} messages (${heartbeatMessages} from heartbeats); filtered ${(result.filteredShare * 100).toFixed(2)} %, ` +
        `${result.messagesPerChange} messages/change, CPU ${(result.windowCpuShare * 100).toFixed(1)} % of a core, peak ${result.peakMiB} MiB (baseline ${result.baselineRssMiB} MiB; NODE_OPTIONS=${nodeOptions || '(none)'})`,
    );
    return result;
  } finally {
    if (child) child.kill('SIGKILL');
  }
}

/** The watch-forwarder function's NODE_OPTIONS in serverless.yml (its own environment, else the provider's); '' when none. */
export function deployedForwarderNodeOptions(): string {
  type Env = { environment?: Record<string, unknown> };
  const yml = load(readFileSync(fileURLToPath(new URL('../../serverless.yml', import.meta.url)), 'utf8')) as { provider?: Env; functions?: { watchForwarder?: Env } };
  const value = yml.functions?.watchForwarder?.environment?.['NODE_OPTIONS'] ?? yml.provider?.environment?.['NODE_OPTIONS'];
  if (value !== undefined && typeof value !== 'string') throw new Error('serverless.yml: the watch-forwarder NODE_OPTIONS is not a plain string');
  return value ?? '';
}

/** The watch-forwarder function's memory in MiB as shipped: serverless.yml's `forwarderMemorySize` default parameter. */
export function shippedForwarderMemoryMiB(): number {
  const yml = load(readFileSync(fileURLToPath(new URL('../../serverless.yml', import.meta.url)), 'utf8')) as { params?: { default?: Record<string, unknown> } };
  const value = Number(yml.params?.default?.['forwarderMemorySize']);
  if (!Number.isInteger(value) || value <= 0) throw new Error('serverless.yml: no integer forwarderMemorySize default parameter');
  return value;
}

/** Bundles `forwarder-child.ts` with esbuild (into `bench/out/`); the caller removes the file. */
export async function bundleChild(): Promise<string> {
  const { build } = await import('esbuild');
  const outDir = fileURLToPath(new URL('../out/', import.meta.url));
  mkdirSync(outDir, { recursive: true });
  const outfile = join(outDir, `forwarder-child-${process.pid}-${Date.now().toString(36)}.cjs`);
  await build({
    entryPoints: [fileURLToPath(new URL('./forwarder-child.ts', import.meta.url))],
    bundle: true,
    minify: true,
    platform: 'node',
    target: 'node22',
    format: 'cjs',
    outfile,
    logLevel: 'silent',
  });
  return outfile;
}

/** Request/response over the child's IPC channel. */
class ChildChannel {
  readonly #child: ChildProcess;
  readonly #waiting: Array<{ type: string; resolve: (m: unknown) => void }> = [];
  readonly #exit: Promise<number | null>;

  constructor(child: ChildProcess) {
    this.#child = child;
    child.on('message', (m: { type: string }) => {
      const i = this.#waiting.findIndex((w) => w.type === m.type);
      if (i >= 0) this.#waiting.splice(i, 1)[0]?.resolve(m);
    });
    this.#exit = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
    void this.#exit.then((code) => {
      for (const w of this.#waiting.splice(0)) w.resolve({ type: 'exit', code });
    });
  }

  send(type: string): void {
    this.#child.send({ type });
  }

  next<T>(type: string, timeoutMs = 30_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`forwarder child: no '${type}' within ${timeoutMs} ms`)), timeoutMs);
      this.#waiting.push({
        type,
        resolve: (m) => {
          clearTimeout(timer);
          if ((m as { type: string }).type === 'exit') reject(new Error(`forwarder child exited (code ${(m as { code: unknown }).code}) while waiting for '${type}'`));
          else resolve(m as T);
        },
      });
    });
  }

  ask<T>(type: string, reply = type): Promise<T> {
    const p = this.next<T>(reply);
    this.send(type);
    return p;
  }

  exited(timeoutMs: number): Promise<void> {
    return Promise.race([this.#exit.then(() => undefined), sleep(timeoutMs).then(() => void this.#child.kill('SIGKILL'))]);
  }
}

