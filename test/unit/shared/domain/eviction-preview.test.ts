import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { countEvictions, decideEviction, describeEvictionCounts, noExecuteChangeOf, nodeTaintsAfter, previewNoExecuteEvictions, toleratesTaint, type EvictionDecision, type PodOnNode, type Toleration } from '#shared/domain/eviction-preview.ts';
import type { Taint } from '#shared/domain/taint.ts';

const NX = 'NoExecute';
const maint: Taint = { key: 'maint', value: 'yes', effect: NX };
const gpu: Taint = { key: 'gpu', effect: NX };

describe('Function: toleratesTaint()', () => {
  // Vectors of k8s.io/api core/v1 toleration.go ToleratesTaint (v0.34.3), one rule per group.
  const cases: ReadonlyArray<{ name: string; toleration: Toleration; taint: Taint; want: boolean }> = [
    // effect
    { name: 'an empty effect matches every effect', toleration: { key: 'maint', operator: 'Exists' }, taint: maint, want: true },
    { name: 'an absent effect matches NoSchedule too', toleration: { key: 'maint', operator: 'Exists', effect: '' }, taint: { key: 'maint', effect: 'NoSchedule' }, want: true },
    { name: 'a different effect does not match', toleration: { key: 'maint', operator: 'Exists', effect: 'NoSchedule' }, taint: maint, want: false },
    { name: 'the same effect matches', toleration: { key: 'maint', operator: 'Exists', effect: NX }, taint: maint, want: true },
    // key
    { name: 'Exists with an empty key matches every taint', toleration: { operator: 'Exists' }, taint: maint, want: true },
    { name: 'Exists with an empty key and an effect matches every taint of that effect', toleration: { operator: 'Exists', effect: NX }, taint: gpu, want: true },
    { name: 'a different key does not match', toleration: { key: 'other', operator: 'Exists' }, taint: maint, want: false },
    { name: 'keys are case-sensitive', toleration: { key: 'Maint', operator: 'Exists' }, taint: maint, want: false },
    // operator and value
    { name: 'Exists ignores the value', toleration: { key: 'maint', operator: 'Exists', value: 'no' }, taint: maint, want: true },
    { name: 'Equal compares the value (equal)', toleration: { key: 'maint', operator: 'Equal', value: 'yes' }, taint: maint, want: true },
    { name: 'Equal compares the value (different)', toleration: { key: 'maint', operator: 'Equal', value: 'no' }, taint: maint, want: false },
    { name: 'an empty operator means Equal', toleration: { key: 'maint', operator: '', value: 'yes' }, taint: maint, want: true },
    { name: 'an absent operator means Equal (different value)', toleration: { key: 'maint', value: 'no' }, taint: maint, want: false },
    { name: 'Equal without a value matches a taint without a value', toleration: { key: 'gpu', operator: 'Equal' }, taint: gpu, want: true },
    { name: 'Equal without a value matches a taint with an empty value', toleration: { key: 'gpu' }, taint: { key: 'gpu', value: '', effect: NX }, want: true },
    { name: 'Equal without a value does not match a taint with a value', toleration: { key: 'maint' }, taint: maint, want: false },
    { name: 'an unknown operator matches nothing', toleration: { key: 'maint', operator: 'In', value: 'yes' }, taint: maint, want: false },
    { name: 'operators are case-sensitive', toleration: { key: 'maint', operator: 'exists' }, taint: maint, want: false },
    // what validation refuses, as upstream's function answers it
    { name: 'an empty key with Equal matches any taint with an empty value (upstream quirk; validation refuses it)', toleration: { operator: 'Equal' }, taint: gpu, want: true },
    { name: 'an empty key with Equal does not match a taint with a value', toleration: {}, taint: maint, want: false },
  ];

  it.each(cases)('$name', ({ toleration, taint, want }) => {
    expect(toleratesTaint(toleration, taint)).toBe(want);
  });
});

