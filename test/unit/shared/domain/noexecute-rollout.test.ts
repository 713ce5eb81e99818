import { describe, expect, it } from 'vitest';
import {
  compareResourceVersions,
  decodeRolloutMark,
  groupMachineSelectorOf,
  maxInProgressOf,
  encodeRolloutMark,
  nodeGroupOf,
  planEvictions,
  planRolloutSlot,
  rolloutSettingOf,
  ROLLOUT_ANNOTATION,
  ROLLOUT_MARK_ANNOTATION,
  type NodeInProgress,
  type RolloutMark,
  type RolloutSetting,
  type RolloutSlotStep,
} from '#shared/domain/noexecute-rollout.ts';
import { nodeTaintsAfter, type PodOnNode } from '#shared/domain/eviction-preview.ts';
import type { Taint } from '#shared/domain/taint.ts';
import { declarationOwnerOf } from '#shared/domain/machine-pool.ts';
import { toMachinePoolFacts, type MachinePoolFacts } from '#shared/model/views.ts';

const MAINT: Taint = { key: 'example.com/maint', value: 'yes', effect: 'NoExecute' };
const G = 'MachineDeployment/ns/md';

function node(name: string, resourceVersion: string, mark?: RolloutMark): { name: string; resourceVersion: string; annotations: Record<string, string> } {
  const annotations: Record<string, string> = mark ? { [ROLLOUT_MARK_ANNOTATION]: encodeRolloutMark(mark) } : {};
  return { name, resourceVersion, annotations };
}
function other(name: string, resourceVersion: string, mark: Partial<RolloutMark> = {}): NodeInProgress {
  return { name, resourceVersion, mark: { group: G, taints: ['example.com/maint=yes:NoExecute'], ...mark } };
}
const two: RolloutSetting = { maxInProgress: 2 };
const one: RolloutSetting = { maxInProgress: 1 };
const held = (ticket: string): RolloutMark => ({ group: G, taints: ['example.com/maint=yes:NoExecute'], ticket });

