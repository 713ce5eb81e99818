/**
 * Scenario `hostile` (opt-in: `npm run bench -- --only=hostile`), issue "One bad workload cluster cannot hurt the
 * others": the product's local pipeline in `capi` mode, in a child process, watches a healthy workload cluster (an API
 * server of its own, two Machines and their Nodes) when six Clusters appear whose `<cluster>-kubeconfig` Secrets name
 * hostile servers (bench/lib/hostile-servers.ts). For two minutes (`--hostile-seconds` changes it) the healthy
 * cluster's Machines are edited one edit after another; then the servers go away and it is edited three more times.
 * Reports the child's peak RSS above its baseline, its log bytes at INFO, the healthy cluster's edit latencies
 * (p50/p99/max) during the attack and after, the failing clusters as reported, and the requests per second each
 * hostile server saw. As the fleet scenario, the benchmark plays Cluster API and the provider (no manager runs): it
 * creates the Cluster objects, the Secrets, the Machines (`spec.taints`, `status.nodeRef`) and the Nodes; the edits
 * change `spec.taints`, which the product propagates (spec.taints owned by the product).
 *
 * Issue 48's variant (`--hostile-set=three --hostile-machine-edit-seconds=15`, or `=0` for back to back): three servers
 * that answer at once (`empty-close`, `ends-at-once`, `gone`), each hostile cluster with a Machine whose
 * `status.nodeRef` names a Node of that cluster (so the reconcile tries to reach it), its `spec.taints` edited on that
 * cadence; the child runs `npm start`'s status display too. Reports each server's requests per second, by component.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveBinaries } from '#local/control-plane/assets.ts';
import type { Child } from '#local/control-plane/children.ts';
import { startWorkloadApiServer, type WorkloadApiServer } from '#local/control-plane/workload-servers.ts';
import type { BenchContext } from '../lib/context.ts';
import { runHostileAttack, type HostileAttackResult } from '../lib/hostile-attack.ts';
import { HOSTILE_SETS } from '../lib/hostile-servers.ts';
import { createMachine, registerWorkloadCluster, BENCH_LABEL, MACHINES_PATH, RawKube, cleanup, createNamespace, createPairs, hasTaint, loadKubeConfig, runId, setMachineTaints, type Pair, type RawNode } from '../lib/kube.ts';

export type HostileResult = Omit<HostileAttackResult, 'leaks'> & { readonly leakSamples: readonly string[] };

const PROBE = 'hostile-probe';

/** Which servers, and how the hostile clusters' Machines are edited (none without `machineEditSeconds`). */
export interface HostileVariant {
  readonly set?: keyof typeof HOSTILE_SETS;
  readonly machineEditSeconds?: number;
}

