/**
 * Runs the scenarios of a profile against one API server and assembles `results.json`: the stable figures at the
 * top level, each target with its measured value and verdict, and every scenario's details.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { SIZES, type BenchContext, type Profile, type Sizes } from './context.ts';
import { loadKubeConfig, RawKube } from './kube.ts';
import { round } from './stats.ts';
import { runThroughput, type ThroughputResult } from '../scenarios/throughput.ts';
import { runApiCost, type ApiCostResult } from '../scenarios/api-cost.ts';
import { runE2eLatency, type E2eLatencyResult } from '../scenarios/e2e-latency.ts';
import { runForwarder, type ForwarderResult } from '../scenarios/forwarder.ts';
import { runConflictStorm, type ConflictStormResult } from '../scenarios/conflict-storm.ts';
import { runColdStart, type ColdStartResult } from '../scenarios/cold-start.ts';
import { runIncidentStorm, type IncidentStormResult } from '../scenarios/incident-storm.ts';
import { runFleet, type FleetResult } from '../scenarios/fleet.ts';
import { runSideBySide, type SideBySideResult } from '../scenarios/side-by-side.ts';
import { runFleet100, runFleet1000, type Fleet100Result, type Fleet1000Result } from '../scenarios/fleet100.ts';
import { runFleetDeployed, type FleetDeployedResult } from '../scenarios/fleet-deployed.ts';
import { runHostile, type HostileResult } from '../scenarios/hostile.ts';
import { runNoExecute, type NoExecuteResult } from '../scenarios/noexecute.ts';
import { BENCH_PACKAGE_SHORT_WINDOWS, runDeployedLatency, type DeployedLatencyResult } from '../scenarios/deployed.ts';
import { PACKAGE_VARIANTS } from '#local/lambda/serverless-package.ts';

export const SCENARIOS = ['throughput', 'api-cost', 'e2e-latency', 'forwarder', 'conflict-storm', 'cold-start', 'incident-storm', 'fleet', 'fleet100', 'fleet1000', 'side-by-side', 'noexecute'] as const;
/**
 * Scenarios run only when named in `--only` (not part of a full run, nor of BENCHMARKS.md's tables): `hostile`, the
 * two-minute attack of six hostile workload clusters (bench/scenarios/hostile.ts).
 */
export const OPT_IN_SCENARIOS = ['hostile'] as const;
export type ScenarioName = (typeof SCENARIOS)[number] | (typeof OPT_IN_SCENARIOS)[number];

/** The figures of the issue, under their stable keys. */
export const FIGURE_KEYS = [
  'throughputRatio',
  'throughputRatioContract',
  'callsPerChangedNode',
  'readsPerUnchangedNode',
  'writesPerUnchangedNode',
  'e2eP50Ms',
  'e2eP99Ms',
  'filteredShare',
  'messagesPerChange',
  'forwarderPeakMiB',
  'forwarderPeakMiB20k',
  'reconcileBundleBytes',
  'reconcileLoadMs',
  'forwarderLoadMs',
  'callsPerNoiseEvent',
  'messagesPerNoiseEvent',
  'fleetForwarderPeakMiB',
  'fleetInitialSyncMs',
  'fleetE2eP50Ms',
  'fleetE2eP99Ms',
  'forwarderPeakMiB100Clusters',
  'fleet100InitialSyncMs',
  'fleet100E2eP50Ms',
  'fleet100E2eP99Ms',
  'fleet1000PeakMiB',
  'fleet1000InitialSyncMs',
  'fleet1000E2eP99Ms',
  'fleet1000ManagementReqPerSec',
  'vsCapiRatioP99',
  'vsCapiRatioConverge',
  'workloadCallsPerChangedNode',
  'joinP99RatioVsCapi',
  'callsPerForeignChange',
  'vsCapiRatioP99Deployed',
  'vsCapiRatioConvergeDeployed',
  'workloadCallsPerChangedNodeDeployed',
  'joinP99RatioVsCapiDeployed',
  'callsPerForeignChangeDeployed',
  'noExecuteImmediatePodsDeletedPerSecond',
  'noExecuteImmediateBudgetsViolated',
  'noExecuteStagedMaxInProgress',
  'noExecuteStagedBudgetsViolated',
  'noExecuteStagedSeconds',
] as const;
export type FigureKey = (typeof FIGURE_KEYS)[number];