describe('Function: planRolloutSlot()', () => {
  const cases: ReadonlyArray<{ name: string; input: Parameters<typeof planRolloutSlot>[0]; want: RolloutSlotStep['kind']; ahead?: string[] }> = [
    // not concerned: exactly as without the feature
    { name: 'a group that did not opt in goes on at once', input: { setting: undefined, group: G, pending: [MAINT], node: node('n1', '10'), others: [] }, want: 'immediate' },
    { name: 'nothing new with NoExecute goes on at once', input: { setting: one, group: G, pending: [], node: node('n1', '10'), others: [] }, want: 'immediate' },
    // withdrawn
    { name: 'a mark without anything pending is cleared (declaration withdrawn)', input: { setting: one, group: G, pending: [], node: node('n1', '10', held('5')), others: [] }, want: 'clear' },
    { name: 'a mark of a group that no longer opts in is cleared', input: { setting: undefined, group: G, pending: [MAINT], node: node('n1', '10', held('5')), others: [] }, want: 'clear' },
    // invalid opt-in: wait, never evict at once
    { name: 'an invalid opt-in waits', input: { setting: { invalid: 'x' }, group: G, pending: [MAINT], node: node('n1', '10'), others: [] }, want: 'invalid' },
    // claim and ticket
    { name: 'a Node without mark claims', input: { setting: one, group: G, pending: [MAINT], node: node('n1', '10'), others: [other('n2', '3', { ticket: '2' })] }, want: 'claim' },
    { name: 'a mark of another group is claimed again', input: { setting: one, group: G, pending: [MAINT], node: node('n1', '10', { group: 'MachineSet/ns/old', taints: [], ticket: '4' }), others: [] }, want: 'claim' },
    { name: 'a claim without ticket takes the resourceVersion it reads as its ticket', input: { setting: one, group: G, pending: [MAINT], node: node('n1', '12', { group: G, taints: [] }), others: [] }, want: 'ticket' },
    // the bound
    { name: 'holds when fewer than N of its group have lower tickets', input: { setting: two, group: G, pending: [MAINT], node: node('n3', '40', held('30')), others: [other('n1', '21', { ticket: '20' }), other('n4', '41', { ticket: '35' })] }, want: 'hold' },
    { name: 'waits when N of its group have lower tickets', input: { setting: two, group: G, pending: [MAINT], node: node('n3', '40', held('30')), others: [other('n1', '21', { ticket: '20' }), other('n2', '26', { ticket: '25' })] }, want: 'wait', ahead: ['n1', 'n2'] },
    { name: 'other groups do not count', input: { setting: one, group: G, pending: [MAINT], node: node('n3', '40', held('30')), others: [other('x1', '21', { group: 'MachineDeployment/ns/other', ticket: '20' })] }, want: 'hold' },
    { name: 'a stuck Node of its group does not count', input: { setting: one, group: G, pending: [MAINT], node: node('n3', '40', held('30')), others: [other('n1', '21', { ticket: '20', stuck: ['a/p'] })] }, want: 'hold' },
    { name: 'its own listing is ignored', input: { setting: one, group: G, pending: [MAINT], node: node('n3', '40', held('30')), others: [other('n3', '40', { ticket: '30' })] }, want: 'hold' },
    { name: 'a claim without ticket read below its ticket may come first: wait', input: { setting: one, group: G, pending: [MAINT], node: node('n3', '40', held('30')), others: [other('n1', '28')] }, want: 'wait', ahead: ['n1'] },
    { name: 'a claim without ticket read above its ticket comes after it', input: { setting: one, group: G, pending: [MAINT], node: node('n3', '40', held('30')), others: [other('n1', '33')] }, want: 'hold' },
    { name: 'a stuck Node goes on with its own pods whatever the group does', input: { setting: one, group: G, pending: [MAINT], node: node('n3', '40', { ...held('30'), stuck: ['a/p'] }), others: [other('n1', '21', { ticket: '20' })] }, want: 'hold' },
  ];

  it.each(cases)('$name', ({ input, want, ahead }) => {
    // Act
    const step = planRolloutSlot(input);

    // Assess
    expect(step.kind).toBe(want);
    if (step.kind === 'wait') expect(step.ahead).toEqual(ahead);
    if (step.kind === 'ticket') expect(step.mark.ticket).toBe(input.node.resourceVersion);
    if (step.kind === 'claim') expect(step.mark).toEqual({ group: G, taints: ['example.com/maint=yes:NoExecute'] });
  });

  it('never lets more than N of a group hold, whatever order the claims and tickets come in', () => {
    // Prepare: five Nodes whose tickets are 10..50, each seeing every other as listed after its own ticket write
    const tickets = ['10', '20', '30', '40', '50'];
    const all = tickets.map((t, i) => other(`n${i}`, String(Number(t) + 1), { ticket: t }));

    // Act
    const holding = all.filter((n) => planRolloutSlot({ setting: two, group: G, pending: [MAINT], node: node(n.name, n.resourceVersion, n.mark), others: all }).kind === 'hold');

    // Assess
    expect(holding.map((n) => n.name)).toEqual(['n0', 'n1']);
  });
});

describe('Function: planEvictions()', () => {
  const now = new Date('2026-01-01T00:10:00Z');
  const pod = (name: string, extra: Partial<PodOnNode> = {}): PodOnNode => ({ namespace: 'a', name, tolerations: [], phase: 'Running', ...extra });
  const cases: ReadonlyArray<{ name: string; pods: PodOnNode[]; want: { evict: string[]; terminating: string[]; stuck: string[]; leftToTaint: string[]; done: boolean } }> = [
    { name: 'evicts a pod that does not tolerate the taint', pods: [pod('web')], want: { evict: ['web'], terminating: [], stuck: [], leftToTaint: [], done: false } },
    { name: 'leaves a tolerating pod alone', pods: [pod('ok', { tolerations: [{ key: MAINT.key, operator: 'Exists' }] })], want: { evict: [], terminating: [], stuck: [], leftToTaint: [], done: true } },
    { name: 'evicts a pod that tolerates for a while only', pods: [pod('t', { tolerations: [{ key: MAINT.key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 60 }] })], want: { evict: ['t'], terminating: [], stuck: [], leftToTaint: [], done: false } },
    { name: 'leaves DaemonSet and mirror pods to the taint', pods: [pod('ds', { ownerKind: 'DaemonSet' }), pod('mirror', { ownerKind: 'Node' })], want: { evict: [], terminating: [], stuck: [], leftToTaint: ['a/ds', 'a/mirror'], done: true } },
    { name: 'leaves finished pods to the taint', pods: [pod('job', { phase: 'Succeeded' }), pod('crash', { phase: 'Failed' })], want: { evict: [], terminating: [], stuck: [], leftToTaint: [], done: true } },
    { name: 'waits for a terminating pod without evicting it again', pods: [pod('going', { deletionTimestamp: '2026-01-01T00:09:00Z' })], want: { evict: [], terminating: ['a/going'], stuck: [], leftToTaint: [], done: false } },
    { name: 'reports a pod terminating past the bound as stuck', pods: [pod('stuck', { deletionTimestamp: '2026-01-01T00:04:00Z' })], want: { evict: [], terminating: ['a/stuck'], stuck: ['a/stuck'], leftToTaint: [], done: false } },
  ];

  it.each(cases)('$name', ({ pods, want }) => {
    // Act
    const plan = planEvictions({ taintsAfter: [MAINT], pods, now, stuckAfterSeconds: 300 });

    // Assess
    expect({ ...plan, evict: plan.evict.map((p) => p.name) }).toEqual(want);
  });
});

