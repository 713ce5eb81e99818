/**
 * Cluster API's pause, next to the real Cluster API manager (gate MachineTaintPropagation on) with the product's
 * pipeline as `npm start` runs it. A paused object is left alone (product.md, "Next to upstream Cluster API"): its
 * Node gets no write from the product while the pause lasts, and converges once it ends.
 *
 * Each case pairs the paused object with an unpaused one next to it that gets the same change; that one converging is
 * the positive marker that the product saw and handled the change (never a sleep). The change on the paused side was
 * made first, on the same watch stream, so once the marker has landed and the queue is empty the product has decided
 * about it too.
 *
 * - A paused Cluster (`spec.paused: true`): Cluster API stops copying template annotations, so the change is a hand
 *   edit on the Node (a product-owned taint removed), which the product puts back only on the unpaused Cluster's Node.
 * - A paused Machine (`cluster.x-k8s.io/paused` on one Machine of a MachineDeployment): Cluster API still copies the
 *   MachineDeployment's new declaration onto it, but only its sibling's Node gets the new taint.
 * - A paused MachineDeployment (the annotation on the MachineDeployment): Cluster API stops propagating its template,
 *   so the new declaration reaches none of its Nodes, while the unpaused MachineDeployment's Node gets it.
 * `npm run status` reports the paused Cluster's and the paused Machine's Nodes `paused`, naming whose pause it is.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import { readTaintStatuses, type ReadTaintStatus } from '#local/cluster-status.ts';
import type { Pipeline } from '#local/pipeline.ts';
import type { PipelineCounters } from '#local/pipeline-report.ts';
import { PAUSED_ANNOTATION } from '#shared/domain/pause.ts';
import { STARTUP_GATE_TAINT_KEY } from '#shared/domain/taint.ts';
import { createNamespace, MERGE_PATCH, statusOf as httpStatusOf, waitFor } from '#test/support/control-plane.ts';
import {
  CLUSTERS,
  MACHINES,
  MACHINE_DEPLOYMENTS,
  capiKubeConfig,
  createMachineDeployment,
  createSelfHostedCluster,
  describeWithCapi,
  getObject,
  startProductPipeline,
  taintText,
  waitForMachineNodes,
  drained,
} from '#test/support/capi.ts';

const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const DECLARE = 'taints.capi-taint-propagator.dev/machine';
const taintsOf = (n: V1Node): string[] => (n.spec?.taints ?? []).map(taintText).sort();

describeWithCapi("Next to Cluster API: a paused object's Node is left alone until the pause ends", () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;
  let ns: string;
  /** A Cluster that case (a) pauses. */
  let pausable: string;
  /** A Cluster never paused: the markers' Machines live here. */
  let live: string;
  let pipeline: Pipeline | undefined;

  beforeAll(async () => {
    kc = capiKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
    ns = await createNamespace(kc, 'pause');
    pausable = await createSelfHostedCluster(kc, ns);
    live = await createSelfHostedCluster(kc, ns);
    pipeline = await startProductPipeline(kc, ns);
  });
  afterAll(async () => {
    await pipeline?.stop();
  });

  const nodeTaints = async (name: string): Promise<string[]> => taintsOf(await core.readNode({ name }));

  async function waitForTaints(name: string, want: readonly string[], what: string): Promise<void> {
    let have: string[] = [];
    try {
      await waitFor(async () => JSON.stringify((have = await nodeTaints(name))) === JSON.stringify([...want].sort()), { timeoutMs: 60_000, intervalMs: 200, description: `Node ${name} ${what}` });
    } catch (e) {
      throw new Error(`${(e as Error).message}: want ${JSON.stringify([...want].sort())}, have ${JSON.stringify(have)}`, { cause: e });
    }
  }

  /** A MachineDeployment of `replicas` declaring `declaration`, converged; returns its name and its Machines' and Nodes' names. */
  async function convergedDeployment(cluster: string, replicas: number, declaration: string): Promise<{ md: string; machines: string[]; nodes: string[] }> {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas, startupTaints: [GATE], annotations: { [DECLARE]: declaration } });
    const pairs = await waitForMachineNodes(kc, ns, md, replicas);
    const nodes = pairs.map((p) => p.node.metadata?.name as string);
    for (const node of nodes) await waitForTaints(node, [declaration], 'to carry the declaration, its gate lifted');
    return { md, machines: pairs.map((p) => p.machine.metadata.name), nodes };
  }

  /** Removes the taint with this key from the Node, as a user with kubectl edit would (on the version read). */
  async function removeTaintByHand(name: string, key: string): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const node = await core.readNode({ name });
      const taints = (node.spec?.taints ?? []).filter((t) => t.key !== key);
      try {
        await core.patchNode({ name, body: { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints } } }, MERGE_PATCH);
        return;
      } catch (e) {
        if (httpStatusOf(e) !== 409 || attempt >= 5) throw e;
      }
    }
  }

  const setTemplateDeclaration = (md: string, declaration: string): Promise<unknown> =>
    custom.patchNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body: { spec: { template: { metadata: { annotations: { [DECLARE]: declaration } } } } } }, MERGE_PATCH);
  const setPausedAnnotation = (api: typeof MACHINES | typeof MACHINE_DEPLOYMENTS, name: string, paused: boolean): Promise<unknown> =>
    custom.patchNamespacedCustomObject({ ...api, namespace: ns, name, body: { metadata: { annotations: { [PAUSED_ANNOTATION]: paused ? '' : null } } } }, MERGE_PATCH);

  /** What `npm run status` says about the Node's pair. */
  async function statusOf(node: string): Promise<ReadTaintStatus | undefined> {
    return (await readTaintStatuses({ kubeConfig: kc, mode: 'self', machineNamespace: ns, startupTaint: GATE })).find((s) => s.node === node);
  }


  it('a paused Cluster: a product-owned taint removed by hand is not put back (it is on an unpaused Cluster next to it) until the Cluster is unpaused', async () => {
    // Prepare: one converged Node in each Cluster, then the first Cluster paused.
    const paused = await convergedDeployment(pausable, 1, 'hand=v1:NoSchedule');
    const marker = await convergedDeployment(live, 1, 'hand=v1:NoSchedule');
    const [pausedNode, markerNode] = [paused.nodes[0] as string, marker.nodes[0] as string];
    await custom.patchNamespacedCustomObject({ ...CLUSTERS, namespace: ns, name: pausable, body: { spec: { paused: true } } }, MERGE_PATCH);
    await waitFor(async () => (await getObject(kc, CLUSTERS, ns, pausable)).spec?.['paused'] === true, { timeoutMs: 10_000, description: `Cluster ${pausable} paused` });

    // Act: the same hand edit on both Nodes, the paused Cluster's first.
    await removeTaintByHand(pausedNode, 'hand');
    await removeTaintByHand(markerNode, 'hand');

    // Assess: the marker is put back (the product acted on the edits), the paused Cluster's Node keeps the edit.
    await waitForTaints(markerNode, ['hand=v1:NoSchedule'], 'to get its taint back (Cluster not paused)');
    const settled = await drained(pipeline as Pipeline);
    expect(await statusOf(pausedNode)).toMatchObject({ state: 'paused', pausedBy: 'Cluster' });
    expect(await nodeTaints(pausedNode), `the product wrote Node ${pausedNode} of paused Cluster ${pausable}`).toEqual([]);
    expect(settled.deadLettered).toBe(0);

    // Act: the Cluster unpaused. Assess: its Node converges.
    await custom.patchNamespacedCustomObject({ ...CLUSTERS, namespace: ns, name: pausable, body: { spec: { paused: false } } }, MERGE_PATCH);
    await waitForTaints(pausedNode, ['hand=v1:NoSchedule'], 'to get its taint back once its Cluster is unpaused');
  });

  it('a paused Machine: the new declaration Cluster API copies onto it does not reach its Node (it reaches its sibling’s) until the Machine is unpaused', async () => {
    // Prepare: two converged Machines of one MachineDeployment; the first one paused.
    const { md, machines, nodes } = await convergedDeployment(live, 2, 'mach=v1:NoSchedule');
    const [pausedMachine, siblingMachine] = machines as [string, string];
    const [pausedNode, siblingNode] = nodes as [string, string];
    await setPausedAnnotation(MACHINES, pausedMachine, true);

    // Act: a new declaration on the MachineDeployment, which Cluster API copies onto both Machines.
    await setTemplateDeclaration(md, 'mach=v2:NoSchedule');
    await waitFor(
      async () => (await Promise.all(machines.map((m) => getObject(kc, MACHINES, ns, m)))).every((m) => m.metadata.annotations?.[DECLARE] === 'mach=v2:NoSchedule'),
      { timeoutMs: 60_000, intervalMs: 200, description: "Cluster API's copy of v2 onto both Machines, the paused one included" },
    );
    // The marker: the sibling's Node gets v2, then a declaration of the sibling alone, made after both copies.
    await waitForTaints(siblingNode, ['mach=v2:NoSchedule'], 'to carry v2 (Machine not paused)');
    await custom.patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name: siblingMachine, body: { metadata: { annotations: { 'taints.capi-taint-propagator.dev/class': 'marker=x:NoSchedule' } } } }, MERGE_PATCH);
    await waitForTaints(siblingNode, ['mach=v2:NoSchedule', 'marker=x:NoSchedule'], 'to carry the marker');
    const settled = await drained(pipeline as Pipeline);

    // Assess: the paused Machine's Node still carries v1, and the status says why.
    expect(await statusOf(pausedNode)).toMatchObject({ state: 'paused', pausedBy: 'Machine' });
    expect(await nodeTaints(pausedNode), `the product wrote Node ${pausedNode} of paused Machine ${pausedMachine}`).toEqual(['mach=v1:NoSchedule']);
    expect(settled.deadLettered).toBe(0);

    // Act: the Machine unpaused. Assess: its Node converges.
    await setPausedAnnotation(MACHINES, pausedMachine, false);
    await waitForTaints(pausedNode, ['mach=v2:NoSchedule'], 'to carry v2 once its Machine is unpaused');
  });

  it('a paused MachineDeployment: its new declaration reaches none of its Nodes (an unpaused one’s does) until it is unpaused', async () => {
    // Prepare: two converged MachineDeployments; the first one paused.
    const paused = await convergedDeployment(live, 2, 'md=v1:NoSchedule');
    const marker = await convergedDeployment(live, 1, 'md=v1:NoSchedule');
    await setPausedAnnotation(MACHINE_DEPLOYMENTS, paused.md, true);

    // Act: the same new declaration on both, the paused one first.
    await setTemplateDeclaration(paused.md, 'md=v2:NoSchedule');
    await setTemplateDeclaration(marker.md, 'md=v2:NoSchedule');

    // Assess: the marker converges; the paused MachineDeployment's Machines and Nodes keep v1.
    await waitForTaints(marker.nodes[0] as string, ['md=v2:NoSchedule'], 'to carry v2 (MachineDeployment not paused)');
    const settled = await drained(pipeline as Pipeline);
    for (const name of paused.machines) expect((await getObject(kc, MACHINES, ns, name)).metadata.annotations?.[DECLARE], `Cluster API copied onto Machine ${name} of a paused MachineDeployment`).toBe('md=v1:NoSchedule');
    for (const name of paused.nodes) expect(await nodeTaints(name), `the product wrote Node ${name} of paused MachineDeployment ${paused.md}`).toEqual(['md=v1:NoSchedule']);
    expect(settled.deadLettered).toBe(0);

    // Act: unpaused. Assess: Cluster API propagates the template and every Node converges.
    await setPausedAnnotation(MACHINE_DEPLOYMENTS, paused.md, false);
    for (const name of paused.nodes) await waitForTaints(name, ['md=v2:NoSchedule'], 'to carry v2 once its MachineDeployment is unpaused');
  });
});
