/**
 * The hostile-clusters attack of issue 27, shared by its e2e test (test/e2e-capi/hostile-clusters.test.ts, which
 * asserts) and its benchmark (bench/scenarios/hostile.ts, which reports):
 *
 * 1. the product's local pipeline in `capi` mode runs in a child process (capi-pipeline-child.ts), its log output (INFO)
 *    counted line by line, its RSS sampled from /proc every 250 ms; a healthy workload cluster is already watched;
 * 2. the baseline: RSS before the attack, after one edit of the healthy cluster has gone through;
 * 3. the attack: the hostile servers (hostile-servers.ts; issue 27's six by default) start, and a Cluster and its
 *    `<cluster>-kubeconfig` Secret is created for each in the management cluster; for `attackMs` the healthy cluster's
 *    Machines are edited one edit after another, each timed from the edit to its Nodes carrying it. With
 *    `hostileMachines`, each hostile cluster also gets a Machine whose `status.nodeRef` names a Node of that cluster
 *    (so the reconcile tries to reach it), edited every `hostileMachines.editEveryMs` (0: back to back) meanwhile;
 *    and the child runs `npm start`'s status display (every `statusReportMs`, default 2 s as `npm start`), which lists
 *    the Nodes of every cluster with a Machine. Each server counts its requests by the component its User-Agent names;
 * 4. the servers go away (stopped; their Clusters and Secrets stay, now naming closed ports), and the healthy cluster
 *    is edited again, each edit timed the same way.
 *
 * Every log line is checked as it arrives: its size, how much hostile text it holds (the servers' payloads repeat
 * HOSTILE_MARKER), raw control bytes, and whether it is the per-cluster "Workload cluster unreachable" line.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, type WriteStream } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { HOSTILE_MARKER, ISSUE27_BEHAVIOURS, startHostileServers, type HostileBehaviour, type HostileServer, type HostileStats } from './hostile-servers.ts';
import { quantile, round } from './stats.ts';

/** The healthy workload cluster, as the caller drives it. */
export interface HealthyCluster {
  /** Declares `value` on the cluster's Machines (through a MachineDeployment or on the Machines themselves). */
  edit(value: string): Promise<void>;
  /** True once every Node of those Machines carries `value`. */
  reached(value: string): Promise<boolean>;
}

/** A Machine of each hostile cluster, linked to a Node of that cluster, and how it is edited during the attack. */
export interface HostileMachines {
  /** Creates a Machine of `cluster` whose `status.nodeRef` names a Node of that cluster (the Node need not exist). */
  create(cluster: string): Promise<void>;
  /** Changes what that Machine declares, so that the product reconciles its Node (`value` differs at each edit). */
  edit(cluster: string, value: string): Promise<void>;
  /** Pause between the starts of two rounds of edits (one edit of each hostile Machine); 0: back to back. */
  readonly editEveryMs: number;
}

export interface HostileAttackOptions {
  /** The hostile servers (default issue 27's six). */
  readonly behaviours?: readonly HostileBehaviour[];
  /** Machines of the hostile clusters linked to their Nodes, edited during the attack (default none). */
  readonly hostileMachines?: HostileMachines;
  /** Interval of `npm start`'s status display in the child (default 2 000 ms, `npm start`'s); 0 runs none. */
  readonly statusReportMs?: number;
  /** The management cluster (what the child's pipeline reads) and its admin KubeConfig. */
  readonly managementKubeconfigPath: string;
  readonly management: KubeConfig;
  /** Namespace of the Machines, Clusters, Secrets, Lease and state (the healthy cluster lives there already). */
  readonly namespace: string;
  readonly healthy: HealthyCluster;
  /** Length of the attack (the issue's: 120 000 ms). */
  readonly attackMs: number;
  /** Edits after the servers went away (default 3). */
  readonly editsAfter?: number;
  /** Pause between two edits (default 2 s). */
  readonly editPauseMs?: number;
  /** An edit not seen on the Nodes after this long counts as lost (default 60 s, twice the issue's limit). */
  readonly editGiveUpMs?: number;
  /** Folder for the hostile servers' certificates. */
  readonly dir: string;
  /** `upstream` when Cluster API's manager runs (it propagates `spec.taints`), else `product`. */
  readonly specTaintsOwner: 'upstream' | 'product';
  /** Cluster API group version of the Cluster objects (default v1beta2). */
  readonly capiVersion?: 'v1beta2' | 'v1beta1';
  /**
   * The `spec` of each hostile Cluster (default: its server as `controlPlaneEndpoint`, enough where no Cluster API
   * webhook runs). With Cluster API's manager, give references to provider objects that do not exist: the Cluster then
   * waits for them, and the manager neither writes its kubeconfig Secret nor connects to its server.
   */
  readonly clusterSpec?: (name: string, server: string) => Record<string, unknown>;
  /** Size of `huge-event`'s one event (default 300 MiB). */
  readonly hugeEventBytes?: number;
  readonly log?: (line: string) => void;
  /** A file that gets a copy of the child's whole output (for a look at what it logged), default none. */
  readonly childLogPath?: string;
}