describe('Function: decideEviction()', () => {
  // Vectors of pkg/controller/tainteviction/taint_eviction.go processPodOnNode + getMinTolerationTime (v1.34.3).
  const cases: ReadonlyArray<{ name: string; tolerations: Toleration[]; taints: Taint[]; want: EvictionDecision }> = [
    // no NoExecute taint
    { name: 'never without any taint', tolerations: [], taints: [], want: { evict: 'never', reason: { kind: 'no-noexecute-taint' } } },
    { name: 'never when only NoSchedule/PreferNoSchedule taints are there', tolerations: [], taints: [{ key: 'a', effect: 'NoSchedule' }, { key: 'b', effect: 'PreferNoSchedule' }], want: { evict: 'never', reason: { kind: 'no-noexecute-taint' } } },
    // untolerated
    { name: 'now without tolerations', tolerations: [], taints: [maint], want: { evict: 'now', reason: { kind: 'untolerated', taint: maint } } },
    { name: 'now when one of two taints is untolerated, naming the first untolerated', tolerations: [{ key: 'maint', operator: 'Exists' }], taints: [maint, gpu], want: { evict: 'now', reason: { kind: 'untolerated', taint: gpu } } },
    { name: 'now when the tolerated one has tolerationSeconds and another is untolerated', tolerations: [{ key: 'gpu', operator: 'Exists', tolerationSeconds: 300 }], taints: [gpu, maint], want: { evict: 'now', reason: { kind: 'untolerated', taint: maint } } },
    { name: 'a NoSchedule toleration does not tolerate a NoExecute taint', tolerations: [{ key: 'maint', operator: 'Exists', effect: 'NoSchedule' }], taints: [maint], want: { evict: 'now', reason: { kind: 'untolerated', taint: maint } } },
    // tolerated forever
    { name: 'never when tolerated without tolerationSeconds', tolerations: [{ key: 'maint', operator: 'Equal', value: 'yes', effect: NX }], taints: [maint], want: { evict: 'never', reason: { kind: 'tolerated' } } },
    { name: 'never with tolerationSeconds null', tolerations: [{ operator: 'Exists', tolerationSeconds: null }], taints: [maint, gpu], want: { evict: 'never', reason: { kind: 'tolerated' } } },
    { name: 'NoSchedule taints need no toleration', tolerations: [{ key: 'maint', operator: 'Exists' }], taints: [maint, { key: 'x', effect: 'NoSchedule' }], want: { evict: 'never', reason: { kind: 'tolerated' } } },
    // tolerationSeconds
    {
      name: 'after the tolerationSeconds of the matching toleration',
      tolerations: [{ key: 'maint', operator: 'Exists', tolerationSeconds: 30 }],
      taints: [maint],
      want: { evict: { afterSeconds: 30 }, reason: { kind: 'toleration-seconds', taint: maint, toleration: { key: 'maint', operator: 'Exists', tolerationSeconds: 30 } } },
    },
    {
      name: 'the shortest tolerationSeconds among the taints counts',
      tolerations: [{ key: 'maint', operator: 'Exists', tolerationSeconds: 60 }, { key: 'gpu', operator: 'Exists', tolerationSeconds: 10 }],
      taints: [maint, gpu],
      want: { evict: { afterSeconds: 10 }, reason: { kind: 'toleration-seconds', taint: gpu, toleration: { key: 'gpu', operator: 'Exists', tolerationSeconds: 10 } } },
    },
    {
      name: 'a taint tolerated forever does not lift another one tolerated for a while',
      tolerations: [{ key: 'maint', operator: 'Exists' }, { key: 'gpu', operator: 'Exists', tolerationSeconds: 5 }],
      taints: [maint, gpu],
      want: { evict: { afterSeconds: 5 }, reason: { kind: 'toleration-seconds', taint: gpu, toleration: { key: 'gpu', operator: 'Exists', tolerationSeconds: 5 } } },
    },
    {
      name: 'only the FIRST matching toleration of a taint counts (a later shorter one is ignored)',
      tolerations: [{ key: 'maint', operator: 'Exists' }, { operator: 'Exists', tolerationSeconds: 1 }],
      taints: [maint],
      want: { evict: 'never', reason: { kind: 'tolerated' } },
    },
    {
      name: 'only the FIRST matching toleration of a taint counts (an earlier one with seconds wins over a later forever)',
      tolerations: [{ operator: 'Exists', tolerationSeconds: 7 }, { key: 'maint', operator: 'Exists' }],
      taints: [maint],
      want: { evict: { afterSeconds: 7 }, reason: { kind: 'toleration-seconds', taint: maint, toleration: { operator: 'Exists', tolerationSeconds: 7 } } },
    },
    {
      name: 'tolerationSeconds 0 means at once (after 0 s)',
      tolerations: [{ key: 'maint', operator: 'Exists', tolerationSeconds: 0 }],
      taints: [maint],
      want: { evict: { afterSeconds: 0 }, reason: { kind: 'toleration-seconds', taint: maint, toleration: { key: 'maint', operator: 'Exists', tolerationSeconds: 0 } } },
    },
    {
      name: 'a negative tolerationSeconds counts as 0',
      tolerations: [{ key: 'gpu', operator: 'Exists', tolerationSeconds: 20 }, { key: 'maint', operator: 'Exists', tolerationSeconds: -5 }],
      taints: [gpu, maint],
      want: { evict: { afterSeconds: 0 }, reason: { kind: 'toleration-seconds', taint: maint, toleration: { key: 'maint', operator: 'Exists', tolerationSeconds: -5 } } },
    },
    {
      name: 'equal tolerationSeconds: the first taint is the reason',
      tolerations: [{ operator: 'Exists', effect: NX, tolerationSeconds: 15 }],
      taints: [gpu, maint],
      want: { evict: { afterSeconds: 15 }, reason: { kind: 'toleration-seconds', taint: gpu, toleration: { operator: 'Exists', effect: NX, tolerationSeconds: 15 } } },
    },
  ];

  it.each(cases)('$name', ({ tolerations, taints, want }) => {
    expect(decideEviction(tolerations, taints)).toEqual(want);
  });
});