export async function runHostile(ctx: BenchContext, attackSeconds: number, variant: HostileVariant = {}): Promise<HostileResult> {
  if (!ctx.etcdEndpoint) throw new Error("the hostile scenario starts a workload API server on the control plane's etcd: pass --etcd=<url> with --kubeconfig");
  const binaries = await resolveBinaries({ build: false, log: ctx.log });
  if (!binaries.available) throw new Error(`no kube-apiserver for the workload cluster: ${binaries.reason}`);
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 16);
  const run = runId('hostile');
  const ns = run;
  const dir = await mkdtemp(join(tmpdir(), 'capi-tp-bench-hostile-'));
  const children: Child[] = [];
  let server: WorkloadApiServer | undefined;
  let workload: RawKube | undefined;
  try {
    server = await startWorkloadApiServer({ name: `${run}-wc`, dir, kubeApiserver: binaries.value.kubeApiserver, etcdEndpoint: ctx.etcdEndpoint, children, timeoutMs: 90_000 });
    workload = await RawKube.from(loadKubeConfig(server.adminKubeconfigPath), 16);
    await createNamespace(raw, ns, run);
    const cluster = 'healthy';
    await registerWorkloadCluster(raw, ns, run, cluster, server.server, server.kubeconfigYaml);
    const wk = workload;
    const pairs: Pair[] = await createPairs(raw, { run, namespace: ns, count: 2, clusterName: cluster, nodePrefix: `${run}-n`, nodeKube: wk, machineTaints: [{ key: PROBE, value: 'v0', effect: 'NoSchedule' }], nodeStatus: true });
    ctx.log(`  healthy cluster: API server ${server.server}, ${pairs.length} Machines and Nodes`);
    const hostileMachine = (cluster: string): string => `${cluster}-m0`;
    const result = await runHostileAttack({
      behaviours: HOSTILE_SETS[variant.set ?? 'six'],
      // HOSTILE_CHILD_LOG=<file>: a copy of the pipeline child's output, to see what it logged.
      ...(process.env['HOSTILE_CHILD_LOG'] ? { childLogPath: process.env['HOSTILE_CHILD_LOG'] } : {}),
      ...(variant.machineEditSeconds !== undefined
        ? {
            hostileMachines: {
              editEveryMs: variant.machineEditSeconds * 1000,
              create: async (hostileCluster) => {
                await createMachine(raw, ns, hostileMachine(hostileCluster), run, [{ key: PROBE, value: 'h0', effect: 'NoSchedule' }], hostileCluster);
                await raw.mergePatch(`${MACHINES_PATH}/namespaces/${ns}/machines/${hostileMachine(hostileCluster)}/status`, { status: { nodeRef: { name: `${hostileCluster}-n0` } } });
              },
              edit: async (hostileCluster, value) => {
                await setMachineTaints(raw, ns, hostileMachine(hostileCluster), [{ key: PROBE, value, effect: 'NoSchedule' }]);
              },
            },
          }
        : {}),
      managementKubeconfigPath: ctx.kubeconfigPath,
      management: loadKubeConfig(ctx.kubeconfigPath),
      namespace: ns,
      attackMs: attackSeconds * 1000,
      dir: join(dir, 'hostile'),
      specTaintsOwner: 'product',
      log: ctx.log,
      healthy: {
        edit: async (value) => {
          for (const p of pairs) await setMachineTaints(raw, ns, p.machine, [{ key: PROBE, value, effect: 'NoSchedule' }]);
        },
        reached: async (value) => {
          for (const p of pairs) {
            const node = await wk.get<RawNode>(`/api/v1/nodes/${p.node}`);
            if (!hasTaint(node, { key: PROBE, value, effect: 'NoSchedule' })) return false;
          }
          return true;
        },
      },
    });
    const { leaks, ...rest } = result;
    const summary = (ms: readonly number[]): string => ms.map((v) => (Number.isFinite(v) ? String(Math.round(v)) : 'lost')).join(', ');
    ctx.log(`  peak RSS ${result.peakRssMiB} MiB (baseline ${result.baselineRssMiB} MiB, +${result.rssDeltaMiB} MiB); log ${(result.logBytes / 2 ** 20).toFixed(2)} MiB in ${result.logLines} lines (${(result.logBytesDuringAttack / 2 ** 20).toFixed(2)} MiB during the attack), ${result.leakCount} leaking`);
    ctx.log(`  healthy cluster's edits during the attack: p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, max ${result.maxMs} ms (${summary(result.latenciesMs)}); after: ${summary(result.latenciesAfterMs)}`);
    ctx.log(`  requests per second to each hostile server over ${result.attackSeconds} s: ${JSON.stringify(result.requestsPerSecond)}; by component: ${JSON.stringify(result.requestsPerSecondByComponent)}; hostile Machine edits: ${result.hostileMachineEdits} each`);
    ctx.log(`  failing clusters reported: ${result.failingClusters.map((f) => `${f.cluster}: ${f.reason}`).join(' | ')}`);
    return { ...rest, leakSamples: leaks };
  } finally {
    await workload?.request('DELETE', `/api/v1/nodes?labelSelector=${encodeURIComponent(`${BENCH_LABEL}=${run}`)}`).catch(() => undefined);
    workload?.close();
    await server?.stop();
    await raw.request('DELETE', `${MACHINES_PATH}/namespaces/${ns}/clusters`).catch(() => undefined);
    await raw.request('DELETE', `/api/v1/namespaces/${ns}/secrets`).catch(() => undefined);
    await cleanup(raw, run, [ns]);
    raw.close();
    await rm(dir, { recursive: true, force: true });
  }
}