/** The figures of scenario 9 (side by side with Cluster API), which runs a control plane of its own. */
/** The figures of the NoExecute scenario (issue 51), which runs a control plane of its own with kube-controller-manager. */
export const NOEXECUTE_KEYS: readonly FigureKey[] = ['noExecuteImmediatePodsDeletedPerSecond', 'noExecuteImmediateBudgetsViolated', 'noExecuteStagedMaxInProgress', 'noExecuteStagedBudgetsViolated', 'noExecuteStagedSeconds'];

export const SIDE_BY_SIDE_KEYS: readonly FigureKey[] = ['vsCapiRatioP99', 'vsCapiRatioConverge', 'workloadCallsPerChangedNode', 'joinP99RatioVsCapi', 'callsPerForeignChange'];
/**
 * The same figures with the product in the deployed form (`--deployed --only=side-by-side`: the packaged functions
 * under the Lambda runner), under keys of their own so that neither form's run overwrites the other's.
 */
export const SIDE_BY_SIDE_DEPLOYED_KEYS: readonly FigureKey[] = ['vsCapiRatioP99Deployed', 'vsCapiRatioConvergeDeployed', 'workloadCallsPerChangedNodeDeployed', 'joinP99RatioVsCapiDeployed', 'callsPerForeignChangeDeployed'];

export interface Target {
  readonly figure: FigureKey;
  readonly target: string;
  readonly measured: number | undefined;
  readonly met: boolean | undefined;
}

export interface BenchResults extends Partial<Record<FigureKey, number>> {
  readonly schema: 1;
  readonly profile: Profile;
  readonly startedAt: string;
  readonly durationSeconds: number;
  readonly machine: Record<string, string | number>;
  readonly versions: Record<string, string>;
  readonly targets: readonly Target[];
  readonly scenarios: {
    throughput?: ThroughputResult;
    apiCost?: ApiCostResult;
    e2eLatency?: E2eLatencyResult;
    forwarder?: ForwarderResult;
    conflictStorm?: ConflictStormResult;
    coldStart?: ColdStartResult;
    incidentStorm?: IncidentStormResult;
    fleet?: FleetResult;
    fleet100?: Fleet100Result;
    /** Issue 52: the product's shards at 100 and 1 000 workload clusters (stand-ins), each shard's forwarder alone. */
    fleet1000?: Fleet1000Result;
    /** `--deployed`: one shard of fleet1000's largest fleet, the packaged forwarder under the Lambda runner. */
    fleet1000Deployed?: FleetDeployedResult;
    hostile?: HostileResult;
    /** `--deployed`: scenarios 3 and 8 through the packaged functions (bench/scenarios/deployed.ts). */
    e2eLatencyDeployed?: DeployedLatencyResult;
    fleetDeployed?: DeployedLatencyResult;
    sideBySide?: SideBySideResult;
    /** `--deployed`: scenario 10 with the product's side in the deployed form. */
    sideBySideDeployed?: SideBySideResult;
    /** Issue 51: a NoExecute taint on a node group, immediate against staged (its own control plane with kube-controller-manager). */
    noExecute?: NoExecuteResult;
  };
  /** Scenarios that threw, with the error (the run goes on with the others). */
  readonly failures: Readonly<Record<string, string>>;
}

export interface RunBenchOptions {
  readonly profile: Profile;
  readonly kubeconfigPath: string;
  readonly only?: readonly ScenarioName[];
  readonly log?: (line: string) => void;
  /** Extra machine facts (e.g. the etcd version, known to whoever started the control plane). */
  readonly machineFacts?: Record<string, string | number>;
  /** Overrides of the profile's sizes (e.g. `--throughput-n=1000`). */
  readonly sizes?: Partial<Sizes>;
  /** etcd client URL, to report its version. */
  readonly etcdEndpoint?: string;
  /** Length of the `hostile` scenario's attack (default 120 s, the issue's). */
  readonly hostileSeconds?: number;
  /** The `hostile` scenario's servers (default issue 27's six) and its hostile Machines' edit cadence (default none). */
  readonly hostileSet?: 'six' | 'three';
  readonly hostileMachineEditSeconds?: number;
  /**
   * Run scenarios 3, 8 and 10 in the deployed form instead (the packaged zips under local/lambda/'s runner; scenario 10
   * with the product's side so, Cluster API's as always); the other scenarios are not run. `shipped`: the rota's
   * windows as serverless.yml ships them (885 s), else the shortest the deploy check accepts (270 s).
   */
  readonly deployed?: 'short-windows' | 'shipped';
  /** Deployed form: further `serverless package` arguments (e.g. `--param=reconcileProvisionedConcurrency=10`). */
  readonly packageParams?: readonly string[];
  /** Deployed form of scenario 10: `eks` (default, serverless.yml's default management auth, through the EKS stand-in) or `ssm`. */
  readonly deployedAuth?: 'eks' | 'ssm';
}

