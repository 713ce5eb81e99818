import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  AUTOSCALER_MAX_SIZE_ANNOTATION,
  AUTOSCALER_MIN_SIZE_ANNOTATION,
  AUTOSCALER_OWNED_ANNOTATION,
  AUTOSCALER_TAINTS_ANNOTATION,
  autoscalerTaintsValue,
  isDroppedByAutoscaler,
  planAutoscalerTaints,
} from '#shared/domain/autoscaler.ts';
import { declaredTaintsOf } from '#shared/domain/declarations.ts';
import type { Taint } from '#shared/domain/taint.ts';
import { autoscalerAssumedTaints, sameTaints } from '#local/autoscaler-status.ts';
import { toMachinePoolFacts, type ScalableFacts } from '#shared/model/views.ts';

/**
 * The cluster-autoscaler's reading of a scalable resource's taints, re-implemented here from its source
 * (kubernetes/autoscaler `cluster-autoscaler/cloudprovider/clusterapi/clusterapi_unstructured.go`, `Taints` and
 * `parseTaint`; docs/autoscaler.md), independently of the product's code:
 * - spec.template.spec.taints first, in order;
 * - annotation split on ","; each piece split on ":" — 1 part: the whole piece is the key and the effect is empty,
 *   2 parts: the second is the effect (not checked), 3+: refused; the first part split on "=" — 3+: refused, 2: a
 *   value that must be a label value; the key must be a qualified name; a refused piece is skipped (logged only);
 * - each parsed taint replaces the first taint with the same key and effect, else is appended.
 */
function autoscalerTaints(spec: readonly Taint[], annotation: string | undefined): Taint[] {
  const out: Taint[] = spec.map((t) => ({ ...t }));
  if (annotation === undefined) return out;
  for (const piece of annotation.split(',')) {
    const parsed = goParseTaint(piece);
    if (parsed instanceof Error) continue;
    const at = out.findIndex((t) => t.key === parsed.key && t.effect === parsed.effect);
    if (at === -1) out.push(parsed);
    else out[at] = parsed;
  }
  return out;
}

function goParseTaint(st: string): Taint | Error {
  const parts = st.split(':');
  let key: string;
  let value = '';
  let effect = '';
  if (parts.length === 1) key = parts[0] as string;
  else if (parts.length === 2) {
    effect = parts[1] as string;
    const kv = (parts[0] as string).split('=');
    if (kv.length > 2) return new Error(`invalid taint spec: ${st}`);
    key = kv[0] as string;
    if (kv.length === 2) {
      value = kv[1] as string;
      if (!isValidLabelValue(value)) return new Error(`invalid taint spec: ${st}`);
    }
  } else return new Error(`invalid taint spec: ${st}`);
  if (!isQualifiedName(key)) return new Error(`invalid taint spec: ${st}`);
  return value === '' ? { key, effect } : { key, value, effect };
}

/** apimachinery IsValidLabelValue: empty, or ≤ 63 of [-A-Za-z0-9_.] starting and ending alphanumeric. */
function isValidLabelValue(v: string): boolean {
  return v === '' || (v.length <= 63 && /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/.test(v));
}

/** apimachinery IsQualifiedName: [DNS-1123 subdomain ≤ 253 "/"] name ≤ 63. */
function isQualifiedName(k: string): boolean {
  const parts = k.split('/');
  if (parts.length > 2) return false;
  const name = parts.length === 2 ? (parts[1] as string) : (parts[0] as string);
  if (parts.length === 2) {
    const prefix = parts[0] as string;
    if (prefix.length === 0 || prefix.length > 253 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(prefix)) return false;
  }
  return name.length > 0 && name.length <= 63 && /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/.test(name);
}

const nodeGroup = { [AUTOSCALER_MIN_SIZE_ANNOTATION]: '0', [AUTOSCALER_MAX_SIZE_ANNOTATION]: '5' };

