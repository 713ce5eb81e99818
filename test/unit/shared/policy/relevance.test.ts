import { describe, expect, it } from 'vitest';
import {
  changedSince,
  diffRelist,
  fingerprintOf,
  forwardDecision,
  isDeclarationRecovery,
  isForeignTaintNoise,
  isOwnNodeWrite,
} from '#shared/policy/relevance.ts';
import { toMachineFacts, toNodeFacts, type MachineFacts, type NodeFacts } from '#shared/model/views.ts';
import { FIELD_MANAGER } from '#shared/domain/taint.ts';

type Json = Record<string, any>;

const baseNode = (): Json => ({
  metadata: {
    name: 'n1', uid: 'u-n1', resourceVersion: '10',
    labels: { role: 'worker' },
    annotations: { 'cluster.x-k8s.io/machine': 'm1', 'cluster.x-k8s.io/cluster-name': 'c1', 'cluster.x-k8s.io/cluster-namespace': 'ns' },
    managedFields: [{ manager: 'kubelet' }],
  },
  spec: { taints: [{ key: 'a', effect: 'NoSchedule' }], podCIDR: '10.0.0.0/24' },
  status: { conditions: [{ type: 'Ready', status: 'True', lastHeartbeatTime: '2026-01-01T00:00:00Z' }] },
});

const baseMachine = (): Json => ({
  metadata: {
    name: 'm1', namespace: 'ns', uid: 'u-m1', resourceVersion: '20',
    labels: { 'cluster.x-k8s.io/cluster-name': 'c1' },
    annotations: { 'taints.capi-taint-propagator.dev/machine': 'gpu=a:NoSchedule:Always', 'other/annotation': 'x' },
  },
  spec: { clusterName: 'c1', taints: [{ key: 'gpu', value: 'a', effect: 'NoSchedule', propagation: 'Always' }] },
  status: { nodeRef: { name: 'n1' }, conditions: [{ type: 'Ready', status: 'True' }], phase: 'Running' },
});

function nodeChanged(mutate: (n: Json) => void): boolean {
  const before = toNodeFacts(baseNode()) as NodeFacts;
  const next = baseNode();
  next.metadata.resourceVersion = '11';
  mutate(next);
  const after = toNodeFacts(next) as NodeFacts;
  return fingerprintOf(before) !== fingerprintOf(after);
}

function machineChanged(mutate: (m: Json) => void): boolean {
  const before = toMachineFacts(baseMachine()) as MachineFacts;
  const next = baseMachine();
  next.metadata.resourceVersion = '21';
  mutate(next);
  const after = toMachineFacts(next) as MachineFacts;
  return fingerprintOf(before) !== fingerprintOf(after);
}

describe('Function: fingerprintOf() for Nodes', () => {
  const cases: ReadonlyArray<{ name: string; mutate: (n: Json) => void; want: boolean }> = [
    // heartbeats and other noise
    { name: 'drops a status-only heartbeat', mutate: (n) => (n.status.conditions[0].lastHeartbeatTime = '2026-01-01T00:05:00Z'), want: false },
    { name: 'drops a label change', mutate: (n) => (n.metadata.labels.role = 'gpu'), want: false },
    { name: 'drops an unrelated annotation', mutate: (n) => (n.metadata.annotations['foo'] = 'bar'), want: false },
    { name: 'drops a managedFields / podCIDR change', mutate: (n) => ((n.metadata.managedFields = []), (n.spec.podCIDR = '10.0.1.0/24')), want: false },
    // what the reconcile function reads
    { name: 'forwards a taint added', mutate: (n) => n.spec.taints.push({ key: 'b', effect: 'NoExecute' }), want: true },
    { name: 'forwards a taint value changed', mutate: (n) => (n.spec.taints[0].value = 'x'), want: true },
    { name: 'forwards all taints removed', mutate: (n) => delete n.spec.taints, want: true },
    { name: 'forwards the tracking annotation set', mutate: (n) => (n.metadata.annotations['cluster.x-k8s.io/taints-from-machine'] = 'a:NoSchedule'), want: true },
    { name: 'forwards the machine annotation changed', mutate: (n) => (n.metadata.annotations['cluster.x-k8s.io/machine'] = 'm2'), want: true },
    { name: 'forwards the cluster-name annotation changed', mutate: (n) => (n.metadata.annotations['cluster.x-k8s.io/cluster-name'] = 'c2'), want: true },
    { name: 'forwards the cluster-namespace annotation removed', mutate: (n) => delete n.metadata.annotations['cluster.x-k8s.io/cluster-namespace'], want: true },
  ];
  it.each(cases)('$name', ({ mutate, want }) => {
    // Act + Assess
    expect(nodeChanged(mutate)).toBe(want);
  });
});

