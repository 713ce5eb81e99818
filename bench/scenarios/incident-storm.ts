/**
 * Scenario 7, incident storm and noise: what the product spends on changes that cannot change a Node's taints.
 * N Machine/Node pairs run through the whole pipeline (production forwarder composition → local SQS FIFO queue →
 * reconcile handler) until every Node carries its declared taint and the product's tracking annotation. Then, as when
 * a zone goes dark, every Node gets a foreign `node.kubernetes.io/unreachable:NoExecute` taint at once (another
 * field manager, the way the node lifecycle controller writes it); and, as everyday noise, every Node gets a label
 * change and every Machine an unrelated annotation. A marker — one Machine's declaration edited — must then reach its
 * Node: the positive signal that the forwarder saw everything before it. The same marker is measured alone first,
 * so noise = (storm + marker) − marker, in queue messages and in API calls of the reconcile function.
 */
import type { BenchContext } from '../lib/context.ts';
import { BENCH_LABEL, CallCounter, RawKube, cleanup, countingKubeConfig, createNamespace, createPairs, listNodes, loadKubeConfig, mapConcurrent, runId, setMachineTaints, type BenchTaint, type RawNode } from '../lib/kube.ts';
import { ReconcilePipeline, startCountedForwarder } from '../lib/pipeline.ts';
import { round, sleep, since } from '../lib/stats.ts';

export interface IncidentStormResult {
  readonly nodes: number;
  /** Noise events written: foreign NoExecute taints + Node label changes + unrelated Machine annotations. */
  readonly noiseEvents: number;
  readonly foreignTaints: number;
  /** Queue messages sent for the noise (storm + marker, minus the marker alone). */
  readonly noiseMessages: number;
  /** Reconcile API calls for the noise (same subtraction). */
  readonly noiseCalls: number;
  readonly messagesPerNoiseEvent: number;
  readonly callsPerNoiseEvent: number;
  /** From the last noise write until the marker reached its Node with the queue empty. */
  readonly queueEmptyAfterMs: number;
  readonly storm: { readonly writeMs: number; readonly foreignTaintChangesFiltered: number };
  readonly marker: { readonly messages: number; readonly calls: number };
}

const KEY = 'bench.capi-tp/storm';
const UNREACHABLE = { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' };

export async function runIncidentStorm(ctx: BenchContext): Promise<IncidentStormResult> {
  const n = ctx.sizes.incidentNodes;
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath));
  const run = runId('incident');
  const ns = run;
  const stop = new AbortController();
  let forwarderRun: Promise<unknown> | undefined;
  let pipeline: ReconcilePipeline | undefined;
  try {
    await createNamespace(raw, ns, run);
    const declared: BenchTaint = { key: KEY, value: 'v0', effect: 'NoSchedule' };
    const pairs = await createPairs(raw, { run, namespace: ns, count: n, machineTaints: [declared] });

    const counter = new CallCounter();
    pipeline = await ReconcilePipeline.create({ kubeConfig: countingKubeConfig(ctx.kubeconfigPath, counter) });
    const forwarder = startCountedForwarder({ pipeline, kubeConfig: loadKubeConfig(ctx.kubeconfigPath), namespace: ns, run, nodeLabel: BENCH_LABEL, signal: stop.signal });
    forwarderRun = forwarder.done;
    const telemetry = forwarder.telemetry;
    pipeline.start();

    // Warm-up: every Node carries the declared taint and the product's tracking annotation.
    const warm = performance.now();
    for (;;) {
      const nodes = await listNodes(raw, run);
      if (nodes.length === n && nodes.every((node) => valueOf(node) === 'v0' && node.metadata.annotations?.['taints.capi-taint-propagator.dev/applied'] !== undefined)) break;
      if (since(warm) > 300_000) throw new Error('warm-up did not converge in 300 s');
      await sleep(250);
    }
    await pipeline.drain(60_000);

    // The marker alone: one Machine's declaration edited, until its Node carries the new value and the queue is empty.
    const first = pairs[0];
    if (!first) throw new Error('no pairs');
    const marker = async (value: string): Promise<void> => {
      await setMachineTaints(raw, ns, first.machine, [{ ...declared, value }]);
      for (const t0 = performance.now(); ; ) {
        const node = (await listNodes(raw, run)).find((x) => x.metadata.name === first.node);
        if (node && valueOf(node) === value) break;
        if (since(t0) > 60_000) throw new Error(`the marker ${value} did not arrive in 60 s`);
        await sleep(50);
      }
      await pipeline!.drain(60_000);
    };
    let before = counter.snapshot();
    let sentBefore = forwarder.messages();
    await marker('v1');
    const markerAlone = { messages: forwarder.messages() - sentBefore, calls: counter.since(before).total };

    // The storm and the noise, then the marker.
    before = counter.snapshot();
    sentBefore = forwarder.messages();
    const filteredBefore = telemetry.counts().ForeignTaintChangesFiltered ?? 0;
    const current = new Map((await listNodes(raw, run)).map((node) => [node.metadata.name, node]));
    const writeStart = performance.now();
    await mapConcurrent(pairs, 32, async (p) => {
      const taints = [...(current.get(p.node)?.spec?.taints ?? []), UNREACHABLE];
      await raw.mergePatch(`/api/v1/nodes/${p.node}`, { spec: { taints } });
    });
    await mapConcurrent(pairs, 32, async (p) => {
      await raw.mergePatch(`/api/v1/nodes/${p.node}`, { metadata: { labels: { 'bench.capi-tp/zone-state': 'dark' } } });
      await raw.mergePatch(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines/${p.machine}`, { metadata: { annotations: { 'bench.capi-tp/noise': 'x' } } });
    });
    const writeMs = since(writeStart);
    const lastWrite = performance.now();
    await marker('v2');
    const queueEmptyAfterMs = since(lastWrite);
    const calls = counter.since(before).total;
    const noiseMessages = forwarder.messages() - sentBefore - markerAlone.messages;
    const noiseCalls = calls - markerAlone.calls;
    const noiseEvents = 3 * n;
    const result: IncidentStormResult = {
      nodes: n,
      noiseEvents,
      foreignTaints: n,
      noiseMessages,
      noiseCalls,
      messagesPerNoiseEvent: round(Math.max(0, noiseMessages) / noiseEvents, 3),
      callsPerNoiseEvent: round(Math.max(0, noiseCalls) / noiseEvents, 3),
      queueEmptyAfterMs: round(queueEmptyAfterMs, 0),
      storm: { writeMs: round(writeMs, 0), foreignTaintChangesFiltered: (telemetry.counts().ForeignTaintChangesFiltered ?? 0) - filteredBefore },
      marker: markerAlone,
    };
    ctx.log(
      `  ${n} Nodes: ${n} foreign NoExecute taints + ${n} label changes + ${n} Machine annotations written in ${result.storm.writeMs} ms; ` +
        `${noiseMessages} messages and ${noiseCalls} reconcile API calls for them (${result.messagesPerNoiseEvent} / ${result.callsPerNoiseEvent} per noise event; ` +
        `${result.storm.foreignTaintChangesFiltered} foreign taint changes filtered); marker through, queue empty ${result.queueEmptyAfterMs} ms after the last write ` +
        `(the marker alone: ${markerAlone.messages} messages, ${markerAlone.calls} calls)`,
    );
    return result;
  } finally {
    stop.abort();
    await pipeline?.stop();
    await forwarderRun?.catch(() => undefined);
    await cleanup(raw, run, [ns]);
    raw.close();
  }
}

function valueOf(node: RawNode): string | undefined {
  return node.spec?.taints?.find((t) => t.key === KEY)?.value;
}