export async function runBench(o: RunBenchOptions): Promise<BenchResults> {
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const ctx: BenchContext = { profile: o.profile, sizes: { ...SIZES[o.profile], ...o.sizes }, kubeconfigPath: o.kubeconfigPath, ...(o.etcdEndpoint ? { etcdEndpoint: o.etcdEndpoint } : {}), log };
  const selected = new Set<ScenarioName>(o.only && o.only.length > 0 ? o.only : SCENARIOS);
  const startedAt = new Date();
  const t0 = performance.now();
  const scenarios: BenchResults['scenarios'] = {};
  const failures: Record<string, string> = {};

  async function step<T>(name: ScenarioName, title: string, fn: () => Promise<T>): Promise<T | undefined> {
    if (!selected.has(name)) return undefined;
    const start = performance.now();
    log(`[bench] ${title} (${o.profile})`);
    try {
      const r = await fn();
      log(`[bench] ${name} done in ${((performance.now() - start) / 1000).toFixed(1)} s`);
      return r;
    } catch (e) {
      failures[name] = e instanceof Error ? `${e.name}: ${e.message}` : String(e);
      log(`[bench] ${name} FAILED: ${failures[name]}`);
      return undefined;
    }
  }

  if (o.deployed) {
    const args = [...(o.deployed === 'shipped' ? PACKAGE_VARIANTS.ssm : BENCH_PACKAGE_SHORT_WINDOWS), ...(o.packageParams ?? []).map((p) => `--param=${p}`)];
    const e2eDeployed = await step('e2e-latency', 'Scenario 3 in the deployed form: packaged functions under the Lambda runner', () => runDeployedLatency(ctx, 'e2e', args));
    if (e2eDeployed) scenarios.e2eLatencyDeployed = e2eDeployed;
    const fleetDeployed = await step('fleet', 'Scenario 8 in the deployed form: packaged functions under the Lambda runner', () => runDeployedLatency(ctx, 'fleet', args));
    if (fleetDeployed) scenarios.fleetDeployed = fleetDeployed;
    const sideBySideDeployed = await step('side-by-side', 'Scenario 10 in the deployed form: side by side with Cluster API, the product as packaged functions under the Lambda runner', () => runSideBySide(ctx, { form: 'deployed', packageArgs: args, auth: o.deployedAuth ?? 'eks' }));
    if (sideBySideDeployed) scenarios.sideBySideDeployed = sideBySideDeployed;
    const fleet1000Deployed = await step('fleet1000', 'Scenario fleet1000 in the deployed form: one shard of the largest fleet, the packaged forwarder under the Lambda runner', () => runFleetDeployed(ctx, (o.packageParams ?? []).map((p) => `--param=${p}`)));
    if (fleet1000Deployed) scenarios.fleet1000Deployed = fleet1000Deployed;
    const figures: Partial<Record<FigureKey, number>> = {};
    if (sideBySideDeployed) SIDE_BY_SIDE_KEYS.forEach((key, i) => (figures[SIDE_BY_SIDE_DEPLOYED_KEYS[i] as FigureKey] = sideBySideDeployed[key as keyof SideBySideResult] as number));
    const at = { throughputAtN: undefined, e2eRate: undefined, forwarderObjects: undefined, forwarder20kObjects: undefined, fleet: undefined, sideBySideDeployed: sideBySideSize(sideBySideDeployed) };
    return {
      schema: 1,
      profile: o.profile,
      startedAt: startedAt.toISOString(),
      durationSeconds: round((performance.now() - t0) / 1000, 1),
      machine: { ...machineFacts(), ...o.machineFacts },
      versions: await versions(o.kubeconfigPath, o.etcdEndpoint),
      ...figures,
      // Only the figures a deployed run measures (scenarios 3 and 8 in the deployed form have no keys of their own).
      targets: judge(figures, at).filter((t) => t.measured !== undefined),
      scenarios,
      failures,
    };
  }

  const throughput = await step('throughput', 'Scenario 1: reconcile throughput vs floor', () => runThroughput(ctx));
  if (throughput) scenarios.throughput = throughput;
  const apiCost = await step('api-cost', 'Scenario 2: API calls per reconcile', () => runApiCost(ctx));
  if (apiCost) scenarios.apiCost = apiCost;
  const e2e = await step('e2e-latency', 'Scenario 3: end-to-end latency', () => runE2eLatency(ctx));
  if (e2e) scenarios.e2eLatency = e2e;
  const forwarder = await step('forwarder', 'Scenario 4: forwarder under heartbeat churn', () => runForwarder(ctx));
  if (forwarder) scenarios.forwarder = forwarder;
  const storm = await step('conflict-storm', 'Scenario 5: conflict storm', () => runConflictStorm(ctx));
  if (storm) scenarios.conflictStorm = storm;
  const cold = await step('cold-start', 'Scenario 6: cold start', () => runColdStart(ctx));
  if (cold) scenarios.coldStart = cold;
  const incident = await step('incident-storm', 'Scenario 7: incident storm and noise', () => runIncidentStorm(ctx));
  if (incident) scenarios.incidentStorm = incident;
  const fleet = await step('fleet', 'Scenario 8: fleet of workload clusters (capi mode)', () => runFleet(ctx));
  if (fleet) scenarios.fleet = fleet;
  const fleet100 = await step('fleet100', 'Scenario 9: the forwarder over a hundred workload clusters (stand-in workload API servers, capi mode)', () => runFleet100(ctx));
  if (fleet100) scenarios.fleet100 = fleet100;
  const fleet1000 = await step('fleet1000', 'Scenario fleet1000: the product\'s shards over 100 and 1 000 workload clusters (stand-in workload API servers, capi mode)', () => runFleet1000(ctx));
  if (fleet1000) scenarios.fleet1000 = fleet1000;
  const hostile = await step('hostile', 'Scenario hostile: hostile workload clusters next to a healthy one (capi mode)', () =>
    runHostile(ctx, o.hostileSeconds ?? 120, { ...(o.hostileSet ? { set: o.hostileSet } : {}), ...(o.hostileMachineEditSeconds !== undefined ? { machineEditSeconds: o.hostileMachineEditSeconds } : {}) }),
  );
  if (hostile) scenarios.hostile = hostile;
  const sideBySide = await step('side-by-side', 'Scenario 10: side by side with Cluster API (its own control plane)', () => runSideBySide(ctx));
  if (sideBySide) scenarios.sideBySide = sideBySide;
  const noExecute = await step('noexecute', 'Scenario noexecute: a NoExecute taint on a node group, immediate against staged (its own control plane with kube-controller-manager)', () => runNoExecute(ctx));
  if (noExecute) scenarios.noExecute = noExecute;

  const figures: Partial<Record<FigureKey, number>> = {};
  if (throughput) {
    figures.throughputRatio = throughput.throughputRatio;
    figures.throughputRatioContract = throughput.throughputRatioContract;
  }
  if (apiCost) {
    figures.callsPerChangedNode = apiCost.callsPerChangedNode;
    figures.readsPerUnchangedNode = apiCost.readsPerUnchangedNode;
    figures.writesPerUnchangedNode = apiCost.writesPerUnchangedNode;
  }
  if (e2e) {
    figures.e2eP50Ms = e2e.p50Ms;
    figures.e2eP99Ms = e2e.p99Ms;
  }
  // The figures of scenario 4 come from its run at 5 000 (the targets' size), else its largest; the 20k peak from
  // its run at 20 000, else its largest (then not judged).
  const fwdRuns = forwarder?.runs ?? [];
  const fwdLargest = fwdRuns[fwdRuns.length - 1];
  const fwdRef = fwdRuns.find((r) => r.nodes === 5000) ?? fwdLargest;
  const fwd20k = fwdRuns.find((r) => r.nodes === 20000) ?? fwdLargest;
  if (fwdRef) {
    figures.filteredShare = fwdRef.filteredShare;
    figures.messagesPerChange = fwdRef.messagesPerChange;
    figures.forwarderPeakMiB = fwdRef.peakMiB;
  }
  if (fwd20k) figures.forwarderPeakMiB20k = fwd20k.peakMiB;
  if (cold) {
    figures.reconcileBundleBytes = cold.reconcileBundleBytes;
    figures.reconcileLoadMs = cold.reconcileLoadMs;
    figures.forwarderLoadMs = cold.forwarderLoadMs;
  }
  if (incident) {
    figures.callsPerNoiseEvent = incident.callsPerNoiseEvent;
    figures.messagesPerNoiseEvent = incident.messagesPerNoiseEvent;
  }
  if (fleet) {
    figures.fleetForwarderPeakMiB = fleet.forwarder.peakMiB;
    figures.fleetInitialSyncMs = fleet.forwarder.initialSyncMs;
    figures.fleetE2eP50Ms = fleet.e2e.overall.p50Ms;
    figures.fleetE2eP99Ms = fleet.e2e.overall.p99Ms;
  }
  // Scenario 9's fleet is split by the product's shards, each measured alone: its figures are per forwarder, the
  // largest shard's of the first layout (with one shard, the single forwarder's over the whole fleet).
  const f100Layout = fleet100?.layouts[0];
  if (f100Layout) {
    figures.forwarderPeakMiB100Clusters = f100Layout.largest.peakMiB;
    figures.fleet100InitialSyncMs = f100Layout.largest.initialSyncMs;
    figures.fleet100E2eP50Ms = f100Layout.largest.p50Ms;
    figures.fleet100E2eP99Ms = f100Layout.largest.p99Ms;
  }
  // fleet1000: the largest fleet at its first shard count (full: 1 000 clusters on 4 shards), the largest shard's.
  const f1kFleet = fleet1000?.fleets.at(-1);
  const f1kLayout = f1kFleet?.layouts[0];
  if (f1kLayout) {
    figures.fleet1000PeakMiB = f1kLayout.largest.peakMiB;
    figures.fleet1000InitialSyncMs = f1kLayout.largest.initialSyncMs;
    figures.fleet1000E2eP99Ms = f1kLayout.largest.p99Ms;
    figures.fleet1000ManagementReqPerSec = f1kLayout.largest.managementReqPerSec;
  }
  if (sideBySide) for (const key of SIDE_BY_SIDE_KEYS) figures[key] = sideBySide[key as keyof SideBySideResult] as number;
  if (noExecute) {
    figures.noExecuteImmediatePodsDeletedPerSecond = noExecute.immediate.podsDeletedPerSecond;
    figures.noExecuteImmediateBudgetsViolated = noExecute.immediate.budgetsViolated;
    figures.noExecuteStagedMaxInProgress = noExecute.staged.mostInProgress;
    figures.noExecuteStagedBudgetsViolated = noExecute.staged.budgetsViolated;
    figures.noExecuteStagedSeconds = round(noExecute.staged.allTaintedMs / 1000, 1);
  }

  return {
    schema: 1,
    profile: o.profile,
    startedAt: startedAt.toISOString(),
    durationSeconds: round((performance.now() - t0) / 1000, 1),
    machine: { ...machineFacts(), ...o.machineFacts },
    versions: await versions(o.kubeconfigPath, o.etcdEndpoint),
    ...figures,
    targets: judge(figures, {
      throughputAtN: throughput?.ratioAtN,
      e2eRate: e2e?.targetRatePerSec,
      forwarderObjects: fwdRef?.nodes,
      forwarder20kObjects: fwd20k?.nodes,
      fleet: fleet ? { clusters: fleet.clusters, objects: fleet.forwarder.nodes, e2eRate: fleet.e2e.targetRatePerSec } : undefined,
      fleet100: fleet100 && f100Layout ? { clusters: fleet100.clusters, objects: fleet100.clusters * fleet100.nodesPerCluster, shards: f100Layout.shards } : undefined,
      fleet1000: f1kFleet && f1kLayout ? { clusters: f1kFleet.clusters, nodesPerCluster: f1kFleet.nodesPerCluster, shards: f1kLayout.shards, memoryMiB: f1kFleet.shippedMemoryMiB } : undefined,
      sideBySide: sideBySideSize(sideBySide),
      noExecute: noExecute ? { nodes: noExecute.nodes, podsPerNode: noExecute.podsPerNode, bound: noExecute.maxInProgressBound } : undefined,
    }),
    scenarios,
    failures,
  };
}

