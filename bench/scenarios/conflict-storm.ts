/**
 * Scenario 5, conflict storm: S Nodes whose declarations all changed, while a foreign writer (a kubelet or another
 * controller: merge patches of a label, no precondition) updates the same Nodes at increasing rates. Every write of
 * ours that meets a foreign write in its read→write window gets a real 409 and is retried through the queue with
 * production's backoff (RETRY_BASE_SECONDS 2, equal jitter). Reports time to converge and retries per change.
 */
import { PatchConflictError } from '#shared/errors.ts';
import type { BenchContext } from '../lib/context.ts';
import { CallCounter, RawKube, cleanup, countingKubeConfig, createNamespace, createPairs, hasTaint, listNodes, loadKubeConfig, machineMeta, mapConcurrent, runId, setMachineTaints, type BenchTaint } from '../lib/kube.ts';
import { ReconcilePipeline, machineModified, publishAll } from '../lib/pipeline.ts';
import { round, sleep, since } from '../lib/stats.ts';

export interface StormRound {
  readonly targetForeignWritesPerSec: number;
  readonly achievedForeignWritesPerSec: number;
  readonly convergeMs: number;
  readonly converged: number;
  readonly conflicts: number;
  readonly retriesPerChange: number;
  readonly callsPerChange: number;
}

export interface ConflictStormResult {
  readonly nodes: number;
  readonly retryBaseSeconds: number;
  readonly rounds: readonly StormRound[];
}

const KEY = 'bench.capi-tp/storm';

export async function runConflictStorm(ctx: BenchContext): Promise<ConflictStormResult> {
  const s = ctx.sizes.stormNodes;
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath));
  const foreign = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath), 16);
  const run = runId('storm');
  const ns = run;
  const rounds: StormRound[] = [];
  try {
    await createNamespace(raw, ns, run);
    const pairs = await createPairs(raw, { run, namespace: ns, count: s, machineTaints: [{ key: KEY, value: 'initial', effect: 'NoSchedule' }] });
    let retryBaseSeconds = 0;
    for (const [r, rate] of ctx.sizes.stormRates.entries()) {
      const declared: BenchTaint = { key: KEY, value: `round${r}`, effect: 'NoSchedule' };
      const metas = await mapConcurrent(pairs, 16, async (p) => {
        await setMachineTaints(raw, ns, p.machine, [declared]);
        return machineMeta(raw, ns, p.machine);
      });

      let conflicts = 0;
      const counter = new CallCounter();
      const pipeline = await ReconcilePipeline.create({
        kubeConfig: countingKubeConfig(ctx.kubeconfigPath, counter),
        wrapDeps: (deps) => ({
          ...deps,
          clusters: {
            async nodesOf(cluster) {
              const store = await deps.clusters.nodesOf(cluster);
              return {
                getNode: (name: string) => store.getNode(name),
                async patchNodeTaints(name, patch) {
                  try {
                    return await store.patchNodeTaints(name, patch);
                  } catch (e) {
                    if (e instanceof PatchConflictError) conflicts++;
                    throw e;
                  }
                },
                listNodes: (selector) => store.listNodes(selector),
              };
            },
            podsOf: (cluster) => deps.clusters.podsOf(cluster),
          },
        }),
      });
      retryBaseSeconds = pipeline.config.retryBaseSeconds;

      // The foreign writer: `rate` label writes per second, round-robin over the Nodes, until convergence.
      const writing = new AbortController();
      let foreignWrites = 0;
      const writerStart = performance.now();
      const writer =
        rate <= 0
          ? Promise.resolve()
          : mapConcurrent(Array.from({ length: 8 }, (_, w) => w), 8, async (w) => {
              for (let i = w; !writing.signal.aborted; i += 8) {
                const wait = writerStart + (i * 1000) / rate - performance.now();
                if (wait > 0) await sleep(wait);
                if (writing.signal.aborted) return;
                const node = pairs[i % s]?.node;
                await foreign.mergePatch(`/api/v1/nodes/${node}`, { metadata: { labels: { 'bench.capi-tp/foreign-tick': String(i) } } }).catch(() => undefined);
                foreignWrites++;
              }
            });
      await sleep(rate > 0 ? 300 : 0);

      const start = performance.now();
      const at = new Date();
      await publishAll(pipeline.publisher, pairs.map((p, i) => machineModified(ns, p.machine, metas[i]?.uid ?? p.uid, metas[i]?.resourceVersion ?? p.resourceVersion, p.node, at)));
      pipeline.start();
      try {
        await pipeline.drain(180_000);
      } finally {
        await pipeline.stop();
      }
      const convergeMs = since(start);
      writing.abort();
      await writer;
      const writerMs = since(writerStart);
      const converged = (await listNodes(raw, run)).filter((n) => hasTaint(n, declared)).length;
      const round1: StormRound = {
        targetForeignWritesPerSec: rate,
        achievedForeignWritesPerSec: round((foreignWrites * 1000) / writerMs, 1),
        convergeMs: round(convergeMs, 0),
        converged,
        conflicts,
        retriesPerChange: round(conflicts / s, 3),
        callsPerChange: round(counter.snapshot().total / s, 2),
      };
      rounds.push(round1);
      ctx.log(
        `  foreign writes ${round1.achievedForeignWritesPerSec}/s (target ${rate}): converged ${converged}/${s} in ${round1.convergeMs} ms, ` +
          `${conflicts} conflicts (${round1.retriesPerChange} retries/change), ${round1.callsPerChange} calls/change`,
      );
    }
    return { nodes: s, retryBaseSeconds, rounds };
  } finally {
    await cleanup(raw, run, [ns]);
    raw.close();
    foreign.close();
  }
}
