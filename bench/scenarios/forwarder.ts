/**
 * Scenario 4, the watch-forwarder under kubelet-like heartbeat churn: N Nodes (kubelet-like status, ~3 KB) and N
 * Machines; the forwarder runs alone in a child process (its memory and CPU are its own) against the API server.
 * After its initial sync (every object announced once), a measuring window: this process plays the kubelets,
 * writing Node status heartbeats (new `lastHeartbeatTime` only) at a steady rate over all Nodes, and makes a known
 * number of real changes (half Machine `spec.taints` edits, half foreign Node taint edits).
 * - filteredShare = 1 − (messages whose resourceVersion is one a heartbeat wrote) / heartbeats written;
 * - messagesPerChange = messages sent in the window / real changes made;
 * - CPU of the forwarder in the window and in the initial sync; peak memory = VmHWM of the child.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchContext } from '../lib/context.ts';
import { BENCH_LABEL, RawKube, cleanup, createNamespace, createPairs, kubeletStatus, loadKubeConfig, mapConcurrent, runId, setMachineTaints, type BenchTaint, type CallCounts } from '../lib/kube.ts';
import { round, sleep, since } from '../lib/stats.ts';

export interface ForwarderResult {
  readonly nodes: number;
  readonly machines: number;
  readonly setupMs: number;
  /** Initial list + announce of every object (2 N messages). */
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
  /** The forwarder's own API calls (list pages, watches, Lease). */
  readonly forwarderCalls: CallCounts;
}

const DECLARED: BenchTaint = { key: 'bench.capi-tp/pool', value: 'gpu', effect: 'NoSchedule' };

interface ChildReport {
  windowMs: number;
  windowCpuMs: number;
  windowCounts: Record<string, number>;
  windowMessages: number;
  windowIds: string[];
  calls: CallCounts;
  peakMiB: number;
  maxSampledRssMiB: number;
  heapUsedMiB: number;
  baselineRssMiB: number;
}

export async function runForwarder(ctx: BenchContext): Promise<ForwarderResult> {
  const { forwarderObjects: n, heartbeatRate, forwarderSeconds, forwarderRealChanges } = ctx.sizes;
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 64);
  const run = runId('fw');
  const ns = run;
  let child: ChildProcess | undefined;
  try {
    const setupStart = performance.now();
    await createNamespace(raw, ns, run);
    const pairs = await createPairs(raw, { run, namespace: ns, count: n, machineTaints: [DECLARED], nodeTaints: [DECLARED], nodeStatus: true, concurrency: 48 });
    const setupMs = since(setupStart);
    ctx.log(`  ${n} Nodes (with kubelet-like status) + ${n} Machines created in ${(setupMs / 1000).toFixed(1)} s`);

    // The child runs as one esbuild bundle, as the forwarder runs on Lambda: running the .ts sources directly would
    // add Node's type-stripping compiler (WebAssembly, tens of MB) to the measured memory.
    const childScript = await bundleChild();
    child = fork(childScript, [], {
      execArgv: [],
      env: {
        ...process.env,
        POWERTOOLS_LOG_LEVEL: 'SILENT',
        POWERTOOLS_METRICS_DISABLED: 'true',
        BENCH_KUBECONFIG: ctx.kubeconfigPath,
        BENCH_NAMESPACE: ns,
        BENCH_RUN: run,
        BENCH_LABEL_SELECTOR: `${BENCH_LABEL}=${run}`,
      },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    const ipc = new ChildChannel(child);
    await ipc.next('started', 30_000);

    // Initial sync: every Node and Machine is announced once.
    const syncDeadline = Date.now() + Math.max(60_000, n * 30);
    for (;;) {
      const s = await ipc.ask<{ messages: number }>('status');
      if (s.messages >= 2 * n) break;
      if (Date.now() > syncDeadline) throw new Error(`initial sync incomplete: ${s.messages}/${2 * n} messages`);
      await sleep(100);
    }
    const marked = await ipc.ask<{ syncCpuMs: number; syncMs: number; messages: number }>('mark', 'marked');
    ctx.log(`  forwarder initial sync: ${marked.messages} messages in ${(marked.syncMs / 1000).toFixed(1)} s (CPU ${(marked.syncCpuMs / 1000).toFixed(1)} s)`);

    // Measuring window: heartbeats at a steady rate, real changes spread evenly.
    const heartbeatRvs = new Set<string>();
    const total = Math.round(heartbeatRate * forwarderSeconds);
    const changeEvery = Math.max(1, Math.floor(total / Math.max(1, forwarderRealChanges)));
    let realChanges = 0;
    const start = performance.now();
    await mapConcurrent(
      Array.from({ length: total }, (_, i) => i),
      32,
      async (i) => {
        const due = start + (i * 1000) / heartbeatRate;
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const pair = pairs[i % pairs.length];
        if (!pair) return;
        const hb = await raw.mergePatch<{ metadata: { resourceVersion: string } }>(`/api/v1/nodes/${pair.node}/status`, { status: kubeletStatus(pair.node, new Date()) });
        heartbeatRvs.add(hb.metadata.resourceVersion);
        if (i % changeEvery === 0 && realChanges < forwarderRealChanges) {
          const k = realChanges++;
          const target = pairs[(i * 7 + 3) % pairs.length] ?? pair;
          if (k % 2 === 0) {
            await setMachineTaints(raw, ns, target.machine, [DECLARED, { key: 'bench.capi-tp/change', value: `c${k}`, effect: 'NoSchedule' }]);
          } else {
            await raw.mergePatch(`/api/v1/nodes/${target.node}`, { spec: { taints: [DECLARED, { key: 'bench.capi-tp/foreign', value: `c${k}`, effect: 'NoSchedule' }] } });
          }
        }
      },
    );
    const generateMs = since(start);
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
    rmSync(childScript, { force: true });

    const ids = report.windowIds;
    const rvOf = (id: string): string => id.split(':')[1] ?? '';
    const heartbeatMessages = ids.filter((id) => heartbeatRvs.has(rvOf(id))).length;
    const changeMessages = ids.length - heartbeatMessages;
    const seen = report.windowCounts['EventsSeen'] ?? 0;
    const result: ForwarderResult = {
      nodes: n,
      machines: n,
      setupMs: round(setupMs, 0),
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
      forwarderCalls: report.calls,
    };
    ctx.log(
      `  window ${(result.windowMs / 1000).toFixed(1)} s: ${result.heartbeatsWritten} heartbeats (${result.heartbeatRatePerSec}/s), ${realChanges} real changes, ` +
        `${result.windowMessages} messages (${heartbeatMessages} from heartbeats); filtered ${(result.filteredShare * 100).toFixed(2)} %, ` +
        `${result.messagesPerChange} messages/change, CPU ${(result.windowCpuShare * 100).toFixed(1)} % of a core, peak ${result.peakMiB} MiB (baseline ${result.baselineRssMiB} MiB)`,
    );
    return result;
  } finally {
    if (child) {
      child.kill('SIGKILL');
    }
    await cleanup(raw, run, [ns]);
    raw.close();
  }
}

async function bundleChild(): Promise<string> {
  const { build } = await import('esbuild');
  const outDir = fileURLToPath(new URL('../out/', import.meta.url));
  mkdirSync(outDir, { recursive: true });
  const outfile = join(outDir, `forwarder-child-${process.pid}.cjs`);
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