describe('Function: rolloutSettingOf()', () => {
  it.each([
    { value: undefined, want: undefined },
    { value: '1', want: { maxInProgress: 1 } },
    { value: ' 3 ', want: { maxInProgress: 3 } },
    { value: '0', want: 'invalid' },
    { value: '25%', want: { percent: 25 } },
    { value: '100%', want: { percent: 100 } },
    { value: '0%', want: 'invalid' },
    { value: '101%', want: 'invalid' },
    { value: '2.5', want: 'invalid' },
    { value: 'two', want: 'invalid' },
  ])('reads $value', ({ value, want }) => {
    const setting = rolloutSettingOf({ annotations: value === undefined ? {} : { [ROLLOUT_ANNOTATION]: value } });
    if (want === 'invalid') expect(setting && 'invalid' in setting).toBe(true);
    else expect(setting).toEqual(want);
  });
});

describe('Function: nodeGroupOf()', () => {
  it.each<{ labels: Record<string, string>; want: string }>([
    { labels: { 'cluster.x-k8s.io/deployment-name': 'md', 'cluster.x-k8s.io/set-name': 'ms' }, want: 'MachineDeployment/ns/md' },
    { labels: { 'cluster.x-k8s.io/set-name': 'ms' }, want: 'MachineSet/ns/ms' },
    { labels: { 'cluster.x-k8s.io/control-plane-name': 'kcp' }, want: 'ControlPlane/ns/kcp' },
    { labels: {}, want: 'Machine/ns/m1' },
  ])('names $want', ({ labels, want }) => {
    expect(nodeGroupOf({ namespace: 'ns', name: 'm1', labels, annotations: {} })).toBe(want);
  });

  it('names a MachinePool by itself', () => {
    expect(nodeGroupOf({ kind: 'MachinePool', namespace: 'ns', name: 'pool', labels: {}, annotations: {} })).toBe('MachinePool/ns/pool');
  });
});

describe('Function: decodeRolloutMark()', () => {
  it('reads back what encodeRolloutMark wrote', () => {
    const mark: RolloutMark = { group: G, taints: ['k:NoExecute'], ticket: '42', refused: ['a/p'], stuck: ['a/q'] };
    expect(decodeRolloutMark({ [ROLLOUT_MARK_ANNOTATION]: encodeRolloutMark(mark) })).toEqual(mark);
  });

  it.each(['not json', '{"taints":[]}', '[]'])('reads %s as a claim of no group, never trusted', (raw) => {
    expect(decodeRolloutMark({ [ROLLOUT_MARK_ANNOTATION]: raw })).toEqual({ group: '', taints: [] });
  });

  it('drops a ticket that is not a resourceVersion', () => {
    expect(decodeRolloutMark({ [ROLLOUT_MARK_ANNOTATION]: '{"group":"g","taints":[],"ticket":"abc"}' })).toEqual({ group: 'g', taints: [] });
  });

  it('reads no annotation as no mark', () => {
    expect(decodeRolloutMark({})).toBeUndefined();
  });
});

describe('Function: compareResourceVersions()', () => {
  it.each([
    ['9', '10', -1],
    ['10', '9', 1],
    ['10', '10', 0],
    ['x', '10', -1],
    ['10', 'x', 1],
    ['x', 'y', 0],
    ['123456789012345678901', '123456789012345678902', -1],
  ] as const)('orders %s and %s', (a, b, want) => {
    expect(compareResourceVersions(a, b)).toBe(want);
  });
});

