/**
 * Invariants of the domain for any input (fast-check): untouched foreign taints, idempotent planning,
 * a round-tripping tracking annotation, and invalid declarations that never yield a declaration.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { declaredTaintsOf } from '#shared/domain/declarations.ts';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';
import { planNodeTaints } from '#shared/domain/taint-plan.ts';
import { OWN_TRACKING_ANNOTATION as OWN, TRACKING_ANNOTATION as UPSTREAM, UNINITIALIZED_TAINT_KEY, taintId, type MachineTaint, type Taint } from '#shared/domain/taint.ts';
import { planOwnedTaints } from '#shared/domain/ownership.ts';
import type { EffectiveDeclaration } from '#shared/domain/declarations.ts';
import { decodeOwnedTaints, encodeOwnedTaints, parseOwnedTaintId } from '#shared/domain/tracking-annotation.ts';

const EFFECTS = ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] as const;
const GATE = { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' } as const;

// Small pools so that Node taints, Machine taints and tracked entries collide often.
const poolKey = fc.constantFrom('a', 'b', 'B', 'a-b', 'a.b', 'a/b', 'example.com/gpu', 'x');
const validKey = fc.oneof(
  poolKey,
  fc.tuple(fc.option(fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,10}[a-z0-9])?$/), { nil: undefined }), fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,20}[A-Za-z0-9])?$/))
    .filter(([prefix]) => prefix === undefined || !/\.\.|\.-|-\./.test(prefix))
    .map(([prefix, name]) => (prefix === undefined ? name : `${prefix}/${name}`)),
);
const effect = fc.constantFrom(...EFFECTS);
const value = fc.option(fc.constantFrom('v1', 'v2', 'x'), { nil: undefined });
const nodeTaintArb: fc.Arbitrary<Taint> = fc
  .record({ key: fc.oneof(poolKey, fc.constant(UNINITIALIZED_TAINT_KEY)), value, effect: fc.constantFrom(...EFFECTS, 'Custom'), timeAdded: fc.option(fc.constant('2026-01-01T00:00:00Z'), { nil: undefined }) })
  .map(({ key, value, effect, timeAdded }) => ({ key, effect, ...(value === undefined ? {} : { value }), ...(timeAdded === undefined ? {} : { timeAdded }) }));
const machineTaintsArb: fc.Arbitrary<MachineTaint[]> = fc
  .uniqueArray(fc.record({ key: poolKey, effect, value, propagation: fc.constantFrom('Always', 'OnInitialization') as fc.Arbitrary<MachineTaint['propagation']> }), {
    selector: (t) => taintId(t),
    maxLength: 6,
  })
  .map((ts) => ts.map(({ value, ...t }) => (value === undefined ? t : { ...t, value })));
/** Tracking annotation: absent, or entries from the pool plus tolerated oddities (and rarely a malformed one). */
const trackingArb = fc.option(
  fc
    .array(fc.oneof({ weight: 8, arbitrary: fc.tuple(poolKey, effect).map(([k, e]) => `${k}:${e}`) }, { weight: 1, arbitrary: fc.constantFrom('', ':NoSchedule', 'a:', ' a:NoSchedule') }, { weight: 1, arbitrary: fc.constantFrom('junk', 'a:b:c') }), { maxLength: 5 })
    .map((entries) => entries.join(',')),
  { nil: undefined },
);
const nodeArb = fc
  .record({ taints: fc.array(nodeTaintArb, { maxLength: 8 }), tracking: trackingArb, upstream: trackingArb, other: fc.option(fc.constant('keep'), { nil: undefined }) })
  .map(({ taints, tracking, upstream, other }) => ({
    resourceVersion: '1',
    taints,
    annotations: {
      ...(tracking === undefined ? {} : { [OWN]: tracking }),
      ...(upstream === undefined ? {} : { [UPSTREAM]: upstream }),
      ...(other === undefined ? {} : { other }),
    },
  }));

