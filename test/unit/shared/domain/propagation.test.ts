/**
 * propagateMachineTaints() and its helpers, rule for rule as upstream's propagateMachineTaintsToNode
 * (upstream-capi.md §3.3–3.6, quirks Q1–Q8). Every case asserts the `changed` flag and the resulting
 * Node state (taints in order, whole annotation map) together, and that the input was not mutated.
 */
import { describe, expect, it } from 'vitest';
import { MalformedTrackingAnnotationError } from '#shared/errors.ts';
import { ensureNodeTaint, propagateMachineTaints, removeNodeTaint, toNodeTaint, type NodeTaintState } from '#shared/domain/propagation.ts';
import { TRACKING_ANNOTATION, type MachineTaint, type Taint, type TaintId } from '#shared/domain/taint.ts';
import { machineTaint, nodeBuilder, nodeTaint } from '#test/support/builders.ts';

const A = TRACKING_ANNOTATION;
const T0 = '2026-01-01T00:00:00Z';

interface Case {
  readonly name: string;
  readonly machineTaints: readonly MachineTaint[];
  readonly node: NodeTaintState;
  readonly want:
    | { readonly taints: readonly Taint[]; readonly annotations: Record<string, string>; readonly changed: boolean }
    | { readonly error: string };
}

const cases: readonly Case[] = [
  // --- basic add / keep ---
  {
    name: 'writes an empty annotation when the Machine has no taints and the Node has no annotation (Q6)',
    machineTaints: [],
    node: nodeBuilder().build(),
    want: { taints: [], annotations: { [A]: '' }, changed: true },
  },
  {
    name: 'changes nothing when the Machine has no taints and the annotation is already empty',
    machineTaints: [],
    node: nodeBuilder().withTracking('').build(),
    want: { taints: [], annotations: { [A]: '' }, changed: false },
  },
  {
    name: 'preserves every other annotation',
    machineTaints: [],
    node: nodeBuilder().withAnnotations({ other: 'x', [`${A}-not`]: 'y' }).build(),
    want: { taints: [], annotations: { other: 'x', [`${A}-not`]: 'y', [A]: '' }, changed: true },
  },
  {
    name: 'appends an Always taint and tracks it',
    machineTaints: [machineTaint('gpu', 'a100')],
    node: nodeBuilder().withTaints(nodeTaint('kubelet')).build(),
    want: { taints: [nodeTaint('kubelet'), nodeTaint('gpu', 'a100')], annotations: { [A]: 'gpu:NoSchedule' }, changed: true },
  },
  {
    name: 'appends several new taints in Machine spec order and tracks only the Always ones',
    machineTaints: [machineTaint('z'), machineTaint('b', 'v', 'NoExecute', 'OnInitialization'), machineTaint('a', undefined, 'PreferNoSchedule')],
    node: nodeBuilder().build(),
    want: {
      taints: [nodeTaint('z'), nodeTaint('b', 'v', 'NoExecute'), nodeTaint('a', undefined, 'PreferNoSchedule')],
      annotations: { [A]: 'a:PreferNoSchedule,z:NoSchedule' },
      changed: true,
    },
  },
  {
    name: 'changes nothing when a tracked Always taint is already there with its value (timeAdded kept)',
    machineTaints: [machineTaint('gpu', 'a100', 'NoExecute')],
    node: nodeBuilder().withTaints(nodeTaint('gpu', 'a100', 'NoExecute', T0)).withTracking('gpu:NoExecute').build(),
    want: { taints: [nodeTaint('gpu', 'a100', 'NoExecute', T0)], annotations: { [A]: 'gpu:NoExecute' }, changed: false },
  },
  {
    name: 'treats an explicit empty value on the Node as no value',
    machineTaints: [machineTaint('gpu')],
    node: nodeBuilder().withTaints({ key: 'gpu', value: '', effect: 'NoSchedule' }).withTracking('gpu:NoSchedule').build(),
    want: { taints: [{ key: 'gpu', value: '', effect: 'NoSchedule' }], annotations: { [A]: 'gpu:NoSchedule' }, changed: false },
  },
  {
    name: 're-adds (appends) a tracked Always taint a user removed',
    machineTaints: [machineTaint('gpu', 'a100')],
    node: nodeBuilder().withTaints(nodeTaint('other')).withTracking('gpu:NoSchedule').build(),
    want: { taints: [nodeTaint('other'), nodeTaint('gpu', 'a100')], annotations: { [A]: 'gpu:NoSchedule' }, changed: true },
  },

  // --- ownership: adoption, values, removal (Q2, Q3) ---
  {
    name: 'adopts an untracked Node taint with the same key and effect and leaves it untouched (Q2)',
    machineTaints: [machineTaint('dedicated', 'db')],
    node: nodeBuilder().withTaints(nodeTaint('dedicated', 'db', 'NoSchedule', T0)).withTracking('').build(),
    want: { taints: [nodeTaint('dedicated', 'db', 'NoSchedule', T0)], annotations: { [A]: 'dedicated:NoSchedule' }, changed: true },
  },
  {
    name: 'adopts and corrects the value of an untracked taint with the same key and effect (Q2, Q3)',
    machineTaints: [machineTaint('dedicated', 'db')],
    node: nodeBuilder().withTaints(nodeTaint('dedicated', 'kubeadm')).build(),
    want: { taints: [nodeTaint('dedicated', 'db')], annotations: { [A]: 'dedicated:NoSchedule' }, changed: true },
  },
  {
    name: 'corrects a value in place and drops timeAdded (Q3)',
    machineTaints: [machineTaint('b', 'new', 'NoExecute')],
    node: nodeBuilder()
      .withTaints(nodeTaint('a'), nodeTaint('b', 'old', 'NoExecute', T0), nodeTaint('c'))
      .withTracking('b:NoExecute')
      .build(),
    want: { taints: [nodeTaint('a'), nodeTaint('b', 'new', 'NoExecute'), nodeTaint('c')], annotations: { [A]: 'b:NoExecute' }, changed: true },
  },
  {
    name: 'removes the value in place when the Machine taint has none',
    machineTaints: [machineTaint('b')],
    node: nodeBuilder().withTaints(nodeTaint('b', 'old')).withTracking('b:NoSchedule').build(),
    want: { taints: [nodeTaint('b')], annotations: { [A]: 'b:NoSchedule' }, changed: true },
  },
  {
    name: 'corrects only the first of two Node taints with the same key and effect',
    machineTaints: [machineTaint('b', 'want')],
    node: nodeBuilder().withTaints(nodeTaint('b', 'x'), nodeTaint('b', 'y')).withTracking('b:NoSchedule').build(),
    want: { taints: [nodeTaint('b', 'want'), nodeTaint('b', 'y')], annotations: { [A]: 'b:NoSchedule' }, changed: true },
  },
  {
    name: 'removes every value of a tracked key+effect dropped from the Machine, and only that effect',
    machineTaints: [],
    node: nodeBuilder()
      .withTaints(nodeTaint('gpu', 'x'), nodeTaint('gpu', undefined, 'NoExecute'), nodeTaint('gpu', 'y'), nodeTaint('other'))
      .withTracking('gpu:NoSchedule')
      .build(),
    want: { taints: [nodeTaint('gpu', undefined, 'NoExecute'), nodeTaint('other')], annotations: { [A]: '' }, changed: true },
  },
  {
    name: 'never touches a Node taint that is neither declared nor tracked',
    machineTaints: [machineTaint('gpu')],
    node: nodeBuilder()
      .withTaints(nodeTaint('node.kubernetes.io/not-ready', undefined, 'NoExecute', T0), nodeTaint('gpu'), nodeTaint('user', 'v', 'PreferNoSchedule'))
      .withTracking('gpu:NoSchedule')
      .build(),
    want: {
      taints: [nodeTaint('node.kubernetes.io/not-ready', undefined, 'NoExecute', T0), nodeTaint('gpu'), nodeTaint('user', 'v', 'PreferNoSchedule')],
      annotations: { [A]: 'gpu:NoSchedule' },
      changed: false,
    },
  },
  {
    name: 'does not remove an untracked taint that the Machine no longer declares',
    machineTaints: [],
    node: nodeBuilder().withTaints(nodeTaint('gpu')).withTracking('').build(),
    want: { taints: [nodeTaint('gpu')], annotations: { [A]: '' }, changed: false },
  },

  // --- initialization: presence of the annotation (Q1) ---
  {
    name: 'applies an OnInitialization taint to a Node without the annotation and initializes it',
    machineTaints: [machineTaint('boot', 'v', 'NoSchedule', 'OnInitialization')],
    node: nodeBuilder().build(),
    want: { taints: [nodeTaint('boot', 'v')], annotations: { [A]: '' }, changed: true },
  },
  {
    name: 'ignores an OnInitialization taint on a Node whose annotation is empty (presence = initialized, Q1)',
    machineTaints: [machineTaint('boot', 'v', 'NoSchedule', 'OnInitialization')],
    node: nodeBuilder().withTracking('').build(),
    want: { taints: [], annotations: { [A]: '' }, changed: false },
  },
  {
    name: 'overwrites the value of an existing same key+effect taint at initialization (Q3)',
    machineTaints: [machineTaint('boot', 'machine', 'NoSchedule', 'OnInitialization')],
    node: nodeBuilder().withTaints(nodeTaint('boot', 'bootstrap', 'NoSchedule', T0)).build(),
    want: { taints: [nodeTaint('boot', 'machine')], annotations: { [A]: '' }, changed: true },
  },
  {
    name: 'does not correct the value of an OnInitialization taint on an initialized Node',
    machineTaints: [machineTaint('boot', 'machine', 'NoSchedule', 'OnInitialization')],
    node: nodeBuilder().withTaints(nodeTaint('boot', 'user')).withTracking('').build(),
    want: { taints: [nodeTaint('boot', 'user')], annotations: { [A]: '' }, changed: false },
  },
  {
    name: 'leaves an OnInitialization taint on the Node when it is dropped from the Machine',
    machineTaints: [],
    node: nodeBuilder().withTaints(nodeTaint('boot', 'v')).withTracking('').build(),
    want: { taints: [nodeTaint('boot', 'v')], annotations: { [A]: '' }, changed: false },
  },
  {
    name: 'applies OnInitialization taints again to a Node whose annotation was removed (Q1)',
    machineTaints: [machineTaint('gpu'), machineTaint('boot', undefined, 'NoSchedule', 'OnInitialization')],
    node: nodeBuilder().withTaints(nodeTaint('gpu')).build(),
    want: { taints: [nodeTaint('gpu'), nodeTaint('boot')], annotations: { [A]: 'gpu:NoSchedule' }, changed: true },
  },

  // --- transitions (Q4, Q5) ---
  {
    name: 'appends the new effect and removes the old one when an Always taint changes effect (Q4)',
    machineTaints: [machineTaint('gpu', 'v', 'NoExecute')],
    node: nodeBuilder().withTaints(nodeTaint('gpu', 'v'), nodeTaint('other')).withTracking('gpu:NoSchedule').build(),
    want: { taints: [nodeTaint('other'), nodeTaint('gpu', 'v', 'NoExecute')], annotations: { [A]: 'gpu:NoExecute' }, changed: true },
  },
  {
    name: "re-adds the Machine's effect and leaves a user's effect variant alone (Q4)",
    machineTaints: [machineTaint('gpu', 'v')],
    node: nodeBuilder().withTaints(nodeTaint('gpu', 'v', 'NoExecute')).withTracking('gpu:NoSchedule').build(),
    want: { taints: [nodeTaint('gpu', 'v', 'NoExecute'), nodeTaint('gpu', 'v')], annotations: { [A]: 'gpu:NoSchedule' }, changed: true },
  },
  {
    name: 'keeps the taint and its value on Always -> OnInitialization, ignoring a simultaneous value change (Q5)',
    machineTaints: [machineTaint('gpu', 'new', 'NoSchedule', 'OnInitialization')],
    node: nodeBuilder().withTaints(nodeTaint('gpu', 'old')).withTracking('gpu:NoSchedule').build(),
    want: { taints: [nodeTaint('gpu', 'old')], annotations: { [A]: '' }, changed: true },
  },
  {
    name: 'ensures and tracks the taint on OnInitialization -> Always, even after a user removed it (Q5)',
    machineTaints: [machineTaint('gpu', 'v')],
    node: nodeBuilder().withTaints(nodeTaint('other')).withTracking('').build(),
    want: { taints: [nodeTaint('other'), nodeTaint('gpu', 'v')], annotations: { [A]: 'gpu:NoSchedule' }, changed: true },
  },

  // --- annotation format (Q8) ---
  {
    name: 'writes the annotation sorted byte-wise (Q8)',
    machineTaints: ['a', 'a/b', 'a.b', 'a-b', 'B'].map((k) => machineTaint(k)),
    node: nodeBuilder().withTracking('').build(),
    want: {
      taints: ['a', 'a/b', 'a.b', 'a-b', 'B'].map((k) => nodeTaint(k)),
      annotations: { [A]: 'B:NoSchedule,a-b:NoSchedule,a.b:NoSchedule,a/b:NoSchedule,a:NoSchedule' },
      changed: true,
    },
  },
  {
    name: 'tracks the same key with three effects as three entries',
    machineTaints: [machineTaint('dedicated', 'x', 'PreferNoSchedule'), machineTaint('dedicated', 'x', 'NoSchedule'), machineTaint('dedicated', 'x', 'NoExecute')],
    node: nodeBuilder()
      .withTaints(nodeTaint('dedicated', 'x', 'PreferNoSchedule'), nodeTaint('dedicated', 'x', 'NoSchedule'), nodeTaint('dedicated', 'x', 'NoExecute'))
      .withTracking('dedicated:NoExecute,dedicated:NoSchedule,dedicated:PreferNoSchedule')
      .build(),
    want: {
      taints: [nodeTaint('dedicated', 'x', 'PreferNoSchedule'), nodeTaint('dedicated', 'x', 'NoSchedule'), nodeTaint('dedicated', 'x', 'NoExecute')],
      annotations: { [A]: 'dedicated:NoExecute,dedicated:NoSchedule,dedicated:PreferNoSchedule' },
      changed: false,
    },
  },
  {
    name: 'rewrites an unsorted annotation without touching taints (changed for the annotation alone)',
    machineTaints: [machineTaint('b'), machineTaint('a')],
    node: nodeBuilder().withTaints(nodeTaint('b'), nodeTaint('a')).withTracking('b:NoSchedule,a:NoSchedule').build(),
    want: { taints: [nodeTaint('b'), nodeTaint('a')], annotations: { [A]: 'a:NoSchedule,b:NoSchedule' }, changed: true },
  },
  {
    name: 'recovers from a broken annotation: duplicates, empty entries and a trailing comma',
    machineTaints: [machineTaint('a')],
    node: nodeBuilder().withTaints(nodeTaint('a')).withTracking('a:NoSchedule,,a:NoSchedule,').build(),
    want: { taints: [nodeTaint('a')], annotations: { [A]: 'a:NoSchedule' }, changed: true },
  },
  {
    name: 'cleans up a stale entry whose taint is already gone',
    machineTaints: [],
    node: nodeBuilder().withTracking('gone:NoSchedule').build(),
    want: { taints: [], annotations: { [A]: '' }, changed: true },
  },

  // --- malformed annotation (Q7) ---
  {
    name: 'refuses to plan when an entry to delete has no colon, leaving the Node as it was (Q7)',
    machineTaints: [machineTaint('new')],
    node: nodeBuilder().withTaints(nodeTaint('a')).withTracking('a:NoSchedule,junk').build(),
    want: { error: 'invalid taint format: "junk"' },
  },
  {
    name: 'refuses to plan when an entry to delete has two colons (Q7)',
    machineTaints: [],
    node: nodeBuilder().withTaints(nodeTaint('a')).withTracking('a:b:NoSchedule').build(),
    want: { error: 'invalid taint format: "a:b:NoSchedule"' },
  },
  {
    name: 'tolerates two-part oddities: they match nothing and are dropped on rewrite (Q7, no trimming)',
    machineTaints: [],
    node: nodeBuilder().withTaints(nodeTaint('a'), nodeTaint('a', undefined, 'NoExecute')).withTracking(':NoSchedule,a:, a:NoSchedule').build(),
    want: { taints: [nodeTaint('a'), nodeTaint('a', undefined, 'NoExecute')], annotations: { [A]: '' }, changed: true },
  },
];