/** Scenario 10's size: replicas per side at the last change, Nodes per side in the last join. */
function sideBySideSize(r: SideBySideResult | undefined): JudgedAt['sideBySide'] {
  return r ? { replicas: r.changes.at(-1)?.replicas ?? 0, joining: r.joins.at(-1)?.joining ?? 0 } : undefined;
}

/** The sizes at which the figures were measured: a target is judged only at the size it names. */
export interface JudgedAt {
  readonly throughputAtN: number | undefined;
  readonly e2eRate: number | undefined;
  readonly forwarderObjects: number | undefined;
  readonly forwarder20kObjects: number | undefined;
  readonly fleet: { readonly clusters: number; readonly objects: number; readonly e2eRate: number } | undefined;
  /** Scenario 9: the whole fleet's clusters and Nodes, and the forwarders (shards) it was split over. */
  readonly fleet100?: { readonly clusters: number; readonly objects: number; readonly shards: number } | undefined;
  /** Scenario fleet1000: the largest fleet's clusters, Nodes per cluster, the shard count its figures come from, and the shipped forwarder memory. */
  readonly fleet1000?: { readonly clusters: number; readonly nodesPerCluster: number; readonly shards: number; readonly memoryMiB: number } | undefined;
  /** Scenario 9: replicas per side at the last change, Nodes per side in the last join. */
  readonly sideBySide?: { readonly replicas: number; readonly joining: number } | undefined;
  /** The same, of scenario 10 in the deployed form. */
  readonly sideBySideDeployed?: { readonly replicas: number; readonly joining: number } | undefined;
  /** Scenario noexecute: the group's Nodes and pods per Node, and the staged rollout's bound (Nodes in progress at once). */
  readonly noExecute?: { readonly nodes: number; readonly podsPerNode: number; readonly bound: number } | undefined;
}