describe('Function: nodeTaintsAfter()', () => {
  it('adds the NoExecute taints the Node does not carry, replaces one of the same key and effect, and ignores the rest', () => {
    // Prepare
    const node: Taint[] = [{ key: 'maint', value: 'old', effect: NX }, { key: 'keep', effect: 'NoSchedule' }, gpu];
    const toAdd: Taint[] = [maint, { key: 'gpu', value: '', effect: NX }, { key: 'sched', effect: 'NoSchedule' }, { key: 'maint', value: 'dup', effect: NX }];

    // Act
    const { added, after } = nodeTaintsAfter(toAdd, node);

    // Assess: gpu is already carried ('' and absent are the same value); the second maint is a duplicate of the first
    expect(added).toEqual([maint]);
    expect(after).toEqual([{ key: 'keep', effect: 'NoSchedule' }, gpu, maint]);
  });
});

describe('Function: previewNoExecuteEvictions()', () => {
  const pod = (name: string, tolerations: Toleration[], more: Partial<PodOnNode> = {}): PodOnNode => ({ namespace: 'ns', name, tolerations, ...more });

  it('tells per pod when the controller evicts it once the taint is added, and why', () => {
    // Prepare
    const pods = [
      pod('plain', [], { ownerKind: 'ReplicaSet', phase: 'Running' }),
      pod('exists', [{ key: 'maint', operator: 'Exists', effect: NX }]),
      pod('equal-other-value', [{ key: 'maint', operator: 'Equal', value: 'no' }]),
      pod('for-2s', [{ key: 'maint', operator: 'Equal', value: 'yes', tolerationSeconds: 2 }]),
      pod('done', [], { phase: 'Succeeded' }),
      pod('failed', [], { phase: 'Failed' }),
      pod('leaving', [], { deletionTimestamp: '2026-11-28T23:00:00Z', phase: 'Running' }),
    ];

    // Act
    const preview = previewNoExecuteEvictions({ taintsToAdd: [maint], nodeTaints: [], pods });

    // Assess
    expect(preview.map((p) => [p.name, p.evict, p.reason.kind, p.podState, p.current])).toEqual([
      ['plain', 'now', 'untolerated', 'active', 'never'],
      ['exists', 'never', 'tolerated', 'active', 'never'],
      ['equal-other-value', 'now', 'untolerated', 'active', 'never'],
      ['for-2s', { afterSeconds: 2 }, 'toleration-seconds', 'active', 'never'],
      ['done', 'now', 'untolerated', 'terminal', 'never'],
      ['failed', 'now', 'untolerated', 'terminal', 'never'],
      ['leaving', 'now', 'untolerated', 'terminating', 'never'],
    ]);
    expect(preview[0]).toEqual({ namespace: 'ns', name: 'plain', ownerKind: 'ReplicaSet', podState: 'active', evict: 'now', reason: { kind: 'untolerated', taint: maint }, current: 'never', keepsPendingEviction: false });
    expect(preview.some((p) => p.keepsPendingEviction)).toBe(false);
    expect(preview[1]).not.toHaveProperty('ownerKind');
  });

  it('counts the Node\'s existing NoExecute taints in the timing, and reports what they already do', () => {
    // Prepare: the pod tolerates the new taint for 60 s but the Node's gpu taint for 10 s
    const p = pod('p', [{ key: 'maint', operator: 'Exists', tolerationSeconds: 60 }, { key: 'gpu', operator: 'Exists', tolerationSeconds: 10 }]);

    // Act
    const [preview] = previewNoExecuteEvictions({ taintsToAdd: [maint], nodeTaints: [gpu], pods: [p] });

    // Assess: an eviction already pends from the gpu taint; the controller keeps it
    expect(preview?.evict).toEqual({ afterSeconds: 10 });
    expect(preview?.current).toEqual({ afterSeconds: 10 });
    expect(preview?.keepsPendingEviction).toBe(true);
  });

  it('says when the controller keeps a pending eviction rather than the shorter time of the added taint', () => {
    // Prepare: tolerates the Node's gpu taint for 6 s (pending), the added maint for 1 s; another tolerates gpu forever
    const pending = pod('pending', [{ key: 'gpu', operator: 'Exists', tolerationSeconds: 6 }, { key: 'maint', operator: 'Exists', tolerationSeconds: 1 }]);
    const fresh = pod('fresh', [{ key: 'gpu', operator: 'Exists' }, { key: 'maint', operator: 'Exists', tolerationSeconds: 2 }]);
    const doomed = pod('doomed', [{ key: 'gpu', operator: 'Exists', tolerationSeconds: 6 }]);

    // Act
    const preview = previewNoExecuteEvictions({ taintsToAdd: [maint], nodeTaints: [gpu], pods: [pending, fresh, doomed] });

    // Assess: an untolerated added taint is at once whatever pends
    expect(preview.map((p) => [p.name, p.evict, p.current, p.keepsPendingEviction])).toEqual([
      ['pending', { afterSeconds: 1 }, { afterSeconds: 6 }, true],
      ['fresh', { afterSeconds: 2 }, 'never', false],
      ['doomed', 'now', { afterSeconds: 6 }, false],
    ]);
  });

  it('names an untolerated added taint before an untolerated existing one', () => {
    // Act
    const [preview] = previewNoExecuteEvictions({ taintsToAdd: [maint], nodeTaints: [gpu], pods: [pod('p', [])] });

    // Assess
    expect(preview?.reason).toEqual({ kind: 'untolerated', taint: maint });
    expect(preview?.current).toBe('now');
  });

  it('decides on the new value when a taint of the same key and effect is replaced', () => {
    // Prepare: the pod tolerates maint=old only
    const p = pod('p', [{ key: 'maint', value: 'old' }]);

    // Act
    const [preview] = previewNoExecuteEvictions({ taintsToAdd: [maint], nodeTaints: [{ key: 'maint', value: 'old', effect: NX }], pods: [p] });

    // Assess
    expect([preview?.evict, preview?.current]).toEqual(['now', 'never']);
  });

  it('changes nothing when every taint to add is already there or not NoExecute', () => {
    // Act
    const preview = previewNoExecuteEvictions({ taintsToAdd: [gpu, { key: 'x', effect: 'NoSchedule' }], nodeTaints: [gpu], pods: [pod('p', [])] });

    // Assess: the decision is the current one
    expect(preview.map((p) => [p.evict, p.current])).toEqual([['now', 'now']]);
  });

  it('returns nothing for a Node without pods', () => {
    expect(previewNoExecuteEvictions({ taintsToAdd: [maint], nodeTaints: [], pods: [] })).toEqual([]);
  });
});