describe('Function: propagateMachineTaints()', () => {
  it.each(cases)('$name', ({ machineTaints, node, want }) => {
    // Prepare
    const before = structuredClone(node);

    // Act
    const result = propagateMachineTaints(node, machineTaints);

    // Assess
    if ('error' in want) {
      expect(result.ok).toBe(false);
      expect(result.ok ? undefined : result.error).toBeInstanceOf(MalformedTrackingAnnotationError);
      expect(result.ok ? undefined : result.error.message).toBe(want.error);
    } else {
      expect(result).toEqual({ ok: true, changed: want.changed, state: { taints: want.taints, annotations: want.annotations } });
    }
    expect(node).toEqual(before);
  });

  it('returns the input lists themselves when nothing changed', () => {
    // Prepare
    const node = nodeBuilder().withTaints(nodeTaint('a')).withTracking('a:NoSchedule').build();

    // Act
    const result = propagateMachineTaints(node, [machineTaint('a')]);

    // Assess
    expect(result.ok && result.changed).toBe(false);
    expect(result.ok && result.state.taints).toBe(node.taints);
    expect(result.ok && result.state.annotations).toBe(node.annotations);
  });
});

describe('Function: ensureNodeTaint()', () => {
  const existing = [nodeTaint('a', 'x', 'NoSchedule', T0), nodeTaint('b')];
  const ensureCases: ReadonlyArray<{ name: string; wanted: MachineTaint; taints: readonly Taint[]; changed: boolean }> = [
    { name: 'appends a missing taint', wanted: machineTaint('c', 'v'), taints: [...existing, nodeTaint('c', 'v')], changed: true },
    { name: 'keeps a taint with the same value as it is', wanted: machineTaint('a', 'x'), taints: existing, changed: false },
    { name: 'replaces a different value in place', wanted: machineTaint('a', 'y'), taints: [nodeTaint('a', 'y'), nodeTaint('b')], changed: true },
    {
      name: 'appends when only the effect differs',
      wanted: machineTaint('b', undefined, 'NoExecute'),
      taints: [...existing, nodeTaint('b', undefined, 'NoExecute')],
      changed: true,
    },
  ];

  it.each(ensureCases)('$name', ({ wanted, taints, changed }) => {
    // Act
    const result = ensureNodeTaint(existing, wanted);

    // Assess
    expect(result).toEqual({ taints, changed });
    expect(existing).toEqual([nodeTaint('a', 'x', 'NoSchedule', T0), nodeTaint('b')]);
  });
});

