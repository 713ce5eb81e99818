import { beforeAll, expect, it } from 'vitest';
import { CustomObjectsApi } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  adminKubeConfig,
  createMachine,
  createNamespace,
  describeWithControlPlane,
  getMachine,
  MACHINES,
  MERGE_PATCH,
  setMachineNodeRef,
  statusOf,
  uniqueName,
} from '#test/support/control-plane.ts';

describeWithControlPlane('Kubernetes API: Cluster API Machine v1beta2', () => {
  let kc: KubeConfig;
  let namespace: string;
  beforeAll(async () => {
    kc = adminKubeConfig();
    namespace = await createNamespace(kc, 'machines');
  });

  it('round-trips spec.taints and a status.nodeRef written through the status subresource', async () => {
    // Prepare
    const name = uniqueName('machine');
    const nodeName = uniqueName('node');

    // Act
    await createMachine(kc, namespace, name, {
      clusterName: 'c1',
      specTaints: [
        { key: 'example.com/dedicated', value: 'gpu', effect: 'NoSchedule' },
        { key: 'example.com/init-only', effect: 'NoExecute', propagation: 'OnInitialization' },
      ],
      annotations: { 'example.com/note': 'hello' },
      nodeName,
    });
    const machine = await getMachine(kc, namespace, name);

    // Assess
    expect(machine.apiVersion).toBe('cluster.x-k8s.io/v1beta2');
    expect(machine.spec.clusterName).toBe('c1');
    expect(machine.spec.taints).toEqual([
      { key: 'example.com/dedicated', value: 'gpu', effect: 'NoSchedule', propagation: 'Always' },
      { key: 'example.com/init-only', effect: 'NoExecute', propagation: 'OnInitialization' },
    ]);
    expect(machine.status?.nodeRef).toEqual({ name: nodeName });
    expect(machine.metadata.annotations).toMatchObject({ 'example.com/note': 'hello' });
    expect(machine.metadata.labels).toMatchObject({ 'cluster.x-k8s.io/cluster-name': 'c1' });
  });

  it('ignores status written through the main resource (status is a subresource)', async () => {
    // Prepare
    const name = uniqueName('machine');
    await createMachine(kc, namespace, name);

    // Act
    await kc
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObject({ ...MACHINES, namespace, name, body: { status: { nodeRef: { name: 'ignored' } } } }, MERGE_PATCH);

    // Assess
    expect((await getMachine(kc, namespace, name)).status?.nodeRef).toBeUndefined();
    const updated = await setMachineNodeRef(kc, namespace, name, 'n1');
    expect(updated.status?.nodeRef).toEqual({ name: 'n1' });
  });

  it('rejects a Machine taint with an invalid effect (the CRD schema is enforced)', async () => {
    // Prepare
    const name = uniqueName('machine');

    // Act
    const error = await createMachine(kc, namespace, name, {
      specTaints: [{ key: 'example.com/x', effect: 'Sometimes' as 'NoSchedule' }],
    }).then(() => undefined, (e: unknown) => e);

    // Assess
    expect(statusOf(error)).toBe(422);
  });
});