describe('Invariants of the preview (fast-check)', () => {
  const key = fc.constantFrom('a', 'b', 'c');
  const taintArb: fc.Arbitrary<Taint> = fc
    .record({ key, value: fc.constantFrom(undefined, '', 'x', 'y'), effect: fc.constantFrom('NoExecute', 'NoExecute', 'NoSchedule', 'PreferNoSchedule') })
    .map(({ value, ...t }) => (value === undefined ? t : { ...t, value }));
  const tolerationArb: fc.Arbitrary<Toleration> = fc.record(
    {
      key: fc.constantFrom('', 'a', 'b', 'c'),
      operator: fc.constantFrom('', 'Equal', 'Exists', 'Other'),
      value: fc.constantFrom('', 'x', 'y'),
      effect: fc.constantFrom('', 'NoExecute', 'NoSchedule'),
      tolerationSeconds: fc.constantFrom(undefined, null, -1, 0, 1, 5, 60),
    },
    { requiredKeys: [] },
  );
  const tolerations = fc.array(tolerationArb, { maxLength: 4 });
  const taints = fc.array(taintArb, { maxLength: 4 });

  it('is `now` exactly when some NoExecute taint has no matching toleration', () => {
    fc.assert(
      fc.property(tolerations, taints, (tols, ts) => {
        const untolerated = ts.some((t) => t.effect === 'NoExecute' && !tols.some((tol) => toleratesTaint(tol, t)));
        expect(decideEviction(tols, ts).evict === 'now').toBe(untolerated);
      }),
    );
  });

  it('does not depend on the order of the taints, and never evicts for non-NoExecute taints', () => {
    fc.assert(
      fc.property(tolerations, taints, (tols, ts) => {
        const evict = decideEviction(tols, ts).evict;
        expect(decideEviction(tols, [...ts].reverse()).evict).toEqual(evict);
        expect(decideEviction(tols, ts.filter((t) => t.effect === 'NoExecute')).evict).toEqual(evict);
      }),
    );
  });

  it('only brings an eviction forward as NoExecute taints are added, never back', () => {
    const rank = (e: ReturnType<typeof decideEviction>['evict']): number => (e === 'now' ? -1 : e === 'never' ? Infinity : e.afterSeconds);
    fc.assert(
      fc.property(tolerations, taints, taintArb, (tols, ts, extra) => {
        expect(rank(decideEviction(tols, [...ts, extra]).evict)).toBeLessThanOrEqual(rank(decideEviction(tols, ts).evict));
      }),
    );
  });

  it('an Exists toleration with an empty key and effect and no seconds keeps every pod', () => {
    fc.assert(
      fc.property(tolerations, taints, (tols, ts) => {
        expect(decideEviction([{ operator: 'Exists' }, ...tols], ts).evict).toBe('never');
      }),
    );
  });
});

