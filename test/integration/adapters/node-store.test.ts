import { expect, it } from 'vitest';
import type { NodeTaintPatch } from '#shared/domain/taint-plan.ts';
import type { NodeFacts } from '#shared/model/views.ts';
import { OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { KubernetesNodeStore } from '#shared/adapters/kubernetes/node-store.ts';
import { NodeNotFoundError, PatchConflictError } from '#shared/errors.ts';
import { CoreV1Api } from '@kubernetes/client-node';
import { MERGE_PATCH, adminKubeConfig, createNode, describeWithControlPlane, uniqueName } from '#test/support/control-plane.ts';

const FOREIGN = { key: 'team.example.com/dedicated', value: 'db', effect: 'NoSchedule' } as const;
const OURS = { key: 'gpu', value: 'a100', effect: 'NoSchedule' } as const;

function patchFrom(node: NodeFacts, taints: NodeTaintPatch['taints'], annotation: string | null): NodeTaintPatch {
  return { resourceVersion: node.resourceVersion, taints, annotations: { [OWN_TRACKING_ANNOTATION]: annotation } };
}

describeWithControlPlane('Class: KubernetesNodeStore, merge patch with the resourceVersion precondition', () => {
  const kc = adminKubeConfig();
  const store = new KubernetesNodeStore(kc);
  const core = kc.makeApiClient(CoreV1Api);
  const annotated = { annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true', [TRACKING_ANNOTATION]: 'upstream:NoSchedule' } };

  it('writes the Node as read, keeping the taints and annotations someone else owns', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name, { ...annotated, taints: [FOREIGN] });
    const read = (await store.getNode(name))!;

    // Act
    const written = await store.patchNodeTaints(name, patchFrom(read, [...read.taints, OURS], 'gpu:NoSchedule'));

    // Assess
    const live = await core.readNode({ name });
    expect(live.spec?.taints?.map((t) => t.key)).toEqual([FOREIGN.key, OURS.key]);
    expect(live.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
    expect(live.metadata?.annotations?.[TRACKING_ANNOTATION]).toBe('upstream:NoSchedule');
    expect(live.metadata?.resourceVersion).toBe(written.resourceVersion);
    // The view keeps only the annotations the product reads; the write never drops the others.
    expect(read.annotations).toEqual({ [TRACKING_ANNOTATION]: 'upstream:NoSchedule' });
    expect(live.metadata?.annotations?.['volumes.kubernetes.io/controller-managed-attach-detach']).toBe('true');
  });

  it('removes the tracking annotation and every taint when the plan says so', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name, { annotations: { ...annotated.annotations, [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' }, taints: [OURS] });
    const read = (await store.getNode(name))!;

    // Act
    const written = await store.patchNodeTaints(name, patchFrom(read, [], null));

    // Assess
    expect(written.taints).toEqual([]);
    expect((await core.readNode({ name })).metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBeUndefined();
  });

  it('refuses a write planned from a stale read with PatchConflictError: nothing written, the other change kept', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name, annotated);
    const read = (await store.getNode(name))!;
    await core.patchNode({ name, body: { metadata: { labels: { 'other-writer': 'yes' } } } }, MERGE_PATCH);
    const before = await core.readNode({ name });

    // Act
    const write = store.patchNodeTaints(name, patchFrom(read, [OURS], 'gpu:NoSchedule'));

    // Assess
    await expect(write).rejects.toBeInstanceOf(PatchConflictError);
    const live = await core.readNode({ name });
    expect(live.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    expect(live.spec?.taints ?? []).toEqual([]);
  });

  it('throws NodeNotFoundError for a Node deleted after the read, and reads a missing Node as undefined', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name, annotated);
    const read = (await store.getNode(name))!;
    await core.deleteNode({ name });

    // Act
    const write = store.patchNodeTaints(name, patchFrom(read, [OURS], 'gpu:NoSchedule'));

    // Assess
    await expect(write).rejects.toBeInstanceOf(NodeNotFoundError);
    expect(await store.getNode(name)).toBeUndefined();
  });
});
