/**
 * No work for changes the product cannot act on, next to the real Cluster API manager (gate MachineTaintPropagation
 * on), with the product's pipeline as `npm start` runs it: a MachineDeployment "capi" declares its taint in
 * `spec.template.spec.taints` (Cluster API propagates it), a MachineDeployment "product" declares its own through the
 * product's annotation. A change of the "capi" taint's value reaches every "capi" Machine and Node (Cluster API's
 * writes) and costs the product 0 messages and 0 reconciles: the forwarder saw each of those Machine and Node changes
 * and filtered it (its counters say so: the positive signal that they arrived), and the marker edit made afterwards on
 * the "product" side is then the only reconcile (exactly 1).
 *
 * A declaration edited on a MachineDeployment reaches the product only through Cluster API's copies onto the Machines
 * (the Machine is the source of truth): one reconcile per Node, none for the MachineDeployment's and MachineSet's own
 * changes. A Node that joins after its machine was provisioned gets the product's taint next to Cluster API's link, and
 * the join leaves nothing behind: an edit afterwards is the only reconcile. No object is paused here: a paused object's
 * Node is left alone (test/e2e-capi/pause.test.ts).
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import type { Pipeline } from '#local/pipeline.ts';
import type { PipelineCounters } from '#local/pipeline-report.ts';
import { OWN_TRACKING_ANNOTATION, STARTUP_GATE_TAINT_KEY, TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { createNamespace, MERGE_PATCH, waitFor } from '#test/support/control-plane.ts';
import {
  MACHINES,
  MACHINE_DEPLOYMENTS,
  listObjects,
  getObject,
  capiKubeConfig,
  createMachineDeployment,
  createSelfHostedCluster,
  describeWithCapi,
  startProductPipeline,
  taintText,
  waitForMachineNodes,
  drained,
} from '#test/support/capi.ts';

const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const DECLARE = 'taints.capi-taint-propagator.dev/machine';
/** Machines on the "capi" side: enough to see a per-Machine cost, few enough for CI. */
const CAPI_REPLICAS = 3;

const reconcileTotal = (c: PipelineCounters): number => Object.values(c.reconciles).reduce((a, b) => a + b, 0);
const taintsOf = (n: V1Node): string[] => (n.spec?.taints ?? []).map(taintText).sort();