describe('Function: noExecuteChangeOf()', () => {
  const m: Taint = { key: 'maint', value: 'yes', effect: 'NoExecute' };
  const cases: ReadonlyArray<{ name: string; node: Taint[]; after: Taint[]; previews: Taint[]; want: { applied: Taint[]; previewed: Taint[] } }> = [
    { name: 'names a NoExecute taint the write adds', node: [], after: [m], previews: [], want: { applied: [m], previewed: [] } },
    { name: 'names a NoExecute value change', node: [{ ...m, value: 'old' }], after: [m], previews: [], want: { applied: [m], previewed: [] } },
    { name: 'ignores a NoExecute taint the Node carries and a NoSchedule addition', node: [m], after: [m, { key: 'gpu', effect: 'NoSchedule' }], previews: [], want: { applied: [], previewed: [] } },
    { name: 'names a preview the Node does not carry', node: [], after: [], previews: [m], want: { applied: [], previewed: [m] } },
    { name: 'ignores a preview the Node carries (or the write adds)', node: [], after: [m], previews: [m], want: { applied: [m], previewed: [] } },
  ];

  it.each(cases)('$name', ({ node, after, previews, want }) => {
    // Act
    const change = noExecuteChangeOf(node, after, previews);

    // Assess
    expect(change).toEqual(want);
  });
});

describe('Functions: countEvictions(), describeEvictionCounts()', () => {
  it('counts now (tolerationSeconds <= 0 included), later with the distinct delays, and kept', () => {
    // Act
    const counts = countEvictions([{ evict: 'now' }, { evict: { afterSeconds: 0 } }, { evict: { afterSeconds: 300 } }, { evict: { afterSeconds: 30 } }, { evict: { afterSeconds: 300 } }, { evict: 'never' }]);

    // Assess
    expect(counts).toEqual({ now: 2, later: 3, laterSeconds: [30, 300], kept: 1 });
  });

  it.each([
    { counts: { now: 3, later: 1, laterSeconds: [300], kept: 2 }, want: 'would evict 3 pods now, 1 after 300 s, keeps 2' },
    { counts: { now: 1, later: 0, laterSeconds: [], kept: 0 }, want: 'would evict 1 pod now, keeps 0' },
    { counts: { now: 0, later: 2, laterSeconds: [30, 300], kept: 1 }, want: 'would evict 0 pods now, 2 after 30-300 s, keeps 1' },
  ])('says "$want"', ({ counts, want }) => {
    expect(describeEvictionCounts(counts)).toBe(want);
  });
});
