import { describe, expect, it } from 'vitest';
import { fromCloudEventBody, toCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { messageGroupIdFor, parseEventType, type ClusterRef } from '#shared/contract/cloud-event.ts';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';
import { declaredTaintsOf } from '#shared/domain/declarations.ts';
import { declarationOwnerOf, machinePoolOf, poolDeclarations } from '#shared/domain/machine-pool.ts';
import { forwardDecision, isDeclarationRecovery, poolNodesToAnnounce } from '#shared/policy/relevance.ts';
import { clusterOfMachine, toMachinePoolEvents } from '#shared/contract/events.ts';
import { toMachinePoolFacts, type MachinePoolFacts } from '#shared/model/views.ts';

const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const CLUSTER = 'taints.capi-taint-propagator.dev/cluster';
const at = new Date('2026-11-23T10:00:00.000Z');
const capi: ClusterRef = { mode: 'capi', namespace: 'fleet', name: 'wc1' };

const pool = (extra: Partial<MachinePoolFacts> = {}): MachinePoolFacts => ({
  kind: 'MachinePool',
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  namespace: 'fleet',
  name: 'mp-0',
  uid: 'u-mp',
  resourceVersion: '11',
  labels: {},
  annotations: {},
  specTaints: undefined,
  clusterName: 'wc1',
  nodeNames: ['n1', 'n2'],
  deleting: false,
  ...extra,
});

const poolObject = (o: { annotations?: Record<string, string>; template?: Record<string, string>; nodes?: unknown[]; taints?: unknown; rv?: string } = {}) => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  metadata: { name: 'mp-0', namespace: 'fleet', uid: 'u-mp', resourceVersion: o.rv ?? '11', labels: { 'cluster.x-k8s.io/cluster-name': 'wc1' }, annotations: o.annotations ?? {} },
  spec: { clusterName: 'wc1', template: { metadata: { annotations: o.template ?? {} }, spec: { ...(o.taints !== undefined ? { taints: o.taints } : {}) } } },
  status: { nodeRefs: o.nodes ?? [{ kind: 'Node', name: 'n2' }, { kind: 'Node', name: 'n1' }] },
});

const facts = (o: Parameters<typeof poolObject>[0] = {}): MachinePoolFacts => toMachinePoolFacts(poolObject(o)) as MachinePoolFacts;

describe('Function: machinePoolOf()', () => {
  it('names the pool of a Machine that carries Cluster API pool-name label, and nothing otherwise', () => {
    expect(machinePoolOf({ labels: { 'cluster.x-k8s.io/pool-name': 'mp-0' } })).toBe('mp-0');
    expect(machinePoolOf({ labels: { 'cluster.x-k8s.io/pool-name': '' } })).toBeUndefined();
    expect(machinePoolOf({ labels: {} })).toBeUndefined();
  });
});

describe('Function: poolDeclarations()', () => {
  it("reads each declaration annotation from the pool's metadata, else from its template's, and nothing else", () => {
    // Act
    const out = poolDeclarations({
      annotations: { [MACHINE]: 'a=1:NoSchedule', 'other.example.com/x': 'y' },
      templateAnnotations: { [MACHINE]: 'a=2:NoSchedule', [CLUSTER]: 'b:NoExecute' },
    }, DECLARATION_ANNOTATIONS);

    // Assess
    expect(out).toEqual({ [MACHINE]: 'a=1:NoSchedule', [CLUSTER]: 'b:NoExecute' });
  });
});

