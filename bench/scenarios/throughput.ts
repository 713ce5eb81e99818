/**
 * Scenario 1, reconcile throughput: N Machine/Node pairs whose declarations changed (every Node lacks its Machine's
 * taint); time for the reconcile handler, fed through the local SQS FIFO queue, to converge all of them, against the
 * floor measured in the same run on the same Nodes: a minimal loop doing just GET Node + PATCH Node (merge patch
 * with the resourceVersion precondition) per Node, with the same client as the product (its HTTP client, kube-http.ts,
 * with its keep-alive pool) and the same concurrency. A second floor with the benchmarks' own keep-alive HTTPS client
 * (RawKube) shows what the client itself costs.
 *
 * The contract floor (issue 29, item 2): what the product's contract needs per changed Node, done by the smallest loop
 * over the same client at the same concurrency, so that the ratio measures overhead, not design. Four calls in three
 * round trips, as the product makes them: GET Machine beside GET Node (events are hints: the declaration is re-read
 * where it lives, the management cluster, and the Node where it lives), PATCH Node as a merge patch with its
 * resourceVersion as the precondition, then POST the `TaintsPropagated` Event on the Machine (the record `kubectl
 * describe machine` shows; the contract says every write is reported there).
 */
import type { V1Node } from '@kubernetes/client-node';
import { randomBytes } from 'node:crypto';
import { kubeCall, type ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { EVENT_COMPONENT } from '#shared/adapters/kubernetes/event-recorder.ts';
import { FIELD_MANAGER } from '#shared/domain/taint.ts';
import type { BenchContext } from '../lib/context.ts';
import { CallCounter, MACHINES_PATH, RawKube, cleanup, countingKubeConfig, createNamespace, createPairs, hasTaint, listNodes, loadKubeConfig, mapConcurrent, runId, type BenchTaint, type CallCounts, type Pair, type RawNode } from '../lib/kube.ts';
import { RECONCILE_CONCURRENCY, ReconcilePipeline, machineModified, publishAll } from '../lib/pipeline.ts';
import { mean, round, since } from '../lib/stats.ts';

export interface ThroughputRun {
  readonly n: number;
  readonly concurrency: number;
  readonly floorMs: readonly number[];
  readonly floorNodesPerSec: number;
  readonly keepAliveFloorMs: number;
  readonly keepAliveFloorNodesPerSec: number;
  readonly pipelineMs: number;
  readonly pipelineNodesPerSec: number;
  /** pipeline rate / mean floor rate. */
  readonly ratio: number;
  /** The contract floor (GET Machine ‖ GET Node, merge PATCH Node, POST Event), before / after the pipeline. */
  readonly contractFloorMs: readonly number[];
  readonly contractFloorNodesPerSec: number;
  readonly contractFloorCallsPerNode: number;
  /** pipeline rate / mean contract floor rate. */
  readonly ratioContract: number;
  readonly converged: number;
  readonly pipelineCalls: CallCounts;
  readonly floorCallsPerNode: number;
  readonly setupMs: number;
}

export interface ThroughputResult {
  readonly runs: readonly ThroughputRun[];
  /** The ratio at N = 1 000 when measured, else at the largest N measured. */
  readonly throughputRatio: number;
  /** The same against the contract floor. */
  readonly throughputRatioContract: number;
  readonly ratioAtN: number;
}

const DECLARED: BenchTaint = { key: 'bench.capi-tp/pool', value: 'gpu', effect: 'NoSchedule' };

export async function runThroughput(ctx: BenchContext): Promise<ThroughputResult> {
  const runs: ThroughputRun[] = [];
  for (const n of ctx.sizes.throughputN) runs.push(await runOnce(ctx, n, RECONCILE_CONCURRENCY));
  const at = runs.find((r) => r.n === 1000) ?? runs[runs.length - 1];
  if (!at) throw new Error('no throughput run');
  return { runs, throughputRatio: at.ratio, throughputRatioContract: at.ratioContract, ratioAtN: at.n };
}

async function runOnce(ctx: BenchContext, n: number, concurrency: number): Promise<ThroughputRun> {
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath));
  const run = runId('tp');
  const ns = run;
  try {
    const setupStart = performance.now();
    await createNamespace(raw, ns, run);
    const pairs = await createPairs(raw, { run, namespace: ns, count: n, machineTaints: [DECLARED] });
    const setupMs = since(setupStart);
    ctx.log(`  N=${n}: ${n} pairs created in ${(setupMs / 1000).toFixed(1)} s`);

    // Floor before, pipeline, floor after: the mean floor absorbs drift of a shared, noisy machine.
    const floorCounter = new CallCounter();
    // The same client as the product: its HTTP client with its keep-alive pool.
    const floorKc = countingKubeConfig(ctx.kubeconfigPath, floorCounter);
    const floor1 = await floorLoop(pairs, concurrency, (node) => floorStep(floorKc, node, 'bench.capi-tp/floor-1'));
    const contractCounter = new CallCounter();
    const contractKc = countingKubeConfig(ctx.kubeconfigPath, contractCounter);
    const contract1 = await contractFloorLoop(raw, run, ns, pairs, concurrency, contractKc, 'bench.capi-tp/contract-1');

    const counter = new CallCounter();
    const pipeline = await ReconcilePipeline.create({ kubeConfig: countingKubeConfig(ctx.kubeconfigPath, counter), concurrency });
    const now = new Date();
    const events = pairs.map((p) => machineModified(ns, p.machine, p.uid, p.resourceVersion, p.node, now));
    const before = counter.snapshot();
    const start = performance.now();
    let pipelineMs: number;
    try {
      await publishAll(pipeline.publisher, events);
      pipeline.start();
      await pipeline.drain(Math.max(120_000, n * 200));
      pipelineMs = since(start);
    } finally {
      await pipeline.stop();
    }
    const pipelineCalls = counter.since(before);

    const floor2 = await floorLoop(pairs, concurrency, (node) => floorStep(floorKc, node, 'bench.capi-tp/floor-2'));
    const contract2 = await contractFloorLoop(raw, run, ns, pairs, concurrency, contractKc, 'bench.capi-tp/contract-2');
    const keepAlive = await floorLoop(pairs, concurrency, (node) => keepAliveFloorStep(raw, node, 'bench.capi-tp/floor-ka'));

    const nodes = await listNodes(raw, run);
    const converged = nodes.filter((node) => hasTaint(node, DECLARED)).length;
    const floorMs = [floor1, floor2];
    const floorRate = mean(floorMs.map((ms) => (n * 1000) / ms));
    const pipelineRate = (n * 1000) / pipelineMs;
    const contractMs = [contract1, contract2];
    const contractRate = mean(contractMs.map((ms) => (n * 1000) / ms));
    const result: ThroughputRun = {
      n,
      concurrency,
      floorMs: floorMs.map((x) => round(x, 0)),
      floorNodesPerSec: round(floorRate, 1),
      keepAliveFloorMs: round(keepAlive, 0),
      keepAliveFloorNodesPerSec: round((n * 1000) / keepAlive, 1),
      pipelineMs: round(pipelineMs, 0),
      pipelineNodesPerSec: round(pipelineRate, 1),
      ratio: round(pipelineRate / floorRate, 3),
      contractFloorMs: contractMs.map((x) => round(x, 0)),
      contractFloorNodesPerSec: round(contractRate, 1),
      contractFloorCallsPerNode: round(contractCounter.snapshot().total / (2 * n), 2),
      ratioContract: round(pipelineRate / contractRate, 3),
      converged,
      pipelineCalls,
      floorCallsPerNode: round(floorCounter.snapshot().total / (2 * n), 2),
      setupMs: round(setupMs, 0),
    };
    ctx.log(
      `  N=${n}: floor ${result.floorMs.join(' / ')} ms (${result.floorNodesPerSec}/s), pipeline ${result.pipelineMs} ms (${result.pipelineNodesPerSec}/s), ` +
        `ratio ${result.ratio}; contract floor ${result.contractFloorMs.join(' / ')} ms (${result.contractFloorNodesPerSec}/s, ${result.contractFloorCallsPerNode} calls/Node), ratio ${result.ratioContract}; keep-alive floor ${result.keepAliveFloorMs} ms, converged ${converged}/${n}`,
    );
    return result;
  } finally {
    await cleanup(raw, run, [ns]);
    raw.close();
  }
}

