/**
 * Scale from zero (docs/autoscaler.md) next to the real Cluster API manager (the tier's: MachineTaintPropagation and
 * ClusterTopology on), with the product's pipeline as `npm start` runs it: the cluster-autoscaler taints annotation on
 * node groups whose taints are declared through the product's annotations or `spec.template.spec.taints`. One control
 * plane, one pipeline, one file.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, KubernetesObjectApi, loadAllYaml, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import { readAutoscalerStatuses } from '#local/autoscaler-status.ts';
import type { Pipeline } from '#local/pipeline.ts';
import {
  AUTOSCALER_MAX_SIZE_ANNOTATION,
  AUTOSCALER_MIN_SIZE_ANNOTATION,
  AUTOSCALER_OWNED_ANNOTATION,
  AUTOSCALER_TAINTS_ANNOTATION,
} from '#shared/domain/autoscaler.ts';
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { FIELD_MANAGER } from '#shared/domain/taint.ts';
import { createNamespace, MERGE_PATCH, waitFor } from '#test/support/control-plane.ts';
import {
  CAPI,
  CLUSTERS,
  MACHINE_DEPLOYMENTS,
  MACHINE_POOLS,
  capiKubeConfig,
  createMachineDeployment,
  createMachinePool,
  createSelfHostedCluster,
  describeWithCapi,
  getObject,
  listObjects,
  startProductPipeline,
} from '#test/support/capi.ts';

const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const CLASS = 'taints.capi-taint-propagator.dev/class';
const CLUSTER = 'taints.capi-taint-propagator.dev/cluster';
const NODE_GROUP = { [AUTOSCALER_MIN_SIZE_ANNOTATION]: '0', [AUTOSCALER_MAX_SIZE_ANNOTATION]: '5' };
const MACHINE_SETS = { ...CAPI, plural: 'machinesets' } as const;
const CLUSTER_CLASSES = { ...CAPI, plural: 'clusterclasses' } as const;
/** How long the converged resources are watched for writes (AUTOSCALER_QUIET_MS; 60 000 for the per-minute figure). */
const QUIET_MS = Number(process.env['AUTOSCALER_QUIET_MS'] ?? 15_000);
type Api = { group: string; version: string; plural: string };