describe('Function: declarationOwnerOf()', () => {
  it("makes the pool the declaration owner of a member Node, with the pool's declarations (its own, else its template's)", () => {
    // Act
    const owner = declarationOwnerOf(facts({ annotations: { [MACHINE]: 'gpu=a:NoSchedule' }, template: { [CLUSTER]: 'spot:NoExecute@OnInitialization' } }), 'n2');

    // Assess
    expect(owner).toMatchObject({ kind: 'MachinePool', namespace: 'fleet', name: 'mp-0', uid: 'u-mp', nodeName: 'n2', clusterName: 'wc1' });
    const declared = declaredTaintsOf(owner!);
    expect(declared.valid && declared.declaration.taints.map((t) => `${t.key}:${t.effect}@${t.propagation}`)).toEqual(['gpu:NoSchedule@Always', 'spot:NoExecute@OnInitialization']);
  });

  it('leaves a Node that is not (or no longer) in status.nodeRefs alone', () => {
    expect(declarationOwnerOf(pool(), 'n3')).toBeUndefined();
  });

  it('keeps a pool without spec.clusterName without one (the cluster-name label then decides)', () => {
    const { clusterName: _none, ...noCluster } = pool();
    expect(declarationOwnerOf(noCluster, 'n1')).not.toHaveProperty('clusterName');
  });
});

describe('Function: toMachinePoolFacts()', () => {
  it('keeps the declarations, the template taints and the sorted, de-duplicated Node names', () => {
    // Act
    const f = facts({ annotations: { [MACHINE]: 'a:NoSchedule' }, nodes: [{ name: 'n2' }, { name: 'n1' }, { name: 'n2' }, {}, 'x'], taints: [{ key: 't', effect: 'NoSchedule' }] });

    // Assess
    expect(f).toEqual({
      kind: 'MachinePool', apiVersion: 'cluster.x-k8s.io/v1beta2', namespace: 'fleet', name: 'mp-0', uid: 'u-mp', resourceVersion: '11',
      specTaints: [{ key: 't', effect: 'NoSchedule' }], annotations: { [MACHINE]: 'a:NoSchedule' }, nodeNames: ['n1', 'n2'],
      clusterName: 'wc1', labels: { 'cluster.x-k8s.io/cluster-name': 'wc1' }, deleting: false,
    });
    expect(clusterOfMachine(f, 'capi')).toEqual(capi);
  });

  it('reads a bare MachinePool (no spec, no status, no labels) as a pool without Nodes or declarations', () => {
    // Act
    const f = toMachinePoolFacts({ metadata: { name: 'mp', namespace: 'ns', uid: 'u', resourceVersion: '1' }, status: { nodeRefs: 'not-a-list' } });

    // Assess
    expect(f).toEqual({ kind: 'MachinePool', apiVersion: '', labels: {}, namespace: 'ns', name: 'mp', uid: 'u', resourceVersion: '1', specTaints: null, annotations: {}, nodeNames: [], deleting: false });
    expect(clusterOfMachine(f!, 'capi')).toBeUndefined();
    expect(toMachinePoolFacts({ metadata: { name: 'mp', namespace: 'ns', uid: 'u', resourceVersion: '1' }, spec: { template: 'x' } })?.annotations).toEqual({});
  });

  it('refuses an object without namespace, uid or resourceVersion', () => {
    expect(toMachinePoolFacts({ metadata: { name: 'mp', uid: 'u', resourceVersion: '1' } })).toBeUndefined();
    expect(toMachinePoolFacts('nope')).toBeUndefined();
  });
});

