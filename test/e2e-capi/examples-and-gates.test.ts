/**
 * The manifests in local/examples/ on a control plane of their own with the manager's default gates
 * (MachineTaintPropagation off, ClusterTopology on), then the same manager restarted with the gate on.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AdmissionregistrationV1Api, CoreV1Api, KubeConfig, KubernetesObjectApi, loadAllYaml, type KubernetesObject } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import { waitFor } from '#test/support/control-plane.ts';
import { MACHINES, describeWithCapi, listObjects, taintText, waitForClusterConnected, waitForMachineNodes } from '#test/support/capi.ts';

const EXAMPLES = join(import.meta.dirname, '..', '..', 'local', 'examples');
const NS = 'capi-examples';

/** Creates every object of an example file; one that exists already is left as it is (as `kubectl apply` of an unchanged file). */
async function apply(kc: KubeConfig, file: string): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const doc of loadAllYaml(readFileSync(join(EXAMPLES, file), 'utf8')) as KubernetesObject[]) {
    if (!doc) continue;
    try {
      await api.create(doc);
    } catch (e) {
      if ((e as { code?: number }).code !== 409) throw e;
    }
  }
}

describeWithCapi('local/examples with the default gates, then MachineTaintPropagation turned on', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;

  beforeAll(async () => {
    cp = await startControlPlane({ build: false, log: () => undefined, capi: {} });
    kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
  });
  afterAll(async () => {
    await cp?.stop();
  });

  it('starts the manager with ClusterTopology on and MachineTaintPropagation at its default (off)', () => {
    expect(cp.capi?.manager.featureGates).toEqual({ ClusterTopology: true });
  });

  it('cluster-annotations.yaml: Machines carry the template annotation and each has its Node', async () => {
    await apply(kc, 'cluster-annotations.yaml');
    await waitForClusterConnected(kc, NS, 'annotated');
    const pairs = await waitForMachineNodes(kc, NS, 'edge', 2);
    for (const { machine, node } of pairs) {
      expect(machine.metadata.annotations?.['taints.capi-taint-propagator.dev/machine']).toBe('pool=edge:NoSchedule, zone=eu-1a:PreferNoSchedule@OnInitialization');
      expect(node.metadata?.name).toBe(machine.metadata.name);
    }
  });

  it('clusterclass.yaml + cluster-topology.yaml: the topology makes a MachineDeployment whose Machines carry class and cluster annotations', async () => {
    await apply(kc, 'clusterclass.yaml');
    await apply(kc, 'cluster-topology.yaml');
    await waitForClusterConnected(kc, NS, 'topology');
    const machines = await waitFor(
      async () => {
        const items = await listObjects(kc, MACHINES, NS, 'cluster.x-k8s.io/cluster-name=topology');
        return items.length === 2 && items.every((m) => (m.status?.['nodeRef'] as { name?: string } | undefined)?.name === m.metadata.name) ? items : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 200, description: 'two topology Machines with Nodes' },
    );
    for (const m of machines) {
      expect(m.metadata.annotations).toMatchObject({
        'taints.capi-taint-propagator.dev/class': 'nvidia.com/gpu=present:NoSchedule, example.com/spot:PreferNoSchedule',
        'taints.capi-taint-propagator.dev/cluster': 'nvidia.com/gpu=a100:NoSchedule, example.com/spot:PreferNoSchedule-',
      });
    }
  });

  it('gate off: the webhook refuses spec.taints (cluster-spec-taints.yaml)', async () => {
    await expect(apply(kc, 'cluster-spec-taints.yaml')).rejects.toThrow(/MachineTaintPropagation/);
  });

  it('restartManager with the gate on: webhooks re-registered, spec.taints accepted and propagated by Cluster API', async () => {
    const before = cp.capi?.manager.pid;
    const manager = await cp.capi?.restartManager({ featureGates: { MachineTaintPropagation: true } });
    expect(manager?.pid).not.toBe(before);
    expect(manager?.featureGates).toEqual({ ClusterTopology: true, MachineTaintPropagation: true });
    await apply(kc, 'cluster-spec-taints.yaml'); // the MachineDeployment refused before is created now
    await waitForClusterConnected(kc, NS, 'spec-taints');
    const pairs = await waitForMachineNodes(kc, NS, 'gpu', 2);
    const core = kc.makeApiClient(CoreV1Api);
    await waitFor(
      async () => {
        const nodes = await Promise.all(pairs.map((p) => core.readNode({ name: p.node.metadata?.name ?? '' })));
        return nodes.every((n) => {
          const taints = (n.spec?.taints ?? []).map(taintText);
          return taints.includes('nvidia.com/gpu=present:NoSchedule') && taints.includes('example.com/warming=:PreferNoSchedule');
        });
      },
      { timeoutMs: 30_000, description: 'the MachineDeployment spec.taints on both Nodes' },
    );
  });

  it('stop removes the webhook registrations before the manager goes', async () => {
    const admission = kc.makeApiClient(AdmissionregistrationV1Api);
    expect((await admission.listValidatingWebhookConfiguration()).items.map((w) => w.metadata?.name)).toContain('capi-validating-webhook-configuration');
    await cp.capi?.manager.stop();
    expect((await admission.listValidatingWebhookConfiguration()).items).toEqual([]);
    expect((await admission.listMutatingWebhookConfiguration()).items).toEqual([]);
    expect(cp.capi?.manager.child.alive).toBe(false);
  });
});