/**
 * The targets, judged on the measured figures. `met` is undefined when a figure was not measured, or was
 * measured at a smaller size than the target names (quick and smoke runs).
 */
export function judge(f: Partial<Record<FigureKey, number>>, at: JudgedAt): Target[] {
  const t = (figure: FigureKey, target: string, ok: (v: number) => boolean, atSize = true): Target => {
    const measured = f[figure];
    return { figure, target, measured, met: measured === undefined || Number.isNaN(measured) || !atSize ? undefined : ok(measured) };
  };
  const e2eAtSize = at.e2eRate === 50;
  const forwarderAtSize = (at.forwarderObjects ?? 0) >= 5000;
  const forwarderAt20k = (at.forwarder20kObjects ?? 0) >= 20000;
  const fleetAtSize = (at.fleet?.clusters ?? 0) >= 5 && (at.fleet?.objects ?? 0) >= 5000;
  const fleetE2eAtSize = fleetAtSize && at.fleet?.e2eRate === 50;
  const fleet100AtSize = (at.fleet100?.clusters ?? 0) >= 100 && (at.fleet100?.objects ?? 0) >= 20000;
  const sideBySideAt500 = (at.sideBySide?.replicas ?? 0) >= 500;
  const sideBySideDeployedAt500 = (at.sideBySideDeployed?.replicas ?? 0) >= 500;
  const noExecuteAtSize = (at.noExecute?.nodes ?? 0) >= 50 && (at.noExecute?.podsPerNode ?? 0) >= 20;
  const noExecuteBound = at.noExecute?.bound ?? 5;
  const deployedForm = 'the product as packaged functions under the Lambda runner';
  const shards = at.fleet100?.shards ?? 1;
  // Scenario 9 not run (a partial run): its targets are listed unmeasured, and their wording claims no shard count.
  const perForwarder = at.fleet100 === undefined ? 'per forwarder; scenario 9 not run here' : shards === 1 ? 'one forwarder over the whole fleet' : `per forwarder, the largest of ${shards} product shards (FORWARDER_SHARDS), each with its own Lease and clusters, measured alone`;
  const f1k = at.fleet1000;
  const fleet1000AtSize = (f1k?.clusters ?? 0) >= 1000 && (f1k?.nodesPerCluster ?? 0) >= 20;
  const perShard1k = f1k === undefined ? 'per shard; scenario fleet1000 not run here' : `per shard, the largest of ${f1k.shards} shards of ${f1k.clusters} clusters × ${f1k.nodesPerCluster} Nodes, each measured alone`;
  const memory = f1k?.memoryMiB ?? 512;
  return [
    t('throughputRatio', '>= 0.8 x floor at N = 1 000', (v) => v >= 0.8, at.throughputAtN === 1000),
    t('throughputRatioContract', '>= 0.8 x contract floor (GET Machine ‖ GET Node, merge PATCH Node, POST Event) at N = 1 000', (v) => v >= 0.8, at.throughputAtN === 1000),
    t('callsPerChangedNode', '<= 3 API calls per changed Node (including reads)', (v) => v <= 3),
    t('readsPerUnchangedNode', '<= 2 reads per unchanged Node', (v) => v <= 2),
    t('writesPerUnchangedNode', '0 writes per unchanged Node', (v) => v === 0),
    t('e2eP50Ms', 'reported (p99 is the target)', () => true, e2eAtSize),
    t('e2eP99Ms', 'p99 <= 1 000 ms at 50 changes/s', (v) => v <= 1000, e2eAtSize),
    t('filteredShare', '>= 99 % of heartbeat-only Node updates filtered', (v) => v >= 0.99),
    t('messagesPerChange', '<= 1.1 queue messages per real change', (v) => v <= 1.1),
    t('forwarderPeakMiB', '<= 150 MB peak with 5 000 Nodes + 5 000 Machines', (v) => v <= 150, forwarderAtSize),
    t('forwarderPeakMiB20k', 'reported: peak with 20 000 Nodes + 20 000 Machines (no target)', () => true, forwarderAt20k),
    t('reconcileBundleBytes', '<= 2 MiB minified', (v) => v <= 2 * 1024 * 1024),
    t('reconcileLoadMs', '<= 100 ms module load, as deployed', (v) => v <= 100),
    t('forwarderLoadMs', '<= 100 ms module load, as deployed', (v) => v <= 100),
    t('callsPerNoiseEvent', '0 API calls per noise event (foreign taints, labels, unrelated Machine changes)', (v) => v === 0),
    t('messagesPerNoiseEvent', '0 queue messages per noise event', (v) => v === 0),
    t('fleetForwarderPeakMiB', '<= 150 MB peak with 5 000 Nodes + 5 000 Machines (5 workload clusters × 1 000 Nodes)', (v) => v <= 150, fleetAtSize),
    t('fleetInitialSyncMs', 'reported: initial sync of 5 clusters × 1 000 Nodes + 5 000 Machines (no target)', () => true, fleetAtSize),
    t('fleetE2eP50Ms', 'reported (p99 is the target)', () => true, fleetE2eAtSize),
    t('fleetE2eP99Ms', 'p99 <= 1 000 ms at 50 changes/s, spread over 5 workload clusters', (v) => v <= 1000, fleetE2eAtSize),
    t('forwarderPeakMiB100Clusters', `<= 150 MiB peak with 100 workload clusters × 200 Nodes + 20 000 Machines (stand-in workload API servers; ${perForwarder})`, (v) => v <= 150, fleet100AtSize),
    t('fleet100InitialSyncMs', `reported: initial sync of 100 clusters × 200 Nodes + 20 000 Machines (no target; ${perForwarder})`, () => true, fleet100AtSize),
    t('fleet100E2eP50Ms', `reported (p99 is the target; ${perForwarder})`, () => true, fleet100AtSize),
    t('fleet100E2eP99Ms', `p99 <= 1 000 ms, change write sent → message, changes spread over the 100 clusters (${perForwarder})`, (v) => v <= 1000, fleet100AtSize),
    t('fleet1000PeakMiB', `<= ${memory} MiB peak (the shipped forwarderMemorySize), 1 000 workload clusters × 20 Nodes + 20 000 Machines (${perShard1k})`, (v) => v <= memory, fleet1000AtSize),
    t('fleet1000InitialSyncMs', `reported: initial sync (no target; ${perShard1k})`, () => true, fleet1000AtSize),
    t('fleet1000E2eP99Ms', `p99 <= 1 000 ms, change write sent → message (${perShard1k})`, (v) => v <= 1000, fleet1000AtSize),
    t('fleet1000ManagementReqPerSec', `reported: requests per second to the management API server, initial sync or window whichever is higher (no target; ${perShard1k})`, () => true, fleet1000AtSize),
    t('vsCapiRatioP99', "<= 1.0 x Cluster API's Machine -> Node p99 at N = 500, same run", (v) => v <= 1, sideBySideAt500),
    t('vsCapiRatioConverge', "<= 1.0 x Cluster API's whole-fleet convergence at N = 500, same run", (v) => v <= 1, sideBySideAt500),
    t('workloadCallsPerChangedNode', '<= 3 requests to the workload API server per changed Node (counted there)', (v) => v <= 3),
    t('joinP99RatioVsCapi', "<= 1.0 x Cluster API's p99 from a Node's appearance to its taints, 400 joining at once", (v) => v <= 1, (at.sideBySide?.joining ?? 0) >= 400),
    t('callsPerForeignChange', '0 reconciles and 0 API calls per change Cluster API owns', (v) => v === 0),
    t('vsCapiRatioP99Deployed', `<= 1.0 x Cluster API's Machine -> Node p99 at N = 500, same run (${deployedForm})`, (v) => v <= 1, sideBySideDeployedAt500),
    t('vsCapiRatioConvergeDeployed', `<= 1.0 x Cluster API's whole-fleet convergence at N = 500, same run (${deployedForm})`, (v) => v <= 1, sideBySideDeployedAt500),
    t('workloadCallsPerChangedNodeDeployed', `<= 3 requests to the workload API server per changed Node (counted there; ${deployedForm})`, (v) => v <= 3),
    t('joinP99RatioVsCapiDeployed', `<= 1.0 x Cluster API's p99 from a Node's appearance to its taints, 400 joining at once (${deployedForm})`, (v) => v <= 1, (at.sideBySideDeployed?.joining ?? 0) >= 400),
    t('callsPerForeignChangeDeployed', `0 reconciles and 0 API calls per change Cluster API owns (${deployedForm})`, (v) => v === 0),
    t('noExecuteImmediatePodsDeletedPerSecond', 'reported: pods deleted per second by the taint-eviction controller, first deletion to last, 50 Nodes × 20 pods, no opt-in', () => true, noExecuteAtSize),
    t('noExecuteImmediateBudgetsViolated', 'reported: PodDisruptionBudgets (of 3) whose healthy pods fell below their minimum, immediate mode', () => true, noExecuteAtSize),
    t('noExecuteStagedMaxInProgress', `<= ${noExecuteBound} Nodes holding a place (the product's evicting taint) at once: the opt-in "10%" of 50, staged`, (v) => v <= noExecuteBound, noExecuteAtSize),
    t('noExecuteStagedBudgetsViolated', '0 PodDisruptionBudgets (of 3) below their minimum, staged', (v) => v === 0, noExecuteAtSize),
    t('noExecuteStagedSeconds', 'reported: declaration published → every Node of the group carries the taint, staged, production rollout timings', () => true, noExecuteAtSize),
  ];
}