describeWithCapi('Scale from zero: the cluster-autoscaler taints annotation next to the Cluster API manager', () => {
  let kc: KubeConfig;
  let ns: string;
  let cluster: string;
  let pipeline: Pipeline;

  beforeAll(async () => {
    kc = capiKubeConfig();
    ns = await createNamespace(kc, 'capi-as');
    cluster = await createSelfHostedCluster(kc, ns);
    pipeline = await startProductPipeline(kc, ns);
  });
  afterAll(async () => {
    await pipeline?.stop();
  });

  const annotations = async (api: Api, name: string): Promise<Record<string, string>> => (await getObject(kc, api, ns, name)).metadata.annotations ?? {};
  const patchMeta = (api: Api, name: string, a: Record<string, string | null>): Promise<unknown> =>
    kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...api, namespace: ns, name, body: { metadata: { annotations: a } } }, MERGE_PATCH);
  const waitForValue = (api: Api, name: string, value: string | undefined, timeoutMs = 30_000): Promise<unknown> =>
    waitFor(
      async () => {
        const a = await annotations(api, name);
        return a[AUTOSCALER_TAINTS_ANNOTATION] === value && a[AUTOSCALER_OWNED_ANNOTATION] === value;
      },
      { timeoutMs, intervalMs: 100, description: `${api.plural} ${name}: taints annotation and record ${JSON.stringify(value)}` },
    );
  const machineSetsOf = (md: string) => listObjects(kc, MACHINE_SETS, ns, `cluster.x-k8s.io/deployment-name=${md}`);
  const writes = (): number => pipeline.counters().reconciles[ReconcileOutcome.autoscalerPatched];
  /** A node group declared through the product's annotation: a positive signal that every earlier change was handled. */
  const marker = async (): Promise<string> => {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 0, annotations: { [MACHINE]: 'marker:NoSchedule' } });
    await patchMeta(MACHINE_DEPLOYMENTS, md, NODE_GROUP);
    await waitForValue(MACHINE_DEPLOYMENTS, md, 'marker:NoSchedule');
    return md;
  };

  it('an annotation-declared MachineDeployment at 0 replicas gets the annotation; Cluster API copies it to its MachineSet, never back; an edit reaches it; then 0 writes', async () => {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 0, annotations: { [MACHINE]: 'nvidia.com/gpu=a100:NoSchedule, warm:PreferNoSchedule@OnInitialization' } });
    await patchMeta(MACHINE_DEPLOYMENTS, md, NODE_GROUP);
    await waitForValue(MACHINE_DEPLOYMENTS, md, 'nvidia.com/gpu=a100:NoSchedule,warm:PreferNoSchedule');
    expect((await getObject(kc, MACHINE_DEPLOYMENTS, ns, md)).spec?.['replicas']).toBe(0);

    // Cluster API (MachineDeployment controller) copies the MachineDeployment's annotations to its MachineSet.
    const [ms] = await waitFor(
      async () => {
        const sets = await machineSetsOf(md);
        return sets.length === 1 && sets[0]?.metadata.annotations?.[AUTOSCALER_TAINTS_ANNOTATION] === 'nvidia.com/gpu=a100:NoSchedule,warm:PreferNoSchedule' ? sets : undefined;
      },
      { timeoutMs: 30_000, description: 'the MachineSet to carry the copied annotation' },
    );
    const msName = ms?.metadata.name ?? '';
    expect(ms?.metadata.annotations?.[AUTOSCALER_OWNED_ANNOTATION]).toBe('nvidia.com/gpu=a100:NoSchedule,warm:PreferNoSchedule');

    // An edit of the MachineDeployment's declaration reaches it (and Cluster API's copy follows).
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      { ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body: { spec: { template: { metadata: { annotations: { [MACHINE]: 'nvidia.com/gpu=h100:NoSchedule' } } } } } },
      MERGE_PATCH,
    );
    await waitForValue(MACHINE_DEPLOYMENTS, md, 'nvidia.com/gpu=h100:NoSchedule');
    await waitForValue(MACHINE_SETS, msName, 'nvidia.com/gpu=h100:NoSchedule');

    // A MachineSet annotation written by hand is not copied back to the MachineDeployment: the copy goes one way only.
    await patchMeta(MACHINE_SETS, msName, { 'example.com/on-the-set': 'x' });
    const markerBefore = await marker();
    expect((await annotations(MACHINE_DEPLOYMENTS, md))['example.com/on-the-set']).toBeUndefined();

    // Converged, Cluster API included: both report the current generation in their status (the MachineDeployment
    // controller writes its first status only once the Cluster is ready). Then watch both for QUIET_MS, and a marker
    // proves the pipeline was handling changes all along.
    await waitFor(
      async () => {
        const objs = [await getObject(kc, MACHINE_DEPLOYMENTS, ns, md), await getObject(kc, MACHINE_SETS, ns, msName)];
        return objs.every((o) => o.status?.['observedGeneration'] === (o.metadata as { generation?: number }).generation && o.status?.['availableReplicas'] !== undefined);
      },
      { timeoutMs: 60_000, intervalMs: 250, description: 'Cluster API status of the MachineDeployment and its MachineSet at their current generation' },
    );
    const rv = async (api: Api, name: string) => (await getObject(kc, api, ns, name)).metadata as { resourceVersion?: string };
    const full = async (api: Api, name: string) => JSON.stringify(await getObject(kc, api, ns, name), null, 1).split('\n');
    const fullBefore = { md: await full(MACHINE_DEPLOYMENTS, md), ms: await full(MACHINE_SETS, msName) };
    const before = { md: (await rv(MACHINE_DEPLOYMENTS, md)).resourceVersion, ms: (await rv(MACHINE_SETS, msName)).resourceVersion, writes: writes() };
    // A measurement window (writes per unit of time), not a wait for something to finish: the marker after it is
    // the positive signal that the pipeline was handling changes throughout.
    const started = Date.now();
    await new Promise((r) => setTimeout(r, QUIET_MS));
    const elapsed = Date.now() - started;
    const markerAfter = await marker();
    const after = { md: (await rv(MACHINE_DEPLOYMENTS, md)).resourceVersion, ms: (await rv(MACHINE_SETS, msName)).resourceVersion, writes: writes() };
    const fullAfter = { md: await full(MACHINE_DEPLOYMENTS, md), ms: await full(MACHINE_SETS, msName) };
    const changed = (a: string[], b: string[]): string[] => a.filter((l) => !b.includes(l));
    if (after.md !== before.md || after.ms !== before.ms) process.stderr.write(`[autoscaler] changed lines: MachineDeployment ${JSON.stringify(changed(fullAfter.md, fullBefore.md))}, MachineSet ${JSON.stringify(changed(fullAfter.ms, fullBefore.ms))}\n`);
    process.stderr.write(`[autoscaler] after convergence: MachineDeployment and MachineSet unchanged for ${elapsed} ms (resourceVersion ${before.md}/${before.ms} -> ${after.md}/${after.ms}); product annotation writes in that time: ${after.writes - before.writes - 1} besides the marker's\n`);
    expect(after.md).toBe(before.md); // nobody wrote the MachineDeployment: 0 writes per minute, by either side
    expect(after.ms).toBe(before.ms);
    expect(after.writes - before.writes).toBe(1); // the marker's one write
    expect([markerBefore, markerAfter]).toHaveLength(2);
  });

  it('a user-written value is left alone and reported (Warning Event, npm run status)', async () => {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 0, annotations: { [MACHINE]: 'gpu:NoSchedule' } });
    await patchMeta(MACHINE_DEPLOYMENTS, md, { ...NODE_GROUP, [AUTOSCALER_TAINTS_ANNOTATION]: 'gpu=by-hand:NoSchedule' });
    const core = kc.makeApiClient(CoreV1Api);
    const events = await waitFor(
      async () => {
        const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.kind=MachineDeployment,involvedObject.name=${md}` });
        const ours = list.items.filter((e) => e.reason === 'AutoscalerTaintsNotManaged');
        return ours.length > 0 ? ours : undefined;
      },
      { timeoutMs: 30_000, description: `AutoscalerTaintsNotManaged Event on MachineDeployment ${md}` },
    );
    expect(events[0]?.type).toBe('Warning');
    await marker();
    const a = await annotations(MACHINE_DEPLOYMENTS, md);
    expect(a[AUTOSCALER_TAINTS_ANNOTATION]).toBe('gpu=by-hand:NoSchedule');
    expect(a[AUTOSCALER_OWNED_ANNOTATION]).toBeUndefined();
    const row = (await readAutoscalerStatuses({ kubeConfig: kc, namespace: ns })).find((r) => r.name === md);
    expect(row).toMatchObject({ state: 'foreign', matches: false, desired: 'gpu:NoSchedule', annotation: 'gpu=by-hand:NoSchedule' });
    expect(row?.assumed).toEqual([{ key: 'gpu', value: 'by-hand', effect: 'NoSchedule' }]);
  });

  it('taints in spec.template.spec.taints (gate on) are written into the annotation too, spec.taints winning a clash; Cluster API copies it, writes nothing back; an edit follows', async () => {
    const md = await createMachineDeployment(kc, ns, {
      cluster,
      replicas: 0,
      annotations: { [MACHINE]: 'nvidia.com/gpu=other:NoSchedule, edge:NoSchedule' },
      taints: [
        { key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule', propagation: 'Always' },
        { key: 'example.com/warming', effect: 'PreferNoSchedule', propagation: 'OnInitialization' },
      ],
    });
    await patchMeta(MACHINE_DEPLOYMENTS, md, NODE_GROUP);
    // What autoscaler 1.34/1.35 read (the annotation alone) is now the new Node's taints; 1.36+ reads the field
    // and replaces each of its taints by the same annotation taint.
    const value = 'edge:NoSchedule,example.com/warming:PreferNoSchedule,nvidia.com/gpu=present:NoSchedule';
    await waitForValue(MACHINE_DEPLOYMENTS, md, value);
    const [ms] = await waitFor(
      async () => {
        const sets = await machineSetsOf(md);
        return sets.length === 1 && sets[0]?.metadata.annotations?.[AUTOSCALER_TAINTS_ANNOTATION] === value ? sets : undefined;
      },
      { timeoutMs: 30_000, description: 'the MachineSet to carry the copied annotation' },
    );
    expect((await getObject(kc, MACHINE_DEPLOYMENTS, ns, md)).spec?.['template']).toMatchObject({ spec: { taints: [{ key: 'nvidia.com/gpu' }, { key: 'example.com/warming' }] } });

    // The OnInitialization taint the autoscaler counts anyway: a Warning Event on the MachineDeployment, and status.
    const core = kc.makeApiClient(CoreV1Api);
    const warned = await waitFor(
      async () => {
        const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.kind=MachineDeployment,involvedObject.name=${md}` });
        return list.items.find((e) => e.reason === 'AutoscalerCountsStartupTaints');
      },
      { timeoutMs: 30_000, description: `AutoscalerCountsStartupTaints Event on MachineDeployment ${md}` },
    );
    expect(warned.type).toBe('Warning');
    expect(warned.message).toContain('--startup-taint=example.com/warming');
    const row = (await readAutoscalerStatuses({ kubeConfig: kc, namespace: ns })).find((r) => r.name === md);
    expect(row).toMatchObject({ state: 'in-sync', matches: true, countedStartupTaints: [{ key: 'example.com/warming', effect: 'PreferNoSchedule' }] });

    // An edit of spec.template.spec.taints (a new MachineSet at 0 replicas) reaches the annotation.
    const taints = [{ key: 'nvidia.com/gpu', value: 'h100', effect: 'NoSchedule', propagation: 'Always' }];
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body: { spec: { template: { spec: { taints } } } } }, MERGE_PATCH);
    await waitForValue(MACHINE_DEPLOYMENTS, md, 'edge:NoSchedule,nvidia.com/gpu=h100:NoSchedule');

    // No write war: once Cluster API's status is at the current generation, neither side writes the
    // MachineDeployment; a marker after the window proves the pipeline was handling changes.
    await waitFor(
      async () => {
        const o = await getObject(kc, MACHINE_DEPLOYMENTS, ns, md);
        return o.status?.['observedGeneration'] === (o.metadata as { generation?: number }).generation && o.status?.['availableReplicas'] !== undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, description: 'Cluster API status of the MachineDeployment at its current generation' },
    );
    const rv = async () => ((await getObject(kc, MACHINE_DEPLOYMENTS, ns, md)).metadata as { resourceVersion?: string }).resourceVersion;
    const before = { rv: await rv(), writes: writes() };
    await new Promise((r) => setTimeout(r, Math.min(QUIET_MS, 5_000)));
    await marker();
    expect(await rv()).toBe(before.rv);
    expect(writes() - before.writes).toBe(1); // the marker's
    expect(ms?.metadata.annotations?.[AUTOSCALER_OWNED_ANNOTATION]).toBe(value);
  });

  it('spec.template.spec.taints next to a user-written value: left alone and reported', async () => {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 0, taints: [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule', propagation: 'Always' }] });
    await patchMeta(MACHINE_DEPLOYMENTS, md, { ...NODE_GROUP, [AUTOSCALER_TAINTS_ANNOTATION]: 'nvidia.com/gpu=by-hand:NoSchedule' });
    const core = kc.makeApiClient(CoreV1Api);
    await waitFor(
      async () => {
        const list = await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.kind=MachineDeployment,involvedObject.name=${md}` });
        return list.items.find((e) => e.reason === 'AutoscalerTaintsNotManaged');
      },
      { timeoutMs: 30_000, description: `AutoscalerTaintsNotManaged Event on MachineDeployment ${md}` },
    );
    await marker();
    const obj = await getObject(kc, MACHINE_DEPLOYMENTS, ns, md);
    expect(obj.metadata.annotations?.[AUTOSCALER_TAINTS_ANNOTATION]).toBe('nvidia.com/gpu=by-hand:NoSchedule');
    expect(obj.metadata.annotations?.[AUTOSCALER_OWNED_ANNOTATION]).toBeUndefined();
    const managers = ((obj.metadata as { managedFields?: { manager?: string }[] }).managedFields ?? []).map((m) => m.manager);
    expect(managers).not.toContain(FIELD_MANAGER);
    const row = (await readAutoscalerStatuses({ kubeConfig: kc, namespace: ns })).find((r) => r.name === md);
    expect(row).toMatchObject({ state: 'foreign', matches: false, desired: 'nvidia.com/gpu=present:NoSchedule' });
  });

  it('the creation window: a group created opted in gets its value within seconds; created at max size 0, or with value and record, it has none', async () => {
    // Measured from just before the create request to the first read that shows the value (polled every 20 ms).
    const windows: number[] = [];
    const conflictsBefore = pipeline.counters().conflicts;
    for (let i = 0; i < 5; i++) {
      const started = Date.now();
      const md = await createMachineDeployment(kc, ns, { cluster, replicas: 0, metadataAnnotations: NODE_GROUP, annotations: { [MACHINE]: `window${i}:NoSchedule` } });
      await waitFor(async () => (await annotations(MACHINE_DEPLOYMENTS, md))[AUTOSCALER_TAINTS_ANNOTATION] === `window${i}:NoSchedule`, {
        timeoutMs: 30_000,
        intervalMs: 20,
        description: `MachineDeployment ${md}: the product's first write`,
      });
      windows.push(Date.now() - started);
    }
    process.stderr.write(`[autoscaler] creation window (create request to the annotation, 5 groups created opted in): ${windows.join(', ')} ms; 409 conflicts meanwhile: ${pipeline.counters().conflicts - conflictsBefore}\n`);
    expect(Math.max(...windows)).toBeLessThan(10_000);

    // Created with max size 0 (the autoscaler skips such a group: newNodeGroupFromScalableResource), which opts it in
    // for the product: the value is there before the max size is raised and the autoscaler first sees the group.
    const closed = await createMachineDeployment(kc, ns, { cluster, replicas: 0, metadataAnnotations: { [AUTOSCALER_MAX_SIZE_ANNOTATION]: '0' }, annotations: { [MACHINE]: 'closed:NoSchedule' } });
    await waitForValue(MACHINE_DEPLOYMENTS, closed, 'closed:NoSchedule');
    const writesAtRaise = writes();
    await patchMeta(MACHINE_DEPLOYMENTS, closed, NODE_GROUP);
    await marker();
    expect(writes() - writesAtRaise).toBe(1); // the marker's: raising the max size needs no write
    expect((await annotations(MACHINE_DEPLOYMENTS, closed))[AUTOSCALER_TAINTS_ANNOTATION]).toBe('closed:NoSchedule');

    // Created with the value and the product's record (what the product would write): the autoscaler never sees the
    // group without its taints, and the product owns the value from the start (it writes nothing while it is right).
    const writesBefore = writes();
    const md = await createMachineDeployment(kc, ns, {
      cluster,
      replicas: 0,
      metadataAnnotations: { ...NODE_GROUP, [AUTOSCALER_TAINTS_ANNOTATION]: 'ready:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'ready:NoSchedule' },
      annotations: { [MACHINE]: 'ready:NoSchedule' },
    });
    await marker();
    expect(writes() - writesBefore).toBe(1); // the marker's
    const row = (await readAutoscalerStatuses({ kubeConfig: kc, namespace: ns })).find((r) => r.name === md);
    expect(row).toMatchObject({ state: 'in-sync', matches: true });
    // And it is the product's: a declaration change is followed.
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      { ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body: { spec: { template: { metadata: { annotations: { [MACHINE]: 'ready=2:NoSchedule' } } } } } },
      MERGE_PATCH,
    );
    await waitForValue(MACHINE_DEPLOYMENTS, md, 'ready=2:NoSchedule');
  });

  it('a paused group (cluster.x-k8s.io/paused) gets no write and no Event: outcome paused', async () => {
    const pausedBefore = pipeline.counters().reconciles[ReconcileOutcome.paused];
    const md = await createMachineDeployment(kc, ns, {
      cluster,
      replicas: 0,
      metadataAnnotations: { ...NODE_GROUP, 'cluster.x-k8s.io/paused': '' },
      annotations: { [MACHINE]: 'paused:NoSchedule, warming:NoSchedule@OnInitialization' },
    });
    await waitFor(async () => pipeline.counters().reconciles[ReconcileOutcome.paused] > pausedBefore, { timeoutMs: 30_000, description: `a paused outcome for MachineDeployment ${md}` });
    await marker();
    const obj = await getObject(kc, MACHINE_DEPLOYMENTS, ns, md);
    expect(obj.metadata.annotations?.[AUTOSCALER_TAINTS_ANNOTATION]).toBeUndefined();
    const managers = ((obj.metadata as { managedFields?: { manager?: string }[] }).managedFields ?? []).map((m) => m.manager);
    expect(managers).not.toContain(FIELD_MANAGER);
    const list = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.kind=MachineDeployment,involvedObject.name=${md}` });
    expect(list.items.filter((e) => e.reason?.startsWith('Autoscaler'))).toEqual([]);
  });

  it("a MachinePool's declaration reaches its annotation (upstream refuses its spec.taints), and an edit follows", async () => {
    const pool = await createMachinePool(kc, ns, { cluster, replicas: 0, annotations: { [MACHINE]: 'pool=a:NoSchedule' } });
    await patchMeta(MACHINE_POOLS, pool, NODE_GROUP);
    await waitForValue(MACHINE_POOLS, pool, 'pool=a:NoSchedule');
    await patchMeta(MACHINE_POOLS, pool, { [CLUSTER]: 'pool=b:NoSchedule, spot:PreferNoSchedule' });
    await waitForValue(MACHINE_POOLS, pool, 'pool=a:NoSchedule,spot:PreferNoSchedule'); // the template's machine key ranks above
    // Opting out removes what the product wrote.
    await patchMeta(MACHINE_POOLS, pool, { [AUTOSCALER_MAX_SIZE_ANNOTATION]: null });
    await waitForValue(MACHINE_POOLS, pool, undefined);
  });

  it('ClusterClass and Cluster topology annotation changes reach the topology MachineDeployment', async () => {
    const examples = join(import.meta.dirname, '..', '..', 'local', 'examples');
    const docs = ['clusterclass.yaml', 'cluster-topology.yaml'].flatMap((f) => loadAllYaml(readFileSync(join(examples, f), 'utf8')) as KubernetesObject[]);
    const api = KubernetesObjectApi.makeApiClient(kc);
    for (const doc of docs) {
      if (!doc || doc.kind === 'Namespace') continue;
      doc.metadata = { ...doc.metadata, namespace: ns };
      if (doc.kind === 'Cluster') {
        const md = (doc as unknown as { spec: { topology: { workers: { machineDeployments: { replicas?: number; metadata: { annotations: Record<string, string> } }[] } } } }).spec.topology.workers.machineDeployments[0];
        if (md) {
          // Cluster API refuses replicas next to the autoscaler's size annotations; unset, they default to the min (0).
          delete md.replicas;
          md.metadata.annotations = { ...md.metadata.annotations, ...NODE_GROUP };
        }
      }
      await api.create(doc);
    }
    const md = await waitFor(
      async () => (await listObjects(kc, MACHINE_DEPLOYMENTS, ns, 'cluster.x-k8s.io/cluster-name=topology'))[0],
      { timeoutMs: 90_000, intervalMs: 250, description: 'the topology MachineDeployment' },
    );
    const name = md.metadata.name;
    await waitForValue(MACHINE_DEPLOYMENTS, name, 'nvidia.com/gpu=a100:NoSchedule');

    // The class changes: a new taint reaches the MachineDeployment's template, then the annotation.
    const cc = await getObject(kc, CLUSTER_CLASSES, ns, 'local');
    const workers = structuredClone(cc.spec?.['workers']) as { machineDeployments: { metadata: { annotations: Record<string, string> } }[] };
    const classMd = workers.machineDeployments[0];
    if (classMd) classMd.metadata.annotations[CLASS] = 'nvidia.com/gpu=present:NoSchedule, example.com/spot:PreferNoSchedule, edge:NoExecute';
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...CLUSTER_CLASSES, namespace: ns, name: 'local', body: { spec: { workers } } }, MERGE_PATCH);
    await waitForValue(MACHINE_DEPLOYMENTS, name, 'edge:NoExecute,nvidia.com/gpu=a100:NoSchedule', 60_000);

    // The cluster changes: its value for nvidia.com/gpu.
    const c = await getObject(kc, CLUSTERS, ns, 'topology');
    const topology = structuredClone(c.spec?.['topology']) as { workers: { machineDeployments: { metadata: { annotations: Record<string, string> } }[] } };
    const clusterMd = topology.workers.machineDeployments[0];
    if (clusterMd) clusterMd.metadata.annotations[CLUSTER] = 'nvidia.com/gpu=h100:NoSchedule, example.com/spot:PreferNoSchedule-';
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...CLUSTERS, namespace: ns, name: 'topology', body: { spec: { topology } } }, MERGE_PATCH);
    await waitForValue(MACHINE_DEPLOYMENTS, name, 'edge:NoExecute,nvidia.com/gpu=h100:NoSchedule', 60_000);
    const row = (await readAutoscalerStatuses({ kubeConfig: kc, namespace: ns })).find((r) => r.name === name);
    expect(row).toMatchObject({ state: 'in-sync', matches: true });
    expect(pipeline.counters().deadLettered).toBe(0);
  });
});