describe('Function: fingerprintOf() for Machines', () => {
  const cases: ReadonlyArray<{ name: string; mutate: (m: Json) => void; want: boolean }> = [
    // noise
    { name: 'drops a status condition change', mutate: (m) => (m.status.conditions[0].status = 'False'), want: false },
    { name: 'drops a phase change', mutate: (m) => (m.status.phase = 'Provisioned'), want: false },
    { name: 'drops a non-declaration annotation', mutate: (m) => (m.metadata.annotations['other/annotation'] = 'y'), want: false },
    { name: 'drops an unrelated label', mutate: (m) => (m.metadata.labels['team'] = 'a'), want: false },
    // declarations
    { name: 'forwards spec.taints changed', mutate: (m) => (m.spec.taints[0].effect = 'NoExecute'), want: true },
    { name: 'forwards spec.taints removed', mutate: (m) => delete m.spec.taints, want: true },
    { name: 'forwards a declaration annotation changed', mutate: (m) => (m.metadata.annotations['taints.capi-taint-propagator.dev/machine'] = ''), want: true },
    { name: 'forwards a class-level declaration added', mutate: (m) => (m.metadata.annotations['taints.capi-taint-propagator.dev/class'] = 'x:NoSchedule:Always'), want: true },
    // routing
    { name: 'forwards nodeRef set to another Node', mutate: (m) => (m.status.nodeRef.name = 'n2'), want: true },
    { name: 'forwards nodeRef removed', mutate: (m) => delete m.status.nodeRef, want: true },
    { name: 'forwards the control-plane label added', mutate: (m) => (m.metadata.labels['cluster.x-k8s.io/control-plane'] = ''), want: true },
    { name: 'forwards the cluster-name label changed', mutate: (m) => (m.metadata.labels['cluster.x-k8s.io/cluster-name'] = 'c2'), want: true },
    { name: 'forwards spec.clusterName changed', mutate: (m) => (m.spec.clusterName = 'c2'), want: true },
    // deletion
    { name: 'forwards deletionTimestamp set', mutate: (m) => (m.metadata.deletionTimestamp = '2026-01-01T00:00:00Z'), want: true },
  ];
  it.each(cases)('$name', ({ mutate, want }) => {
    expect(machineChanged(mutate)).toBe(want);
  });
});

describe('Function: fingerprintOf()', () => {
  it('ignores resourceVersion and key order', () => {
    // Prepare
    const a = toNodeFacts(baseNode()) as NodeFacts;
    const b = { ...a, resourceVersion: '999' };
    // Act + Assess
    expect(fingerprintOf(b)).toBe(fingerprintOf(a));
    expect(fingerprintOf({ ...a, taints: [{ effect: 'NoSchedule', key: 'a' }] })).toBe(fingerprintOf(a));
  });

  it('differs when a Node is re-created under the same name (new uid)', () => {
    const a = toNodeFacts(baseNode()) as NodeFacts;
    expect(fingerprintOf({ ...a, uid: 'other' })).not.toBe(fingerprintOf(a));
  });
});

