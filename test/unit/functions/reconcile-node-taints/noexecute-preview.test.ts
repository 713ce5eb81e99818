/**
 * The NoExecutePreview hook of the reconcile: pods are read only when a NoExecute taint is about to be added or
 * previewed, and the Event says the counts (noexecute-preview.ts).
 */
import { describe, expect, it } from 'vitest';
import { NOEXECUTE_PREVIEW, previewNoExecute } from '#functions/reconcile-node-taints/noexecute-preview.ts';
import type { PodOnNode } from '#shared/domain/eviction-preview.ts';
import type { Taint } from '#shared/domain/taint.ts';
import { AccessDeniedError } from '#shared/errors.ts';
import type { NodeWithTaints } from '#shared/model/views.ts';
import type { PodStore } from '#shared/ports/pod-store.ts';

const node: NodeWithTaints = { kind: 'Node', name: 'w-1', uid: 'u', resourceVersion: '3', labels: {}, annotations: {}, taints: [] };
const maint: Taint = { key: 'maintenance', value: 'true', effect: 'NoExecute' };
const pods: PodOnNode[] = [
  { namespace: 'a', name: 'web', tolerations: [] },
  { namespace: 'a', name: 'db', tolerations: [{ key: 'maintenance', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }] },
  { namespace: 'a', name: 'agent', tolerations: [{ operator: 'Exists' }] },
];

/** A cluster whose pods are in memory, counting the lists. */
function cluster(answer: () => Promise<readonly PodOnNode[]> = async () => pods) {
  const calls = { lists: 0 };
  const store: PodStore = {
    listPodsOnNode: async () => {
      calls.lists++;
      return answer();
    },
    evictPod: async () => 'evicted',
  };
  return { calls, clusters: { podsOf: async () => store } };
}

describe('Function: previewNoExecute()', () => {
  const cases: ReadonlyArray<{ name: string; after: Taint[]; previews: Taint[]; want: { lists: number; events: string[] } }> = [
    { name: 'reads no pod and records nothing for a NoSchedule addition', after: [{ key: 'gpu', effect: 'NoSchedule' }], previews: [], want: { lists: 0, events: [] } },
    { name: 'reads no pod when the Node keeps its taints', after: [], previews: [], want: { lists: 0, events: [] } },
    { name: 'previews a NoExecute taint the write adds', after: [maint], previews: [], want: { lists: 1, events: [`Normal ${NOEXECUTE_PREVIEW} Node w-1: maintenance=true:NoExecute would evict 1 pod now, 1 after 300 s, keeps 1`] } },
    { name: 'previews a @Preview taint, saying it is not applied', after: [], previews: [maint], want: { lists: 1, events: [`Normal ${NOEXECUTE_PREVIEW} Node w-1: maintenance=true:NoExecute@Preview (preview only, not applied) would evict 1 pod now, 1 after 300 s, keeps 1`] } },
  ];

  it.each(cases)('$name', async ({ after, previews, want }) => {
    // Prepare
    const { calls, clusters } = cluster();
    const events: string[] = [];

    // Act
    const result = await previewNoExecute(clusters, { mode: 'self' }, node, after, previews, async (type, reason, message) => events.push(`${type} ${reason} ${message}`));

    // Assess
    expect(calls.lists).toBe(want.lists);
    expect(events).toEqual(want.events);
    expect(result === undefined).toBe(want.lists === 0);
  });

  it('records a Warning and returns the error when the pods cannot be read, without throwing', async () => {
    // Prepare
    const denied = new AccessDeniedError('Listing the pods of Node w-1', 'HTTP 403');
    const { clusters } = cluster(async () => {
      throw denied;
    });
    const events: string[] = [];

    // Act
    const result = await previewNoExecute(clusters, { mode: 'self' }, node, [maint], [], async (type, reason, message) => events.push(`${type} ${reason} ${message}`));

    // Assess
    expect(result).toEqual({ taints: ['maintenance=true:NoExecute'], error: denied });
    expect(events).toEqual([`Warning ${NOEXECUTE_PREVIEW} Node w-1: maintenance=true:NoExecute: its pods could not be read, so the evictions are not previewed`]);
  });
});
