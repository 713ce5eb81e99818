/**
 * The version matrix: one scenario per Cluster API release (`local/control-plane/capi-versions.ts`), each on its own
 * control plane running that release's CRDs and core manager (built from its Go module) with the local provider, and
 * the product's pipeline as `npm start` runs it. `npm test` runs the oldest and the newest release;
 * `npm run test:matrix` runs every row (`CAPI_MATRIX=all`).
 *
 * Per release: the product discovers the group version the release serves (v1beta1 up to v1.10, v1beta2 from v1.11)
 * and names it in its Events; a MachineDeployment declares taints through an annotation (every release) and through
 * `spec.taints` (where the field exists, gate MachineTaintPropagation on: Cluster API propagates those itself); the
 * declaration is edited in place (same Machine, no rollout); a Node joins (scale up) and gets the taints, including
 * the OnInitialization one; the declaration is removed (the Always taints go, the OnInitialization one stays); a
 * Machine is removed (scale down) and the remaining Node is left alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type CoreV1Event, type V1Node } from '@kubernetes/client-node';
import { CAPI_VERSION_MATRIX, selectedCapiReleases, type CapiRelease } from '#local/control-plane/capi-versions.ts';
import { ControlPlaneUnavailableError, startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import type { Pipeline } from '#local/pipeline.ts';
import { OWN_TRACKING_ANNOTATION, STARTUP_GATE_TAINT_KEY } from '#shared/domain/taint.ts';
import { createNamespace, MERGE_PATCH, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { capiControlPlane, capiResources, createMachineDeployment, createSelfHostedCluster, taintText, waitForMachineNodes, type MachineNode, startProductPipeline } from '#test/support/capi.ts';

const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const taintsOf = (n: V1Node | undefined): string[] => (n?.spec?.taints ?? []).map(taintText).sort();
const CI = /^(true|1|yes)$/i.test(process.env['CI']?.trim() ?? '');

/** What each release ran in, for the closing line (the README's matrix result comes from it). */
const results: Record<string, string> = {};