describe('Function: diffRelist()', () => {
  // Nodes a, b, c as the forwarder last saw them; `changed` differs in something the reconcile reads (its taints),
  // `heartbeat` only in what it does not (resourceVersion, writers).
  const node = (name: string): NodeFacts => ({ ...(toNodeFacts(baseNode()) as NodeFacts), name, uid: `u-${name}` });
  const changed = (name: string): NodeFacts => ({ ...node(name), taints: [{ key: 'b', effect: 'NoExecute' }] });
  const heartbeat = (name: string): NodeFacts => ({ ...node(name), resourceVersion: '99', writers: { taints: 'other' } });
  const known = new Map([['a', node('a')], ['b', node('b')], ['c', node('c')]]);

  const cases: ReadonlyArray<{ name: string; listed: NodeFacts[]; full: boolean; want: { resynced: string[]; deleted: string[] } }> = [
    { name: 'announces nothing when nothing relevant changed', listed: [heartbeat('a'), node('b'), node('c')], full: false, want: { resynced: [], deleted: [] } },
    { name: 'announces changed and new objects', listed: [changed('a'), node('b'), node('c'), node('d')], full: false, want: { resynced: ['a', 'd'], deleted: [] } },
    { name: 'announces an object re-created under the same name (new uid)', listed: [{ ...node('a'), uid: 'u-a2' }, node('b'), node('c')], full: false, want: { resynced: ['a'], deleted: [] } },
    { name: 'announces deletions of objects gone', listed: [node('a')], full: false, want: { resynced: [], deleted: ['b', 'c'] } },
    { name: 'announces everything in a full resync', listed: [node('a'), node('b')], full: true, want: { resynced: ['a', 'b'], deleted: ['c'] } },
  ];
  it.each(cases)('$name', ({ listed, full, want }) => {
    // Act
    const got = diffRelist(known, listed, full);
    // Assess
    expect({ resynced: got.resynced.map((o) => o.name), deleted: got.deleted.map((o) => o.name) }).toEqual(want);
  });
});

describe('Function: changedSince()', () => {
  const obj = (key: string, resourceVersion: string): { key: string; resourceVersion: string } => ({ key, resourceVersion });

  const cases: ReadonlyArray<{ name: string; rv: string; than: string; want: boolean }> = [
    { name: 'compares etcd revisions as numbers, not as text', rv: '12', than: '9', want: true },
    { name: 'an older revision is not newer', rv: '9', than: '12', want: false },
    { name: 'the same revision is not newer', rv: '12', than: '12', want: false },
    { name: 'compares revisions beyond 2^53 exactly', rv: '9007199254740993', than: '9007199254740992', want: true },
    { name: 'takes an opaque resourceVersion as newer (announced rather than missed)', rv: 'abc', than: '12', want: true },
    { name: 'takes anything as newer than an opaque checkpoint', rv: '1', than: 'xyz', want: true },
  ];
  it.each(cases)('$name', ({ rv, than, want }) => {
    // Act / Assess
    expect(changedSince([obj('a', rv)], than)).toHaveLength(want ? 1 : 0);
  });

  it('announces only the objects changed after the compacted checkpoint, in list order', () => {
    // Prepare
    const listed = [obj('a', '120'), obj('b', '99'), obj('c', '100'), obj('d', '101')];

    // Act
    const got = changedSince(listed, '100');

    // Assess
    expect(got.map((o) => o.key)).toEqual(['a', 'd']);
  });

  it('announces nothing when nothing changed since the checkpoint', () => {
    // Act / Assess
    expect(changedSince([obj('a', '5'), obj('b', '7')], '7')).toEqual([]);
  });
});

