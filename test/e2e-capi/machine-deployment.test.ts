/**
 * Cluster API in the loop: the upstream core manager (gate MachineTaintPropagation on) and the local provider turn
 * MachineDeployments into Machines and Nodes. Nothing here writes a Machine or a nodeRef.
 */
import { beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { LOCAL_CLUSTER, LOCAL_MACHINE } from '#local/infrastructure/crds.ts';
import { MACHINE_FINALIZER } from '#local/infrastructure/provider.ts';
import { createNamespace, MERGE_PATCH, statusOf, waitFor } from '#test/support/control-plane.ts';
import {
  CLUSTERS,
  MACHINE_DEPLOYMENTS,
  MACHINES,
  capiControlPlane,
  capiKubeConfig,
  createMachineDeployment,
  createSelfHostedCluster,
  describeWithCapi,
  getObject,
  listObjects,
  scaleMachineDeployment,
  taintText,
  waitForMachineNodes,
} from '#test/support/capi.ts';

const STARTUP = { key: 'example.com/booting', effect: 'NoSchedule' };
const local = (k: typeof LOCAL_MACHINE): { group: string; version: string; plural: string } => ({ group: k.group, version: k.version, plural: k.plural });

describeWithCapi('Cluster API in the loop: MachineDeployment → Machines → Nodes', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: string;
  let cluster: string;

  beforeAll(async () => {
    kc = capiKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    ns = await createNamespace(kc, 'capi');
    cluster = await createSelfHostedCluster(kc, ns);
  });

  it('runs the manager with the gates the tier asked for', () => {
    const cp = capiControlPlane();
    expect(cp.available && cp.featureGates).toEqual({ ClusterTopology: true, MachineTaintPropagation: true });
  });

  it('gives the self-hosted Cluster a labelled kubeconfig Secret that reaches this API server', async () => {
    const secret = await core.readNamespacedSecret({ namespace: ns, name: `${cluster}-kubeconfig` });
    expect(secret.type).toBe('cluster.x-k8s.io/secret');
    expect(secret.metadata?.labels?.['cluster.x-k8s.io/cluster-name']).toBe(cluster);
    const kubeconfig = Buffer.from(secret.data?.['value'] ?? '', 'base64').toString('utf8');
    const cp = capiControlPlane();
    expect(cp.available && kubeconfig).toContain(cp.available ? cp.server : '?');
    const c = await getObject(kc, CLUSTERS, ns, cluster);
    expect(c.spec?.['controlPlaneEndpoint']).toEqual({ host: '127.0.0.1', port: Number(new URL(cp.available ? cp.server : 'https://x:1').port) });
  });

  it('registers one Node per Machine, named like the Machine, as a kubelet would; Cluster API sets nodeRef', async () => {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 2, startupTaints: [STARTUP] });
    const pairs = await waitForMachineNodes(kc, ns, md, 2);
    for (const { machine, node } of pairs) {
      expect(node.metadata?.name).toBe(machine.metadata.name);
      const infra = machine.spec?.['infrastructureRef'] as { name: string };
      const localMachine = await getObject(kc, local(LOCAL_MACHINE), ns, infra.name);
      expect(localMachine.metadata.finalizers).toContain(MACHINE_FINALIZER);
      expect(node.spec?.providerID).toBe(localMachine.spec?.['providerID']);
      expect(machine.spec?.['providerID']).toBe(node.spec?.providerID);
      const conditions = Object.fromEntries((node.status?.conditions ?? []).map((c) => [c.type, c.status]));
      expect(conditions).toEqual({ Ready: 'True', MemoryPressure: 'False', DiskPressure: 'False', PIDPressure: 'False' });
      // The startup taint the template asks for; Cluster API keeps taints it did not put there.
      expect((node.spec?.taints ?? []).map(taintText)).toContain(taintText(STARTUP));
    }
    // Cluster API reports the Machines running once their Nodes are Ready.
    await waitFor(async () => (await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/deployment-name=${md}`)).every((m) => m.status?.['phase'] === 'Running'), {
      timeoutMs: 30_000,
      description: 'Machines in phase Running',
    });
  });

  it('scales up and down: new Machines get Nodes, removed Machines take their Nodes and LocalMachines with them', async () => {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 1 });
    const [first] = await waitForMachineNodes(kc, ns, md, 1);
    await scaleMachineDeployment(kc, ns, md, 3);
    const three = await waitForMachineNodes(kc, ns, md, 3);
    expect(three.map((p) => p.machine.metadata.name)).toContain(first?.machine.metadata.name);
    await scaleMachineDeployment(kc, ns, md, 1);
    const [left] = await waitForMachineNodes(kc, ns, md, 1);
    const removed = three.filter((p) => p.machine.metadata.name !== left?.machine.metadata.name);
    expect(removed).toHaveLength(2);
    for (const { machine } of removed) {
      const name = machine.metadata.name;
      await waitFor(async () => statusOf(await core.readNode({ name }).catch((e: unknown) => e)) === 404, { timeoutMs: 30_000, description: `Node ${name} deleted` });
      const infra = (machine.spec?.['infrastructureRef'] as { name: string }).name;
      await waitFor(async () => statusOf(await getObject(kc, local(LOCAL_MACHINE), ns, infra).catch((e: unknown) => e)) === 404, { timeoutMs: 30_000, description: `LocalMachine ${infra} deleted` });
    }
  });

  it('gate on: spec.taints of the MachineDeployment reach the Nodes through Cluster API, and an edit changes them in place', async () => {
    const md = await createMachineDeployment(kc, ns, {
      cluster,
      replicas: 2,
      startupTaints: [STARTUP],
      taints: [{ key: 'example.com/gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always' }],
    });
    const before = await waitForMachineNodes(kc, ns, md, 2);
    await waitFor(
      async () => {
        const nodes = await Promise.all(before.map((p) => core.readNode({ name: p.node.metadata?.name ?? '' })));
        return nodes.every((n) => (n.spec?.taints ?? []).map(taintText).includes('example.com/gpu=a100:NoSchedule'));
      },
      { timeoutMs: 30_000, description: 'example.com/gpu=a100:NoSchedule on both Nodes' },
    );
    const current = await getObject(kc, MACHINE_DEPLOYMENTS, ns, md);
    const template = current.spec?.['template'] as { spec: Record<string, unknown> };
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      {
        ...MACHINE_DEPLOYMENTS,
        namespace: ns,
        name: md,
        body: { spec: { template: { spec: { ...template.spec, taints: [{ key: 'example.com/gpu', value: 'h100', effect: 'NoSchedule', propagation: 'Always' }] } } } },
      },
      MERGE_PATCH,
    );
    const nodes = await waitFor(
      async () => {
        const got = await Promise.all(before.map((p) => core.readNode({ name: p.node.metadata?.name ?? '' })));
        return got.every((n) => (n.spec?.taints ?? []).map(taintText).includes('example.com/gpu=h100:NoSchedule')) ? got : undefined;
      },
      { timeoutMs: 30_000, description: 'example.com/gpu=h100:NoSchedule on both Nodes' },
    );
    for (const n of nodes) expect((n.spec?.taints ?? []).map(taintText)).not.toContain('example.com/gpu=a100:NoSchedule');
    // In place: the same Machines (and Nodes) still back the MachineDeployment.
    const after = await waitForMachineNodes(kc, ns, md, 2);
    expect(after.map((p) => p.machine.metadata.uid)).toEqual(before.map((p) => p.machine.metadata.uid));
  });

  it('deletes Machines and Nodes with their MachineDeployment, and the kubeconfig Secret with the Cluster', async () => {
    const md = await createMachineDeployment(kc, ns, { cluster, replicas: 2 });
    const pairs = await waitForMachineNodes(kc, ns, md, 2);
    await kc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: md });
    // No garbage collector runs here: the MachineDeployment's finalizer makes Cluster API delete its MachineSets and Machines itself.
    for (const { node } of pairs) {
      const name = node.metadata?.name ?? '';
      await waitFor(async () => statusOf(await core.readNode({ name }).catch((e: unknown) => e)) === 404, { timeoutMs: 60_000, description: `Node ${name} deleted` });
    }
    await waitFor(async () => (await listObjects(kc, MACHINES, ns, `cluster.x-k8s.io/deployment-name=${md}`)).length === 0, { timeoutMs: 60_000, description: 'Machines deleted' });

    await kc.makeApiClient(CustomObjectsApi).deleteNamespacedCustomObject({ ...CLUSTERS, namespace: ns, name: cluster });
    await waitFor(async () => statusOf(await getObject(kc, CLUSTERS, ns, cluster).catch((e: unknown) => e)) === 404, { timeoutMs: 60_000, description: 'Cluster deleted' });
    await waitFor(async () => statusOf(await getObject(kc, local(LOCAL_CLUSTER), ns, cluster).catch((e: unknown) => e)) === 404, { timeoutMs: 30_000, description: 'LocalCluster deleted' });
    await waitFor(async () => statusOf(await core.readNamespacedSecret({ namespace: ns, name: `${cluster}-kubeconfig` }).catch((e: unknown) => e)) === 404, {
      timeoutMs: 30_000,
      description: 'kubeconfig Secret deleted',
    });
  });
});
