import { describe, expect, it } from 'vitest';
import { claimedNode } from '#shared/domain/node-state.ts';
import { nodeStateOf, type NodeFacts } from '#shared/domain/watch-event.ts';
import { OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION } from '#shared/domain/taint.ts';

const facts = (change: Partial<NodeFacts> = {}): NodeFacts => ({ kind: 'Node', name: 'n1', uid: 'u1', resourceVersion: '7', taints: null, ...change });

describe('Function: nodeStateOf()', () => {
  it('keeps the taints exactly as stored, with the tracking annotations and creation time when set', () => {
    // Prepare
    const taints = [{ key: 'a', effect: 'NoSchedule' }, { key: 'b', value: 'v', effect: 'NoExecute', timeAdded: '2026-11-22T09:30:00Z' }];

    // Act
    const state = nodeStateOf(facts({ taints, creationTimestamp: '2026-11-22T09:00:00Z', trackingAnnotation: 'x:NoSchedule', ownTrackingAnnotation: '' }));

    // Assess
    expect(state).toEqual({ uid: 'u1', resourceVersion: '7', creationTimestamp: '2026-11-22T09:00:00Z', taints, trackingAnnotation: 'x:NoSchedule', ownTrackingAnnotation: '' });
  });

  it('claims no taints for a Node without spec.taints', () => {
    expect(nodeStateOf(facts())?.taints).toEqual([]);
  });

  it.each([
    ['not a list', { key: 'a', effect: 'NoSchedule' }],
    ['an entry that is not an object', ['a:NoSchedule']],
    ['an entry without an effect', [{ key: 'a' }]],
    ['an entry with a field the API server does not store', [{ key: 'a', effect: 'NoSchedule', extra: 1 }]],
    ['a value that is not a string', [{ key: 'a', value: 3, effect: 'NoSchedule' }]],
  ])('makes no claim when spec.taints is %s', (_case, taints) => {
    expect(nodeStateOf(facts({ taints }))).toBeUndefined();
  });
});

describe('Function: claimedNode()', () => {
  it('is the snapshot of exactly the claimed fields, under the Node\'s name', () => {
    // Act
    const node = claimedNode('n1', { uid: 'u1', resourceVersion: '7', taints: [{ key: 'a', value: '', effect: 'NoSchedule' }], ownTrackingAnnotation: 'a:NoSchedule', trackingAnnotation: '' });

    // Assess
    expect(node).toEqual({ name: 'n1', uid: 'u1', resourceVersion: '7', labels: {}, annotations: { [TRACKING_ANNOTATION]: '', [OWN_TRACKING_ANNOTATION]: 'a:NoSchedule' }, taints: [{ key: 'a', effect: 'NoSchedule' }] });
  });
});