/** A log line of the product that says a hostile cluster is failing, as parsed. */
export interface FailingLine {
  readonly cluster: string;
  readonly reason: string;
  readonly message: string;
}

export interface HostileAttackResult {
  readonly attackMs: number;
  /** RSS of the child before the attack, and the highest sample from the attack's start to the end. */
  readonly baselineRssMiB: number;
  readonly peakRssMiB: number;
  readonly rssDeltaMiB: number;
  /** The child's whole output (stdout + stderr), from its start to its end; and from the attack's start to its end. */
  readonly logBytes: number;
  readonly logBytesDuringAttack: number;
  readonly logLines: number;
  readonly longestLogLineBytes: number;
  /** Log lines with more hostile text than a short excerpt, or raw control bytes (up to 5, each cut to 300 chars). */
  readonly leaks: readonly string[];
  readonly leakCount: number;
  /** The per-cluster "unreachable" lines, by cluster (`<namespace>/<name>`), first one each. */
  readonly failingLines: Readonly<Record<string, FailingLine>>;
  /** What the forwarder reported as failing (what UnreachableClusters counts) just before the servers went away. */
  readonly failingClusters: readonly { cluster: string; reason: string; since: string }[];
  /** The healthy cluster's edit latencies, during the attack and after the servers went away (lost: Infinity). */
  readonly latenciesMs: readonly number[];
  readonly latenciesAfterMs: readonly number[];
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly maxAfterMs: number;
  /** The hostile servers of the run. */
  readonly behaviours: readonly HostileBehaviour[];
  /** Requests per second to each hostile server during the attack (averaged over it), and what each saw. */
  readonly requestsPerSecond: Readonly<Partial<Record<HostileBehaviour, number>>>;
  /** The same, by the component the requests named (`watch-forwarder`, `reconcile-node-taints`, `start`: the display). */
  readonly requestsPerSecondByComponent: Readonly<Partial<Record<HostileBehaviour, Readonly<Record<string, number>>>>>;
  readonly servers: Readonly<Partial<Record<HostileBehaviour, HostileStats>>>;
  /** The cluster name of each hostile server. */
  readonly clusters: Readonly<Partial<Record<HostileBehaviour, string>>>;
  /** The length of the attack as measured (the rates' denominator), in seconds. */
  readonly attackSeconds: number;
  /** Edits of each hostile cluster's Machine during the attack (0 without `hostileMachines`). */
  readonly hostileMachineEdits: number;
  /** Counters of the child's pipeline at the end. */
  readonly counters: Record<string, unknown>;
}

/** Text of a log line beyond which hostile content is a leak: a short excerpt (here: at most 200 bytes of it). */
const MAX_EXCERPT_MARKERS = Math.ceil(200 / HOSTILE_MARKER.length);
/** Lines longer than this are not kept whole while they are read (they are counted, and checked in parts). */
const MAX_KEPT_LINE = 64 * 1024;

const UNREACHABLE = 'Workload cluster unreachable';