async function floorLoop(pairs: readonly Pair[], concurrency: number, step: (node: string) => Promise<void>): Promise<number> {
  const start = performance.now();
  await mapConcurrent(pairs, concurrency, (p) => step(p.node));
  return since(start);
}

/** The necessary read + write for one Node through the product's HTTP client: GET, then a merge patch with the precondition. */
async function floorStep(kc: ClusterEndpoint, name: string, key: string): Promise<void> {
  const path = `/api/v1/nodes/${encodeURIComponent(name)}`;
  const node = await kubeCall<V1Node>(kc, { method: 'GET', path });
  const taints = [...(node.spec?.taints ?? []), { key, effect: 'NoSchedule' }];
  await kubeCall(kc, { method: 'PATCH', path, contentType: 'application/merge-patch+json', body: { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints } } });
}

/** The same read + write over one keep-alive HTTPS agent (no client library). */
async function keepAliveFloorStep(raw: RawKube, name: string, key: string): Promise<void> {
  const node = await raw.get<RawNode>(`/api/v1/nodes/${name}`);
  const taints = [...(node.spec?.taints ?? []), { key, effect: 'NoSchedule' }];
  await raw.mergePatch(`/api/v1/nodes/${name}`, { metadata: { resourceVersion: node.metadata.resourceVersion }, spec: { taints } });
}

