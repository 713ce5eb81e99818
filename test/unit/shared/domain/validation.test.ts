/**
 * validateMachineTaints(): upstream's two validation layers in one (upstream-capi.md §1–2, Q12–Q14).
 * Every case asserts the verdict and the resulting state together: the typed taints when valid,
 * the exact `field rule` list when invalid.
 */
import { describe, expect, it } from 'vitest';
import { CONTROL_PLANE_TAINT_KEY, MAX_TAINTS, validateMachineTaint, validateMachineTaints } from '#shared/domain/validation.ts';

type Raw = Record<string, unknown>;
const taint = (key: unknown, extra: Raw = {}): Raw => ({ key, effect: 'NoSchedule', propagation: 'Always', ...extra });
const many = (n: number): Raw[] => Array.from({ length: n }, (_, i) => taint(`t${i}`));
const name63 = 'n'.repeat(63);
// DNS labels inside the prefix are not limited to 63 characters (Q13), only the whole prefix to 253.
const prefix253 = `${'a'.repeat(100)}.${'b'.repeat(152)}`;

interface Case {
  readonly name: string;
  readonly taints: unknown;
  readonly worker?: boolean;
  /** `field rule` of every issue, in order; empty = valid. */
  readonly issues: readonly string[];
}

const cases: readonly Case[] = [
  // --- the list (CRD: listType=map on key+effect, MinItems=1, MaxItems=64) ---
  { name: 'accepts an absent list as "no taints"', taints: undefined, issues: [] },
  { name: 'accepts null as "no taints"', taints: null, issues: [] },
  { name: 'rejects an explicit empty list (Q14)', taints: [], issues: ['spec.taints minItems'] },
  { name: 'rejects a list that is not an array', taints: { key: 'a' }, issues: ['spec.taints type'] },
  { name: 'accepts 64 taints', taints: many(MAX_TAINTS), issues: [] },
  { name: 'rejects 65 taints', taints: many(MAX_TAINTS + 1), issues: ['spec.taints maxItems'] },
  {
    name: 'rejects two taints with the same key and effect, whatever their values',
    taints: [taint('a', { value: 'x' }), taint('a', { value: 'y' })],
    issues: ['spec.taints[1] unique'],
  },
  {
    name: 'accepts the same key with different effects',
    taints: [taint('a'), taint('a', { effect: 'NoExecute' }), taint('a', { effect: 'PreferNoSchedule' })],
    issues: [],
  },
  { name: 'rejects an item that is not an object', taints: ['a:NoSchedule'], issues: ['spec.taints[0] type'] },
  { name: 'rejects a list item that is null', taints: [null], issues: ['spec.taints[0] type'] },

  // --- key: required, CRD maxLength 317 and pattern ---
  { name: 'rejects a missing key', taints: [{ effect: 'NoSchedule', propagation: 'Always' }], issues: ['spec.taints[0].key required'] },
  { name: 'rejects an empty key', taints: [taint('')], issues: ['spec.taints[0].key required'] },
  { name: 'rejects a key that is not a string', taints: [taint(7)], issues: ['spec.taints[0].key required'] },
  {
    name: 'rejects a key longer than 317 characters',
    taints: [taint(`${'a'.repeat(300)}/${'b'.repeat(20)}`)],
    issues: ['spec.taints[0].key maxLength', 'spec.taints[0].key labelKey'],
  },
  { name: 'rejects a key with a space (no trimming)', taints: [taint(' a')], issues: ['spec.taints[0].key pattern', 'spec.taints[0].key labelKey'] },
  { name: 'rejects a key with an uppercase prefix', taints: [taint('Example.com/a')], issues: ['spec.taints[0].key pattern', 'spec.taints[0].key labelKey'] },
  { name: 'rejects a key ending with a dash', taints: [taint('a-')], issues: ['spec.taints[0].key pattern', 'spec.taints[0].key labelKey'] },
  { name: 'accepts an uppercase name and a dotted prefix', taints: [taint('example.com/GPU_a.b-c')], issues: [] },

  // --- key: label-key syntax (webhook; the lengths are webhook-only, Q13) ---
  { name: 'accepts a 63-character name', taints: [taint(name63)], issues: [] },
  { name: 'rejects a 64-character name', taints: [taint(`${name63}n`)], issues: ['spec.taints[0].key labelKey'] },
  { name: 'accepts a 63-character name after a prefix', taints: [taint(`example.com/${name63}`)], issues: [] },
  { name: 'accepts a 253-character prefix with a label longer than 63', taints: [taint(`${prefix253}/a`)], issues: [] },
  { name: 'rejects a 254-character prefix', taints: [taint(`${prefix253}b/a`)], issues: ['spec.taints[0].key labelKey'] },
  { name: 'rejects an empty prefix', taints: [taint('/a')], issues: ['spec.taints[0].key pattern', 'spec.taints[0].key labelKey'] },
  { name: 'rejects two slashes', taints: [taint('a/b/c')], issues: ['spec.taints[0].key pattern', 'spec.taints[0].key labelKey'] },
  { name: 'rejects an empty name after the prefix', taints: [taint('example.com/')], issues: ['spec.taints[0].key pattern', 'spec.taints[0].key labelKey'] },

  // --- reserved keys (webhook, at most one per taint, effect ignored; narrow, Q12) ---
  { name: 'rejects the uninitialized key', taints: [taint('node.cluster.x-k8s.io/uninitialized')], issues: ['spec.taints[0].key reserved'] },
  {
    name: 'rejects the uninitialized key with any effect',
    taints: [taint('node.cluster.x-k8s.io/uninitialized', { effect: 'PreferNoSchedule' })],
    issues: ['spec.taints[0].key reserved'],
  },
  {
    name: 'rejects the outdated-revision key',
    taints: [taint('node.cluster.x-k8s.io/outdated-revision', { effect: 'PreferNoSchedule' })],
    issues: ['spec.taints[0].key reserved'],
  },
  { name: 'accepts another key under node.cluster.x-k8s.io/', taints: [taint('node.cluster.x-k8s.io/anything-else')], issues: [] },
  { name: 'rejects a key under node.kubernetes.io/', taints: [taint('node.kubernetes.io/not-ready')], issues: ['spec.taints[0].key reserved'] },
  { name: 'accepts node.kubernetes.io/out-of-service', taints: [taint('node.kubernetes.io/out-of-service', { effect: 'NoExecute' })], issues: [] },
  { name: 'accepts node.kubernetes.io without a slash', taints: [taint('node.kubernetes.io')], issues: [] },
  { name: 'accepts a subdomain of node.kubernetes.io', taints: [taint('sub.node.kubernetes.io/x')], issues: [] },
  {
    name: 'rejects a key under node.cloudprovider.kubernetes.io/',
    taints: [taint('node.cloudprovider.kubernetes.io/uninitialized')],
    issues: ['spec.taints[0].key reserved'],
  },
  { name: 'rejects the deprecated node-role.kubernetes.io/master', taints: [taint('node-role.kubernetes.io/master')], issues: ['spec.taints[0].key reserved'] },
  { name: 'accepts another node-role.kubernetes.io/ key', taints: [taint('node-role.kubernetes.io/worker')], issues: [] },

  // --- worker-only rule (webhook, key only, any effect) ---
  { name: 'refuses the control-plane key on a worker', taints: [taint(CONTROL_PLANE_TAINT_KEY)], worker: true, issues: ['spec.taints[0].key worker'] },
  {
    name: 'refuses the control-plane key on a worker with any effect',
    taints: [taint(CONTROL_PLANE_TAINT_KEY, { effect: 'PreferNoSchedule' })],
    worker: true,
    issues: ['spec.taints[0].key worker'],
  },
  { name: 'accepts the control-plane key on a control-plane Machine', taints: [taint(CONTROL_PLANE_TAINT_KEY)], worker: false, issues: [] },

  // --- value (CRD only: minLength 1, maxLength 63, pattern) ---
  { name: 'accepts an absent value', taints: [taint('a')], issues: [] },
  { name: 'accepts a 63-character value', taints: [taint('a', { value: 'v'.repeat(63) })], issues: [] },
  { name: 'rejects a 64-character value', taints: [taint('a', { value: 'v'.repeat(64) })], issues: ['spec.taints[0].value maxLength'] },
  { name: 'rejects an explicit empty value (Q14)', taints: [taint('a', { value: '' })], issues: ['spec.taints[0].value minLength'] },
  { name: 'rejects a value starting with a dash', taints: [taint('a', { value: '-x' })], issues: ['spec.taints[0].value pattern'] },
  { name: 'rejects a value with a space', taints: [taint('a', { value: 'a b' })], issues: ['spec.taints[0].value pattern'] },
  { name: 'rejects a value that is not a string', taints: [taint('a', { value: 1 })], issues: ['spec.taints[0].value type'] },

  // --- effect and propagation (CRD enums) ---
  { name: 'accepts every effect', taints: ['NoSchedule', 'PreferNoSchedule', 'NoExecute'].map((effect) => taint('a', { effect })), issues: [] },
  { name: 'rejects an unknown effect', taints: [taint('a', { effect: 'noschedule' })], issues: ['spec.taints[0].effect enum'] },
  { name: 'rejects a missing effect', taints: [{ key: 'a', propagation: 'Always' }], issues: ['spec.taints[0].effect required'] },
  { name: 'rejects an empty effect', taints: [taint('a', { effect: '' })], issues: ['spec.taints[0].effect required'] },
  { name: 'rejects a non-string effect', taints: [taint('a', { effect: 1 })], issues: ['spec.taints[0].effect enum'] },
  { name: 'accepts OnInitialization', taints: [taint('a', { propagation: 'OnInitialization' })], issues: [] },
  { name: 'rejects an unknown propagation', taints: [taint('a', { propagation: 'always' })], issues: ['spec.taints[0].propagation enum'] },
  { name: 'rejects a missing propagation', taints: [{ key: 'a', effect: 'NoSchedule' }], issues: ['spec.taints[0].propagation required'] },

  // --- aggregation: every issue of every taint (upstream returns one 422 with all field errors) ---
  {
    name: 'reports the issues of every taint in one result',
    taints: [taint('node.kubernetes.io/x', { value: '' }), taint('ok'), taint('a/b/c', { effect: 'Bad', propagation: 'Never' })],
    issues: [
      'spec.taints[0].key reserved',
      'spec.taints[0].value minLength',
      'spec.taints[2].key pattern',
      'spec.taints[2].key labelKey',
      'spec.taints[2].effect enum',
      'spec.taints[2].propagation enum',
    ],
  },
];