/** Reads a child's output line by line without ever holding a line longer than MAX_KEPT_LINE. */
class LogTap {
  bytes = 0;
  lines = 0;
  longest = 0;
  leakCount = 0;
  readonly leaks: string[] = [];
  readonly failing: Record<string, FailingLine> = {};
  private partial = '';
  private partialBytes = 0;
  private partialMarkers = 0;

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    let text = chunk.toString('latin1');
    for (;;) {
      const nl = text.indexOf('\n');
      const piece = nl === -1 ? text : text.slice(0, nl);
      this.partialBytes += piece.length;
      this.partialMarkers += piece.split(HOSTILE_MARKER).length - 1;
      if (this.partial.length < MAX_KEPT_LINE) this.partial += piece.slice(0, MAX_KEPT_LINE - this.partial.length);
      if (nl === -1) return;
      this.endLine();
      text = text.slice(nl + 1);
    }
  }

  private endLine(): void {
    const line = this.partial;
    this.lines++;
    this.longest = Math.max(this.longest, this.partialBytes);
    // eslint-disable-next-line no-control-regex
    const raw = /[\u0000-\u0008\u000b-\u001f\u007f]/.test(line);
    if (this.partialMarkers > MAX_EXCERPT_MARKERS || raw) {
      this.leakCount++;
      if (this.leaks.length < 5) this.leaks.push(JSON.stringify(line.slice(0, 300)));
    }
    if (line.includes(UNREACHABLE) && line.length < MAX_KEPT_LINE) {
      try {
        const parsed = JSON.parse(line) as { message?: string; cluster?: string; reason?: string };
        if (parsed.cluster && !this.failing[parsed.cluster]) this.failing[parsed.cluster] = { cluster: parsed.cluster, reason: parsed.reason ?? '', message: parsed.message ?? '' };
      } catch {
        // not one JSON line: counted above, nothing more to learn
      }
    }
    this.partial = '';
    this.partialBytes = 0;
    this.partialMarkers = 0;
  }
}

/** IPC with the child: one pending question at a time. */
function ask<T>(child: ChildProcess, key: string, timeoutMs = 10_000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.off('message', on);
      reject(new Error(`the pipeline child did not answer ${key} within ${timeoutMs} ms`));
    }, timeoutMs);
    const on = (m: unknown): void => {
      if (typeof m === 'object' && m !== null && key in m) {
        clearTimeout(timer);
        child.off('message', on);
        resolve((m as Record<string, T>)[key] as T);
      }
    };
    child.on('message', on);
    child.send(key);
  });
}