describe('Function: isOwnNodeWrite()', () => {
  const TA = 'taints.capi-taint-propagator.dev/applied';
  const ours = 'capi-taint-propagator';
  /** A Node as the API server returns it after an update by `manager` of taints and/or the tracking annotation. */
  function written(mutate: (n: Json) => void, owners: { taints?: string; annotation?: string }): NodeFacts {
    const n = baseNode();
    n.metadata.resourceVersion = '11';
    mutate(n);
    n.metadata.managedFields = [
      { manager: 'kubelet', fieldsV1: { 'f:status': {} } },
      ...(owners.taints ? [{ manager: owners.taints, fieldsV1: { 'f:spec': { 'f:taints': {} } } }] : []),
      ...(owners.annotation ? [{ manager: owners.annotation, fieldsV1: { 'f:metadata': { 'f:annotations': { [`f:${TA}`]: {} } } } }] : []),
    ];
    return toNodeFacts(n) as NodeFacts;
  }
  const before = () => toNodeFacts(baseNode()) as NodeFacts;
  const addGpu = (n: Json) => n.spec.taints.push({ key: 'gpu', value: 'a', effect: 'NoSchedule' });
  const track = (n: Json) => (n.metadata.annotations[TA] = 'gpu:NoSchedule');

  it.each([
    { name: 'our write of taints and annotation', mutate: (n: Json) => (addGpu(n), track(n)), owners: { taints: ours, annotation: ours }, want: true },
    { name: 'our write of the annotation only', mutate: track, owners: { annotation: ours }, want: true },
    { name: 'a foreign write of taints after ours (it owns the atomic list now)', mutate: (n: Json) => (addGpu(n), track(n)), owners: { taints: 'kubectl-edit', annotation: ours }, want: false },
    { name: 'taints changed but nobody recorded as their writer', mutate: addGpu, owners: {}, want: false },
    { name: 'our taints plus a change of the Machine annotation', mutate: (n: Json) => (addGpu(n), (n.metadata.annotations['cluster.x-k8s.io/machine'] = 'm2')), owners: { taints: ours }, want: false },
    { name: 'nothing relevant changed (a heartbeat)', mutate: (n: Json) => (n.status.conditions[0].lastHeartbeatTime = 'later'), owners: { taints: ours }, want: false },
  ])('$name → $want', ({ mutate, owners, want }) => {
    // Act
    const own = isOwnNodeWrite(before(), written(mutate, owners));

    // Assess
    expect(own).toBe(want);
  });

  it('never applies to a Node seen for the first time, or to Machines', () => {
    // Prepare
    const node = written((n) => (addGpu(n), track(n)), { taints: ours, annotation: ours });
    const machine = toMachineFacts(baseMachine()) as MachineFacts;

    // Act + Assess
    expect([isOwnNodeWrite(undefined, node), isOwnNodeWrite(machine, machine)]).toEqual([false, false]);
  });

  it('leaves the writers out of the fingerprint', () => {
    // Prepare
    const a = written(addGpu, { taints: ours });
    const b = written(addGpu, { taints: 'someone-else' });

    // Act + Assess
    expect(fingerprintOf(a)).toBe(fingerprintOf(b));
  });
});

describe('Function: isDeclarationRecovery()', () => {
  const machine = (annotation: string | undefined, mutate: (m: Json) => void = () => undefined): MachineFacts => {
    const m = baseMachine();
    delete m.spec.taints;
    if (annotation === undefined) delete m.metadata.annotations['taints.capi-taint-propagator.dev/machine'];
    else m.metadata.annotations['taints.capi-taint-propagator.dev/machine'] = annotation;
    mutate(m);
    return toMachineFacts(m) as MachineFacts;
  };
  const cases: { name: string; previous: () => MachineFacts | NodeFacts | undefined; current: () => MachineFacts | NodeFacts; want: boolean }[] = [
    { name: 'invalid effect fixed', previous: () => machine('gpu=a:NoSchedul'), current: () => machine('gpu=a:NoSchedule'), want: true },
    { name: 'syntax error fixed by removing the annotation', previous: () => machine('{"gpu": "a"}'), current: () => machine(undefined), want: true },
    { name: 'invalid spec.taints fixed', previous: () => machine(undefined, (m) => (m.spec.taints = [{ key: 'gpu', effect: 'NoSchedul', propagation: 'Always' }])), current: () => machine(undefined, (m) => (m.spec.taints = [{ key: 'gpu', effect: 'NoSchedule', propagation: 'Always' }])), want: true },
    { name: 'still invalid', previous: () => machine('gpu=a:NoSchedul'), current: () => machine('gpu=a:NoSchedulee'), want: false },
    { name: 'valid to valid', previous: () => machine('gpu=a:NoSchedule'), current: () => machine('gpu=b:NoSchedule'), want: false },
    { name: 'valid to invalid', previous: () => machine('gpu=a:NoSchedule'), current: () => machine('gpu=a:NoSchedul'), want: false },
    { name: 'declaration unchanged (a label changed)', previous: () => machine('gpu=a:NoSchedul'), current: () => machine('gpu=a:NoSchedul', (m) => (m.metadata.labels.x = 'y')), want: false },
    { name: 'first version seen', previous: () => undefined, current: () => machine('gpu=a:NoSchedule'), want: false },
    { name: 'a Node', previous: () => toNodeFacts(baseNode()) as NodeFacts, current: () => toNodeFacts(baseNode()) as NodeFacts, want: false },
    // Validity is judged with the Machine's control-plane label, as the reconcile function judges it.
    { name: 'control-plane label considered', previous: () => machine('gpu=a:NoSchedul', (m) => (m.metadata.labels['cluster.x-k8s.io/control-plane'] = '')), current: () => machine('gpu=a:NoSchedule', (m) => (m.metadata.labels['cluster.x-k8s.io/control-plane'] = '')), want: true },
  ];
  it.each(cases)('$name', ({ previous, current, want }) => {
    expect(isDeclarationRecovery(previous(), current())).toBe(want);
  });
});

