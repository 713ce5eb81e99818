/**
 * planNodeTaints(): one reconcile's single write (upstream-capi.md §3.2 steps 4–5 and §3.7), plus the
 * product's own rules: configurable startup gate and first enablement (`adoptAsInitialized`).
 */
import { describe, expect, it } from 'vitest';
import { MalformedTrackingAnnotationError } from '#shared/errors.ts';
import { diffTaints, planNodeTaints, type NodeTaintPlan, type PlanInput } from '#shared/domain/taint-plan.ts';
import { OWN_TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY, type Taint } from '#shared/domain/taint.ts';
import { machineTaint, nodeBuilder, nodeTaint } from '#test/support/builders.ts';

const A = OWN_TRACKING_ANNOTATION;
const GATE = { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' } as const;
const gateTaint = nodeTaint(UNINITIALIZED_TAINT_KEY);

interface Case {
  readonly name: string;
  readonly input: PlanInput;
  readonly want:
    | { readonly kind: 'unchanged' }
    | { readonly kind: 'rejected'; readonly error: string }
    | {
        readonly kind: 'patch';
        readonly taints: readonly Taint[];
        /** The annotation part of the patch (only the tracking annotation, and only when it changes). */
        readonly patchAnnotations: Record<string, string | null>;
        readonly annotations: Record<string, string>;
      };
}

const cases: readonly Case[] = [
  // --- startup gate ---
  {
    name: 'removes the startup gate in the same plan that applies the OnInitialization taints',
    input: {
      node: nodeBuilder().withTaints(nodeTaint('kubelet'), gateTaint).build(),
      taints: [machineTaint('always', 'a'), machineTaint('init', 'i', 'NoSchedule', 'OnInitialization')],
      startupTaint: GATE,
    },
    want: {
      kind: 'patch',
      taints: [nodeTaint('kubelet'), nodeTaint('always', 'a'), nodeTaint('init', 'i')],
      patchAnnotations: { [A]: 'always:NoSchedule' },
      annotations: { [A]: 'always:NoSchedule' },
    },
  },
  {
    name: 'removes the startup gate from an already initialized Node too',
    input: { node: nodeBuilder().withTaints(gateTaint, nodeTaint('x')).withOwnTracking('').build(), taints: [], startupTaint: GATE },
    want: { kind: 'patch', taints: [nodeTaint('x')], patchAnnotations: {}, annotations: { [A]: '' } },
  },
  {
    name: 'removes every startup gate taint whatever its value, and only with its effect',
    input: {
      node: nodeBuilder()
        .withTaints(nodeTaint(UNINITIALIZED_TAINT_KEY, 'v'), nodeTaint(UNINITIALIZED_TAINT_KEY, undefined, 'PreferNoSchedule'), gateTaint)
        .withOwnTracking('')
        .build(),
      taints: [],
      startupTaint: GATE,
    },
    want: { kind: 'patch', taints: [nodeTaint(UNINITIALIZED_TAINT_KEY, undefined, 'PreferNoSchedule')], patchAnnotations: {}, annotations: { [A]: '' } },
  },
  {
    name: 'removes a configured startup gate key and leaves the upstream one alone',
    input: {
      node: nodeBuilder().withTaints(gateTaint, nodeTaint('example.com/booting', undefined, 'NoExecute')).withOwnTracking('').build(),
      taints: [],
      startupTaint: { key: 'example.com/booting', effect: 'NoExecute' },
    },
    want: { kind: 'patch', taints: [gateTaint], patchAnnotations: {}, annotations: { [A]: '' } },
  },
  {
    name: 'leaves a gate-like taint alone when no startup gate is configured',
    input: { node: nodeBuilder().withTaints(gateTaint).withOwnTracking('').build(), taints: [] },
    want: { kind: 'unchanged' },
  },
  {
    name: 'does not remove the startup gate when the tracking annotation is malformed (no write at all, Q7)',
    input: { node: nodeBuilder().withTaints(gateTaint).withOwnTracking('junk').build(), taints: [machineTaint('a')], startupTaint: GATE },
    want: { kind: 'rejected', error: 'invalid taint format: "junk"' },
  },

  // --- no write when the Node is right ---
  {
    name: 'plans no write when taints and annotation are already right',
    input: { node: nodeBuilder().withTaints(nodeTaint('a', 'v')).withOwnTracking('a:NoSchedule').build(), taints: [machineTaint('a', 'v')], startupTaint: GATE },
    want: { kind: 'unchanged' },
  },
  {
    name: 'plans an annotation-only write when only the annotation is missing',
    input: { node: nodeBuilder().withTaints(nodeTaint('a')).build(), taints: [] },
    want: { kind: 'patch', taints: [nodeTaint('a')], patchAnnotations: { [A]: '' }, annotations: { [A]: '' } },
  },

  // --- first enablement ---
  {
    name: 'adopts a Node without annotation as initialized: Always applied, OnInitialization not, annotation written',
    input: {
      node: nodeBuilder().withTaints(nodeTaint('kubelet')).build(),
      taints: [machineTaint('always'), machineTaint('init', undefined, 'NoSchedule', 'OnInitialization')],
      adoptAsInitialized: true,
    },
    want: { kind: 'patch', taints: [nodeTaint('kubelet'), nodeTaint('always')], patchAnnotations: { [A]: 'always:NoSchedule' }, annotations: { [A]: 'always:NoSchedule' } },
  },
  {
    name: 'writes an empty annotation when adopting a Node with no Always taints declared',
    input: { node: nodeBuilder().build(), taints: [machineTaint('init', undefined, 'NoSchedule', 'OnInitialization')], adoptAsInitialized: true },
    want: { kind: 'patch', taints: [], patchAnnotations: { [A]: '' }, annotations: { [A]: '' } },
  },
  {
    name: 'changes nothing through adoption when the annotation is already present',
    input: {
      node: nodeBuilder().withTaints(nodeTaint('always')).withOwnTracking('always:NoSchedule').build(),
      taints: [machineTaint('always'), machineTaint('init', undefined, 'NoSchedule', 'OnInitialization')],
      adoptAsInitialized: true,
    },
    want: { kind: 'unchanged' },
  },
  {
    // The very first Nodes after a deployment are created seconds before the first reconcile records enablement.
    name: 'never adopts a Node that still carries the startup gate: it is new, OnInitialization taints apply',
    input: {
      node: nodeBuilder().withTaints(nodeTaint('gate')).build(),
      taints: [machineTaint('always'), machineTaint('init', undefined, 'NoSchedule', 'OnInitialization')],
      startupTaint: { key: 'gate', effect: 'NoSchedule' },
      adoptAsInitialized: true,
    },
    want: { kind: 'patch', taints: [nodeTaint('always'), nodeTaint('init')], patchAnnotations: { [A]: 'always:NoSchedule' }, annotations: { [A]: 'always:NoSchedule' } },
  },
  {
    name: 'applies OnInitialization taints when adoption is off and the annotation is absent',
    input: { node: nodeBuilder().build(), taints: [machineTaint('init', undefined, 'NoSchedule', 'OnInitialization')], adoptAsInitialized: false },
    want: { kind: 'patch', taints: [nodeTaint('init')], patchAnnotations: { [A]: '' }, annotations: { [A]: '' } },
  },
];

describe('Function: planNodeTaints()', () => {
  it.each(cases)('$name', ({ input, want }) => {
    // Prepare
    const before = structuredClone(input);

    // Act
    const plan: NodeTaintPlan = planNodeTaints(input);

    // Assess
    expect(plan.kind).toBe(want.kind);
    if (plan.kind === 'unchanged') {
      expect(plan.state).toEqual({ taints: input.node.taints, annotations: input.node.annotations });
    } else if (plan.kind === 'rejected' && want.kind === 'rejected') {
      expect(plan.error).toBeInstanceOf(MalformedTrackingAnnotationError);
      expect(plan.error.message).toBe(want.error);
    } else if (plan.kind === 'patch' && want.kind === 'patch') {
      expect(plan.patch).toEqual({ resourceVersion: input.node.resourceVersion, taints: want.taints, annotations: want.patchAnnotations });
      expect(plan.after).toEqual({ taints: want.taints, annotations: { ...input.node.annotations, ...want.annotations } });
      expect(plan.before).toEqual({ taints: input.node.taints, annotations: input.node.annotations });
    }
    expect(input).toEqual(before);
  });

  it('carries the Node resourceVersion as the precondition of the patch', () => {
    // Prepare
    const node = nodeBuilder().withResourceVersion('4711').build();

    // Act
    const plan = planNodeTaints({ node, taints: [] });

    // Assess
    expect(plan.kind === 'patch' && plan.patch.resourceVersion).toBe('4711');
  });

  it('describes added, removed and updated taints and the annotation change in the diff', () => {
    // Prepare
    const node = nodeBuilder()
      .withTaints(gateTaint, nodeTaint('old'), nodeTaint('fix', 'before'), nodeTaint('keep'))
      .withOwnTracking('fix:NoSchedule,old:NoSchedule')
      .build();

    // Act
    const plan = planNodeTaints({ node, taints: [machineTaint('fix', 'after'), machineTaint('new', 'n')], startupTaint: GATE });

    // Assess
    expect(plan.kind).toBe('patch');
    expect(plan.kind === 'patch' && plan.diff).toEqual({
      added: [nodeTaint('new', 'n')],
      removed: [gateTaint, nodeTaint('old')],
      updated: [{ before: nodeTaint('fix', 'before'), after: nodeTaint('fix', 'after') }],
      trackingAnnotation: { name: A, before: 'fix:NoSchedule,old:NoSchedule', after: 'fix:NoSchedule,new:NoSchedule' },
    });
    expect(plan.kind === 'patch' && plan.patch.taints).toEqual([nodeTaint('fix', 'after'), nodeTaint('keep'), nodeTaint('new', 'n')]);
  });
});

describe('Function: diffTaints()', () => {
  it('compares by key+effect and reports value changes as updates', () => {
    // Prepare
    const before = [nodeTaint('a', '1'), nodeTaint('b'), nodeTaint('c', undefined, 'NoExecute')];
    const after = [nodeTaint('a', '2'), nodeTaint('c', undefined, 'NoExecute'), nodeTaint('b', undefined, 'NoExecute')];

    // Act
    const diff = diffTaints(before, after);

    // Assess
    expect(diff).toEqual({
      added: [nodeTaint('b', undefined, 'NoExecute')],
      removed: [nodeTaint('b')],
      updated: [{ before: nodeTaint('a', '1'), after: nodeTaint('a', '2') }],
    });
  });

  it('reports nothing for equal lists', () => {
    // Act
    const diff = diffTaints([nodeTaint('a', '1')], [nodeTaint('a', '1')]);

    // Assess
    expect(diff).toEqual({ added: [], removed: [], updated: [] });
  });
});