function rssMiB(pid: number): number | undefined {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Runs the attack (see the module comment); the child and the servers are stopped before it returns or throws. */
export async function runHostileAttack(o: HostileAttackOptions): Promise<HostileAttackResult> {
  const log = o.log ?? (() => undefined);
  const editPauseMs = o.editPauseMs ?? 2_000;
  const giveUpMs = o.editGiveUpMs ?? 60_000;
  const version = o.capiVersion ?? 'v1beta2';
  const tap = new LogTap();
  const child = fork(fileURLToPath(new URL('./capi-pipeline-child.ts', import.meta.url)), [], {
    execArgv: ['--no-warnings=ExperimentalWarning'],
    env: {
      ...process.env,
      POWERTOOLS_LOG_LEVEL: 'INFO',
      POWERTOOLS_METRICS_DISABLED: 'true',
      POWERTOOLS_DEV: 'false',
      HOSTILE_KUBECONFIG: o.managementKubeconfigPath,
      HOSTILE_NAMESPACE: o.namespace,
      HOSTILE_LEASE: `forwarder-hostile-${process.pid}`,
      HOSTILE_SPEC_TAINTS_OWNER: o.specTaintsOwner,
      ...((o.statusReportMs ?? 2_000) > 0 ? { HOSTILE_STATUS_REPORT_MS: String(o.statusReportMs ?? 2_000) } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const copy: WriteStream | undefined = o.childLogPath ? createWriteStream(o.childLogPath) : undefined;
  child.stdout?.on('data', (c: Buffer) => {
    tap.push(c);
    copy?.write(c);
  });
  child.stderr?.on('data', (c: Buffer) => {
    tap.push(c);
    copy?.write(c);
  });
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  let servers: HostileServer[] = [];
  let sampler: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('the pipeline child did not become ready within 90 s')), 90_000);
      child.once('message', (m) => {
        clearTimeout(timer);
        if (m === 'ready') resolve();
        else reject(new Error(`unexpected first message ${JSON.stringify(m)}`));
      });
      void exited.then((code) => reject(new Error(`the pipeline child exited (${code}) before it was ready`)));
    });
    const pid = child.pid as number;

    let editNo = 0;
    const timedEdit = async (): Promise<number> => {
      const value = `v${++editNo}-${Date.now().toString(36)}`;
      const started = performance.now();
      await o.healthy.edit(value);
      while (performance.now() - started < giveUpMs) {
        if (await o.healthy.reached(value).catch(() => false)) return performance.now() - started;
        await sleep(100);
      }
      return Number.POSITIVE_INFINITY;
    };

    // Baseline: one edit through, then the RSS settles for a few seconds.
    const warmup = await timedEdit();
    log(`  warm-up edit: ${Math.round(warmup)} ms`);
    const baselineSamples: number[] = [];
    for (let i = 0; i < 12; i++) {
      baselineSamples.push(rssMiB(pid) ?? 0);
      await sleep(250);
    }
    const baselineRssMiB = quantile(baselineSamples, 0.5);
    let peakRssMiB = baselineRssMiB;
    sampler = setInterval(() => {
      peakRssMiB = Math.max(peakRssMiB, rssMiB(pid) ?? 0);
    }, 250);

    // The attack: the servers, a Cluster and a Secret each (and a Machine each, when asked).
    const behaviours = o.behaviours ?? ISSUE27_BEHAVIOURS;
    servers = await startHostileServers({ dir: o.dir, behaviours, lifetimeMs: o.attackMs + 120_000, ...(o.hugeEventBytes !== undefined ? { hugeEventBytes: o.hugeEventBytes } : {}) });
    const suffix = Date.now().toString(36).slice(-5);
    const clusters = Object.fromEntries(servers.map((s) => [s.behaviour, `hostile-${s.behaviour}-${suffix}`])) as Record<HostileBehaviour, string>;
    const core = o.management.makeApiClient(CoreV1Api);
    const custom = o.management.makeApiClient(CustomObjectsApi);
    const logBytesAtStart = tap.bytes;
    const attackStarted = performance.now();
    for (const s of servers) {
      const name = clusters[s.behaviour];
      await core.createNamespacedSecret({
        namespace: o.namespace,
        body: {
          metadata: { name: `${name}-kubeconfig`, labels: { 'cluster.x-k8s.io/cluster-name': name } },
          type: 'cluster.x-k8s.io/secret',
          data: { value: Buffer.from(s.kubeconfigYaml).toString('base64') },
        },
      });
      await custom.createNamespacedCustomObject({
        group: 'cluster.x-k8s.io',
        version,
        plural: 'clusters',
        namespace: o.namespace,
        // By default the server's address as a provider records it (the spec must not be empty); the product reads the Secret.
        body: { apiVersion: `cluster.x-k8s.io/${version}`, kind: 'Cluster', metadata: { name, namespace: o.namespace }, spec: o.clusterSpec?.(name, s.server) ?? { controlPlaneEndpoint: { host: '127.0.0.1', port: Number(new URL(s.server).port) } } },
      });
    }
    const hostile = o.hostileMachines;
    if (hostile) for (const name of Object.values(clusters)) await hostile.create(name);
    log(`  attack started: ${servers.length} hostile clusters (${Object.values(clusters).join(', ')})${hostile ? `, a Machine each, edited ${hostile.editEveryMs > 0 ? `every ${hostile.editEveryMs} ms` : 'back to back'}` : ''}`);
    // The hostile Machines' edits, beside the healthy cluster's: one round edits each once.
    let hostileRounds = 0;
    const hostileEdits = (async (): Promise<void> => {
      if (!hostile) return;
      while (performance.now() - attackStarted < o.attackMs) {
        const round = performance.now();
        hostileRounds++;
        for (const name of Object.values(clusters)) await hostile.edit(name, `h${hostileRounds}`);
        const wait = hostile.editEveryMs - (performance.now() - round);
        if (wait > 0) await sleep(Math.min(wait, o.attackMs - (performance.now() - attackStarted)));
      }
    })();
    const latenciesMs: number[] = [];
    while (performance.now() - attackStarted < o.attackMs) {
      const ms = await timedEdit();
      latenciesMs.push(ms);
      log(`  edit during the attack: ${Number.isFinite(ms) ? `${Math.round(ms)} ms` : 'lost'} (${Math.round((performance.now() - attackStarted) / 1000)} s in; RSS peak ${Math.round(peakRssMiB)} MiB, log ${(tap.bytes / 1024 / 1024).toFixed(2)} MiB)`);
      await sleep(editPauseMs);
    }
    await hostileEdits;
    const attackSeconds = (performance.now() - attackStarted) / 1000;
    const status = await ask<{ failingClusters: { cluster: string; reason: string; since: string }[] }>(child, 'status');
    const servedBy = Object.fromEntries(servers.map((s) => [s.behaviour, s.stats()])) as Record<HostileBehaviour, HostileStats>;
    await Promise.all(servers.map((s) => s.stop()));
    const logBytesDuringAttack = tap.bytes - logBytesAtStart;
    log(`  servers gone after ${attackSeconds.toFixed(0)} s`);

    const latenciesAfterMs: number[] = [];
    for (let i = 0; i < (o.editsAfter ?? 3); i++) {
      const ms = await timedEdit();
      latenciesAfterMs.push(ms);
      log(`  edit after the attack: ${Number.isFinite(ms) ? `${Math.round(ms)} ms` : 'lost'}`);
      await sleep(editPauseMs);
    }
    const final = await ask<{ counters: Record<string, unknown> }>(child, 'status');
    clearInterval(sampler);
    sampler = undefined;

    // Tidy up: the hostile Clusters and their Secrets go (the stream of each stops).
    for (const name of Object.values(clusters)) {
      await custom.deleteNamespacedCustomObject({ group: 'cluster.x-k8s.io', version, plural: 'clusters', namespace: o.namespace, name }).catch(() => undefined);
      await core.deleteNamespacedSecret({ namespace: o.namespace, name: `${name}-kubeconfig` }).catch(() => undefined);
    }
    child.send('stop');
    await Promise.race([exited, sleep(30_000)]);

    const all = latenciesMs.length > 0 ? latenciesMs : [Number.POSITIVE_INFINITY];
    return {
      attackMs: o.attackMs,
      baselineRssMiB: round(baselineRssMiB, 1),
      peakRssMiB: round(peakRssMiB, 1),
      rssDeltaMiB: round(peakRssMiB - baselineRssMiB, 1),
      logBytes: tap.bytes,
      logBytesDuringAttack,
      logLines: tap.lines,
      longestLogLineBytes: tap.longest,
      leaks: tap.leaks,
      leakCount: tap.leakCount,
      failingLines: tap.failing,
      failingClusters: status.failingClusters,
      latenciesMs,
      latenciesAfterMs,
      p50Ms: round(quantile(all, 0.5), 0),
      p99Ms: round(quantile(all, 0.99), 0),
      maxMs: round(Math.max(...all), 0),
      maxAfterMs: round(Math.max(...(latenciesAfterMs.length > 0 ? latenciesAfterMs : [0])), 0),
      behaviours,
      requestsPerSecond: Object.fromEntries(behaviours.map((b) => [b, round((servedBy[b]?.requests ?? 0) / attackSeconds, 2)])),
      requestsPerSecondByComponent: Object.fromEntries(behaviours.map((b) => [b, Object.fromEntries(Object.entries(servedBy[b]?.byComponent ?? {}).map(([c, n]) => [c, round(n / attackSeconds, 2)]))])),
      servers: servedBy,
      clusters,
      attackSeconds: round(attackSeconds, 1),
      hostileMachineEdits: hostileRounds,
      counters: final.counters,
    };
  } finally {
    if (sampler) clearInterval(sampler);
    await Promise.all(servers.map((s) => s.stop()));
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    copy?.end();
  }
}
