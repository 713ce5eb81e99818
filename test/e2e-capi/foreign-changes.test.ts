/**
 * No work for changes the product cannot act on, next to the real Cluster API manager (gate MachineTaintPropagation
 * on), with the product's pipeline as `npm start` runs it: a MachineDeployment "capi" declares its taint in
 * `spec.template.spec.taints` (Cluster API propagates it), a MachineDeployment "product" declares its own through the
 * product's annotation. A change of the "capi" taint's value reaches every "capi" Machine and Node (Cluster API's
 * writes) and costs the product 0 messages and 0 reconciles: the forwarder saw each of those Machine and Node changes
 * and filtered it (its counters say so: the positive signal that they arrived), and the marker edit made afterwards on
 * the "product" side is then the only reconcile (exactly 1).
 *
 * A paused Machine (`cluster.x-k8s.io/paused`, Cluster API's pause) is left alone: its joining Node gets no product
 * write while it is paused, and its taints once it is unpaused.
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
  capiKubeConfig,
  createMachineDeployment,
  createSelfHostedCluster,
  describeWithCapi,
  startProductPipeline,
  taintText,
  waitForMachineNodes,
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

  async function drained(p: Pipeline): Promise<PipelineCounters> {
    return waitFor(
      async () => {
        const c = await p.freshCounters();
        return c.queueVisible === 0 && c.queueInFlight === 0 ? c : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, description: 'the queue to be empty' },
    );
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

  it("leaves a paused Machine's joining Node alone (Cluster API's pause), and taints it once unpaused", async () => {
    const custom = kc.makeApiClient(CustomObjectsApi);
    const p = pipeline as Pipeline;
    // Prepare: one Machine whose Node boots 15 s after the machine is provisioned (a cloud's order), paused before then.
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 1, startupTaints: [GATE], bootSeconds: 15, annotations: { [DECLARE]: 'joined=v1:NoSchedule' } });
    const machine = await waitFor(
      async () => (await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/deployment-name=${md}`)).find((m) => typeof m.spec?.['providerID'] === 'string'),
      { timeoutMs: 60_000, intervalMs: 100, description: "Cluster API to copy the provider ID to the Machine" },
    );
    const name = machine.metadata.name;
    await custom.patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name, body: { metadata: { annotations: { 'cluster.x-k8s.io/paused': '' } } } }, MERGE_PATCH);
    const exists = await core.readNode({ name }).then(() => true, () => false);
    expect(exists, 'the Node must join after the Machine is paused (its boot is 15 s)').toBe(false);
    const before = await drained(p);

    // Act: the Node boots and registers with the startup gate; the forwarder sees it and the queue drains.
    await waitFor(async () => core.readNode({ name }).catch(() => undefined), { timeoutMs: 60_000, intervalMs: 200, description: 'the Node to join' });
    const whilePaused = await waitFor(
      async () => {
        const c = await drained(p);
        return c.eventsSeen > before.eventsSeen ? c : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100, description: "the forwarder to have seen the joining Node, and the queue drained" },
    );
    const nodeWhilePaused = await core.readNode({ name });

    // Assess: no product write while the Machine is paused; once unpaused, the Node gets its taint and loses its gate.
    expect(whilePaused.reconciles.patched).toBe(before.reconciles.patched);
    expect(taintsOf(nodeWhilePaused)).not.toContain('joined=v1:NoSchedule');
    expect(nodeWhilePaused.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBeUndefined();
    await custom.patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name, body: { metadata: { annotations: { 'cluster.x-k8s.io/paused': null } } } }, MERGE_PATCH);
    await waitFor(async () => (taintsOf(await core.readNode({ name })).join() === 'joined=v1:NoSchedule' ? true : undefined), {
      timeoutMs: 60_000, intervalMs: 200, description: "the product's taint on the Node once unpaused, its gate lifted",
    });
  }, 180_000);
});