describe('Property: planNodeTaints()', () => {
  it('never removes or changes a Node taint that is neither tracked nor declared', () => {
    fc.assert(
      fc.property(nodeArb, machineTaintsArb, fc.boolean(), (node, taints, adoptAsInitialized) => {
        // Prepare
        const tracked = decodeOwnedTaints(node.annotations[OWN] ?? '');
        const declared = new Set(taints.map(taintId));
        const foreign = (t: Taint) => !tracked.has(taintId(t)) && !declared.has(taintId(t)) && taintId(t) !== taintId(GATE);

        // Act
        const plan = planNodeTaints({ node, taints, startupTaint: GATE, adoptAsInitialized });

        // Assess
        if (plan.kind === 'rejected') return; // no write at all: nothing can be lost
        const after = plan.kind === 'patch' ? plan.after.taints : plan.state.taints;
        expect(after.filter(foreign)).toEqual(node.taints.filter(foreign));
      }),
      { numRuns: 500 },
    );
  });

  it('is a no-op the second time: plan, apply the patch, plan again gives unchanged', () => {
    fc.assert(
      fc.property(nodeArb, machineTaintsArb, fc.boolean(), (node, taints, adoptAsInitialized) => {
        // Prepare
        const first = planNodeTaints({ node, taints, startupTaint: GATE, adoptAsInitialized });
        fc.pre(first.kind !== 'rejected');
        const applied =
          first.kind === 'patch'
            ? {
                resourceVersion: '2',
                taints: first.patch.taints,
                annotations: Object.fromEntries(
                  Object.entries({ ...node.annotations, ...first.patch.annotations }).filter((e): e is [string, string] => e[1] !== null),
                ),
              }
            : node;

        // Act
        const second = planNodeTaints({ node: applied, taints, startupTaint: GATE, adoptAsInitialized });

        // Assess
        expect(second.kind).toBe('unchanged');
        if (first.kind === 'patch') expect(applied.annotations).toEqual(first.after.annotations);
      }),
      { numRuns: 500 },
    );
  });
});

describe('Property: tracking annotation', () => {
  const idsArb = fc.array(fc.tuple(validKey, effect).map(([k, e]) => `${k}:${e}`), { maxLength: 10 });

  it('round-trips valid ids through encode and decode', () => {
    fc.assert(
      fc.property(idsArb, (ids) => {
        // Act
        const encoded = encodeOwnedTaints(ids);
        const decoded = decodeOwnedTaints(encoded);

        // Assess
        expect(decoded).toEqual(new Set(ids));
        expect(encodeOwnedTaints(decoded)).toBe(encoded);
        for (const id of decoded) expect(taintId(parseOwnedTaintId(id))).toBe(id);
      }),
    );
  });

  it('encodes sorted byte-wise and without duplicates', () => {
    fc.assert(
      fc.property(idsArb, (ids) => {
        // Act
        const entries = encodeOwnedTaints(ids).split(',').filter((e) => e !== '');

        // Assess
        const byteSorted = [...new Set(ids)].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
        expect(entries).toEqual(byteSorted);
        expect(new Set(entries).size).toBe(entries.length);
      }),
    );
  });
});