function md(over: Partial<ScalableFacts> = {}): ScalableFacts {
  return {
    kind: 'MachineDeployment',
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    labels: {},
    namespace: 'ns',
    name: 'gpu',
    uid: 'u1',
    resourceVersion: '7',
    annotations: { ...nodeGroup },
    templateAnnotations: {},
    templateLabels: {},
    specTaints: undefined,
    ownedByMachineDeployment: false,
    deleting: false,
    ...over,
  };
}

/** The declaration of a MachineDeployment's template, by the product's own declaration rules. */
function declarationOf(r: ScalableFacts): ReturnType<typeof declaredTaintsOf> {
  return declaredTaintsOf({ specTaints: r.specTaints, annotations: r.templateAnnotations, labels: r.templateLabels });
}

/** The taints a new Node gets, in the Node form, from the product's own declaration rules. */
function newNodeTaintsOf(r: ScalableFacts): Taint[] {
  const d = declarationOf(r);
  if (!d.valid) throw new Error('invalid');
  return d.declaration.taints.map((t) => (t.value ? { key: t.key, value: t.value, effect: t.effect } : { key: t.key, effect: t.effect }));
}

/** Spec taints as the autoscaler reads them (key, value, effect). */
function specOf(r: ScalableFacts): Taint[] {
  return ((r.specTaints as Record<string, string>[] | undefined) ?? []).map((t) => (t.value ? { key: t.key as string, value: t.value, effect: t.effect as string } : { key: t.key as string, effect: t.effect as string }));
}

describe('the autoscaler parse rules re-implemented in this test', () => {
  it('read the documented examples as the autoscaler README and tests state', () => {
    // README "Pre-defined labels and taints on nodes scaled from zero", and TestAnnotations.
    expect(autoscalerTaints([], 'key1=value1:NoSchedule,key2=value2:NoExecute')).toEqual([
      { key: 'key1', value: 'value1', effect: 'NoSchedule' },
      { key: 'key2', value: 'value2', effect: 'NoExecute' },
    ]);
    // README example 2: the annotation overrides the spec taint with the same key and effect; the other spec taint stays.
    expect(
      autoscalerTaints(
        [
          { key: 'dedicated', value: 'gpu', effect: 'NoSchedule' },
          { key: 'node-setup', value: 'true', effect: 'NoSchedule' },
        ],
        'dedicated=gpu-override:NoSchedule',
      ),
    ).toEqual([
      { key: 'dedicated', value: 'gpu-override', effect: 'NoSchedule' },
      { key: 'node-setup', value: 'true', effect: 'NoSchedule' },
    ]);
    // TestTemplateNodeInfo "…annotation takes precedence".
    expect(autoscalerTaints([{ key: 'dedicated', value: 'gpu', effect: 'NoSchedule' }], 'dedicated=override:NoSchedule')).toEqual([{ key: 'dedicated', value: 'override', effect: 'NoSchedule' }]);
  });

  it('skip what the autoscaler refuses and keep its quirks', () => {
    expect(autoscalerTaints([], 'a:NoSchedule, b:NoSchedule')).toEqual([{ key: 'a', effect: 'NoSchedule' }]); // " b" is not a qualified name
    expect(autoscalerTaints([], 'a:NoSchedule:x,b=1=2:NoSchedule,c=bad value:NoSchedule,:NoSchedule')).toEqual([]);
    expect(autoscalerTaints([], 'a')).toEqual([{ key: 'a', effect: '' }]); // no effect: taken, with an empty effect
    expect(autoscalerTaints([], 'a:Bogus')).toEqual([{ key: 'a', effect: 'Bogus' }]); // the effect is not checked
    expect(autoscalerTaints([], '')).toEqual([]);
    expect(autoscalerTaints([], 'a=:NoSchedule')).toEqual([{ key: 'a', effect: 'NoSchedule' }]);
  });

  it('agree with the reading the product uses for reports', () => {
    for (const [spec, value] of [
      [[], 'a:NoSchedule, b:NoSchedule'],
      [[{ key: 'dedicated', value: 'gpu', effect: 'NoSchedule' }], 'dedicated=x:NoSchedule,a,z:Bogus,q=1=2:NoExecute'],
      [[], undefined],
    ] as const) {
      expect(autoscalerAssumedTaints(spec, value)).toEqual(autoscalerTaints(spec, value));
    }
  });
});

