import { describe, expect, it } from 'vitest';
import { ObjectCache } from '#shared/adapters/kubernetes/watch/object-cache.ts';
import { toNodeFacts, type NodeFacts } from '#shared/model/views.ts';

function node(name: string, rv: string, taints: unknown[] = []): NodeFacts {
  const facts = toNodeFacts({ metadata: { name, uid: `uid-${name}`, resourceVersion: rv }, spec: { taints } });
  if (!facts) throw new Error('test node is not valid');
  return facts;
}

describe('Class: ObjectCache', () => {
  it('takes watch changes, says what each replaced, and forgets a deleted object', () => {
    // Prepare
    const cache = new ObjectCache<NodeFacts>();
    cache.replace([node('a', '1')], '1');

    // Act
    const added = cache.apply('added', node('b', '2'));
    const modified = cache.apply('modified', node('a', '3'));
    const deleted = cache.apply('deleted', node('b', '4'));

    // Assess
    expect(added).toBeUndefined();
    expect(modified?.resourceVersion).toBe('1');
    expect(deleted?.resourceVersion).toBe('2');
    expect(cache.latest('b')).toBeUndefined();
    expect(cache.latest('a')?.resourceVersion).toBe('3');
    expect(cache.resourceVersion).toBe('4');
  });

  it('diffs a relist against what it holds: relevant changes and deletions only, or everything for a full resync', () => {
    // Prepare
    const cache = new ObjectCache<NodeFacts>();
    cache.replace([node('same', '1'), node('tainted', '1'), node('gone', '1')], '1');
    const listed = [node('same', '5'), node('tainted', '6', [{ key: 'k', effect: 'NoSchedule' }]), node('new', '7')];

    // Act
    const diff = cache.relist(listed, '9', false);
    const full = new ObjectCache<NodeFacts>().relist(listed, '9', true);

    // Assess
    expect(diff.resynced.map((n) => n.name)).toEqual(['tainted', 'new']);
    expect(diff.deleted.map((n) => n.name)).toEqual(['gone']);
    expect(full.resynced.map((n) => n.name)).toEqual(['same', 'tainted', 'new']);
    expect(cache.resourceVersion).toBe('9');
    expect([...cache.values()]).toHaveLength(3);
  });

  it('with no baseline, announces what changed after the checkpoint', () => {
    // Prepare
    const cache = new ObjectCache<NodeFacts>();

    // Act
    const changed = cache.relistSince([node('old', '3'), node('newer', '12')], '20', '10');

    // Assess
    expect(changed.map((n) => n.name)).toEqual(['newer']);
    expect(cache.latest('old')).toBeDefined();
  });
});