function machineFacts(): Record<string, string | number> {
  const cpus = os.cpus();
  return {
    nproc: os.availableParallelism(),
    cpuModel: cpus[0]?.model ?? 'unknown',
    memoryMiB: Math.round(os.totalmem() / 2 ** 20),
    os: `${os.type()} ${os.release()} (${os.arch()})`,
    loadAverage1m: round(os.loadavg()[0] ?? 0, 2),
  };
}

async function versions(kubeconfigPath: string, etcdEndpoint: string | undefined): Promise<Record<string, string>> {
  const out: Record<string, string> = { node: process.version };
  for (const pkg of ['@kubernetes/client-node', '@aws-sdk/client-sqs', 'esbuild', '@aws-lambda-powertools/batch']) {
    try {
      const url = new URL(`../../node_modules/${pkg}/package.json`, import.meta.url);
      out[pkg] = (JSON.parse(readFileSync(url, 'utf8')) as { version: string }).version;
    } catch {
      out[pkg] = 'unknown';
    }
  }
  try {
    const raw = await RawKube.from(loadKubeConfig(kubeconfigPath));
    const v = await raw.get<{ gitVersion: string }>('/version');
    out['kube-apiserver'] = v.gitVersion;
    raw.close();
  } catch {
    out['kube-apiserver'] = 'unknown';
  }
  if (etcdEndpoint) {
    try {
      const v = (await (await fetch(`${etcdEndpoint}/version`)).json()) as { etcdserver?: string };
      out['etcd'] = v.etcdserver ?? 'unknown';
    } catch {
      out['etcd'] = 'unknown';
    }
  }
  return out;
}

