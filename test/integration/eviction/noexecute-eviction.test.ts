/**
 * Kubernetes' own taint-eviction and disruption controllers (kube-controller-manager v1.34.3, started by
 * `startControlPlane({ controllerManager: true })`) against the preview rule of `shared/domain/eviction-preview.ts`
 * (issue 51). No kubelet runs: pods are bound to their Node directly (`spec.nodeName`), their phase and readiness
 * written through the status subresource; `terminationGracePeriodSeconds: 0` lets a deletion complete without one.
 * This file starts its own control plane (the shared one runs no controller that deletes pods).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, PolicyV1Api } from '@kubernetes/client-node';
import type { KubeConfig, V1Pod, V1Toleration } from '@kubernetes/client-node';
import { findBinaries } from '#local/control-plane/assets.ts';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import { previewNoExecuteEvictions, type PodOnNode } from '#shared/domain/eviction-preview.ts';
import type { Taint } from '#shared/domain/taint.ts';
import { controlPlane, createNamespace, createNode, kubeConfigFromFile, MERGE_PATCH, livePod, statusOf, uniqueName, waitFor } from '#test/support/control-plane.ts';

// Without the binary (a cache folder built before kube-controller-manager was added, envtest assets) the file is
// skipped on a developer machine; CI builds it (`control-plane:prepare`), so there a missing binary fails the start.
const found = findBinaries();
const runnable = controlPlane().available && ((found.available && found.value.kubeControllerManager !== undefined) || process.env['CI'] === 'true');

const MAINT: Taint = { key: 'example.com/maintenance', value: 'yes', effect: 'NoExecute' };

function podBody(name: string, nodeName: string, tolerations: V1Toleration[], labels: Record<string, string> = {}): V1Pod {
  return {
    metadata: { name, labels },
    spec: { nodeName, terminationGracePeriodSeconds: 0, tolerations, containers: [{ name: 'c', image: 'registry.invalid/pause:never-pulled' }] },
  };
}

/** The pod as the preview reads it. */
function toPodOnNode(p: V1Pod): PodOnNode {
  return {
    namespace: p.metadata?.namespace ?? '',
    name: p.metadata?.name ?? '',
    tolerations: (p.spec?.tolerations ?? []).map((t) => ({ ...t })),
    ...(p.status?.phase ? { phase: p.status.phase } : {}),
    ...(p.metadata?.deletionTimestamp ? { deletionTimestamp: p.metadata.deletionTimestamp.toISOString() } : {}),
  };
}