describe('Function: validateMachineTaints()', () => {
  it.each(cases)('$name', ({ taints, worker = true, issues }) => {
    // Prepare
    const before = structuredClone(taints);

    // Act
    const result = validateMachineTaints(taints, { worker });

    // Assess
    if (issues.length === 0) {
      expect(result).toEqual({ valid: true, taints: Array.isArray(taints) ? taints : [] });
    } else {
      expect(result.valid).toBe(false);
      expect(result.valid ? [] : result.issues.map((i) => `${i.field} ${i.rule}`)).toEqual(issues);
    }
    expect(taints).toEqual(before);
  });

  it('names the field and the rule in every issue, and uses the given path', () => {
    // Prepare
    const taints = [taint('node-role.kubernetes.io/master')];

    // Act
    const result = validateMachineTaints(taints, { worker: true }, 'spec.template.spec.taints');

    // Assess
    expect(result).toEqual({
      valid: false,
      issues: [{ field: 'spec.template.spec.taints[0].key', rule: 'reserved', message: 'Invalid value: "node-role.kubernetes.io/master": taint is deprecated since 1.24 and should not be used anymore' }],
    });
  });

  it('returns typed taints without an absent value', () => {
    // Prepare
    const taints = [{ key: 'a', effect: 'NoExecute', propagation: 'OnInitialization', extra: 'ignored' }];

    // Act
    const result = validateMachineTaints(taints, { worker: true });

    // Assess
    expect(result).toEqual({ valid: true, taints: [{ key: 'a', effect: 'NoExecute', propagation: 'OnInitialization' }] });
  });
});

describe('Function: validateMachineTaint()', () => {
  it('returns no issue for a valid taint and the issues of an invalid one', () => {
    // Act
    const good = validateMachineTaint(taint('a', { value: 'b' }), { worker: true }, 'x');
    const bad = validateMachineTaint(taint('node.kubernetes.io/foo'), { worker: true }, 'x');

    // Assess
    expect(good).toEqual([]);
    expect(bad).toEqual([
      { field: 'x.key', rule: 'reserved', message: 'Invalid value: "node.kubernetes.io/foo": taint key must not have the prefix node.kubernetes.io/, except for node.kubernetes.io/out-of-service' },
    ]);
  });
});