/**
 * The contract floor over every pair: per pair GET Machine beside GET Node (one round trip, as the reconcile reads
 * them), the merge PATCH of the Node with its resourceVersion (adding `key` and a bench annotation: the same shape as
 * the product's write, whose tracking annotation the floor leaves alone) and the Event POST. Returns the loop's time;
 * a refused write (409: the Node changed) fails the run.
 */
async function contractFloorLoop(_raw: RawKube, _run: string, ns: string, pairs: readonly Pair[], concurrency: number, kc: ClusterEndpoint, key: string): Promise<number> {
  const start = performance.now();
  await mapConcurrent(pairs, concurrency, (p) => contractFloorStep(kc, ns, p, key));
  return since(start);
}

async function contractFloorStep(kc: ClusterEndpoint, ns: string, p: Pair, key: string): Promise<void> {
  const [machine, node] = await Promise.all([
    kubeCall<{ metadata: { uid: string } }>(kc, { method: 'GET', path: `${MACHINES_PATH}/namespaces/${encodeURIComponent(ns)}/machines/${encodeURIComponent(p.machine)}` }),
    kubeCall<RawNode>(kc, { method: 'GET', path: `/api/v1/nodes/${encodeURIComponent(p.node)}` }),
  ]);
  const taints = [...(node.spec?.taints ?? []), { key, effect: 'NoSchedule' }];
  const body = { metadata: { resourceVersion: node.metadata.resourceVersion, annotations: { 'bench.capi-tp/contract-floor': key } }, spec: { taints } };
  await kubeCall(kc, { method: 'PATCH', path: `/api/v1/nodes/${encodeURIComponent(p.node)}`, query: { fieldManager: FIELD_MANAGER }, body, contentType: 'application/merge-patch+json' });
  const at = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  await kubeCall(kc, {
    method: 'POST',
    path: `/api/v1/namespaces/${encodeURIComponent(ns)}/events`,
    body: {
      metadata: { name: `${p.machine}.${randomBytes(8).toString('hex')}`, namespace: ns },
      involvedObject: { apiVersion: MACHINES_PATH.slice('/apis/'.length), kind: 'Machine', namespace: ns, name: p.machine, uid: machine.metadata.uid },
      type: 'Normal',
      reason: 'TaintsPropagated',
      message: `Node ${p.node}: added ${key}:NoSchedule`,
      source: { component: EVENT_COMPONENT },
      reportingComponent: EVENT_COMPONENT,
      reportingInstance: EVENT_COMPONENT,
      count: 1,
      firstTimestamp: at,
      lastTimestamp: at,
    },
  });
}