describe.skipIf(!runnable)('kube-controller-manager: NoExecute evictions and disruption budgets', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let namespace: string;
  beforeAll(async () => {
    cp = await startControlPlane({ build: false, controllerManager: true, log: () => undefined });
    kc = kubeConfigFromFile(cp.kubeconfigPath);
    core = kc.makeApiClient(CoreV1Api);
    namespace = await createNamespace(kc, 'evict');
  });
  afterAll(async () => {
    await cp?.stop();
  });

  const live = (name: string): Promise<V1Pod | undefined> => livePod(core, namespace, name);

  it('deletes exactly the pods the preview evicts now, the tolerationSeconds one after its seconds, and keeps the rest', async () => {
    // Prepare
    const node = uniqueName('nx');
    await createNode(kc, node);
    const pods: Record<string, V1Toleration[]> = {
      plain: [],
      'equal-other-value': [{ key: MAINT.key, operator: 'Equal', value: 'no' }],
      'noschedule-only': [{ key: MAINT.key, operator: 'Exists', effect: 'NoSchedule' }],
      exists: [{ key: MAINT.key, operator: 'Exists' }],
      equal: [{ key: MAINT.key, operator: 'Equal', value: 'yes', effect: 'NoExecute' }],
      wildcard: [{ operator: 'Exists' }],
      'for-2s': [{ key: MAINT.key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 2 }],
      'for-1h': [{ key: MAINT.key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 3600 }],
      succeeded: [],
    };
    for (const [name, tolerations] of Object.entries(pods)) await core.createNamespacedPod({ namespace, body: podBody(name, node, tolerations) });
    // A finished pod: the controller does not look at the phase.
    await core.patchNamespacedPodStatus({ namespace, name: 'succeeded', body: { status: { phase: 'Succeeded' } } }, MERGE_PATCH);
    const listed = (await core.listNamespacedPod({ namespace, fieldSelector: `spec.nodeName=${node}` })).items;
    const preview = previewNoExecuteEvictions({ taintsToAdd: [MAINT], nodeTaints: [], pods: listed.map(toPodOnNode) });
    const byVerdict = (pred: (e: (typeof preview)[number]['evict']) => boolean): string[] => preview.filter((p) => pred(p.evict)).map((p) => p.name).sort();
    const now = byVerdict((e) => e === 'now');
    const never = byVerdict((e) => e === 'never');
    expect(now).toEqual(['equal-other-value', 'noschedule-only', 'plain', 'succeeded']);
    expect(never).toEqual(['equal', 'exists', 'wildcard']);
    expect(preview.find((p) => p.name === 'for-2s')?.evict).toEqual({ afterSeconds: 2 });
    expect(preview.find((p) => p.name === 'for-1h')?.evict).toEqual({ afterSeconds: 3600 });

    // Act
    const tainted = Date.now();
    await core.patchNode({ name: node, body: { spec: { taints: [MAINT] } } }, MERGE_PATCH);

    // Assess: the pods evicted now go first; the 2 s one after 2 s. Its deletion comes after the controller handled
    // the Node update for every pod of the Node, so the pods still there then are kept, not merely not yet reached.
    await waitFor(async () => (await Promise.all(now.map(live))).every((p) => p === undefined), { timeoutMs: 30_000, description: `pods ${now.join(', ')} to be evicted` });
    const evictedNowAfterMs = Date.now() - tainted;
    await waitFor(async () => (await live('for-2s')) === undefined, { timeoutMs: 30_000, description: 'the tolerationSeconds: 2 pod to be evicted' });
    const twoSecondsPodAfterMs = Date.now() - tainted;
    expect(twoSecondsPodAfterMs).toBeGreaterThanOrEqual(2000);
    expect(twoSecondsPodAfterMs).toBeLessThan(15_000);
    const kept = await Promise.all([...never, 'for-1h'].map(live));
    expect(kept.map((p) => p?.metadata?.name)).toEqual([...never, 'for-1h']);
    // The controller says why it deleted them, in an Event per pod (recorded asynchronously, hence the wait).
    const marked = async (): Promise<string[]> =>
      (await core.listNamespacedEvent({ namespace })).items
        .filter((e) => e.reason === 'TaintManagerEviction' && /Marking for deletion/.test(e.message ?? ''))
        .map((e) => e.involvedObject.name ?? '')
        .sort();
    const expected = [...now, 'for-2s'].sort();
    await waitFor(async () => JSON.stringify(await marked()) === JSON.stringify(expected), { timeoutMs: 10_000, description: 'a TaintManagerEviction Event per evicted pod' });
    console.info(`[eviction] evicted-now pods gone ${evictedNowAfterMs} ms after the taint, the 2 s pod after ${twoSecondsPodAfterMs} ms`);
  });

  // The case docs/noexecute-preview.md says the preview cannot time: an eviction already pending from the Node's own
  // NoExecute taint is kept when a tolerated taint with a shorter tolerationSeconds comes (processPodOnNode returns).
  it('keeps an eviction already pending when a tolerated taint with a shorter tolerationSeconds is added', async () => {
    // Prepare
    const node = uniqueName('pending');
    await createNode(kc, node);
    const existing: Taint = { key: 'example.com/existing', effect: 'NoExecute' };
    const pods: Record<string, V1Toleration[]> = {
      // marker: does not tolerate the existing taint, so its deletion shows the controller went through the Node's pods
      marker: [],
      // tolerates the existing taint for 6 s (an eviction then pends), the added one for 1 s
      pending: [
        { key: existing.key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 6 },
        { key: MAINT.key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 1 },
      ],
      // tolerates the existing taint forever, the added one for 2 s: nothing pends before the change
      probe: [
        { key: existing.key, operator: 'Exists' },
        { key: MAINT.key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 2 },
      ],
    };
    for (const [name, tolerations] of Object.entries(pods)) await core.createNamespacedPod({ namespace, body: podBody(name, node, tolerations) });
    const existingAt = Date.now();
    await core.patchNode({ name: node, body: { spec: { taints: [existing] } } }, MERGE_PATCH);
    await waitFor(async () => (await live('marker')) === undefined, { timeoutMs: 30_000, description: 'the marker pod to be evicted' });
    const listed = (await core.listNamespacedPod({ namespace, fieldSelector: `spec.nodeName=${node}` })).items.filter((p) => !p.metadata?.deletionTimestamp);
    const preview = previewNoExecuteEvictions({ taintsToAdd: [MAINT], nodeTaints: [existing], pods: listed.map(toPodOnNode) });
    expect(preview.map((p) => [p.name, p.evict, p.current, p.keepsPendingEviction])).toEqual([
      ['pending', { afterSeconds: 1 }, { afterSeconds: 6 }, true],
      ['probe', { afterSeconds: 2 }, 'never', false],
    ]);

    // Act
    await core.patchNode({ name: node, body: { spec: { taints: [existing, MAINT] } } }, MERGE_PATCH);

    // Assess: the probe goes after its 2 s; the pending pod, which the preview would have evicted after 1 s, is still
    // there then, and goes when its pending eviction fires, 6 s after the existing taint
    await waitFor(async () => (await live('probe')) === undefined, { timeoutMs: 30_000, description: 'the probe pod to be evicted' });
    expect(await live('pending')).toBeDefined();
    const probeGoneAfterMs = Date.now() - existingAt;
    await waitFor(async () => (await live('pending')) === undefined, { timeoutMs: 30_000, description: 'the pending pod to be evicted' });
    const pendingGoneAfterMs = Date.now() - existingAt;
    expect(pendingGoneAfterMs).toBeGreaterThanOrEqual(6000);
    console.info(`[eviction] after the existing taint: probe gone at ${probeGoneAfterMs} ms, the pending pod at ${pendingGoneAfterMs} ms`);
  });

  it('refuses an eviction with 429 once the disruption controller has computed a budget that allows none, and allows one that fits', async () => {
    // Prepare: two Ready pods under a budget keeping both, two under a budget keeping one
    const node = uniqueName('pdb');
    await createNode(kc, node);
    const policy = kc.makeApiClient(PolicyV1Api);
    for (const [name, app] of [['a-1', 'a'], ['a-2', 'a'], ['b-1', 'b'], ['b-2', 'b']] as const) {
      await core.createNamespacedPod({ namespace, body: podBody(name, node, [], { app }) });
      await core.patchNamespacedPodStatus(
        { namespace, name, body: { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }] } } },
        MERGE_PATCH,
      );
    }
    await policy.createNamespacedPodDisruptionBudget({ namespace, body: { metadata: { name: 'keep-all-a' }, spec: { minAvailable: 2, selector: { matchLabels: { app: 'a' } } } } });
    await policy.createNamespacedPodDisruptionBudget({ namespace, body: { metadata: { name: 'keep-one-b' }, spec: { minAvailable: 1, selector: { matchLabels: { app: 'b' } } } } });
    const computed = (name: string, allowed: number) => async (): Promise<boolean> => {
      const pdb = await policy.readNamespacedPodDisruptionBudget({ namespace, name });
      const s = pdb.status;
      return s?.observedGeneration === pdb.metadata?.generation && s?.expectedPods === 2 && s?.currentHealthy === 2 && s?.disruptionsAllowed === allowed;
    };
    const budgetsComputed = Date.now();
    await waitFor(computed('keep-all-a', 0), { timeoutMs: 30_000, description: 'the disruption controller to compute keep-all-a' });
    await waitFor(computed('keep-one-b', 1), { timeoutMs: 30_000, description: 'the disruption controller to compute keep-one-b' });
    const budgetsComputedAfterMs = Date.now() - budgetsComputed;
    const evict = async (name: string): Promise<number> => {
      try {
        await core.createNamespacedPodEviction({ namespace, name, body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name, namespace } } });
        return 201;
      } catch (e) {
        return statusOf(e) ?? -1;
      }
    };

    // Act
    const refused = await evict('a-1');
    const allowed = await evict('b-1');
    const second = await evict('b-2');

    // Assess: the budget holds for a-1; b-1 fits the budget (and goes), after which b-2 does not
    expect([refused, allowed, second]).toEqual([429, 201, 429]);
    expect(await live('a-1')).toBeDefined();
    await waitFor(async () => (await live('b-1')) === undefined, { timeoutMs: 10_000, description: 'b-1 to be evicted' });
    expect(await live('b-2')).toBeDefined();
    console.info(`[eviction] budgets computed ${budgetsComputedAfterMs} ms after their creation`);
  });
});
