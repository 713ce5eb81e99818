/**
 * Scenario 1, reconcile throughput: N Machine/Node pairs whose declarations changed (every Node lacks its Machine's
 * taint); time for the reconcile handler, fed through the local SQS FIFO queue, to converge all of them, against the
 * floor measured in the same run on the same Nodes: a minimal loop doing just GET Node + PATCH Node (merge patch
 * with the resourceVersion precondition) per Node, with the same client as the product (client-node with the
 * product's connection pooling, `withPooledConnections`) and the same concurrency. A second floor with a plain
 * keep-alive HTTPS agent shows what the client itself costs.
 */
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { withPooledConnections } from '#shared/adapters/kubernetes/pooled-connections.ts';
import type { BenchContext } from '../lib/context.ts';
import { CallCounter, RawKube, cleanup, countingKubeConfig, createNamespace, createPairs, hasTaint, listNodes, loadKubeConfig, machineMeta, mapConcurrent, runId, setMachineTaints, type BenchTaint, type CallCounts, type Pair, type RawNode } from '../lib/kube.ts';
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
  readonly converged: number;
  readonly pipelineCalls: CallCounts;
  readonly floorCallsPerNode: number;
  readonly setupMs: number;
  /**
   * The fix under test, same Nodes, same concurrency: client-node with one reused keep-alive dispatcher per
   * KubeConfig (instead of a new TLS connection per request), for both the floor and the pipeline.
   */
  readonly keepAliveClient: { readonly floorMs: number; readonly pipelineMs: number; readonly ratio: number; readonly pipelineNodesPerSec: number };
}

export interface ThroughputResult {
  readonly runs: readonly ThroughputRun[];
  /** The ratio at N = 1 000 when measured, else at the largest N measured. */
  readonly throughputRatio: number;
  readonly ratioAtN: number;
}

const DECLARED: BenchTaint = { key: 'bench.capi-tp/pool', value: 'gpu', effect: 'NoSchedule' };
const MERGE = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export async function runThroughput(ctx: BenchContext): Promise<ThroughputResult> {
  const runs: ThroughputRun[] = [];
  for (const n of ctx.sizes.throughputN) runs.push(await runOnce(ctx, n, RECONCILE_CONCURRENCY));
  const at = runs.find((r) => r.n === 1000) ?? runs[runs.length - 1];
  if (!at) throw new Error('no throughput run');
  return { runs, throughputRatio: at.ratio, ratioAtN: at.n };
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
    // The same client as the product: client-node with the product's connection pooling.
    const floorKc = withPooledConnections(countingKubeConfig(ctx.kubeconfigPath, floorCounter));
    const floorApi = floorKc.makeApiClient(CoreV1Api);
    const floor1 = await floorLoop(pairs, concurrency, (node) => floorStep(floorApi, node, 'bench.capi-tp/floor-1'));

    const counter = new CallCounter();
    const pipeline = await ReconcilePipeline.create({ kubeConfig: countingKubeConfig(ctx.kubeconfigPath, counter), concurrency });
    const now = new Date();
    // Each event carries its Node's state as the forwarder would have seen it (after the floor's writes).
    const seen = new Map((await listNodes(raw, run)).map((node) => [node.metadata.name, node]));
    const events = pairs.map((p) => machineModified(ns, p.machine, p.uid, p.resourceVersion, p.node, now, seen.get(p.node)));
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

    const floor2 = await floorLoop(pairs, concurrency, (node) => floorStep(floorApi, node, 'bench.capi-tp/floor-2'));
    const keepAlive = await floorLoop(pairs, concurrency, (node) => keepAliveFloorStep(raw, node, 'bench.capi-tp/floor-ka'));

    // The same client with a reused keep-alive dispatcher: floor, then the pipeline on a second declaration change.
    const kaApi = countingKubeConfig(ctx.kubeconfigPath, new CallCounter(), { keepAlive: true }).makeApiClient(CoreV1Api);
    const kaFloorMs = await floorLoop(pairs, concurrency, (node) => floorStep(kaApi, node, 'bench.capi-tp/floor-ka-client'));
    const second: BenchTaint = { key: 'bench.capi-tp/pool2', value: 'gpu', effect: 'NoSchedule' };
    const metas = await mapConcurrent(pairs, 32, async (p) => {
      await setMachineTaints(raw, ns, p.machine, [DECLARED, second]);
      return machineMeta(raw, ns, p.machine);
    });
    const kaPipeline = await ReconcilePipeline.create({ kubeConfig: countingKubeConfig(ctx.kubeconfigPath, new CallCounter(), { keepAlive: true }), concurrency });
    const kaSeen = new Map((await listNodes(raw, run)).map((node) => [node.metadata.name, node]));
    const kaStart = performance.now();
    let kaPipelineMs: number;
    try {
      await publishAll(kaPipeline.publisher, pairs.map((p, i) => machineModified(ns, p.machine, p.uid, metas[i]?.resourceVersion ?? `${p.resourceVersion}1`, p.node, new Date(), kaSeen.get(p.node))));
      kaPipeline.start();
      await kaPipeline.drain(Math.max(120_000, n * 200));
      kaPipelineMs = since(kaStart);
    } finally {
      await kaPipeline.stop();
    }

    const nodes = await listNodes(raw, run);
    const converged = nodes.filter((node) => hasTaint(node, DECLARED)).length;
    const floorMs = [floor1, floor2];
    const floorRate = mean(floorMs.map((ms) => (n * 1000) / ms));
    const pipelineRate = (n * 1000) / pipelineMs;
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
      converged,
      pipelineCalls,
      floorCallsPerNode: round(floorCounter.snapshot().total / (2 * n), 2),
      setupMs: round(setupMs, 0),
      keepAliveClient: {
        floorMs: round(kaFloorMs, 0),
        pipelineMs: round(kaPipelineMs, 0),
        ratio: round(kaFloorMs / kaPipelineMs, 3),
        pipelineNodesPerSec: round((n * 1000) / kaPipelineMs, 1),
      },
    };
    ctx.log(
      `  N=${n}: floor ${result.floorMs.join(' / ')} ms (${result.floorNodesPerSec}/s), pipeline ${result.pipelineMs} ms (${result.pipelineNodesPerSec}/s), ` +
        `ratio ${result.ratio}, keep-alive floor ${result.keepAliveFloorMs} ms, converged ${converged}/${n}; ` +
        `with a reused dispatcher: floor ${result.keepAliveClient.floorMs} ms, pipeline ${result.keepAliveClient.pipelineMs} ms, ratio ${result.keepAliveClient.ratio}`,
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

/** The necessary read + write for one Node through client-node: GET, then a merge patch with the precondition. */
async function floorStep(api: CoreV1Api, name: string, key: string): Promise<void> {
  const node = await api.readNode({ name });
  const taints = [...(node.spec?.taints ?? []), { key, effect: 'NoSchedule' }];
  await api.patchNode({ name, body: { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints } } }, MERGE);
}

/** The same read + write over one keep-alive HTTPS agent (no client library). */
async function keepAliveFloorStep(raw: RawKube, name: string, key: string): Promise<void> {
  const node = await raw.get<RawNode>(`/api/v1/nodes/${name}`);
  const taints = [...(node.spec?.taints ?? []), { key, effect: 'NoSchedule' }];
  await raw.mergePatch(`/api/v1/nodes/${name}`, { metadata: { resourceVersion: node.metadata.resourceVersion }, spec: { taints } });
}
