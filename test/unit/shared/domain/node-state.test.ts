import { describe, expect, it } from 'vitest';
import { claimedNode, isJoiningNode, nodeStateOfSnapshot } from '#shared/domain/node-state.ts';
import { OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION } from '#shared/domain/taint.ts';

describe('Function: claimedNode()', () => {
  it('is the snapshot of exactly the claimed fields, under the Node\'s name', () => {
    // Act
    const node = claimedNode('n1', { uid: 'u1', resourceVersion: '7', taints: [{ key: 'a', value: '', effect: 'NoSchedule' }], ownTrackingAnnotation: 'a:NoSchedule', trackingAnnotation: '' });

    // Assess
    expect(node).toEqual({ name: 'n1', uid: 'u1', resourceVersion: '7', labels: {}, annotations: { [TRACKING_ANNOTATION]: '', [OWN_TRACKING_ANNOTATION]: 'a:NoSchedule' }, taints: [{ key: 'a', effect: 'NoSchedule' }] });
  });
});

describe('Function: isJoiningNode()', () => {
  it('is true for a Node created less than 30 s before now, false at 30 s, for a missing or unreadable creation time', () => {
    // Prepare
    const now = new Date('2026-11-22T10:00:00Z');
    const created = (creationTimestamp?: string) => ({ uid: 'u', resourceVersion: '1', taints: [], ...(creationTimestamp ? { creationTimestamp } : {}) });

    // Act
    const verdicts = [created('2026-11-22T09:59:31Z'), created('2026-11-22T09:59:30Z'), created(), created('not a time')].map((s) => isJoiningNode(s, now));

    // Assess
    expect(verdicts).toEqual([true, false, false, false]);
  });
});

describe('Function: nodeStateOfSnapshot()', () => {
  it('keeps the fields a claim states, and says when the Node has no annotation at all', () => {
    // Prepare
    const read = { name: 'n1', uid: 'u1', resourceVersion: '8', creationTimestamp: '2026-11-22T09:59:50Z', labels: { a: 'b' }, taints: [{ key: 'k', effect: 'NoSchedule' as const }] };

    // Act
    const annotated = nodeStateOfSnapshot({ ...read, annotations: { [TRACKING_ANNOTATION]: '', [OWN_TRACKING_ANNOTATION]: 'k:NoSchedule', other: 'x' } });
    const bare = nodeStateOfSnapshot({ ...read, annotations: {} });

    // Assess
    expect(annotated).toEqual({ uid: 'u1', resourceVersion: '8', creationTimestamp: '2026-11-22T09:59:50Z', taints: [{ key: 'k', effect: 'NoSchedule' }], trackingAnnotation: '', ownTrackingAnnotation: 'k:NoSchedule' });
    expect(bare).toEqual({ uid: 'u1', resourceVersion: '8', creationTimestamp: '2026-11-22T09:59:50Z', taints: [{ key: 'k', effect: 'NoSchedule' }], withoutAnnotations: true });
  });
});