describe('autoscalerTaintsValue / planAutoscalerTaints', () => {
  it('writes the annotation-declared taints, Always and OnInitialization, in the autoscaler format', () => {
    const r = md({ templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'pool=edge:NoSchedule, zone=eu-1a:PreferNoSchedule@OnInitialization, gpu:NoExecute' } });
    const plan = planAutoscalerTaints(r);
    expect(plan.state).toBe('out-of-sync');
    expect(plan.desired).toBe('gpu:NoExecute,pool=edge:NoSchedule,zone=eu-1a:PreferNoSchedule');
    expect(plan.patch).toEqual({ [AUTOSCALER_TAINTS_ANNOTATION]: plan.desired, [AUTOSCALER_OWNED_ANNOTATION]: plan.desired });
    expect(sameTaints(autoscalerTaints([], plan.desired), newNodeTaintsOf(r))).toBe(true);
  });

  it('applies precedence and cancellation as for a new Machine (class < cluster < machine < spec.taints)', () => {
    const r = md({
      templateAnnotations: {
        'taints.capi-taint-propagator.dev/class': 'nvidia.com/gpu=present:NoSchedule, example.com/spot:PreferNoSchedule',
        'taints.capi-taint-propagator.dev/cluster': 'nvidia.com/gpu=a100:NoSchedule, example.com/spot:PreferNoSchedule-',
      },
    });
    expect(planAutoscalerTaints(r).desired).toBe('nvidia.com/gpu=a100:NoSchedule');
  });

  it('writes spec.taints too (autoscalers before 1.36.0 read only the annotation), with spec.taints winning a key+effect clash', () => {
    const spec = [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule', propagation: 'Always' }, { key: 'example.com/warming', effect: 'PreferNoSchedule', propagation: 'OnInitialization' }];
    const specOnly = planAutoscalerTaints(md({ specTaints: spec }));
    expect(specOnly).toMatchObject({ state: 'out-of-sync', desired: 'example.com/warming:PreferNoSchedule,nvidia.com/gpu=present:NoSchedule' });
    expect(specOnly.patch).toEqual({ [AUTOSCALER_TAINTS_ANNOTATION]: specOnly.desired, [AUTOSCALER_OWNED_ANNOTATION]: specOnly.desired });
    const mixed = md({ specTaints: spec, templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'nvidia.com/gpu=other:NoSchedule, edge:NoSchedule' } });
    const plan = planAutoscalerTaints(mixed);
    expect(plan.desired).toBe('edge:NoSchedule,example.com/warming:PreferNoSchedule,nvidia.com/gpu=present:NoSchedule'); // spec.taints wins for nvidia.com/gpu:NoSchedule
    // Both readings give the new Node's taints: 1.36+ (field, then the annotation over it) and 1.34/1.35 (annotation only).
    expect(sameTaints(autoscalerTaints(specOf(mixed), plan.desired), newNodeTaintsOf(mixed))).toBe(true);
    expect(sameTaints(autoscalerTaints([], plan.desired), newNodeTaintsOf(mixed))).toBe(true);
    // No declaration at all: nothing to write.
    expect(planAutoscalerTaints(md())).toMatchObject({ state: 'not-needed' });
  });

  it('names the OnInitialization taints the autoscaler counts anyway (not its startup, ignore or status prefixes)', () => {
    const spec = [{ key: 'example.com/driver', effect: 'NoSchedule', propagation: 'OnInitialization' }];
    const r = md({
      specTaints: spec,
      templateAnnotations: {
        'taints.capi-taint-propagator.dev/machine':
          'warming=1:PreferNoSchedule@OnInitialization, startup-taint.cluster-autoscaler.kubernetes.io/cni:NoSchedule@OnInitialization, ignore-taint.cluster-autoscaler.kubernetes.io/a:NoSchedule@OnInitialization, status-taint.cluster-autoscaler.kubernetes.io/b:NoSchedule@OnInitialization, gpu:NoSchedule',
      },
    });
    expect(planAutoscalerTaints(r).countedStartupTaints).toEqual([{ key: 'example.com/driver', effect: 'NoSchedule' }, { key: 'warming', value: '1', effect: 'PreferNoSchedule' }]);
    expect(planAutoscalerTaints(md({ templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu:NoSchedule' } })).countedStartupTaints).toBeUndefined();
    // Not a node group: the autoscaler does not read it, nothing to warn about.
    expect(planAutoscalerTaints(md({ annotations: {}, specTaints: spec })).countedStartupTaints).toBeUndefined();
  });

  it.each([
    { key: 'startup-taint.cluster-autoscaler.kubernetes.io/driver', dropped: true },
    { key: 'ignore-taint.cluster-autoscaler.kubernetes.io/x', dropped: true },
    { key: 'status-taint.cluster-autoscaler.kubernetes.io/x', dropped: true },
    { key: 'cloud.google.com/impending-node-termination', dropped: true },
    { key: 'NodeWithImpairedVolumes', dropped: true },
    { key: 'startup-taint.cluster-autoscaler.kubernetes.io', dropped: false },
    { key: 'example.com/startup-taint.cluster-autoscaler.kubernetes.io', dropped: false },
    { key: 'taints.capi-taint-propagator.dev/uninitialized', dropped: false },
  ])('isDroppedByAutoscaler($key) is $dropped', ({ key, dropped }) => {
    expect(isDroppedByAutoscaler(key)).toBe(dropped);
  });

  it('only on node groups, never on a MachineSet of a MachineDeployment', () => {
    const decl = { 'taints.capi-taint-propagator.dev/machine': 'a:NoSchedule' };
    expect(planAutoscalerTaints(md({ annotations: {}, templateAnnotations: decl })).state).toBe('not-opted-in');
    expect(planAutoscalerTaints(md({ annotations: { [AUTOSCALER_MIN_SIZE_ANNOTATION]: '1' }, templateAnnotations: decl })).state).toBe('not-opted-in');
    expect(planAutoscalerTaints(md({ annotations: { [AUTOSCALER_MAX_SIZE_ANNOTATION]: '3' }, templateAnnotations: decl })).desired).toBe('a:NoSchedule');
    const copied = { ...nodeGroup, [AUTOSCALER_TAINTS_ANNOTATION]: 'b:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'b:NoSchedule' };
    expect(planAutoscalerTaints(md({ kind: 'MachineSet', ownedByMachineDeployment: true, annotations: copied, templateAnnotations: decl })).patch).toBeUndefined();
    expect(planAutoscalerTaints(md({ kind: 'MachineSet', templateAnnotations: decl })).desired).toBe('a:NoSchedule');
  });

  it('is in sync (no write) once written, and corrects its own value when the declaration changes', () => {
    const decl = { 'taints.capi-taint-propagator.dev/machine': 'a:NoSchedule' };
    const written = { ...nodeGroup, [AUTOSCALER_TAINTS_ANNOTATION]: 'a:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'a:NoSchedule' };
    expect(planAutoscalerTaints(md({ annotations: written, templateAnnotations: decl })).state).toBe('in-sync');
    const changed = planAutoscalerTaints(md({ annotations: written, templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'a=1:NoSchedule' } }));
    expect(changed.patch).toEqual({ [AUTOSCALER_TAINTS_ANNOTATION]: 'a=1:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'a=1:NoSchedule' });
    // Our value removed by hand: written again (ours, like an Always taint).
    const removed = { ...nodeGroup, [AUTOSCALER_OWNED_ANNOTATION]: 'a:NoSchedule' };
    expect(planAutoscalerTaints(md({ annotations: removed, templateAnnotations: decl })).state).toBe('out-of-sync');
  });

  it('removes what it wrote when the declaration goes away or the resource opts out', () => {
    const written = { ...nodeGroup, [AUTOSCALER_TAINTS_ANNOTATION]: 'a:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'a:NoSchedule' };
    expect(planAutoscalerTaints(md({ annotations: written })).patch).toEqual({ [AUTOSCALER_TAINTS_ANNOTATION]: null, [AUTOSCALER_OWNED_ANNOTATION]: null });
    const optedOut = { [AUTOSCALER_TAINTS_ANNOTATION]: 'a:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'a:NoSchedule' };
    expect(planAutoscalerTaints(md({ annotations: optedOut, templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'a:NoSchedule' } })).patch).toEqual({
      [AUTOSCALER_TAINTS_ANNOTATION]: null,
      [AUTOSCALER_OWNED_ANNOTATION]: null,
    });
  });

  it('never overwrites a value it did not write', () => {
    const decl = { 'taints.capi-taint-propagator.dev/machine': 'a:NoSchedule' };
    const user = planAutoscalerTaints(md({ annotations: { ...nodeGroup, [AUTOSCALER_TAINTS_ANNOTATION]: 'x:NoSchedule' }, templateAnnotations: decl }));
    expect(user).toMatchObject({ state: 'foreign', current: 'x:NoSchedule', desired: 'a:NoSchedule' });
    expect(user.patch).toBeUndefined();
    const edited = { ...nodeGroup, [AUTOSCALER_TAINTS_ANNOTATION]: 'a:NoSchedule,x:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'a:NoSchedule' };
    expect(planAutoscalerTaints(md({ annotations: edited })).patch).toBeUndefined(); // not even to remove it
  });

  it('does not write for an invalid declaration or a resource being deleted', () => {
    expect(planAutoscalerTaints(md({ templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'a:NoSchedul' } })).state).toBe('invalid');
    expect(planAutoscalerTaints(md({ deleting: true, templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': 'a:NoSchedule' } })).state).toBe('deleting');
  });

  it('reads a MachinePool declaration from its metadata, else its template', () => {
    const pool = toMachinePoolFacts({
      metadata: { namespace: 'ns', name: 'pool', uid: 'u', resourceVersion: '1', annotations: { ...nodeGroup, 'taints.capi-taint-propagator.dev/cluster': 'p:NoExecute' } },
      spec: { template: { metadata: { annotations: { 'taints.capi-taint-propagator.dev/machine': 'q=1:NoSchedule' } } } },
    })!;
    expect(planAutoscalerTaints(pool).desired).toBe('p:NoExecute,q=1:NoSchedule');
    // Its spec.template.spec.taints, where present, as for the other kinds (spec.taints wins a clash).
    const withSpec = { ...pool, specTaints: [{ key: 'p', value: 'spec', effect: 'NoExecute', propagation: 'Always' }] };
    expect(planAutoscalerTaints(withSpec).desired).toBe('p=spec:NoExecute,q=1:NoSchedule');
  });

  it('every value it writes parses, under the autoscaler rules, to exactly the taints a new Node gets', () => {
    const key = fc.oneof(
      fc.stringMatching(/^[a-z][a-z0-9]{0,5}(\.[a-z]{1,4})?\/[A-Za-z0-9]([-A-Za-z0-9_.]{0,8}[A-Za-z0-9])?$/),
      fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?$/),
    );
    const value = fc.option(fc.stringMatching(/^[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?$/), { nil: undefined });
    const effect = fc.constantFrom('NoSchedule', 'PreferNoSchedule', 'NoExecute');
    const entry = fc.record({ key, value, effect, propagation: fc.constantFrom('', '@OnInitialization', '@Always'), cancel: fc.boolean() });
    const annotation = fc.array(entry, { maxLength: 6 }).map((es) =>
      es.map((e) => (e.cancel ? `${e.key}:${e.effect}-` : `${e.key}${e.value === undefined ? '' : `=${e.value}`}:${e.effect}${e.propagation}`)).join(', '),
    );
    const specTaint = fc.record({ key, value, effect, propagation: fc.constantFrom('Always', 'OnInitialization') }).map((t) => (t.value === undefined ? { key: t.key, effect: t.effect, propagation: t.propagation } : t));
    fc.assert(
      fc.property(annotation, annotation, fc.option(fc.uniqueArray(specTaint, { selector: (t) => `${t.key}:${t.effect}`, minLength: 1, maxLength: 3 }), { nil: undefined }), (machine, cls, spec) => {
        const r = md({ templateAnnotations: { 'taints.capi-taint-propagator.dev/machine': machine, 'taints.capi-taint-propagator.dev/class': cls }, specTaints: spec });
        const d = declarationOf(r);
        fc.pre(d.valid);
        const written = planAutoscalerTaints(r).desired;
        expect(sameTaints(autoscalerTaints(specOf(r), written), newNodeTaintsOf(r))).toBe(true); // 1.36+
        expect(sameTaints(autoscalerTaints([], written), newNodeTaintsOf(r))).toBe(true); // before 1.36.0: the annotation alone
        if (written !== undefined) {
          // Every entry parses (none is skipped), with one of the three effects, and no two share key and effect.
          const parsed = written.split(',').map(goParseTaint);
          expect(parsed.every((p) => !(p instanceof Error) && ['NoSchedule', 'PreferNoSchedule', 'NoExecute'].includes(p.effect))).toBe(true);
          expect(new Set(parsed.map((p) => (p as Taint).key + ':' + (p as Taint).effect)).size).toBe(parsed.length);
          expect(autoscalerTaintsValue((d as { declaration: Parameters<typeof autoscalerTaintsValue>[0] }).declaration)).toBe(written);
        }
      }),
      { numRuns: 300 },
    );
  });
});

describe('isNodeGroup and the reading for reports', () => {
  it('never counts a MachineSet of a MachineDeployment', async () => {
    const { isNodeGroup } = await import('#shared/domain/autoscaler.ts');
    expect(isNodeGroup({ kind: 'MachineSet', ownedByMachineDeployment: true, annotations: nodeGroup })).toBe(false);
    expect(isNodeGroup({ kind: 'MachineSet', ownedByMachineDeployment: false, annotations: nodeGroup })).toBe(true);
  });

  it('reads odd spec entries and refused keys the way the autoscaler does', () => {
    const spec = [null, 'x', { key: 7, effect: 'NoSchedule' }, { key: 'k', value: '', effect: 3 }];
    expect(autoscalerAssumedTaints(spec, undefined)).toEqual(autoscalerTaints([{ key: '', effect: 'NoSchedule' }, { key: 'k', effect: '' }], undefined));
    const long = 'a'.repeat(64);
    for (const value of [`k=${long}:NoSchedule`, `${long}:NoSchedule`, `a/b/c:NoSchedule`, `/b:NoSchedule`, `${'p'.repeat(254)}/b:NoSchedule`, 'UPPER/b:NoSchedule', 'k=v', 'ok.example.com/b=v:NoExecute']) {
      expect(autoscalerAssumedTaints([], value)).toEqual(autoscalerTaints([], value));
    }
    expect(autoscalerAssumedTaints('not a list', 'ok.example.com/b=v:NoExecute')).toEqual([{ key: 'ok.example.com/b', value: 'v', effect: 'NoExecute' }]);
  });
});