describe('Function: nodeTaintsAfter() for the rollout', () => {
  it('returns the NoExecute taints the Node lacks, a changed value included', () => {
    const planned: Taint[] = [MAINT, { key: 'gpu', effect: 'NoSchedule' }, { key: 'old', value: 'b', effect: 'NoExecute' }];
    const nodeTaints: Taint[] = [{ key: 'old', value: 'a', effect: 'NoExecute' }];
    expect(nodeTaintsAfter(planned, nodeTaints).added).toEqual([MAINT, { key: 'old', value: 'b', effect: 'NoExecute' }]);
  });
});

describe('Function: toMachinePoolFacts() with a rollout opt-in', () => {
  const pool = (annotations: Record<string, string>, templateAnnotations: Record<string, string>): MachinePoolFacts =>
    toMachinePoolFacts({
      metadata: { namespace: 'ns', name: 'pool', uid: 'u', resourceVersion: '1', annotations },
      spec: { template: { metadata: { annotations: templateAnnotations } } },
      status: { nodeRefs: [{ name: 'n1' }] },
    }) as MachinePoolFacts;

  it.each<{ name: string; annotations: Record<string, string>; template: Record<string, string>; want: string | undefined }>([
    { name: 'from the pool itself, over its template', annotations: { [ROLLOUT_ANNOTATION]: '2' }, template: { [ROLLOUT_ANNOTATION]: '5' }, want: '2' },
    { name: 'from the template', annotations: {}, template: { [ROLLOUT_ANNOTATION]: '5' }, want: '5' },
    { name: 'none', annotations: {}, template: {}, want: undefined },
  ])('carries the opt-in $name', ({ annotations, template, want }) => {
    expect(declarationOwnerOf(pool(annotations, template), 'n1')?.annotations[ROLLOUT_ANNOTATION]).toBe(want);
  });
});

describe('Function: planRolloutSlot() edge cases', () => {
  it('orders two Nodes with the same ticket by name', () => {
    const step = planRolloutSlot({ setting: one, group: G, pending: [MAINT], node: node('n2', '40', held('30')), others: [other('n1', '41', { ticket: '30' })] });
    expect(step).toEqual({ kind: 'wait', ahead: ['n1'] });
  });

  it('reads a mark whose taints are not a list as having none', () => {
    expect(decodeRolloutMark({ [ROLLOUT_MARK_ANNOTATION]: '{"group":"g","taints":"x"}' })).toEqual({ group: 'g', taints: [] });
  });
});

describe('Function: maxInProgressOf()', () => {
  it.each([
    { setting: { maxInProgress: 3 }, size: 10, want: 3 },
    { setting: { percent: 25 }, size: 10, want: 2 },
    { setting: { percent: 25 }, size: 3, want: 1 },
    { setting: { percent: 50 }, size: 4, want: 2 },
    { setting: { percent: 100 }, size: 7, want: 7 },
  ])('$setting of $size → $want', ({ setting, size, want }) => {
    expect(maxInProgressOf(setting, size)).toBe(want);
  });

  it('holds a second Node of a group of 4 at 50%, not a third', () => {
    const input = { setting: { percent: 50 }, group: G, pending: [MAINT], groupSize: 4 } as const;
    expect(planRolloutSlot({ ...input, node: node('n3', '40', held('30')), others: [other('n1', '21', { ticket: '20' })] }).kind).toBe('hold');
    expect(planRolloutSlot({ ...input, node: node('n3', '40', held('30')), others: [other('n1', '21', { ticket: '20' }), other('n2', '26', { ticket: '25' })] }).kind).toBe('wait');
  });
});

describe('Function: groupMachineSelectorOf()', () => {
  it.each<{ owner: Parameters<typeof groupMachineSelectorOf>[0]; want: string | undefined }>([
    { owner: { namespace: 'ns', name: 'm', labels: { 'cluster.x-k8s.io/deployment-name': 'md' }, annotations: {} }, want: 'cluster.x-k8s.io/deployment-name=md' },
    { owner: { namespace: 'ns', name: 'm', labels: { 'cluster.x-k8s.io/control-plane-name': 'kcp' }, annotations: {} }, want: 'cluster.x-k8s.io/control-plane-name=kcp' },
    { owner: { namespace: 'ns', name: 'm', labels: {}, annotations: {} }, want: undefined },
    { owner: { kind: 'MachinePool', namespace: 'ns', name: 'p', labels: {}, annotations: {} }, want: undefined },
  ])('selects $want', ({ owner, want }) => {
    expect(groupMachineSelectorOf(owner)).toBe(want);
  });
});