describeWithCapi('Next to Cluster API: no work for changes the product cannot act on', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: string;
  let cluster: string;
  let pipeline: Pipeline | undefined;

  beforeAll(async () => {
    kc = capiKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    ns = await createNamespace(kc, 'foreign');
    cluster = await createSelfHostedCluster(kc, ns);
    pipeline = await startProductPipeline(kc, ns);
  });
  afterAll(async () => {
    await pipeline?.stop();
  });

  async function nodesOf(names: readonly string[]): Promise<V1Node[]> {
    return Promise.all(names.map((name) => core.readNode({ name })));
  }


  it("a change of Cluster API's own spec.taints value on initialized Nodes costs 0 reconciles; a later product edit costs exactly 1", async () => {
    const p = pipeline as Pipeline;
    // Prepare: both sides converged (Cluster API's taint, the product's taint, the gate lifted everywhere)
    const capiMd = await createMachineDeployment(kc, ns, { cluster, replicas: CAPI_REPLICAS, startupTaints: [GATE], taints: [{ key: 'capi-owned', value: 'v1', effect: 'NoSchedule' }] });
    const productMd = await createMachineDeployment(kc, ns, { cluster, replicas: 1, startupTaints: [GATE], annotations: { [DECLARE]: 'product-owned=v1:NoSchedule' } });
    const capiNodes = (await waitForMachineNodes(kc, ns, capiMd, CAPI_REPLICAS)).map((p) => p.node.metadata?.name as string);
    const [productNode] = (await waitForMachineNodes(kc, ns, productMd, 1)).map((p) => p.node.metadata?.name as string);
    await waitFor(async () => (await nodesOf(capiNodes)).every((n) => taintsOf(n).join() === 'capi-owned=v1:NoSchedule' && n.metadata?.annotations?.[OWN_TRACKING_ANNOTATION] === ''), {
      timeoutMs: 30_000, intervalMs: 200, description: "Cluster API's taint on its Nodes, the gate lifted, the product's empty annotation",
    });
    await waitFor(async () => taintsOf(await core.readNode({ name: productNode as string })).join() === 'product-owned=v1:NoSchedule', {
      timeoutMs: 30_000, intervalMs: 200, description: "the product's taint on its Node",
    });
    const before = await drained(p);

    // Act: Cluster API's taint changes value (it reaches Machines and Nodes in place) …
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      { ...MACHINE_DEPLOYMENTS, namespace: ns, name: capiMd, body: { spec: { template: { spec: { taints: [{ key: 'capi-owned', value: 'v2', effect: 'NoSchedule', propagation: 'Always' }] } } } } },
      MERGE_PATCH,
    );
    await waitFor(async () => (await nodesOf(capiNodes)).every((n) => taintsOf(n).join() === 'capi-owned=v2:NoSchedule' && n.metadata?.annotations?.[TRACKING_ANNOTATION] === 'capi-owned:NoSchedule'), {
      timeoutMs: 30_000, intervalMs: 200, description: "Cluster API's new value on every one of its Nodes",
    });
    // … and the forwarder saw every one of those Machine and Node changes (the positive signal) and sent nothing for them.
    const seen = await waitFor(
      () => {
        const c = p.counters();
        return c.foreignDeclarationChangesFiltered - before.foreignDeclarationChangesFiltered >= CAPI_REPLICAS && c.foreignTaintChangesFiltered - before.foreignTaintChangesFiltered >= CAPI_REPLICAS ? c : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100, description: 'the forwarder to see and filter each Machine and Node change of the capi side' },
    );
    // Then the marker: an edit of the product's own declaration, which the product must act on.
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      { ...MACHINE_DEPLOYMENTS, namespace: ns, name: productMd, body: { spec: { template: { metadata: { annotations: { [DECLARE]: 'product-owned=v2:NoSchedule' } } } } } },
      MERGE_PATCH,
    );
    await waitFor(async () => taintsOf(await core.readNode({ name: productNode as string })).join() === 'product-owned=v2:NoSchedule', {
      timeoutMs: 30_000, intervalMs: 200, description: 'the marker applied by the product',
    });
    const after = await waitFor(
      async () => {
        const c = await drained(p);
        return c.reconciles.patched > before.reconciles.patched ? c : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, description: "the marker's reconcile counted" },
    );

    // Assess: the marker's reconcile is the only one since convergence, and it wrote once
    expect(reconcileTotal(after) - reconcileTotal(before)).toBe(1);
    expect(after.reconciles.patched - before.reconciles.patched).toBe(1);
    expect(after.eventsForwarded - seen.eventsForwarded).toBe(1);
    expect(seen.eventsForwarded).toBe(before.eventsForwarded);
    expect(after.foreignDeclarationChangesFiltered - before.foreignDeclarationChangesFiltered).toBe(CAPI_REPLICAS);
  }, 180_000);

  it('a new declaration on a MachineDeployment costs one reconcile per Node (its Machine copy) and none for the MachineDeployment and MachineSet changes; a later Machine edit costs exactly 1', async () => {
    const p = pipeline as Pipeline;
    const custom = kc.makeApiClient(CustomObjectsApi);
    // Prepare: a MachineDeployment declaring v1 through the product's annotation, converged.
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: CAPI_REPLICAS, startupTaints: [GATE], annotations: { [DECLARE]: 'copied=v1:NoSchedule' } });
    const pairs = await waitForMachineNodes(kc, ns, md, CAPI_REPLICAS);
    const nodeNames = pairs.map((x) => x.node.metadata?.name as string);
    const machineNames = pairs.map((x) => x.machine.metadata.name);
    await waitFor(async () => (await nodesOf(nodeNames)).every((n) => taintsOf(n).join() === 'copied=v1:NoSchedule'), { timeoutMs: 30_000, intervalMs: 200, description: 'v1 on every Node' });
    const before = await drained(p);

    // Act: v2 in the MachineDeployment's template; Cluster API copies it to the MachineSet, then onto each Machine.
    await custom.patchNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body: { spec: { template: { metadata: { annotations: { [DECLARE]: 'copied=v2:NoSchedule' } } } } } }, MERGE_PATCH);
    await waitFor(async () => (await Promise.all(machineNames.map((name) => getObject(kc, MACHINES, ns, name)))).every((m) => m.metadata.annotations?.[DECLARE] === 'copied=v2:NoSchedule'), {
      timeoutMs: 60_000, intervalMs: 200, description: "Cluster API's copy of v2 onto every Machine",
    });
    await waitFor(async () => (await nodesOf(nodeNames)).every((n) => taintsOf(n).join() === 'copied=v2:NoSchedule'), { timeoutMs: 30_000, intervalMs: 200, description: 'v2 on every Node' });
    const applied = await waitFor(
      async () => {
        const c = await drained(p);
        return c.reconciles.patched - before.reconciles.patched >= CAPI_REPLICAS ? c : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, description: "the copies' reconciles counted" },
    );
    // Then the marker: a declaration of one Machine alone.
    await custom.patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name: machineNames[0] as string, body: { metadata: { annotations: { 'taints.capi-taint-propagator.dev/class': 'marker=x:NoSchedule' } } } }, MERGE_PATCH);
    await waitFor(async () => taintsOf(await core.readNode({ name: nodeNames[0] as string })).includes('marker=x:NoSchedule'), { timeoutMs: 30_000, intervalMs: 200, description: 'the marker on its Node' });
    const after = await waitFor(
      async () => {
        const c = await drained(p);
        return c.reconciles.patched > applied.reconciles.patched ? c : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, description: "the marker's reconcile counted" },
    );

    // Assess: one reconcile (and one write) per Node for the Machines' copies, none for the MachineDeployment's and
    // MachineSet's template changes, exactly one for the marker.
    expect(reconcileTotal(applied) - reconcileTotal(before)).toBe(CAPI_REPLICAS);
    expect(applied.reconciles.patched - before.reconciles.patched).toBe(CAPI_REPLICAS);
    expect(applied.eventsForwarded - before.eventsForwarded).toBe(CAPI_REPLICAS);
    expect(reconcileTotal(after) - reconcileTotal(applied)).toBe(1);
  }, 180_000);

  it("taints a joining Node that boots after its machine is provisioned, next to Cluster API's link, and the join leaves nothing to do: a later edit costs exactly 1", async () => {
    const p = pipeline as Pipeline;
    const custom = kc.makeApiClient(CustomObjectsApi);
    // Prepare: one Machine whose Node boots 5 s after the machine is provisioned (a cloud's order: the provider ID is
    // known before the Node exists).
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 1, startupTaints: [GATE], bootSeconds: 5, annotations: { [DECLARE]: 'joined=v1:NoSchedule' } });
    const machine = await waitFor(
      async () => (await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/deployment-name=${md}`)).find((m) => typeof m.spec?.['providerID'] === 'string'),
      { timeoutMs: 60_000, intervalMs: 100, description: 'Cluster API to copy the provider ID to the Machine' },
    );
    const name = machine.metadata.name;

    // Act: the Node boots and registers with the startup gate; Cluster API links it (its nodeRef) and the product taints it.
    const node = await waitFor(
      async () => {
        const n = await core.readNode({ name }).catch(() => undefined);
        return n && taintsOf(n).join() === 'joined=v1:NoSchedule' ? n : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200, description: "the product's taint on the joining Node, its gate lifted" },
    );
    const linked = await waitFor(async () => (await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/deployment-name=${md}`)).find((m) => m.metadata.name === name && m.status?.['nodeRef']), {
      timeoutMs: 60_000, intervalMs: 200, description: "Cluster API's nodeRef",
    });

    // Assess: the Node is the Machine's (the same provider ID, Cluster API's link) and carries the product's taint.
    expect(node.spec?.providerID).toBe(machine.spec?.['providerID']);
    expect((linked.status?.['nodeRef'] as { name?: string }).name).toBe(name);
    expect(node.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBe('joined:NoSchedule');
    await waitFor(async () => (await core.readNode({ name })).metadata?.annotations?.['cluster.x-k8s.io/machine'] === name, { timeoutMs: 30_000, intervalMs: 200, description: "Cluster API's Machine annotation on the Node" });
    expect(taintsOf(await core.readNode({ name }))).toEqual(['joined=v1:NoSchedule']);

    // Then, once settled, an edit of the declaration is the only reconcile: the join left no write war behind.
    const before = await drained(p);
    await custom.patchNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body: { spec: { template: { metadata: { annotations: { [DECLARE]: 'joined=v2:NoSchedule' } } } } } }, MERGE_PATCH);
    await waitFor(async () => taintsOf(await core.readNode({ name })).join() === 'joined=v2:NoSchedule', { timeoutMs: 60_000, intervalMs: 200, description: 'the edit applied by the product' });
    const afterEdit = await waitFor(
      async () => {
        const c = await drained(p);
        return c.reconciles.patched > before.reconciles.patched ? c : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, description: "the edit's reconcile counted" },
    );
    expect(reconcileTotal(afterEdit) - reconcileTotal(before)).toBe(1);
    expect(afterEdit.eventsForwarded - before.eventsForwarded).toBe(1);
  }, 180_000);
});