describe('Function: removeNodeTaint()', () => {
  const removeCases: ReadonlyArray<{ name: string; taints: Taint[]; drop: TaintId; want: Taint[]; changed: boolean }> = [
    { name: 'removes a matching taint', taints: [nodeTaint('a'), nodeTaint('b')], drop: { key: 'a', effect: 'NoSchedule' }, want: [nodeTaint('b')], changed: true },
    {
      name: 'removes every value of the key+effect',
      taints: [nodeTaint('a', '1'), nodeTaint('b'), nodeTaint('a', '2')],
      drop: { key: 'a', effect: 'NoSchedule' },
      want: [nodeTaint('b')],
      changed: true,
    },
    {
      name: 'keeps the same key with another effect',
      taints: [nodeTaint('a', undefined, 'NoExecute')],
      drop: { key: 'a', effect: 'NoSchedule' },
      want: [nodeTaint('a', undefined, 'NoExecute')],
      changed: false,
    },
    { name: 'reports no change on an empty list', taints: [], drop: { key: 'a', effect: 'NoSchedule' }, want: [], changed: false },
  ];

  it.each(removeCases)('$name', ({ taints, drop, want, changed }) => {
    // Act
    const result = removeNodeTaint(taints, drop);

    // Assess
    expect(result).toEqual({ taints: want, changed });
    if (!changed) expect(result.taints).toBe(taints);
  });
});

describe('Function: toNodeTaint()', () => {
  it('drops propagation and an empty value', () => {
    // Act
    const withValue = toNodeTaint(machineTaint('a', 'v', 'NoExecute', 'OnInitialization'));
    const withEmpty = toNodeTaint({ key: 'a', value: '', effect: 'NoSchedule', propagation: 'Always' });

    // Assess
    expect(withValue).toEqual({ key: 'a', value: 'v', effect: 'NoExecute' });
    expect(withEmpty).toEqual({ key: 'a', effect: 'NoSchedule' });
  });
});