describe('Function: poolNodesToAnnounce()', () => {
  const cases: { name: string; change: 'added' | 'modified' | 'deleted' | 'resynced'; previous?: MachinePoolFacts; current: MachinePoolFacts; want: string[] }[] = [
    { name: 'a new pool: every Node', change: 'added', current: facts(), want: ['n1', 'n2'] },
    { name: 'a relist announcement: every Node', change: 'resynced', current: facts(), want: ['n1', 'n2'] },
    { name: 'a deleted pool: none (its Nodes are left alone)', change: 'deleted', current: facts(), want: [] },
    { name: 'a declaration edit: every Node', change: 'modified', previous: facts(), current: facts({ annotations: { [MACHINE]: 'a:NoSchedule' }, rv: '12' }), want: ['n1', 'n2'] },
    { name: 'a template declaration edit: every Node', change: 'modified', previous: facts(), current: facts({ template: { [MACHINE]: 'a:NoSchedule' }, rv: '12' }), want: ['n1', 'n2'] },
    { name: 'a scale-up: only the Nodes that joined', change: 'modified', previous: facts(), current: facts({ nodes: [{ name: 'n1' }, { name: 'n2' }, { name: 'n3' }], rv: '12' }), want: ['n3'] },
    { name: 'a scale-down: none (a Node that left is left alone)', change: 'modified', previous: facts(), current: facts({ nodes: [{ name: 'n1' }], rv: '12' }), want: [] },
    { name: 'a modification seen first (no previous state): every Node', change: 'modified', current: facts(), want: ['n1', 'n2'] },
  ];
  it.each(cases)('$name', ({ change, previous, current, want }) => {
    expect(poolNodesToAnnounce(change, previous, current)).toEqual(want);
  });

  it('announces nothing for a pool being deleted', () => {
    expect(poolNodesToAnnounce('added', undefined, { ...facts(), deleting: true })).toEqual([]);
  });

  it('filters a status-only change of the pool (no relevant fact changed) before any Node is considered', () => {
    expect(forwardDecision('modified', facts(), facts({ rv: '12' }))).toEqual({ forward: false, filtered: 'unchanged' });
  });
});

describe('Function: isDeclarationRecovery() for MachinePools', () => {
  it('compares only objects of one kind', () => {
    const fixed = facts({ annotations: { [MACHINE]: 'a:NoSchedule' } });
    const machine = { kind: 'Machine', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name: 'mp-0', uid: 'u', resourceVersion: '1', specTaints: null, annotations: { [MACHINE]: 'a:NoSchedul' }, deleting: false } as const;
    expect(isDeclarationRecovery(machine, fixed)).toBe(false);
    expect(isDeclarationRecovery(undefined, fixed)).toBe(false);
  });

  it('recognises a pool declaration that went from invalid to valid, and nothing else', () => {
    const broken = facts({ annotations: { [MACHINE]: 'a:NoSchedul' } });
    const fixed = facts({ annotations: { [MACHINE]: 'a:NoSchedule' }, rv: '12' });
    expect(isDeclarationRecovery(broken, fixed)).toBe(true);
    expect(isDeclarationRecovery(fixed, broken)).toBe(false);
    expect(isDeclarationRecovery(fixed, { ...fixed, resourceVersion: '13' })).toBe(false);
    expect(forwardDecision('modified', broken, fixed)).toEqual({ forward: true, declarationRecovered: true });
  });
});

describe('Function: toMachinePoolEvents()', () => {
  it("makes one event per Node, each in its Node's FIFO group with its own id, that the reconcile function accepts", () => {
    // Act
    const events = toMachinePoolEvents(facts(), ['n1', 'n2'], 'modified', capi, at, { declarationRecovered: true });

    // Assess
    expect(events.map((e) => e.id)).toEqual(['u-mp:11:modified:n1', 'u-mp:11:modified:n2']);
    expect(events.map((e) => messageGroupIdFor(e.data))).toEqual(['fleet/wc1/node/n1', 'fleet/wc1/node/n2']);
    expect(events[0]).toMatchObject({ type: 'io.github.capi-taint-propagator.machinepool.modified.v1', subject: 'machinepools/fleet/mp-0', source: '/clusters/fleet/wc1' });
    expect(parseEventType(events[0]!.type)).toEqual({ kind: 'MachinePool', change: 'modified' });
    for (const e of events) expect(fromCloudEventBody(toCloudEventBody(e))).toEqual(e);
  });

  it('is refused by the reconcile function when its data lacks the Node', () => {
    // Prepare
    const [event] = toMachinePoolEvents(facts(), ['n1'], 'added', capi, at);
    const { nodeName: _dropped, ...data } = event!.data as { nodeName: string };

    // Act + Assess
    expect(() => fromCloudEventBody(toCloudEventBody({ ...event!, data } as never))).toThrow(/MachinePool event schema.*nodeName/);
  });
});
