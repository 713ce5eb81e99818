import { describe, expect, it } from 'vitest';
import type { MachineFacts, NodeWithTaints, OwnerFacts } from '#shared/model/views.ts';
import type { ClusterView } from '#shared/domain/pause.ts';
import { PausedBy, SyncState, TaintOwner, needsPods, ownersOf, taintStatusOf, type DesiredTaint, type TaintStatusInput } from '#local/taint-status.ts';
import { formatState, formatStatusTable } from '#local/status-format.ts';
import { formatTaint, OWN_TRACKING_ANNOTATION, TRACKING_ANNOTATION as UPSTREAM, UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';

const CLASS = 'taints.capi-taint-propagator.dev/class';
const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const GATE = { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' };

function machine(overrides: Partial<MachineFacts> | { readonly kind: 'MachinePool'; readonly annotations?: Record<string, string> } = {}): OwnerFacts {
  return { kind: 'Machine', apiVersion: 'cluster.x-k8s.io/v1beta2', namespace: 'ns', name: 'm1', uid: 'u', resourceVersion: '1', labels: {}, annotations: {}, specTaints: undefined, nodeName: 'n1', deleting: false, ...overrides } as OwnerFacts;
}

function node(overrides: Partial<NodeWithTaints> = {}): NodeWithTaints {
  return { kind: 'Node', name: 'n1', uid: 'nu', resourceVersion: '7', labels: {}, annotations: {}, taints: [], ...overrides };
}

describe('Function: taintStatusOf()', () => {
  const cases: ReadonlyArray<{ name: string; machine: OwnerFacts; node: NodeWithTaints | undefined; want: { state: SyncState; owners?: string[]; expected?: string[] } }> = [
    // in sync
    {
      name: 'is in sync when the Node carries the tracked Always taint and the annotation',
      machine: machine({ annotations: { [MACHINE]: 'gpu=a100:NoSchedule' } }),
      node: node({ taints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }, { key: 'other', effect: 'NoExecute' }], annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' } }),
      want: { state: SyncState.inSync, owners: ['gpu:tracked', 'other:foreign'] },
    },
    {
      name: 'calls an OnInitialization taint on an initialized Node initialization-only, even with another value',
      machine: machine({ annotations: { [CLASS]: 'boot=1:PreferNoSchedule@OnInitialization' } }),
      node: node({ taints: [{ key: 'boot', value: 'changed', effect: 'PreferNoSchedule' }], annotations: { [OWN_TRACKING_ANNOTATION]: '' } }),
      want: { state: SyncState.inSync, owners: ['boot:initialization-only'] },
    },
    // out of sync
    {
      name: 'is out of sync before the first reconcile, with the gate to remove and the taints to add',
      machine: machine({ annotations: { [MACHINE]: 'gpu:NoSchedule' } }),
      node: node({ taints: [GATE] }),
      want: { state: SyncState.outOfSync, owners: [`${UNINITIALIZED_TAINT_KEY}:startup-gate`], expected: ['gpu:NoSchedule'] },
    },
    {
      name: 'is out of sync when a tracked taint is no longer declared, and calls it tracked (no longer declared)',
      machine: machine(),
      node: node({ taints: [{ key: 'old', effect: 'NoSchedule' }], annotations: { [OWN_TRACKING_ANNOTATION]: 'old:NoSchedule' } }),
      want: { state: SyncState.outOfSync, owners: ['old:tracked'], expected: [] },
    },
    {
      name: 'is out of sync when a value differs from the declaration',
      machine: machine({ annotations: { [MACHINE]: 'gpu=h100:NoSchedule' } }),
      node: node({ taints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }], annotations: { [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' } }),
      want: { state: SyncState.outOfSync, owners: ['gpu:tracked'], expected: ['gpu:NoSchedule'] },
    },
    // next to upstream CAPI, which owns spec.taints
    {
      name: "calls spec.taints upstream's and is in sync when CAPI applied them",
      machine: machine({ specTaints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always' }], annotations: { [MACHINE]: 'pool=edge:NoSchedule' } }),
      node: node({
        taints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }, { key: 'pool', value: 'edge', effect: 'NoSchedule' }],
        annotations: { [UPSTREAM]: 'gpu:NoSchedule', [OWN_TRACKING_ANNOTATION]: 'pool:NoSchedule' },
      }),
      want: { state: SyncState.inSync, owners: ['gpu:upstream', 'pool:tracked'] },
    },
    {
      name: 'applies its own taints but holds the startup gate until CAPI has initialized the Node',
      machine: machine({ specTaints: [{ key: 'gpu', effect: 'NoSchedule', propagation: 'Always' }], annotations: { [MACHINE]: 'pool=edge:NoSchedule' } }),
      node: node({ taints: [GATE] }),
      want: { state: SyncState.outOfSync, owners: [`${UNINITIALIZED_TAINT_KEY}:startup-gate`], expected: [`${UNINITIALIZED_TAINT_KEY}:NoSchedule`, 'pool:NoSchedule'] },
    },
    {
      name: 'waits for upstream with the gate held once its own part is done',
      machine: machine({ specTaints: [{ key: 'gpu', effect: 'NoSchedule', propagation: 'Always' }], annotations: { [MACHINE]: 'pool=edge:NoSchedule' } }),
      node: node({ taints: [GATE, { key: 'pool', value: 'edge', effect: 'NoSchedule' }], annotations: { [OWN_TRACKING_ANNOTATION]: 'pool:NoSchedule' } }),
      want: { state: SyncState.waitingForUpstream, owners: [`${UNINITIALIZED_TAINT_KEY}:startup-gate`, 'pool:tracked'] },
    },
    {
      name: 'waits for upstream when CAPI initialized the Node without a declared spec taint (its gate off)',
      machine: machine({ specTaints: [{ key: 'gpu', effect: 'NoSchedule', propagation: 'Always' }] }),
      node: node({ annotations: { [UPSTREAM]: '', [OWN_TRACKING_ANNOTATION]: '' } }),
      want: { state: SyncState.waitingForUpstream, owners: [] },
    },
    {
      name: 'hands a taint moved to spec.taints over to CAPI: it leaves the own annotation and stays on the Node',
      machine: machine({ specTaints: [{ key: 'gpu', effect: 'NoSchedule', propagation: 'Always' }] }),
      node: node({ taints: [{ key: 'gpu', effect: 'NoSchedule' }], annotations: { [UPSTREAM]: 'gpu:NoSchedule', [OWN_TRACKING_ANNOTATION]: 'gpu:NoSchedule' } }),
      want: { state: SyncState.outOfSync, owners: ['gpu:tracked'], expected: ['gpu:NoSchedule'] },
    },
    // left alone on purpose
    {
      name: 'reports an invalid declaration and leaves the Node alone',
      machine: machine({ annotations: { [CLASS]: 'gpu:NoSchedul' } }),
      node: node({ taints: [GATE] }),
      want: { state: SyncState.invalidDeclaration, owners: [`${UNINITIALIZED_TAINT_KEY}:startup-gate`] },
    },
    {
      name: 'reports a malformed tracking annotation',
      machine: machine(),
      node: node({ annotations: { [OWN_TRACKING_ANNOTATION]: 'a:b:c' } }),
      want: { state: SyncState.malformedAnnotation, owners: [] },
    },
    // no pair
    { name: 'reports a Machine without a Node', machine: machine({ nodeName: undefined }), node: undefined, want: { state: SyncState.noNode } },
    { name: 'reports a missing Node', machine: machine(), node: undefined, want: { state: SyncState.nodeMissing } },
    { name: 'reports a Machine being deleted', machine: machine({ deleting: true }), node: node(), want: { state: SyncState.machineDeleting } },
  ];

  it.each(cases)('$name', ({ machine: m, node: n, want }) => {
    // Act
    const status = taintStatusOf({ machine: m, node: n, startupTaint: GATE });

    // Assess
    expect(status.state).toBe(want.state);
    expect(status.machine).toBe('ns/m1');
    if (want.owners) expect(status.actual.map((a) => `${a.taint.key}:${a.owner}`)).toEqual(want.owners);
    if (want.expected) expect(status.expected?.map((t) => `${t.key}:${t.effect}`)).toEqual(want.expected);
    else expect(status.expected).toBeUndefined();
  });

  it('lists the desired taints with the source that won', () => {
    // Prepare
    const m = machine({ specTaints: [{ key: 'gpu', value: 'a', effect: 'NoSchedule', propagation: 'Always' }], annotations: { [CLASS]: 'gpu=b:NoSchedule, pool=x:NoSchedule' } });

    // Act
    const status = taintStatusOf({ machine: m, node: node() });

    // Assess
    expect(status.desired.map((d) => `${d.key}=${d.value ?? ''}@${d.source}`)).toEqual(['gpu=a@spec.taints', `pool=x@${CLASS}`]);
    expect(status.initialized).toBe(false);
  });
});

describe('Function: taintStatusOf() with Cluster API\'s pause', () => {
  const PAUSED = 'cluster.x-k8s.io/paused';
  const outOfSync = { machine: machine({ annotations: { [MACHINE]: 'gpu:NoSchedule' } }), node: node({ taints: [{ key: 'other', effect: 'NoExecute' }], annotations: { [OWN_TRACKING_ANNOTATION]: '' } }) };
  const cluster = (paused: boolean): ClusterView => ({ namespace: 'ns', name: 'c1', paused });
  const cases: ReadonlyArray<{ name: string; input: TaintStatusInput; want: { state: SyncState; pausedBy?: PausedBy; reason?: string } }> = [
    // paused
    {
      name: 'is paused when its Cluster has spec.paused, whatever the Node would need',
      input: { ...outOfSync, cluster: cluster(true) },
      want: { state: SyncState.paused, pausedBy: PausedBy.cluster, reason: 'Cluster ns/c1 has spec.paused: the Node is left as it is until the pause ends' },
    },
    {
      name: 'is paused when the Machine has the paused annotation (any value)',
      input: { ...outOfSync, machine: machine({ annotations: { [MACHINE]: 'gpu:NoSchedule', [PAUSED]: 'false' } }), cluster: cluster(false) },
      want: { state: SyncState.paused, pausedBy: PausedBy.machine, reason: `Machine ns/m1 has the ${PAUSED} annotation: the Node is left as it is until the pause ends` },
    },
    {
      name: "is paused when the MachinePool's own annotations carry the paused annotation",
      input: { ...outOfSync, machine: machine({ kind: 'MachinePool', annotations: { [PAUSED]: '' } }) },
      want: { state: SyncState.paused, pausedBy: PausedBy.machinePool, reason: `MachinePool ns/m1 has the ${PAUSED} annotation: the Node is left as it is until the pause ends` },
    },
    {
      name: "names the Cluster when both the Cluster and the Machine are paused (Cluster API checks the Cluster first)",
      input: { ...outOfSync, machine: machine({ annotations: { [PAUSED]: '' } }), cluster: cluster(true) },
      want: { state: SyncState.paused, pausedBy: PausedBy.cluster },
    },
    {
      name: 'is paused rather than being deleted or without a Node',
      input: { machine: machine({ deleting: true, nodeName: undefined, annotations: { [PAUSED]: '' } }), node: undefined },
      want: { state: SyncState.paused, pausedBy: PausedBy.machine },
    },
    // not paused
    { name: 'is not paused by an unpaused Cluster', input: { ...outOfSync, cluster: cluster(false) }, want: { state: SyncState.outOfSync } },
  ];

  it.each(cases)('$name', ({ input, want }) => {
    // Act
    const status = taintStatusOf({ ...input, startupTaint: GATE });

    // Assess: the state, whose pause, and the reason together
    expect(status.state).toBe(want.state);
    expect(status.pausedBy).toBe(want.pausedBy);
    if (want.reason) expect(status.reason).toBe(want.reason);
    if (want.state === SyncState.paused) expect(status.pending).toBeUndefined();
  });

  it("still shows the paused Node's taints and the Machine's declaration", () => {
    // Act
    const status = taintStatusOf({ ...outOfSync, cluster: cluster(true) });

    // Assess
    expect(status.actual.map((a) => `${a.taint.key}:${a.owner}`)).toEqual(['other:foreign']);
    expect(status.desired.map((d) => d.key)).toEqual(['gpu']);
  });
});

describe('Function: ownersOf()', () => {
  it('never calls a taint initialization-only on a Node that is not initialized', () => {
    // Prepare
    const desired: DesiredTaint[] = [{ key: 'boot', effect: 'NoSchedule', propagation: 'OnInitialization', source: CLASS }];

    // Act
    const owners = ownersOf({ taints: [{ key: 'boot', effect: 'NoSchedule' }], annotations: {} }, desired);

    // Assess
    expect(owners).toEqual([{ taint: { key: 'boot', effect: 'NoSchedule' }, owner: TaintOwner.foreign, declaredAs: desired[0] }]);
  });
});

describe('Function: taintStatusOf() NoExecute preview', () => {
  const pods = [
    { namespace: 'app', name: 'web', tolerations: [], ownerKind: 'ReplicaSet' },
    { namespace: 'app', name: 'db', tolerations: [{ key: 'maintenance', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }] },
    { namespace: 'kube-system', name: 'agent', tolerations: [{ operator: 'Exists' }], ownerKind: 'DaemonSet' },
  ];
  const initialized = { [OWN_TRACKING_ANNOTATION]: '' };
  const cases: ReadonlyArray<{
    name: string;
    machine: OwnerFacts;
    node: NodeWithTaints;
    pods?: TaintStatusInput['pods'];
    want: { state: SyncState; taints?: string[]; counts?: { now: number; later: number; laterSeconds: number[]; kept: number }; podsError?: string; expected?: string[] };
  }> = [
    // --- applied NoExecute ---
    {
      name: 'previews the evictions of a NoExecute taint the next write adds',
      machine: machine({ annotations: { [MACHINE]: 'maintenance=true:NoExecute' } }),
      node: node({ annotations: initialized }),
      pods,
      want: { state: SyncState.outOfSync, taints: ['maintenance=true:NoExecute'], counts: { now: 1, later: 1, laterSeconds: [300], kept: 1 }, expected: ['maintenance=true:NoExecute'] },
    },
    {
      name: 'previews a NoExecute value change (the Node carries the key with another value)',
      machine: machine({ annotations: { [MACHINE]: 'maintenance=true:NoExecute' } }),
      node: node({ taints: [{ key: 'maintenance', value: 'old', effect: 'NoExecute' }], annotations: { [OWN_TRACKING_ANNOTATION]: 'maintenance:NoExecute' } }),
      pods,
      want: { state: SyncState.outOfSync, taints: ['maintenance=true:NoExecute'], counts: { now: 1, later: 1, laterSeconds: [300], kept: 1 }, expected: ['maintenance=true:NoExecute'] },
    },
    {
      name: 'has no preview when the Node already carries the NoExecute taint',
      machine: machine({ annotations: { [MACHINE]: 'maintenance=true:NoExecute' } }),
      node: node({ taints: [{ key: 'maintenance', value: 'true', effect: 'NoExecute' }], annotations: { [OWN_TRACKING_ANNOTATION]: 'maintenance:NoExecute' } }),
      pods,
      want: { state: SyncState.inSync },
    },
    {
      name: 'has no preview for a NoSchedule addition',
      machine: machine({ annotations: { [MACHINE]: 'gpu:NoSchedule' } }),
      node: node({ annotations: initialized }),
      pods,
      want: { state: SyncState.outOfSync, expected: ['gpu:NoSchedule'] },
    },
    // --- @Preview ---
    {
      name: 'reports a @Preview taint in sync, never expected on the Node, with its evictions',
      machine: machine({ annotations: { [MACHINE]: 'maintenance=true:NoExecute@Preview' } }),
      node: node({ annotations: initialized }),
      pods,
      want: { state: SyncState.inSync, taints: ['maintenance=true:NoExecute@Preview'], counts: { now: 1, later: 1, laterSeconds: [300], kept: 1 } },
    },
    {
      name: 'has no preview for a @Preview taint the Node already carries',
      machine: machine({ annotations: { [MACHINE]: 'maintenance=true:NoExecute@Preview' } }),
      node: node({ taints: [{ key: 'maintenance', value: 'true', effect: 'NoExecute' }], annotations: initialized }),
      pods,
      want: { state: SyncState.inSync },
    },
    // --- pods not read ---
    {
      name: 'names the taints without counts while the pods are not read',
      machine: machine({ annotations: { [MACHINE]: 'maintenance=true:NoExecute@Preview' } }),
      node: node({ annotations: initialized }),
      want: { state: SyncState.inSync, taints: ['maintenance=true:NoExecute@Preview'] },
    },
    {
      name: 'carries the reason when the pods could not be read',
      machine: machine({ annotations: { [MACHINE]: 'maintenance=true:NoExecute@Preview' } }),
      node: node({ annotations: initialized }),
      pods: { error: 'pods is forbidden' },
      want: { state: SyncState.inSync, taints: ['maintenance=true:NoExecute@Preview'], podsError: 'pods is forbidden' },
    },
  ];

  it.each(cases)('$name', ({ machine: m, node: n, pods: p, want }) => {
    // Act
    const status = taintStatusOf({ machine: m, node: n, ...(p ? { pods: p } : {}) });

    // Assess
    expect(status.state).toBe(want.state);
    expect(status.noExecutePreview?.taints.map((t) => `${formatTaint(t.taint)}${t.previewOnly ? '@Preview' : ''}`)).toEqual(want.taints);
    expect(status.noExecutePreview?.counts).toEqual(want.counts);
    expect(status.noExecutePreview?.podsError).toEqual(want.podsError);
    expect(status.expected?.map(formatTaint)).toEqual(want.expected);
    expect(needsPods(status)).toBe(want.taints !== undefined && p === undefined);
  });

  it('lists a @Preview declaration as previewed, not as desired', () => {
    // Act
    const status = taintStatusOf({ machine: machine({ annotations: { [MACHINE]: 'gpu:NoSchedule,maintenance:NoExecute@Preview' } }), node: node({ annotations: initialized }) });

    // Assess
    expect(status.desired.map((d) => d.key)).toEqual(['gpu']);
    expect(status.previewed).toEqual([{ key: 'maintenance', effect: 'NoExecute', source: MACHINE }]);
  });

  it.each<{ labels: Record<string, string>; want: string | undefined }>([
    { labels: { 'cluster.x-k8s.io/deployment-name': 'md', 'cluster.x-k8s.io/set-name': 'md-x' }, want: 'MachineDeployment ns/md' },
    { labels: { 'cluster.x-k8s.io/set-name': 'ms' }, want: 'MachineSet ns/ms' },
    { labels: {}, want: undefined },
  ])('names the node group $want from the Machine labels', ({ labels, want }) => {
    // Act
    const status = taintStatusOf({ machine: machine({ labels }), node: node() });

    // Assess
    expect(status.nodeGroup).toEqual(want);
  });
});

describe('Function: taintStatusOf() with a staged NoExecute rollout in progress', () => {
  const MARK = 'rollout.capi-taint-propagator.dev/in-progress';
  const group = 'MachineDeployment/ns/md';
  const cases: ReadonlyArray<{ name: string; mark: Record<string, unknown> | string | undefined; want: { phase?: string; state: string; line?: string } }> = [
    { name: 'shows no rollout on a Node without a mark', mark: undefined, want: { state: 'out of sync' } },
    { name: 'shows a claim without ticket as waiting for its place', mark: { group, taints: ['maint:NoExecute'] }, want: { phase: 'claimed', state: 'out of sync (rollout: claimed)', line: 'maint:NoExecute in MachineDeployment/ns/md: waiting for a place in the group' } },
    { name: 'shows a ticketed mark as evicting', mark: { group, taints: ['maint:NoExecute'], ticket: '42' }, want: { phase: 'evicting', state: 'out of sync (rollout: evicting)', line: 'maint:NoExecute in MachineDeployment/ns/md: evicting its pods through the Eviction API' } },
    { name: 'names the pods a budget refuses', mark: { group, taints: ['maint:NoExecute'], ticket: '42', refused: ['app/web-1'] }, want: { phase: 'refused', state: 'out of sync (rollout: refused)', line: 'maint:NoExecute in MachineDeployment/ns/md: waiting, a PodDisruptionBudget refuses evicting app/web-1' } },
    { name: 'names the pods that will not go, before the refusals', mark: { group, taints: ['maint:NoExecute'], ticket: '42', refused: ['app/web-1'], stuck: ['app/db-0'] }, want: { phase: 'stuck', state: 'out of sync (rollout: stuck)', line: 'maint:NoExecute in MachineDeployment/ns/md: pods that will not go (still terminating past the bound): app/db-0' } },
  ];
  it.each(cases)('$name', ({ mark, want }) => {
    // Prepare
    const annotations: Record<string, string> = { [OWN_TRACKING_ANNOTATION]: '', ...(mark === undefined ? {} : { [MARK]: typeof mark === 'string' ? mark : JSON.stringify(mark) }) };

    // Act
    const status = taintStatusOf({ machine: machine({ annotations: { [MACHINE]: 'maint:NoExecute' } }), node: node({ annotations }) });

    // Assess
    expect(status.rollout?.phase).toBe(want.phase);
    expect(formatState(status)).toBe(want.state);
    const lines = formatStatusTable([status]);
    if (want.line) expect(lines).toContain(`    rollout  ${want.line}`);
    else expect(lines.some((l) => l.includes('rollout'))).toBe(false);
  });
});
