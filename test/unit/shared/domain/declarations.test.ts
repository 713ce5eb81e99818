/**
 * Declarations from `spec.taints` and the three annotations (docs/declaring-taints.md):
 * syntax, precedence (spec.taints > machine > cluster > class, by key+effect), cancel entries,
 * the same validation as upstream for every source, and the merged-size limit.
 */
import { describe, expect, it } from 'vitest';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';
import { declaredTaintsOf, parseTaintAnnotation, type AnnotationEntry, type Override } from '#shared/domain/declarations.ts';
import type { MachineFacts } from '#shared/model/views.ts';
import type { MachineTaint } from '#shared/domain/taint.ts';
import { machineBuilder, machineTaint } from '#test/support/builders.ts';

const CLASS = 'taints.capi-taint-propagator.dev/class';
const CLUSTER = 'taints.capi-taint-propagator.dev/cluster';
const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const field = (annotation: string) => `metadata.annotations[${annotation}]`;

describe('Constant: DECLARATION_ANNOTATIONS', () => {
  it('lists the annotations from lowest to highest precedence', () => {
    // Assess
    expect(DECLARATION_ANNOTATIONS).toEqual([CLASS, CLUSTER, MACHINE]);
  });
});

describe('Function: parseTaintAnnotation()', () => {
  const declare = (taint: Record<string, string>): AnnotationEntry => ({ kind: 'declare', taint });
  const cases: ReadonlyArray<{ name: string; value: string; entries: AnnotationEntry[]; issues: string[] }> = [
    {
      name: 'parses key=value:Effect with the default propagation Always',
      value: 'gpu=a100:NoSchedule',
      entries: [declare({ key: 'gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always' })],
      issues: [],
    },
    {
      name: 'parses an entry without a value',
      value: 'example.com/spot:PreferNoSchedule',
      entries: [declare({ key: 'example.com/spot', effect: 'PreferNoSchedule', propagation: 'Always' })],
      issues: [],
    },
    {
      name: 'parses an explicit propagation',
      value: 'boot=1:NoExecute@OnInitialization',
      entries: [declare({ key: 'boot', value: '1', effect: 'NoExecute', propagation: 'OnInitialization' })],
      issues: [],
    },
    {
      name: 'ignores whitespace around entries',
      value: '  a:NoSchedule ,\n b=1:NoExecute@Always\t',
      entries: [declare({ key: 'a', effect: 'NoSchedule', propagation: 'Always' }), declare({ key: 'b', value: '1', effect: 'NoExecute', propagation: 'Always' })],
      issues: [],
    },
    { name: 'parses a cancel entry', value: 'a:NoSchedule-', entries: [{ kind: 'cancel', key: 'a', effect: 'NoSchedule' }], issues: [] },
    { name: 'parses an empty annotation as no entries', value: '', entries: [], issues: [] },
    { name: 'parses a blank annotation as no entries', value: '  ', entries: [], issues: [] },
    {
      name: 'keeps an explicit empty value for validation to reject',
      value: 'a=:NoSchedule',
      entries: [declare({ key: 'a', value: '', effect: 'NoSchedule', propagation: 'Always' })],
      issues: [],
    },
    {
      name: 'keeps an empty propagation for validation to reject',
      value: 'a:NoSchedule@',
      entries: [declare({ key: 'a', effect: 'NoSchedule', propagation: '' })],
      issues: [],
    },
    { name: 'reports an empty entry by its position', value: 'a:NoSchedule,', entries: [declare({ key: 'a', effect: 'NoSchedule', propagation: 'Always' })], issues: ['[1] syntax'] },
    { name: 'reports an entry without an effect', value: 'gpu', entries: [], issues: ['[0] syntax'] },
    { name: 'reports an entry with two colons', value: 'b:NoSchedule,a:b:NoSchedule', entries: [declare({ key: 'b', effect: 'NoSchedule', propagation: 'Always' })], issues: ['[1] syntax'] },
    { name: 'reports a cancel entry with a value', value: 'a=b:NoSchedule-', entries: [], issues: ['[0] syntax'] },
    { name: 'reports two propagations', value: 'a:NoSchedule@Always@Always', entries: [], issues: ['[0] syntax'] },
  ];

  it.each(cases)('$name', ({ value, entries, issues }) => {
    // Act
    const parsed = parseTaintAnnotation(value, MACHINE);

    // Assess
    expect(parsed.entries).toEqual(entries);
    expect(parsed.issues.map((i) => `${i.field.slice(field(MACHINE).length)} ${i.rule}`)).toEqual(issues);
  });

  it('names the annotation and quotes the entry in a syntax issue', () => {
    // Act
    const parsed = parseTaintAnnotation('a:NoSchedule, gpu ', CLASS);

    // Assess
    expect(parsed.issues).toEqual([
      { field: `${field(CLASS)}[1]`, rule: 'syntax', message: 'Invalid value: "gpu": is not key[=value]:Effect[@Propagation] or key:Effect-' },
    ]);
  });

  it('reports pasted JSON as one syntax error, not one issue per fragment', () => {
    // Act
    const result = declaredTaintsOf({ specTaints: undefined, labels: {}, annotations: { [CLASS]: ' [{"key":"gpu","value":"a100","effect":"NoSchedule"},{"key":"spot","effect":"NoExecute"}]' } });

    // Assess
    expect(result.valid).toBe(false);
    if (result.valid) return;
    expect(result.issues).toHaveLength(1);
    expect(result.issues[0]).toMatchObject({ field: field(CLASS), rule: 'syntax' });
    expect(result.issues[0]?.message).toMatch(/^Invalid value: "\[\{\\"key\\":\\"gpu\\".*looks like JSON/);
  });

  it('reports an annotation with a syntax error by its syntax errors alone', () => {
    // Act
    const result = declaredTaintsOf({ specTaints: undefined, labels: {}, annotations: { [CLASS]: 'gpu, Bad Key:NoSchedul' } });

    // Assess
    expect(result.valid).toBe(false);
    if (!result.valid) expect(result.issues.map((i) => i.rule)).toEqual(['syntax']);
  });

  it('quotes the offending value the way the API server does', () => {
    // Act
    const result = declaredTaintsOf({ specTaints: undefined, labels: {}, annotations: { [CLASS]: 'gpu:NoSchedul' } });

    // Assess
    expect(result.valid).toBe(false);
    if (!result.valid) expect(result.issues[0]?.message).toBe('Unsupported value: "NoSchedul": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"');
  });
});

interface Case {
  readonly name: string;
  readonly machine: Pick<MachineFacts, 'specTaints' | 'annotations' | 'labels'>;
  readonly want:
    | { readonly taints: readonly MachineTaint[]; readonly sourceOf: Record<string, string>; readonly overrides?: readonly Override[] }
    | { readonly issues: readonly string[] };
}

const spec = (...taints: Record<string, unknown>[]) => taints;
const raw = (key: string, extra: Record<string, unknown> = {}) => ({ key, effect: 'NoSchedule', propagation: 'Always', ...extra });
const many = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}:NoSchedule`).join(',');

const cases: readonly Case[] = [
  // --- single sources ---
  { name: 'declares nothing without any source', machine: machineBuilder().build(), want: { taints: [], sourceOf: {} } },
  {
    name: 'declares spec.taints as they are',
    machine: machineBuilder().withSpecTaints(spec(raw('a', { value: 'v' }), raw('b', { propagation: 'OnInitialization' }))).build(),
    want: { taints: [machineTaint('a', 'v'), machineTaint('b', undefined, 'NoSchedule', 'OnInitialization')], sourceOf: { 'a:NoSchedule': 'spec.taints', 'b:NoSchedule': 'spec.taints' } },
  },
  {
    name: 'declares the taints of one annotation',
    machine: machineBuilder().withAnnotation(CLASS, 'gpu=a100:NoSchedule,boot:NoExecute@OnInitialization').build(),
    want: { taints: [machineTaint('gpu', 'a100'), machineTaint('boot', undefined, 'NoExecute', 'OnInitialization')], sourceOf: { 'gpu:NoSchedule': CLASS, 'boot:NoExecute': CLASS } },
  },
  { name: 'declares nothing from an empty annotation', machine: machineBuilder().withAnnotation(MACHINE, '').build(), want: { taints: [], sourceOf: {} } },

  // --- combination and precedence ---
  {
    name: 'combines distinct taints of all sources: spec.taints first, then machine, cluster, class',
    machine: machineBuilder().withAnnotation(CLASS, 'c:NoSchedule').withAnnotation(CLUSTER, 'k:NoSchedule').withAnnotation(MACHINE, 'm:NoSchedule').withSpecTaints(spec(raw('s'))).build(),
    want: {
      taints: ['s', 'm', 'k', 'c'].map((k) => machineTaint(k)),
      sourceOf: { 's:NoSchedule': 'spec.taints', 'm:NoSchedule': MACHINE, 'k:NoSchedule': CLUSTER, 'c:NoSchedule': CLASS },
      overrides: [],
    },
  },
  {
    name: 'lets the cluster annotation override the class annotation on a key+effect clash',
    machine: machineBuilder().withAnnotation(CLASS, 'gpu=class:NoSchedule').withAnnotation(CLUSTER, 'gpu=cluster:NoSchedule@OnInitialization').build(),
    want: {
      taints: [machineTaint('gpu', 'cluster', 'NoSchedule', 'OnInitialization')],
      sourceOf: { 'gpu:NoSchedule': CLUSTER },
      overrides: [{ id: 'gpu:NoSchedule', source: CLASS, by: CLUSTER, cancelled: false }],
    },
  },
  {
    name: 'lets the machine annotation override the cluster and class annotations',
    machine: machineBuilder().withAnnotation(CLASS, 'gpu=class:NoSchedule').withAnnotation(CLUSTER, 'gpu=cluster:NoSchedule').withAnnotation(MACHINE, 'gpu=machine:NoSchedule').build(),
    want: {
      taints: [machineTaint('gpu', 'machine')],
      sourceOf: { 'gpu:NoSchedule': MACHINE },
      overrides: [
        { id: 'gpu:NoSchedule', source: CLASS, by: CLUSTER, cancelled: false },
        { id: 'gpu:NoSchedule', source: CLUSTER, by: MACHINE, cancelled: false },
      ],
    },
  },
  {
    name: 'lets spec.taints override every annotation',
    machine: machineBuilder().withAnnotation(MACHINE, 'gpu=annotation:NoSchedule').withSpecTaints(spec(raw('gpu', { value: 'spec' }))).build(),
    want: {
      taints: [machineTaint('gpu', 'spec')],
      sourceOf: { 'gpu:NoSchedule': 'spec.taints' },
      overrides: [{ id: 'gpu:NoSchedule', source: MACHINE, by: 'spec.taints', cancelled: false }],
    },
  },
  {
    name: 'keeps the same key with different effects from different sources',
    machine: machineBuilder().withAnnotation(CLASS, 'gpu:NoSchedule').withSpecTaints(spec(raw('gpu', { effect: 'NoExecute' }))).build(),
    want: {
      taints: [machineTaint('gpu', undefined, 'NoExecute'), machineTaint('gpu')],
      sourceOf: { 'gpu:NoExecute': 'spec.taints', 'gpu:NoSchedule': CLASS },
      overrides: [],
    },
  },

  // --- cancel ---
  {
    name: 'cancels a lower declaration at a higher layer',
    machine: machineBuilder().withAnnotation(CLASS, 'gpu:NoSchedule,spot:PreferNoSchedule').withAnnotation(CLUSTER, 'gpu:NoSchedule-').build(),
    want: {
      taints: [machineTaint('spot', undefined, 'PreferNoSchedule')],
      sourceOf: { 'spot:PreferNoSchedule': CLASS },
      overrides: [{ id: 'gpu:NoSchedule', source: CLASS, by: CLUSTER, cancelled: true }],
    },
  },
  {
    name: 'cancels only the named effect',
    machine: machineBuilder().withAnnotation(CLASS, 'gpu:NoSchedule,gpu:NoExecute').withAnnotation(MACHINE, 'gpu:NoExecute-').build(),
    want: { taints: [machineTaint('gpu')], sourceOf: { 'gpu:NoSchedule': CLASS }, overrides: [{ id: 'gpu:NoExecute', source: CLASS, by: MACHINE, cancelled: true }] },
  },
  {
    name: 'does not let a cancel affect a higher layer',
    machine: machineBuilder().withAnnotation(CLUSTER, 'gpu:NoSchedule-').withAnnotation(MACHINE, 'gpu:NoSchedule').build(),
    want: { taints: [machineTaint('gpu')], sourceOf: { 'gpu:NoSchedule': MACHINE }, overrides: [] },
  },
  {
    name: 'lets spec.taints declare again what an annotation cancelled',
    machine: machineBuilder().withAnnotation(CLASS, 'gpu=a:NoSchedule').withAnnotation(MACHINE, 'gpu:NoSchedule-').withSpecTaints(spec(raw('gpu', { value: 'b' }))).build(),
    want: {
      taints: [machineTaint('gpu', 'b')],
      sourceOf: { 'gpu:NoSchedule': 'spec.taints' },
      overrides: [{ id: 'gpu:NoSchedule', source: CLASS, by: MACHINE, cancelled: true }],
    },
  },
  {
    name: 'ignores a cancel of a taint nobody declared',
    machine: machineBuilder().withAnnotation(MACHINE, 'gpu:NoSchedule-').build(),
    want: { taints: [], sourceOf: {}, overrides: [] },
  },
  {
    name: 'refuses a taint both declared and cancelled in the same annotation',
    machine: machineBuilder().withAnnotation(MACHINE, 'gpu:NoSchedule,gpu:NoSchedule-').build(),
    want: { issues: [`${field(MACHINE)}[1] unique`] },
  },
  {
    name: 'validates the key of a cancel entry',
    machine: machineBuilder().withAnnotation(MACHINE, 'node.kubernetes.io/foo:NoSchedule-,a:Bad-').build(),
    want: { issues: [`${field(MACHINE)}[0].key reserved`, `${field(MACHINE)}[1].effect enum`] },
  },
  {
    name: 'names the position of an invalid entry that follows a cancel entry',
    machine: machineBuilder().withAnnotation(MACHINE, 'old:NoSchedule-, ok:NoSchedule, node.kubernetes.io/x:NoSchedule').build(),
    want: { issues: [`${field(MACHINE)}[2].key reserved`] },
  },
  {
    name: 'allows cancelling the control-plane key on a worker',
    machine: machineBuilder().withAnnotation(MACHINE, 'node-role.kubernetes.io/control-plane:NoSchedule-').build(),
    want: { taints: [], sourceOf: {}, overrides: [] },
  },

  // --- same validation for every source ---
  {
    name: 'makes the whole declaration invalid when one annotation entry is invalid, even with valid spec.taints',
    machine: machineBuilder().withAnnotation(CLASS, 'ok:NoSchedule,node.kubernetes.io/x:NoSchedule').withSpecTaints(spec(raw('fine'))).build(),
    want: { issues: [`${field(CLASS)}[1].key reserved`] },
  },
  {
    name: 'makes the whole declaration invalid when spec.taints is invalid, even with valid annotations',
    machine: machineBuilder().withAnnotation(CLASS, 'ok:NoSchedule').withSpecTaints(spec(raw('a', { value: '' }))).build(),
    want: { issues: ['spec.taints[0].value minLength'] },
  },
  { name: 'rejects an explicit empty spec.taints list', machine: machineBuilder().withSpecTaints([]).build(), want: { issues: ['spec.taints minItems'] } },
  { name: 'rejects a syntax error', machine: machineBuilder().withAnnotation(CLUSTER, 'gpu').build(), want: { issues: [`${field(CLUSTER)}[0] syntax`] } },
  { name: 'rejects an explicit empty value in an annotation', machine: machineBuilder().withAnnotation(CLASS, 'a=:NoSchedule').build(), want: { issues: [`${field(CLASS)}[0].value minLength`] } },
  { name: 'rejects an unknown effect in an annotation', machine: machineBuilder().withAnnotation(CLASS, 'a:noschedule').build(), want: { issues: [`${field(CLASS)}[0].effect enum`] } },
  { name: 'rejects an unknown propagation in an annotation', machine: machineBuilder().withAnnotation(CLASS, 'a:NoSchedule@Never').build(), want: { issues: [`${field(CLASS)}[0].propagation enum`] } },
  { name: 'rejects an empty propagation in an annotation', machine: machineBuilder().withAnnotation(CLASS, 'a:NoSchedule@').build(), want: { issues: [`${field(CLASS)}[0].propagation required`] } },
  {
    name: 'rejects a 64-character name in an annotation',
    machine: machineBuilder().withAnnotation(CLASS, `${'n'.repeat(64)}:NoSchedule`).build(),
    want: { issues: [`${field(CLASS)}[0].key labelKey`] },
  },
  {
    name: 'rejects duplicate key+effect within one annotation',
    machine: machineBuilder().withAnnotation(CLUSTER, 'a=1:NoSchedule,a=2:NoSchedule').build(),
    want: { issues: [`${field(CLUSTER)}[1] unique`] },
  },
  {
    name: 'refuses the control-plane key on a worker Machine in an annotation',
    machine: machineBuilder().withAnnotation(CLASS, 'node-role.kubernetes.io/control-plane:NoSchedule').build(),
    want: { issues: [`${field(CLASS)}[0].key worker`] },
  },
  {
    name: 'refuses the control-plane key on a worker Machine in spec.taints',
    machine: machineBuilder().withSpecTaints(spec(raw('node-role.kubernetes.io/control-plane'))).build(),
    want: { issues: ['spec.taints[0].key worker'] },
  },
  {
    name: 'accepts the control-plane key on a control-plane Machine (label cluster.x-k8s.io/control-plane)',
    machine: machineBuilder().controlPlane().withAnnotation(CLASS, 'node-role.kubernetes.io/control-plane:NoSchedule').build(),
    want: { taints: [machineTaint('node-role.kubernetes.io/control-plane')], sourceOf: { 'node-role.kubernetes.io/control-plane:NoSchedule': CLASS } },
  },
  {
    name: 'reports the issues of every source together',
    machine: machineBuilder().withAnnotation(CLASS, 'Bad/x:NoSchedule').withAnnotation(MACHINE, 'x').withSpecTaints(spec(raw('a', { effect: 'Never' }))).build(),
    want: { issues: [`${field(CLASS)}[0].key pattern`, `${field(CLASS)}[0].key labelKey`, `${field(MACHINE)}[0] syntax`, 'spec.taints[0].effect enum'] },
  },

  // --- merged size ---
  {
    name: 'accepts 64 taints over all sources',
    machine: machineBuilder().withAnnotation(CLASS, many('c', 32)).withAnnotation(CLUSTER, many('k', 32)).build(),
    want: { taints: Array.from({ length: 64 }, (_, i) => machineTaint(i < 32 ? `k${i}` : `c${i - 32}`)), sourceOf: expect.any(Object) as Record<string, string> },
  },
  {
    name: 'rejects more than 64 taints over all sources',
    machine: machineBuilder().withAnnotation(CLASS, many('c', 40)).withAnnotation(CLUSTER, many('k', 40)).build(),
    want: { issues: ['taints maxItems'] },
  },
  {
    name: 'counts overridden taints once in the merged size',
    machine: machineBuilder().withAnnotation(CLASS, many('c', 64)).withAnnotation(CLUSTER, many('c', 64)).build(),
    want: { taints: Array.from({ length: 64 }, (_, i) => machineTaint(`c${i}`)), sourceOf: expect.any(Object) as Record<string, string> },
  },
  {
    name: 'rejects 65 taints in one annotation',
    machine: machineBuilder().withAnnotation(MACHINE, many('m', 65)).build(),
    want: { issues: [`${field(MACHINE)} maxItems`] },
  },
];

describe('Function: declaredTaintsOf()', () => {
  it.each(cases)('$name', ({ machine, want }) => {
    // Prepare
    const before = structuredClone(machine);

    // Act
    const result = declaredTaintsOf(machine);

    // Assess
    if ('issues' in want) {
      expect(result.valid).toBe(false);
      expect(result.valid ? [] : result.issues.map((i) => `${i.field} ${i.rule}`)).toEqual(want.issues);
    } else {
      expect(result.valid).toBe(true);
      expect(result.valid && result.declaration.taints).toEqual(want.taints);
      expect(result.valid && result.declaration.sourceOf).toEqual(want.sourceOf);
      if (want.overrides) expect(result.valid && result.declaration.overrides).toEqual(want.overrides);
    }
    expect(machine).toEqual(before);
  });

  it('yields issues and no declaration for an invalid Machine, so no plan can be made for its Node', () => {
    // Prepare
    const machine = machineBuilder().withAnnotation(MACHINE, 'node.cluster.x-k8s.io/uninitialized:NoSchedule').build();

    // Act
    const result = declaredTaintsOf(machine);

    // Assess
    expect(result).toEqual({
      valid: false,
      issues: [{ field: `${field(MACHINE)}[0].key`, rule: 'reserved', message: 'Invalid value: "node.cluster.x-k8s.io/uninitialized": taint key is not allowed' }],
    });
    expect(result).not.toHaveProperty('declaration');
  });
});

describe('Function: declaredTaintsOf() with @Preview declarations', () => {
  const previewCases: ReadonlyArray<{
    name: string;
    annotations: Record<string, string>;
    specTaints?: MachineTaint[];
    want: { taints: MachineTaint[]; previews: unknown[]; sourceOf: Record<string, string> } | { issues: string[] };
  }> = [
    // --- preview alone ---
    {
      name: 'keeps a @Preview NoExecute taint out of the applied taints and lists it as a preview',
      annotations: { [MACHINE]: 'maintenance=true:NoExecute@Preview' },
      want: { taints: [], previews: [{ key: 'maintenance', value: 'true', effect: 'NoExecute' }], sourceOf: { 'maintenance:NoExecute': MACHINE } },
    },
    {
      name: 'applies the other entries of the same annotation as usual',
      annotations: { [MACHINE]: 'gpu:NoSchedule, drain:NoExecute@Preview, spot:NoExecute@OnInitialization' },
      want: {
        taints: [machineTaint('gpu'), machineTaint('spot', undefined, 'NoExecute', 'OnInitialization')],
        previews: [{ key: 'drain', effect: 'NoExecute' }],
        sourceOf: { 'gpu:NoSchedule': MACHINE, 'drain:NoExecute': MACHINE, 'spot:NoExecute': MACHINE },
      },
    },
    // --- precedence ---
    {
      name: 'lets a higher source preview a taint a lower source applies (the applied one is replaced)',
      annotations: { [CLASS]: 'maintenance=true:NoExecute', [MACHINE]: 'maintenance=true:NoExecute@Preview' },
      want: { taints: [], previews: [{ key: 'maintenance', value: 'true', effect: 'NoExecute' }], sourceOf: { 'maintenance:NoExecute': MACHINE } },
    },
    {
      name: 'lets spec.taints apply a taint a lower annotation previews',
      annotations: { [CLUSTER]: 'maintenance:NoExecute@Preview' },
      specTaints: [machineTaint('maintenance', undefined, 'NoExecute')],
      want: { taints: [machineTaint('maintenance', undefined, 'NoExecute')], previews: [], sourceOf: { 'maintenance:NoExecute': 'spec.taints' } },
    },
    {
      name: 'lets a cancel entry withdraw a preview of a lower source',
      annotations: { [CLASS]: 'maintenance:NoExecute@Preview', [MACHINE]: 'maintenance:NoExecute-' },
      want: { taints: [], previews: [], sourceOf: {} },
    },
    // --- refused ---
    {
      name: 'refuses @Preview on an effect that evicts nothing',
      annotations: { [MACHINE]: 'gpu:NoSchedule, spot:PreferNoSchedule@Preview' },
      want: { issues: [`${field(MACHINE)}[1] preview`] },
    },
    {
      name: 'validates a previewed taint like any declaration',
      annotations: { [MACHINE]: 'node.kubernetes.io/unreachable:NoExecute@Preview' },
      want: { issues: [`${field(MACHINE)}[0].key reserved`] },
    },
    {
      name: 'refuses a misspelt suffix as an unsupported propagation',
      annotations: { [MACHINE]: 'maintenance:NoExecute@preview' },
      want: { issues: [`${field(MACHINE)}[0].propagation enum`] },
    },
  ];

  it.each(previewCases)('$name', ({ annotations, specTaints, want }) => {
    // Prepare
    let builder = machineBuilder();
    for (const [k, v] of Object.entries(annotations)) builder = builder.withAnnotation(k, v);
    const machine = { ...builder.build(), ...(specTaints ? { specTaints } : {}) };

    // Act
    const result = declaredTaintsOf(machine);

    // Assess
    if ('issues' in want) {
      expect(result.valid ? [] : result.issues.map((i) => `${i.field} ${i.rule}`)).toEqual(want.issues);
      return;
    }
    expect(result.valid).toBe(true);
    expect(result.valid && result.declaration.taints).toEqual(want.taints);
    expect(result.valid && result.declaration.previews).toEqual(want.previews);
    expect(result.valid && result.declaration.sourceOf).toEqual(want.sourceOf);
  });
});

describe('Function: declaredTaintsOf() with a startup gate', () => {
  const startupTaint = { key: 'example.com/pending', effect: 'NoSchedule' };

  it.each([
    { name: 'in spec.taints', machine: machineBuilder().withSpecTaints([{ key: 'example.com/pending', effect: 'NoSchedule', propagation: 'Always' }]).build(), field: 'spec.taints' },
    { name: 'in an annotation', machine: machineBuilder().withAnnotation(MACHINE, 'example.com/pending:NoSchedule@OnInitialization').build(), field: MACHINE },
  ])('refuses the configured startup gate taint declared $name (it would be removed and re-added in every write)', ({ machine, field: source }) => {
    // Act
    const result = declaredTaintsOf(machine, { startupTaint });

    // Assess
    expect(result.valid).toBe(false);
    if (!result.valid) expect(result.issues.map((i) => `${i.field} ${i.rule}`)).toEqual([`${source} startupGate`]);
  });

  it('accepts the gate key with another effect, and any key when no gate is configured', () => {
    // Prepare
    const machine = machineBuilder().withSpecTaints([{ key: 'example.com/pending', effect: 'NoExecute', propagation: 'Always' }]).build();
    const gated = machineBuilder().withSpecTaints([{ key: 'example.com/pending', effect: 'NoSchedule', propagation: 'Always' }]).build();

    // Act
    const otherEffect = declaredTaintsOf(machine, { startupTaint });
    const noGate = declaredTaintsOf(gated);

    // Assess
    expect([otherEffect.valid, noGate.valid]).toEqual([true, true]);
  });
});

describe('Documentation: README "Declaring taints" examples', () => {
  it('merges the ClusterClass + Cluster topology example into the documented result', () => {
    // Prepare: the annotations CAPI copies onto a Machine of the gpu-a MachineDeployment
    const machine = machineBuilder()
      .withAnnotation(CLASS, 'nvidia.com/gpu=present:NoSchedule, example.com/spot:PreferNoSchedule')
      .withAnnotation(CLUSTER, 'nvidia.com/gpu=a100:NoSchedule, example.com/spot:PreferNoSchedule-')
      .build();

    // Act
    const result = declaredTaintsOf(machine);

    // Assess
    expect(result.valid && result.declaration.taints).toEqual([machineTaint('nvidia.com/gpu', 'a100')]);
  });

  it('accepts the MachineDeployment and KubeadmControlPlane examples', () => {
    // Prepare
    const worker = machineBuilder().withAnnotation(MACHINE, 'nvidia.com/gpu=present:NoSchedule, example.com/warming=true:NoExecute@OnInitialization').build();
    const controlPlane = machineBuilder()
      .controlPlane()
      .withAnnotation(CLASS, 'node-role.kubernetes.io/control-plane:NoSchedule')
      .withAnnotation(CLUSTER, 'example.com/audit=on:NoSchedule@OnInitialization')
      .withAnnotation(MACHINE, 'node-role.kubernetes.io/control-plane:NoSchedule, example.com/etcd=dedicated:PreferNoSchedule')
      .build();

    // Act
    const results = [declaredTaintsOf(worker), declaredTaintsOf(controlPlane)];

    // Assess
    expect(results.map((r) => r.valid && r.declaration.taints.map((t) => `${t.key}:${t.effect}@${t.propagation}`))).toEqual([
      ['nvidia.com/gpu:NoSchedule@Always', 'example.com/warming:NoExecute@OnInitialization'],
      ['node-role.kubernetes.io/control-plane:NoSchedule@Always', 'example.com/etcd:PreferNoSchedule@Always', 'example.com/audit:NoSchedule@OnInitialization'],
    ]);
  });
});