describe('Function: isForeignTaintNoise()', () => {
  const OWN = 'taints.capi-taint-propagator.dev/applied';
  const GATE = { key: 'taints.capi-taint-propagator.dev/uninitialized', effect: 'NoSchedule' };
  const UNREACHABLE = { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute', timeAdded: '2026-11-23T08:00:00Z' };
  /** An initialized Node: the product tracks gpu:NoSchedule; `a` is someone else's. */
  const node = (taints: Json[], options: { own?: string | null; manager?: string } = {}): NodeFacts => {
    const n = baseNode();
    n.spec.taints = taints;
    if (options.own !== null) n.metadata.annotations[OWN] = options.own ?? 'gpu:NoSchedule';
    n.metadata.managedFields = [{ manager: options.manager ?? 'node-controller', fieldsV1: { 'f:spec': { 'f:taints': {} } } }];
    return toNodeFacts(n) as NodeFacts;
  };
  const GPU = { key: 'gpu', value: 'a', effect: 'NoSchedule' };
  const OTHER = { key: 'a', effect: 'NoSchedule' };
  const before = node([OTHER, GPU]);

  const cases: ReadonlyArray<{ name: string; after: NodeFacts; want: boolean }> = [
    { name: 'a foreign NoExecute taint added, the tracked one intact', after: node([OTHER, GPU, UNREACHABLE]), want: true },
    { name: 'a foreign taint removed', after: node([GPU]), want: true },
    { name: "a foreign taint's value changed", after: node([{ ...OTHER, value: 'x' }, GPU]), want: true },
    { name: 'the tracked taint removed by someone', after: node([OTHER]), want: false },
    { name: "the tracked taint's value changed by someone", after: node([OTHER, { ...GPU, value: 'b' }]), want: false },
    { name: 'the startup gate added by someone', after: node([OTHER, GPU, GATE]), want: false },
    { name: 'the write is the reconcile function’s own', after: node([OTHER, GPU, UNREACHABLE], { manager: 'capi-taint-propagator' }), want: false },
    { name: 'the tracking annotation changed too', after: node([OTHER, GPU, UNREACHABLE], { own: '' }), want: false },
    { name: 'the tracking annotation is malformed', after: node([OTHER, GPU, UNREACHABLE], { own: 'gpu' }), want: false },
  ];
  for (const c of cases) {
    it(`${c.want ? 'filters' : 'forwards'}: ${c.name}`, () => {
      const b = c.name.includes('malformed') ? node([OTHER, GPU], { own: 'gpu' }) : before;
      expect(isForeignTaintNoise(b, c.after, GATE)).toBe(c.want);
    });
  }

  it('forwards a Node the product has not initialized (no tracking annotation): its first taints may still be due', () => {
    expect(isForeignTaintNoise(node([OTHER], { own: null }), node([OTHER, UNREACHABLE], { own: null }), GATE)).toBe(false);
  });

  it('forwards when a tracked taint was already missing before (a repair is due)', () => {
    expect(isForeignTaintNoise(node([OTHER]), node([OTHER, UNREACHABLE]), GATE)).toBe(false);
  });

  it('without a gate, a foreign write of the default gate key is a foreign taint like any other', () => {
    expect(isForeignTaintNoise(before, node([OTHER, GPU, GATE]), undefined)).toBe(true);
  });

  it('is never true for Machines or a first sighting', () => {
    const m = toMachineFacts(baseMachine()) as MachineFacts;
    expect(isForeignTaintNoise(m, m)).toBe(false);
    expect(isForeignTaintNoise(undefined, before)).toBe(false);
  });
});

describe('Function: forwardDecision()', () => {
  it('forwards additions, deletions, relist announcements and first sightings', () => {
    const n = toNodeFacts(baseNode()) as NodeFacts;
    for (const change of ['added', 'deleted', 'resynced'] as const) expect(forwardDecision(change, n, n)).toEqual({ forward: true });
    expect(forwardDecision('modified', undefined, n)).toEqual({ forward: true });
  });

  it('filters a heartbeat as unchanged, and names foreign taint noise', () => {
    const n = toNodeFacts(baseNode()) as NodeFacts;
    expect(forwardDecision('modified', n, { ...n, resourceVersion: '99' })).toEqual({ forward: false, filtered: 'unchanged' });
    const own = baseNode();
    own.metadata.annotations['taints.capi-taint-propagator.dev/applied'] = '';
    const before = toNodeFacts(own) as NodeFacts;
    own.spec.taints = [...own.spec.taints, { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' }];
    own.metadata.managedFields = [{ manager: 'node-controller', fieldsV1: { 'f:spec': { 'f:taints': {} } } }];
    expect(forwardDecision('modified', before, toNodeFacts(own) as NodeFacts)).toEqual({ forward: false, filtered: 'foreign-taints' });
  });

  it('carries the declaration-recovered hint', () => {
    const broken = baseMachine();
    broken.metadata.annotations['taints.capi-taint-propagator.dev/machine'] = 'gpu:NoSchedul';
    const fixed = baseMachine();
    fixed.metadata.annotations['taints.capi-taint-propagator.dev/machine'] = 'gpu:NoSchedule';
    expect(forwardDecision('modified', toMachineFacts(broken) as MachineFacts, toMachineFacts(fixed) as MachineFacts)).toEqual({ forward: true, declarationRecovered: true });
  });
});

describe('Function: isForeignTaintNoise() with odd taint lists, and forwardDecision() for our own write', () => {
  const OWN = 'taints.capi-taint-propagator.dev/applied';
  /** The Node's view with `spec.taints` as stored (parsed by toNodeFacts). */
  const facts = (taints: unknown, manager = 'node-controller'): NodeFacts => {
    const n = baseNode();
    n.metadata.annotations[OWN] = '';
    n.metadata.managedFields = [{ manager, fieldsV1: { 'f:spec': { 'f:taints': {} } } }];
    n.spec.taints = taints;
    return toNodeFacts(n) as NodeFacts;
  };
  const UNREACHABLE = { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' };

  it('treats a Node without taints as an empty list: the first foreign taint is noise', () => {
    expect(isForeignTaintNoise(facts(null), facts([UNREACHABLE]))).toBe(true);
    expect(isForeignTaintNoise(facts(undefined), facts([UNREACHABLE]))).toBe(true);
  });

  it('forwards whatever it cannot read as a list of taints (the reconcile function decides)', () => {
    expect(isForeignTaintNoise(facts('not a list'), facts([UNREACHABLE]))).toBe(false);
    expect(isForeignTaintNoise(facts([]), facts([UNREACHABLE, 'text']))).toBe(false);
    expect(isForeignTaintNoise(facts([]), facts([UNREACHABLE, { key: 1, effect: 'NoSchedule' }]))).toBe(false);
  });

  it('takes someone else reordering the same taints for noise too', () => {
    const a = { key: 'a', effect: 'NoSchedule' };
    expect(isForeignTaintNoise(facts([a, UNREACHABLE]), facts([UNREACHABLE, a]))).toBe(true);
  });

  it('is false when the taints did not change at all (only who wrote them, or the resourceVersion)', () => {
    const a = { key: 'a', effect: 'NoSchedule' };
    expect(isForeignTaintNoise(facts([a]), facts([a], 'someone-else'))).toBe(false);
    expect(isOwnNodeWrite(facts([a]), facts([a], FIELD_MANAGER))).toBe(false);
  });

  it('names the echo of our own write', () => {
    const before = facts([]);
    const tainted = facts([{ key: 'gpu', value: 'a', effect: 'NoSchedule' }]);
    const after: NodeFacts = {
      ...tainted,
      annotations: { ...tainted.annotations, [OWN]: 'gpu:NoSchedule' },
      writers: { taints: FIELD_MANAGER, ownTrackingAnnotation: FIELD_MANAGER },
    };
    expect(forwardDecision('modified', before, after)).toEqual({ forward: false, filtered: 'own-write' });
    expect(forwardDecision('modified', before, { ...after, writers: { taints: 'someone', ownTrackingAnnotation: 'someone' } })).toEqual({ forward: true });
  });
});
