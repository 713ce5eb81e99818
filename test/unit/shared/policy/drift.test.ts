import { describe, expect, it } from 'vitest';
import { mayNeedWrite, type NodeOwner } from '#shared/policy/drift.ts';
import type { RelevanceOptions } from '#shared/policy/relevance.ts';
import { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { STARTUP_GATE_TAINT_KEY } from '#shared/domain/taint.ts';
import type { MachinePoolFacts, NodeFacts } from '#shared/model/views.ts';
import { machineFacts, nodeFacts, type NodeFactsChange } from '../../../support/builders.ts';

const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const gpu = { key: 'gpu', value: 'a100', effect: 'NoSchedule' };

/** Node n1, in sync with a Machine declaring `gpu=a100:NoSchedule` by annotation. */
function node(over: NodeFactsChange = {}): NodeFacts {
  return nodeFacts({ resourceVersion: '21', taints: [gpu], ownTrackingAnnotation: 'gpu:NoSchedule', machineAnnotation: 'm1', clusterNamespaceAnnotation: 'fleet', ...over });
}

const machine = (over: Parameters<typeof machineFacts>[0] = {}) => machineFacts({ specTaints: null, annotations: { [MACHINE]: 'gpu=a100:NoSchedule' }, ...over });
const known = (over: Parameters<typeof machineFacts>[0] = {}, clusterPaused?: boolean): NodeOwner => ({ kind: 'known', owner: machine(over), ...(clusterPaused !== undefined ? { clusterPaused } : {}) });

function pool(over: Partial<MachinePoolFacts> = {}): MachinePoolFacts {
  return { kind: 'MachinePool', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'fleet', name: 'p1', uid: 'uid-p1', resourceVersion: '31', specTaints: null, annotations: { [MACHINE]: 'gpu=a100:NoSchedule' }, nodeNames: ['n0', 'n1'], clusterName: 'wc1', deleting: false, ...over };
}

const cases: { name: string; node: NodeFacts; owner: NodeOwner; options?: RelevanceOptions; expected: boolean }[] = [
  // Known owner: the reconcile's own plan decides.
  { name: 'in sync with its Machine', node: node(), owner: known(), expected: false },
  { name: 'in sync, with a foreign taint and taint values as stored (timeAdded, empty value)', node: node({ taints: [gpu, { key: 'x', value: '', effect: 'NoExecute', timeAdded: '2026-01-01T00:00:00Z' }] }), owner: known(), expected: false },
  { name: 'an Always taint removed while no member watched', node: node({ taints: [] }), owner: known(), expected: true },
  { name: 'a tracked taint no longer declared', node: node({ taints: [gpu, { key: 'old', effect: 'NoSchedule' }], ownTrackingAnnotation: 'gpu:NoSchedule,old:NoSchedule' }), owner: known(), expected: true },
  { name: 'a taint value changed by someone else', node: node({ taints: [{ ...gpu, value: 'h100' }] }), owner: known(), expected: true },
  { name: 'never initialized (no tracking annotation): either enablement answer writes', node: node({ ownTrackingAnnotation: undefined }), owner: known(), expected: true },
  { name: 'pre-existing Node, OnInitialization only: the non-adopting answer writes', node: node({ taints: [], ownTrackingAnnotation: undefined }), owner: known({ annotations: { [MACHINE]: 'spot:NoSchedule@OnInitialization' } }), expected: true },
  { name: 'initialized Node missing an OnInitialization taint: never put back', node: node({ taints: [], ownTrackingAnnotation: '' }), owner: known({ annotations: { [MACHINE]: 'spot:NoSchedule@OnInitialization' } }), expected: false },
  { name: 'the startup gate still on an initialized Node', node: node({ taints: [gpu, GATE] }), owner: known(), options: { startupTaint: GATE }, expected: true },
  { name: 'the startup gate held while Cluster API has not applied spec.taints', node: node({ taints: [gpu, GATE] }), owner: known({ specTaints: [{ key: 'capi', effect: 'NoSchedule', propagation: 'Always' }] }), options: { startupTaint: GATE }, expected: false },
  { name: "upstream's spec.taints, tracked by Cluster API, left alone", node: node({ taints: [gpu, { key: 'capi', effect: 'NoSchedule' }], trackingAnnotation: 'capi:NoSchedule' }), owner: known({ specTaints: [{ key: 'capi', effect: 'NoSchedule', propagation: 'Always' }] }), expected: false },
  { name: 'spec.taints owned by the product and missing', node: node(), owner: known({ specTaints: [{ key: 'capi', effect: 'NoSchedule', propagation: 'Always' }] }), options: { specTaintsOwner: SpecTaintsOwner.product }, expected: true },
  { name: 'a control-plane Machine in sync', node: node(), owner: known({ labels: { 'cluster.x-k8s.io/control-plane': '' } }), expected: false },
  { name: 'in sync but marked in a staged NoExecute rollout withdrawn meanwhile (the reconcile clears the mark)', node: node({ annotations: { 'rollout.capi-taint-propagator.dev/in-progress': '{"taints":["maint:NoExecute"]}' } }), owner: known(), expected: true },
  { name: 'in sync but evicting in a staged NoExecute rollout', node: node({ taints: [gpu, { key: 'rollout.capi-taint-propagator.dev/evicting', effect: 'NoSchedule' }] }), owner: known(), expected: true },
  { name: 'invalid declaration: the reconcile reports it again', node: node(), owner: known({ annotations: { [MACHINE]: 'gpu:NoSchedul' } }), expected: true },
  { name: 'malformed tracking annotation: the reconcile reports it again', node: node({ ownTrackingAnnotation: 'gpu:NoSchedule,nonsense' }), owner: known(), expected: true },
  { name: 'spec.taints of the Node not a list of taints (views.ts: unreadable)', node: node({ taints: undefined }), owner: known(), expected: true },
  { name: 'no taints at all and nothing declared', node: node({ taints: [], ownTrackingAnnotation: '' }), owner: known({ annotations: {} }), expected: false },
  { name: 'drifted, but the Machine is paused', node: node({ taints: [] }), owner: known({ annotations: { 'cluster.x-k8s.io/paused': '' } }), expected: false },
  { name: 'drifted, but its Cluster is paused', node: node({ taints: [] }), owner: known({}, true), expected: false },
  { name: 'drifted, its Cluster known not paused', node: node({ taints: [] }), owner: known({}, false), expected: true },
  { name: 'drifted, but the Machine is being deleted', node: node({ taints: [] }), owner: known({ deleting: true }), expected: false },
  { name: 'drifted, but the Machine is linked to another Node', node: node({ taints: [] }), owner: known({ nodeName: 'n2' }), expected: false },
  { name: 'drifted, the Machine not linked yet (the reconcile links by provider ID)', node: node({ taints: [] }), owner: known({ nodeName: undefined, providerID: 'aws:///i-1' }), expected: true },
  // MachinePool owner.
  { name: 'in sync with its MachinePool', node: node({ machineAnnotation: undefined }), owner: { kind: 'known', owner: pool() }, expected: false },
  { name: 'drifted from its MachinePool', node: node({ machineAnnotation: undefined, taints: [] }), owner: { kind: 'known', owner: pool() }, expected: true },
  { name: 'drifted, but no longer in the pool', node: node({ taints: [] }), owner: { kind: 'known', owner: pool({ nodeNames: ['n0'] }) }, expected: false },
  { name: 'drifted, but the pool is paused', node: node({ taints: [] }), owner: { kind: 'known', owner: pool({ annotations: { 'cluster.x-k8s.io/paused': '' } }) }, expected: false },
  // No owner: the management streams hold everything, none owns the Node.
  { name: 'no owner', node: node({ taints: [] }), owner: { kind: 'none' }, expected: false },
  // Unknown owner: the management streams have not listed yet.
  { name: 'unknown owner, tracked by the product', node: node({ machineAnnotation: undefined }), owner: { kind: 'unknown' }, expected: true },
  { name: 'unknown owner, linked by Cluster API', node: node({ ownTrackingAnnotation: undefined }), owner: { kind: 'unknown' }, expected: true },
  { name: 'unknown owner, a joining Node with a provider ID', node: node({ ownTrackingAnnotation: undefined, machineAnnotation: undefined, providerID: 'aws:///i-1' }), owner: { kind: 'unknown' }, expected: true },
  { name: 'unknown owner, carrying the startup gate', node: node({ ownTrackingAnnotation: undefined, machineAnnotation: undefined, taints: [GATE] }), owner: { kind: 'unknown' }, options: { startupTaint: GATE }, expected: true },
  { name: 'unknown owner, taints unreadable and a gate configured', node: node({ ownTrackingAnnotation: undefined, machineAnnotation: undefined, taints: undefined }), owner: { kind: 'unknown' }, options: { startupTaint: GATE }, expected: true },
  { name: 'unknown owner, nothing of the product or of Cluster API', node: node({ ownTrackingAnnotation: undefined, machineAnnotation: undefined, taints: [gpu] }), owner: { kind: 'unknown' }, options: { startupTaint: GATE }, expected: false },
  { name: 'unknown owner, no gate configured, nothing', node: node({ ownTrackingAnnotation: undefined, machineAnnotation: undefined }), owner: { kind: 'unknown' }, expected: false },
];

describe('mayNeedWrite', () => {
  it.each(cases)('$name → $expected', ({ node: n, owner, options, expected }) => {
    expect(mayNeedWrite(n, owner, options)).toBe(expected);
  });
});