describe.each(selectedCapiReleases())('Cluster API $release (serves $servedApi)', (row: CapiRelease) => {
  let cp: ControlPlane | undefined;
  let unavailable: string | undefined;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: string;
  let cluster: string;
  let pipeline: Pipeline | undefined;
  let md: string;
  let first: MachineNode;
  let started = 0;
  const resources = capiResources(row.servedApi);
  const api = (): Pipeline => pipeline as Pipeline;

  /** The taints each Node must carry for the current declaration. */
  const nodeTaints = async (name: string): Promise<string[]> => taintsOf(await core.readNode({ name }));
  const patchTemplate = (body: unknown): Promise<unknown> => kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...resources.machineDeployments, namespace: ns, name: md, body }, MERGE_PATCH);
  const waitForTaints = async (name: string, want: string[], what: string): Promise<void> => {
    let have: string[] = [];
    try {
      await waitFor(async () => JSON.stringify((have = await nodeTaints(name))) === JSON.stringify([...want].sort()), { timeoutMs: 60_000, intervalMs: 200, description: `${row.release}: Node ${name} ${what}` });
    } catch (e) {
      throw new Error(`${(e as Error).message}: want ${JSON.stringify([...want].sort())}, have ${JSON.stringify(have)}`, { cause: e });
    }
  };

  beforeAll(async () => {
    // Skipped like the rest of the tier when Cluster API cannot run here; with CI=true the tier's setup already failed.
    if (!capiControlPlane().available) return;
    started = Date.now();
    try {
      cp = await startControlPlane({
        clusterApiVersion: row.release,
        build: true,
        log: () => undefined,
        capi: { featureGates: row.machineTaints ? { MachineTaintPropagation: true } : {} },
      });
    } catch (e) {
      if (!(e instanceof ControlPlaneUnavailableError) || CI) throw e;
      unavailable = e.reason;
      return;
    }
    kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    core = kc.makeApiClient(CoreV1Api);
    ns = await createNamespace(kc, 'matrix');
    cluster = await createSelfHostedCluster(kc, ns, uniqueName('cluster'), 90_000, row.servedApi);
    pipeline = await startProductPipeline(kc, ns);
  }, 300_000);

  afterAll(async () => {
    await pipeline?.stop();
    await cp?.stop();
    if (cp) results[row.release] = `${((Date.now() - started) / 1000).toFixed(0)} s`;
    if (Object.keys(results).length > 0) console.info(`version matrix: ${JSON.stringify(results)} (rows in the matrix: ${CAPI_VERSION_MATRIX.map((r) => r.release).join(', ')})`);
  }, 60_000);

  // The tier's convention (test/support/capi-control-plane-setup.ts): with CI=true a release that cannot run here fails
  // the run with the reason; a developer without CI=true gets one line saying why, and the row is skipped.
  const live = (name: string, fn: () => Promise<void>, timeoutMs = 120_000): void => {
    it(name, async (ctx) => {
      if (!cp) {
        const tier = capiControlPlane();
        const reason = unavailable ?? (tier.available ? 'its control plane did not start' : tier.reason);
        if (CI) throw new Error(`CI=true and Cluster API ${row.release} is unavailable: ${reason}`);
        console.warn(`SKIPPING ${row.release}: ${reason}`);
        ctx.skip();
      }
      await fn();
    }, timeoutMs);
  };

  live('runs the release asked for, serving the group version the matrix says', async () => {
    expect(cp?.clusterApiVersion).toBe(row.release);
    const groups = await kc.makeApiClient(CustomObjectsApi).getAPIResources({ group: 'cluster.x-k8s.io', version: row.servedApi });
    expect(groups.resources.map((r) => r.name)).toEqual(expect.arrayContaining(['machines', 'clusters', 'machinedeployments']));
    if (row.servedApi === 'v1beta1') {
      // Nothing newer is served: the product must not need it.
      await expect(kc.makeApiClient(CustomObjectsApi).getAPIResources({ group: 'cluster.x-k8s.io', version: 'v1beta2' })).rejects.toMatchObject({ code: 404 });
    }
  });

  live('propagates an annotation declaration (and spec.taints where it exists) to a new Node, in the version it discovered', async () => {
    md = await createMachineDeployment(kc, ns, {
      cluster,
      replicas: 1,
      startupTaints: [GATE],
      annotations: { [MACHINE]: 'm1=1:NoSchedule, m2:PreferNoSchedule@OnInitialization' },
      ...(row.machineTaints ? { taints: [{ key: 's1', value: '1', effect: 'NoSchedule' as const }] } : {}),
      capiVersion: row.servedApi,
    });
    [first] = (await waitForMachineNodes(kc, ns, md, 1, 90_000, row.servedApi)) as [MachineNode];
    const node = first.node.metadata?.name ?? '';
    await waitForTaints(node, ['m1=1:NoSchedule', 'm2=:PreferNoSchedule', ...(row.machineTaints ? ['s1=1:NoSchedule'] : [])], 'after the first reconcile');
    expect((await core.readNode({ name: node })).metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBe('m1:NoSchedule');
    // The product's Event on the Machine names the group version it read the Machine in.
    const events = await waitFor(
      async () => {
        const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${first.machine.metadata.name}` });
        const ours = list.items.filter((e: CoreV1Event) => e.reason === 'TaintsPropagated');
        return ours.length > 0 ? ours : undefined;
      },
      { timeoutMs: 30_000, description: `${row.release}: a TaintsPropagated Event on Machine ${first.machine.metadata.name}` },
    );
    expect(events[0]?.involvedObject.apiVersion).toBe(`cluster.x-k8s.io/${row.servedApi}`);
    // Read in the discovered version, not a guess: on v1.10 and older a v1beta2 read would end every reconcile as machine-gone.
    expect(api().counters().reconciles.patched).toBeGreaterThan(0);
  });

  live('follows an edit in place: same Machine, new taints, the OnInitialization one kept', async () => {
    await patchTemplate({
      spec: {
        template: {
          metadata: { annotations: { [MACHINE]: 'm1=2:NoSchedule, m3=1:NoExecute, m2:PreferNoSchedule@OnInitialization' } },
          ...(row.machineTaints ? { spec: { taints: [{ key: 's1', value: '2', effect: 'NoSchedule', propagation: 'Always' }] } } : {}),
        },
      },
    });
    const node = first.node.metadata?.name ?? '';
    await waitForTaints(node, ['m1=2:NoSchedule', 'm2=:PreferNoSchedule', 'm3=1:NoExecute', ...(row.machineTaints ? ['s1=2:NoSchedule'] : [])], 'after the edit');
    const machines = await kc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({ ...resources.machines, namespace: ns, labelSelector: `cluster.x-k8s.io/deployment-name=${md}` });
    expect((machines as { items: { metadata: { uid: string } }[] }).items.map((m) => m.metadata.uid)).toEqual([first.machine.metadata.uid]);
  });

  live('gives a joining Node every declared taint, OnInitialization included', async () => {
    await patchTemplate({ spec: { replicas: 2 } });
    const pairs = await waitForMachineNodes(kc, ns, md, 2, 90_000, row.servedApi);
    const joined = pairs.find((p) => p.machine.metadata.uid !== first.machine.metadata.uid);
    expect(joined).toBeDefined();
    await waitForTaints(joined?.node.metadata?.name ?? '', ['m1=2:NoSchedule', 'm2=:PreferNoSchedule', 'm3=1:NoExecute', ...(row.machineTaints ? ['s1=2:NoSchedule'] : [])], 'after joining');
  });

  live('removes the declared Always taints when the declaration goes; a removed Machine leaves the other Node alone', async () => {
    await patchTemplate({ spec: { template: { metadata: { annotations: { [MACHINE]: null } }, ...(row.machineTaints ? { spec: { taints: null } } : {}) } } });
    const pairs = await waitForMachineNodes(kc, ns, md, 2, 60_000, row.servedApi);
    for (const p of pairs) await waitForTaints(p.node.metadata?.name ?? '', ['m2=:PreferNoSchedule'], 'after the declaration was removed');
    const before = await core.readNode({ name: first.node.metadata?.name ?? '' });
    await patchTemplate({ spec: { replicas: 1 } });
    const [left] = await waitForMachineNodes(kc, ns, md, 1, 90_000, row.servedApi);
    const remaining = left?.node.metadata?.name ?? '';
    expect(await nodeTaints(remaining)).toEqual(['m2=:PreferNoSchedule']);
    // The Node of the removed Machine is gone with it.
    const gone = pairs.map((p) => p.node.metadata?.name ?? '').filter((n) => n !== remaining);
    await waitFor(async () => !(await core.listNode()).items.some((n) => gone.includes(n.metadata?.name ?? '')), { timeoutMs: 60_000, description: `${row.release}: Node ${gone.join(', ')} deleted` });
    if (remaining === before.metadata?.name) expect((await core.readNode({ name: remaining })).spec?.taints).toEqual(before.spec?.taints);
    // Nothing was dead-lettered and no reconcile failed to find its Machine in the version in use.
    const counters = await api().freshCounters();
    expect(counters.deadLettered).toBe(0);
    expect(counters.reconciles['invalid-declaration']).toBe(0);
  });
});