describe('Property: declaredTaintsOf()', () => {
  const badKey = fc.oneof(
    fc.constantFrom(
      'UPPER.example.com/x',
      '-lead',
      'trail-',
      'a/b/c',
      '/a',
      'n'.repeat(64),
      `${'p'.repeat(254)}/a`,
      'node.kubernetes.io/foo',
      'node.cloudprovider.kubernetes.io/x',
      'node.cluster.x-k8s.io/uninitialized',
      'node.cluster.x-k8s.io/outdated-revision',
      'node-role.kubernetes.io/master',
      'node-role.kubernetes.io/control-plane',
      'in valid',
    ),
    fc.tuple(fc.stringMatching(/^[a-z]{1,5}$/), fc.constantFrom('!', '#', '$', '%', '^', '&', '*', '~', '+', '?')).map(([k, c]) => `${k}${c}${k}`),
  );
  const badValue = fc.constantFrom('', '-x', 'x-', 'a b', 'v'.repeat(64), 'ä');
  const badEffect = fc.constantFrom('', 'noschedule', 'Foo', 'NOEXECUTE');
  const badPropagation = fc.constantFrom('', 'always', 'Never');
  /** One invalid taint: exactly one field broken. */
  const invalidTaint = fc.oneof(
    badKey.map((key) => ({ key, effect: 'NoSchedule', propagation: 'Always' })),
    badValue.map((value) => ({ key: 'k', value, effect: 'NoSchedule', propagation: 'Always' })),
    badEffect.map((effect) => ({ key: 'k', effect, propagation: 'Always' })),
    badPropagation.map((propagation) => ({ key: 'k', effect: 'NoSchedule', propagation })),
  );
  const validTaints = fc.uniqueArray(fc.record({ key: poolKey, effect: fc.constant('NoSchedule'), propagation: fc.constant('Always') }), { selector: (t) => t.key, maxLength: 3 });
  const toEntry = (t: { key: string; value?: string; effect: string; propagation: string }) => `${t.key}${t.value === undefined ? '' : `=${t.value}`}:${t.effect}${t.propagation === 'Always' ? '' : `@${t.propagation}`}`;

  it('yields issues and never a declaration when any source holds an invalid taint', () => {
    fc.assert(
      fc.property(invalidTaint, validTaints, fc.constantFrom(...DECLARATION_ANNOTATIONS, 'spec.taints' as const), fc.nat(), (bad, good, where, at) => {
        // Prepare
        const list: { key: string; value?: string; effect: string; propagation: string }[] = [...good];
        list.splice(at % (list.length + 1), 0, bad);
        const machine =
          where === 'spec.taints'
            ? { labels: {}, annotations: {}, specTaints: list }
            : { labels: {}, annotations: { [where]: list.map(toEntry).join(',') }, specTaints: undefined };

        // Act
        const result = declaredTaintsOf(machine);

        // Assess
        expect(result.valid).toBe(false);
        expect(result).not.toHaveProperty('declaration');
        expect(result.valid ? 0 : result.issues.length).toBeGreaterThan(0);
      }),
      { numRuns: 500 },
    );
  });

  it('yields issues for a duplicate key+effect within one source', () => {
    fc.assert(
      fc.property(poolKey, effect, fc.constantFrom(...DECLARATION_ANNOTATIONS, 'spec.taints' as const), (key, eff, where) => {
        // Prepare
        const list: { key: string; value?: string; effect: string; propagation: string }[] = [
          { key, effect: eff, propagation: 'Always' },
          { key, value: 'other', effect: eff, propagation: 'OnInitialization' },
        ];
        const machine =
          where === 'spec.taints'
            ? { labels: {}, annotations: {}, specTaints: list }
            : { labels: {}, annotations: { [where]: list.map(toEntry).join(',') }, specTaints: undefined };

        // Act
        const result = declaredTaintsOf(machine);

        // Assess
        expect(result.valid ? [] : result.issues.map((i) => i.rule)).toEqual(['unique']);
      }),
    );
  });
});

describe('Property: planOwnedTaints() next to upstream CAPI', () => {
  /** A declaration whose taints come from spec.taints or from the product's machine annotation, at random. */
  const declarationArb: fc.Arbitrary<EffectiveDeclaration> = fc
    .tuple(machineTaintsArb, fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }))
    .map(([taints, fromSpec]) => ({
      taints,
      previews: [],
      sourceOf: Object.fromEntries(taints.map((t, i) => [taintId(t), fromSpec[i] ? 'spec.taints' : 'taints.capi-taint-propagator.dev/machine'])),
      overrides: [],
    }));

  it("never writes upstream's annotation and never removes or changes a taint upstream holds", () => {
    fc.assert(
      fc.property(nodeArb, declarationArb, fc.boolean(), (node, declaration, adoptAsInitialized) => {
        // Prepare
        const upstreamIds = new Set([
          ...declaration.taints.filter((t) => declaration.sourceOf[taintId(t)] === 'spec.taints').map(taintId),
          ...decodeOwnedTaints(node.annotations[UPSTREAM] ?? ''),
        ]);
        const held = node.taints.filter((t) => upstreamIds.has(taintId(t)));

        // Act
        const { plan } = planOwnedTaints(node, declaration, { startupTaint: GATE, adoptAsInitialized });

        // Assess
        if (plan.kind !== 'patch') return;
        expect(Object.keys(plan.patch.annotations)).not.toContain(UPSTREAM);
        for (const t of held) {
          const declaredByProduct = declaration.taints.some((d) => taintId(d) === taintId(t) && declaration.sourceOf[taintId(d)] !== 'spec.taints');
          if (!declaredByProduct) expect(plan.patch.taints).toContainEqual(t);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('is idempotent: planning again on the planned Node writes nothing', () => {
    fc.assert(
      fc.property(nodeArb, declarationArb, (node, declaration) => {
        // Act
        const first = planOwnedTaints(node, declaration, { startupTaint: GATE }).plan;
        if (first.kind !== 'patch') return;
        const second = planOwnedTaints({ ...node, taints: first.after.taints, annotations: first.after.annotations }, declaration, { startupTaint: GATE }).plan;

        // Assess
        expect(second.kind).toBe('unchanged');
      }),
      { numRuns: 500 },
    );
  });
});