/**
 * Merges a partial full-profile run (`--only=…`) into the results of an earlier full run: the figures, targets and
 * scenario details the partial run measured replace the earlier ones; everything else stays. `partialRuns` records
 * which scenarios came from which run, with that run's machine facts (load average included).
 */
export function mergeResults(base: BenchResults & { partialRuns?: readonly unknown[] }, partial: BenchResults, scenarios: readonly ScenarioName[]): BenchResults & { partialRuns: readonly unknown[] } {
  const measured = new Set(partial.targets.filter((t) => t.measured !== undefined).map((t) => t.figure));
  const figures: Partial<Record<FigureKey, number>> = {};
  for (const key of measured) figures[key] = partial[key] as number;
  const targets = FIGURE_KEYS.map((figure) => (measured.has(figure) ? partial.targets.find((t) => t.figure === figure) : base.targets.find((t) => t.figure === figure)) ?? { figure, target: '', measured: undefined, met: undefined });
  const failures = { ...base.failures };
  for (const name of scenarios) delete failures[name];
  return {
    ...base,
    ...figures,
    targets,
    scenarios: { ...base.scenarios, ...partial.scenarios },
    failures: { ...failures, ...partial.failures },
    partialRuns: [...(base.partialRuns ?? []), { scenarios, startedAt: partial.startedAt, durationSeconds: partial.durationSeconds, machine: partial.machine, versions: partial.versions }],
  };
}
