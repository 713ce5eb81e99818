import { expect, it } from 'vitest';
import type { NodeState } from '#shared/domain/cloud-event.ts';
import type { NodeTaintPatch } from '#shared/domain/snapshots.ts';
import { OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { nodeStateOfSnapshot } from '#shared/domain/node-state.ts';
import { KubernetesNodeStore } from '#shared/adapters/kubernetes/node-store.ts';
import { NodeNotFoundError } from '#shared/errors.ts';
import { CoreV1Api } from '@kubernetes/client-node';
import { nodeStateOfJson } from '../../../bench/lib/pipeline.ts';
import { MERGE_PATCH, adminKubeConfig, createNode, describeWithControlPlane, uniqueName, watchUntil } from '#test/support/control-plane.ts';

/** The state the forwarder would claim for the Node as it is now: from the JSON a watch delivers, as the forwarder gets it. */
async function stateNow(name: string): Promise<NodeState> {
  const watched = await watchUntil(adminKubeConfig(), '/api/v1/nodes', { fieldSelector: `metadata.name=${name}` }, (events) => events.length > 0);
  const state = nodeStateOfJson(watched.events[0]?.object);
  if (!state) throw new Error(`no state for Node ${name}`);
  return state;
}

const FOREIGN = { key: 'team.example.com/dedicated', value: 'db', effect: 'NoSchedule' } as const;
const OURS = { key: 'gpu', value: 'a100', effect: 'NoSchedule' } as const;

function patchFrom(state: NodeState, taints: NodeTaintPatch['taints'], annotation: string | null): NodeTaintPatch {
  return { resourceVersion: state.resourceVersion, taints, annotations: { [OWN_TRACKING_ANNOTATION]: annotation } };
}

describeWithControlPlane('Class: KubernetesNodeStore, writes planned from a claimed state (JSON patch with test operations)', () => {
  const kc = adminKubeConfig();
  const store = new KubernetesNodeStore(kc);
  const core = kc.makeApiClient(CoreV1Api);
  // Real Nodes always carry annotations (the kubelet's, Cluster API's).
  const annotated = { annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true', [TRACKING_ANNOTATION]: 'upstream:NoSchedule' } };

  it('writes when the live Node is exactly as claimed, keeping the taints someone else owns', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name, { ...annotated, taints: [FOREIGN] });
    const state = await stateNow(name);

    // Act
    const written = await store.patchClaimedNode(name, state, patchFrom(state, [...state.taints, OURS], 'gpu:NoSchedule'));

    // Assess
    expect(written?.taints.map((t) => t.key)).toEqual([FOREIGN.key, OURS.key]);
    const live = await core.readNode({ name });
    expect(live.spec?.taints?.map((t) => t.key)).toEqual([FOREIGN.key, OURS.key]);
    expect(live.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBe('gpu:NoSchedule');
    expect(live.metadata?.annotations?.[TRACKING_ANNOTATION]).toBe('upstream:NoSchedule');
    expect(live.metadata?.resourceVersion).toBe(written?.resourceVersion);
  });

  it('removes the tracking annotation and every taint when the plan says so, from a claim that holds', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name, { annotations: { ...annotated.annotations, [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' }, taints: [OURS] });
    const state = await stateNow(name);

    // Act
    const written = await store.patchClaimedNode(name, state, patchFrom(state, [], null));

    // Assess
    expect(written?.taints).toEqual([]);
    const live = await core.readNode({ name });
    expect(live.spec?.taints ?? []).toEqual([]);
    expect(live.metadata?.annotations?.[OWN_TRACKING_ANNOTATION]).toBeUndefined();
  });

  it('refuses a stale claim (the Node changed since): nothing written, the other change kept', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name, annotated);
    const state = await stateNow(name);
    await core.patchNode({ name, body: { metadata: { labels: { 'other-writer': 'yes' } } } }, MERGE_PATCH);
    const before = await core.readNode({ name });

    // Act
    const written = await store.patchClaimedNode(name, state, patchFrom(state, [OURS], 'gpu:NoSchedule'));

    // Assess
    expect(written).toBeUndefined();
    const live = await core.readNode({ name });
    expect(live.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    expect(live.spec?.taints ?? []).toEqual([]);
  });

  it.each([
    ['taints', (s: NodeState): NodeState => ({ ...s, taints: [] })],
    ['upstream tracking annotation', (s: NodeState): NodeState => {
      const { trackingAnnotation: _dropped, ...rest } = s;
      return rest;
    }],
    ['own tracking annotation', (s: NodeState): NodeState => ({ ...s, ownTrackingAnnotation: 'gpu:NoSchedule' })],
    ['creation time', (s: NodeState): NodeState => ({ ...s, creationTimestamp: '2020-01-01T00:00:00Z' })],
  ])('refuses a forged claim with the current resourceVersion but other %s: nothing written', async (_field, forge) => {
    // Prepare: the forgery would drop the foreign taint if it were believed.
    const name = uniqueName('node');
    await createNode(kc, name, { ...annotated, taints: [FOREIGN] });
    const state = forge(await stateNow(name));
    const before = await core.readNode({ name });

    // Act
    const written = await store.patchClaimedNode(name, state, patchFrom(state, [OURS], 'gpu:NoSchedule'));

    // Assess
    expect(written).toBeUndefined();
    const live = await core.readNode({ name });
    expect(live.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
    expect(live.spec?.taints?.map((t) => t.key)).toEqual([FOREIGN.key]);
  });

  it('refuses a claim on a Node without any annotation (it is then read and written the ordinary way)', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name);
    const state = await stateNow(name);

    // Act
    const written = await store.patchClaimedNode(name, state, patchFrom(state, [OURS], 'gpu:NoSchedule'));

    // Assess
    expect(written).toBeUndefined();
    expect((await core.readNode({ name })).spec?.taints ?? []).toEqual([]);
  });

  it('writes a claim made from a read of a Node without any annotation, adding the map; refuses it once an annotation appeared', async () => {
    // Prepare: two such Nodes, read; the second gets an annotation from someone else after the read.
    const [name, later] = [uniqueName('node'), uniqueName('node')];
    await createNode(kc, name);
    await createNode(kc, later);
    const state = nodeStateOfSnapshot((await store.getNode(name))!);
    const stale = nodeStateOfSnapshot((await store.getNode(later))!);
    await core.patchNode({ name: later, body: { metadata: { annotations: { 'other-writer': 'yes' } } } }, MERGE_PATCH);

    // Act
    const written = await store.patchClaimedNode(name, state, patchFrom(state, [OURS], 'gpu:NoSchedule'));
    const refused = await store.patchClaimedNode(later, stale, patchFrom(stale, [OURS], 'gpu:NoSchedule'));

    // Assess
    expect(state.withoutAnnotations).toBe(true);
    expect(written?.annotations).toEqual({ [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' });
    expect((await core.readNode({ name })).spec?.taints?.map((t) => t.key)).toEqual([OURS.key]);
    expect(refused).toBeUndefined();
    const live = await core.readNode({ name: later });
    expect(live.metadata?.annotations).toEqual({ 'other-writer': 'yes' });
    expect(live.spec?.taints ?? []).toEqual([]);
  });

  it('throws NodeNotFoundError for a Node deleted after the claim', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name, annotated);
    const state = await stateNow(name);
    await core.deleteNode({ name });

    // Act
    const write = store.patchClaimedNode(name, state, patchFrom(state, [OURS], 'gpu:NoSchedule'));

    // Assess
    await expect(write).rejects.toBeInstanceOf(NodeNotFoundError);
  });
});
