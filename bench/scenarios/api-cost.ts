/**
 * Scenario 2, API cost: HTTP requests per reconcile, counted at the client (every request the reconcile function's
 * KubeConfig sends), for a changed Node, an unchanged Node (reached by a Machine event and by a Node event), and a
 * Node whose write meets one 409 conflict (a foreign writer changes it between our read and our write; its
 * requests are not counted). Runs the production handler through the local SQS FIFO queue (fauxqs); conflicts retry after a 0 s
 * backoff so that the count does not wait on the clock.
 */
import type { BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import { eventIdFor, eventTypeFor, sourceFor, subjectFor, type NodeEventData, type TaintEvent } from '#shared/contract/cloud-event.ts';
import type { BenchContext } from '../lib/context.ts';
import { CallCounter, RawKube, cleanup, countingKubeConfig, createNamespace, createPairs, hasTaint, listNodes, loadKubeConfig, runId, type BenchTaint, type CallCounts, type Pair, type RawNode } from '../lib/kube.ts';
import { ReconcilePipeline, machineModified, publishAll } from '../lib/pipeline.ts';
import { round } from '../lib/stats.ts';

export interface CaseCost {
  readonly nodes: number;
  readonly calls: CallCounts;
  readonly readsPerNode: number;
  readonly writesPerNode: number;
  readonly callsPerNode: number;
  /** Calls to the management cluster that record a Kubernetes Event on the Machine (POST event), per Node. */
  readonly eventWritesPerNode: number;
  /** All calls except the Event records, per Node. */
  readonly callsPerNodeWithoutEvents: number;
}

export interface ApiCostResult {
  readonly changed: CaseCost;
  readonly unchangedMachineEvent: CaseCost;
  readonly unchangedNodeEvent: CaseCost;
  readonly conflict: CaseCost & { readonly conflictsPerNode: number };
  /** Every HTTP call per changed Node, the Event record included. */
  readonly callsPerChangedNode: number;
  /** The same without the Event record (GET Machine, GET Node, PATCH Node). */
  readonly callsPerChangedNodeWithoutEvents: number;
  readonly readsPerUnchangedNode: number;
  readonly writesPerUnchangedNode: number;
  readonly floor: { readonly changed: string; readonly unchanged: string };
}

const DECLARED: BenchTaint = { key: 'bench.capi-tp/pool', value: 'gpu', effect: 'NoSchedule' };

export async function runApiCost(ctx: BenchContext): Promise<ApiCostResult> {
  const k = ctx.sizes.apiCostN;
  const raw = await RawKube.from(loadKubeConfig(ctx.kubeconfigPath));
  const run = runId('cost');
  const ns = run;
  try {
    await createNamespace(raw, ns, run);
    const pairs = await createPairs(raw, { run, namespace: ns, count: 2 * k, machineTaints: [DECLARED] });
    const plain = pairs.slice(0, k);
    const racing = pairs.slice(k);

    // Changed: every Node lacks its Machine's taint.
    const changed = await measure(ctx, plain, (p) => machineModified(ns, p.machine, p.uid, p.resourceVersion, p.node, new Date()));
    await expectConverged(raw, run, plain);
    // Unchanged, reached by a Machine event (a later resourceVersion, so SQS deduplication does not drop it).
    const nodes = new Map((await listNodes(raw, run)).map((n) => [n.metadata.name, n]));
    const unchangedMachineEvent = await measure(ctx, plain, (p) => machineModified(ns, p.machine, p.uid, `${p.resourceVersion}0`, p.node, new Date()));
    // Unchanged, reached by a Node event: the echo of our own write, as the forwarder publishes it.
    const unchangedNodeEvent = await measure(ctx, plain, (p) => nodeModified(ns, p, nodes.get(p.node)));

    // Conflict: a foreign writer changes each Node once, between our read and our write.
    let conflicts = 0;
    const interfered = new Set<string>();
    const interfere = async (name: string): Promise<void> => {
      if (interfered.has(name)) return;
      interfered.add(name);
      await raw.mergePatch(`/api/v1/nodes/${name}`, { metadata: { labels: { 'bench.capi-tp/foreign': 'yes' } } });
    };
    const conflict = await measure(
      ctx,
      racing,
      (p) => machineModified(ns, p.machine, p.uid, p.resourceVersion, p.node, new Date()),
      (deps) => ({
        ...deps,
        clusters: {
          async nodesOf(cluster) {
            const store = await deps.clusters.nodesOf(cluster);
            return {
              getNode: (name: string) => store.getNode(name),
              async patchNodeTaints(name, patch) {
                await interfere(name);
                try {
                  return await store.patchNodeTaints(name, patch);
                } catch (e) {
                  conflicts++;
                  throw e;
                }
              },
              listNodes: (selector) => store.listNodes(selector),
            };
          },
          podsOf: (cluster) => deps.clusters.podsOf(cluster),
        },
      }),
    );
    await expectConverged(raw, run, racing);

    return {
      changed,
      unchangedMachineEvent,
      unchangedNodeEvent,
      conflict: { ...conflict, conflictsPerNode: round(conflicts / racing.length, 2) },
      callsPerChangedNode: changed.callsPerNode,
      callsPerChangedNodeWithoutEvents: changed.callsPerNodeWithoutEvents,
      readsPerUnchangedNode: Math.max(unchangedMachineEvent.readsPerNode, unchangedNodeEvent.readsPerNode),
      writesPerUnchangedNode: Math.max(unchangedMachineEvent.writesPerNode, unchangedNodeEvent.writesPerNode),
      floor: { changed: '1 write (plus the read it needs: GET Node + PATCH Node = 2 calls)', unchanged: '0 writes' },
    };
  } finally {
    await cleanup(raw, run, [ns]);
    raw.close();
  }
}

async function measure(ctx: BenchContext, pairs: readonly Pair[], eventOf: (p: Pair) => TaintEvent, wrapDeps?: (deps: BatchDeps) => BatchDeps): Promise<CaseCost> {
  const counter = new CallCounter();
  const pipeline = await ReconcilePipeline.create({ kubeConfig: countingKubeConfig(ctx.kubeconfigPath, counter), env: { RETRY_BASE_SECONDS: '0', RETRY_MAX_SECONDS: '1' }, ...(wrapDeps ? { wrapDeps } : {}) });
  try {
    await publishAll(pipeline.publisher, pairs.map(eventOf));
    pipeline.start();
    await pipeline.drain(120_000);
  } finally {
    await pipeline.stop();
  }
  const all = counter.snapshot();
  // Discovery of the Cluster API version is once per process (cold start), not per Node: reported, not averaged in.
  const discovery = all.byKind['GET discovery'] ?? 0;
  const calls = { ...all, reads: all.reads - discovery, total: all.total - discovery };
  const n = pairs.length;
  const events = Object.entries(calls.byKind)
    .filter(([k]) => k !== 'GET event' && k.endsWith(' event'))
    .reduce((s, [, v]) => s + v, 0);
  return {
    nodes: n,
    calls,
    readsPerNode: round(calls.reads / n, 2),
    writesPerNode: round(calls.writes / n, 2),
    callsPerNode: round(calls.total / n, 2),
    eventWritesPerNode: round(events / n, 2),
    callsPerNodeWithoutEvents: round((calls.total - events) / n, 2),
  };
}

function nodeModified(namespace: string, p: Pair, node: RawNode | undefined): TaintEvent {
  const rv = node?.metadata.resourceVersion ?? '1';
  const uid = `node-${p.node}`;
  const data: NodeEventData = {
    kind: 'Node',
    cluster: { mode: 'self' },
    node: { name: p.node, uid, resourceVersion: rv },
    machine: { namespace, name: p.machine },
    observedAt: new Date().toISOString(),
  };
  return { id: eventIdFor(uid, rv, 'modified'), source: sourceFor(data.cluster), type: eventTypeFor('Node', 'modified'), subject: subjectFor(data), time: data.observedAt, data };
}

async function expectConverged(raw: RawKube, run: string, pairs: readonly Pair[]): Promise<void> {
  const names = new Set(pairs.map((p) => p.node));
  const missing = (await listNodes(raw, run)).filter((n) => names.has(n.metadata.name) && !hasTaint(n, DECLARED));
  if (missing.length > 0) throw new Error(`${missing.length} Nodes did not converge (e.g. ${missing[0]?.metadata.name})`);
}
