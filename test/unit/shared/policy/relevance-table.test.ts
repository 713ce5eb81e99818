/**
 * "The table is the test": every field of a Machine, a MachinePool and a Node that the reconcile decision reads, when
 * a change of it can change the decision, and the cases that pin it. The same rows are the table of
 * docs/relevance.md (checked below), and every fact the forwarder keeps of an object has exactly one row, so a new
 * fact cannot be added without saying when it matters.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ChangeKind } from '#shared/contract/cloud-event.ts';
import { forwardDecision, pausedChanged, poolNodesToAnnounce } from '#shared/policy/relevance.ts';
import { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { toClusterFacts, toMachineFacts, toMachinePoolFacts, toNodeFacts, toScalableFacts, unlinkedProviderID, type ClusterFacts, type MachineFacts, type MachinePoolFacts, type NodeFacts, type ScalableFacts, type WatchedFacts } from '#shared/model/views.ts';
import { toClusterPauseEvents } from '#shared/contract/events.ts';
import { autoscalerEventNeeded } from '#shared/policy/autoscaler-relevance.ts';

type Json = Record<string, any>;

const OWN = 'taints.capi-taint-propagator.dev/applied';
const CAPI = 'cluster.x-k8s.io/taints-from-machine';
const DECL = 'taints.capi-taint-propagator.dev/machine';
const PAUSED = 'cluster.x-k8s.io/paused';
const GATE = { key: 'taints.capi-taint-propagator.dev/uninitialized', effect: 'NoSchedule' };
const capiTaint = (value = 'v1', key = 'capi') => ({ key, value, effect: 'NoSchedule', propagation: 'Always' });
/** A joining Node Cluster API has not linked yet (no Machine annotations): its provider ID links it. */
const unlinkedNode = (n: Json): void => {
  for (const a of ['cluster.x-k8s.io/machine', 'cluster.x-k8s.io/cluster-name', 'cluster.x-k8s.io/cluster-namespace']) delete n.metadata.annotations[a];
};
/** Cluster API's link of a joining Node to Machine `name` (its annotations). */
const linkNode = (name: string) => (n: Json): void => {
  Object.assign(n.metadata.annotations, { 'cluster.x-k8s.io/machine': name, 'cluster.x-k8s.io/cluster-name': 'c1', 'cluster.x-k8s.io/cluster-namespace': 'ns' });
};

/** A worker Machine: Cluster API owns `capi:NoSchedule` (spec.taints), the product owns `prod:NoSchedule` (annotation). */
const machine = (): Json => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  kind: 'Machine',
  metadata: {
    name: 'm1', namespace: 'ns', uid: 'u-m1', resourceVersion: '20',
    labels: { 'cluster.x-k8s.io/cluster-name': 'c1', 'cluster.x-k8s.io/deployment-name': 'md' },
    annotations: { [DECL]: 'prod=p:NoSchedule', 'other/annotation': 'x' },
    ownerReferences: [{ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineSet', name: 'ms', uid: 'u-ms', controller: true }],
  },
  spec: { clusterName: 'c1', taints: [capiTaint()], providerID: 'local://m1' },
  status: { nodeRef: { name: 'n1' }, conditions: [{ type: 'Ready', status: 'True' }], phase: 'Running' },
});

/** Its Node, initialized by both: Cluster API tracks `capi:NoSchedule`, the product `prod:NoSchedule`. */
const node = (): Json => ({
  apiVersion: 'v1',
  kind: 'Node',
  metadata: {
    name: 'n1', uid: 'u-n1', resourceVersion: '10', creationTimestamp: '2026-11-25T00:00:00Z',
    labels: { role: 'worker' },
    annotations: { 'cluster.x-k8s.io/machine': 'm1', 'cluster.x-k8s.io/cluster-name': 'c1', 'cluster.x-k8s.io/cluster-namespace': 'ns', [CAPI]: 'capi:NoSchedule', [OWN]: 'prod:NoSchedule' },
    managedFields: [{ manager: 'manager', fieldsV1: { 'f:spec': { 'f:taints': {} } } }],
  },
  spec: { taints: [{ key: 'capi', value: 'v1', effect: 'NoSchedule' }, { key: 'prod', value: 'p', effect: 'NoSchedule' }], providerID: 'local://m1' },
  status: { conditions: [{ type: 'Ready', status: 'True', lastHeartbeatTime: '2026-11-25T00:00:00Z' }] },
});

/** The Machine's MachineSet: its template declares what the Machine carries (Cluster API copies it onto the Machine). */
const machineSet = (): Json => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  kind: 'MachineSet',
  metadata: { name: 'ms', namespace: 'ns', uid: 'u-ms', resourceVersion: '40', labels: { 'cluster.x-k8s.io/cluster-name': 'c1' }, annotations: {} },
  spec: { clusterName: 'c1', replicas: 1, template: { metadata: { annotations: { [DECL]: 'prod=p:NoSchedule' } }, spec: { clusterName: 'c1' } } },
  status: { replicas: 1 },
});

const pool = (): Json => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  kind: 'MachinePool',
  metadata: { name: 'mp', namespace: 'ns', uid: 'u-mp', resourceVersion: '30', labels: { 'cluster.x-k8s.io/cluster-name': 'c1' }, annotations: { [DECL]: 'prod:NoSchedule' } },
  spec: { clusterName: 'c1', replicas: 2, template: { metadata: { annotations: {} }, spec: { clusterName: 'c1' } } },
  status: { nodeRefs: [{ name: 'n1' }, { name: 'n2' }], replicas: 2 },
});

const clusterObject = (): Json => ({
  apiVersion: 'cluster.x-k8s.io/v1beta2',
  kind: 'Cluster',
  metadata: { name: 'c1', namespace: 'ns', uid: 'u-c1', resourceVersion: '50', labels: {}, annotations: {} },
  spec: { paused: false, controlPlaneEndpoint: { host: 'c1.example', port: 6443 } },
  status: { phase: 'Provisioned' },
});

type Kind = 'Machine' | 'Node' | 'MachinePool' | 'MachineSet' | 'Cluster';
const facts = (kind: Kind, obj: Json): WatchedFacts =>
  (kind === 'Machine' ? toMachineFacts(obj) : kind === 'Node' ? toNodeFacts(obj) : kind === 'MachineSet' ? toScalableFacts('MachineSet', obj) : kind === 'Cluster' ? toClusterFacts(obj) : toMachinePoolFacts(obj)) as WatchedFacts;
const build = { Machine: machine, Node: node, MachinePool: pool, MachineSet: machineSet, Cluster: clusterObject } as const;

/** One case of a row: a change of the field, in a context, and how many Nodes get a queue message for it (0 = filtered). */
interface Case {
  readonly name: string;
  readonly before?: (o: Json) => void;
  readonly change: (o: Json) => void;
  /** The forwarder's last state of the Machine's Node (default: `node()`); null when it has not seen it. */
  readonly node?: ((n: Json) => void) | null;
  readonly specTaintsOwner?: SpecTaintsOwner;
  /** False: the forwarder knows no unlinked Machine with the Node's provider ID (default: Machine m1 has `local://m1`). */
  readonly linkedMachine?: boolean;
  /** The linked Machine m1 as the forwarder last saw it declares no `spec.taints` (default: it declares `capi:NoSchedule`). */
  readonly machineWithoutSpecTaints?: boolean;
  /** How the forwarder sees the change (default a watch modification; `resynced`: a relist announcement). */
  readonly seen?: ChangeKind;
  readonly messages: number;
}

/**
 * One row of the table. `field` and `when` are the table's text; `fact` is the view's fact (or facts) the field lands
 * in, a kept label or annotation as `labels[<key>]` / `annotations[<key>]`.
 */
interface Row {
  readonly object: Kind;
  readonly field: string;
  readonly fact: string | readonly string[] | null;
  readonly when: string;
  readonly cases: readonly Case[];
}

const capiNode = (n: Json) => n.metadata.annotations; // for readability below

const TABLE: readonly Row[] = [
  // ---- Machine ----
  {
    object: 'Machine', field: 'spec.taints', fact: 'specTaints',
    when: 'SPEC_TAINTS_OWNER=upstream: only when its validity changes, when a key:effect enters or leaves it that the product declares (annotation) or tracks on the Node (the taint changes owner), or when it turns empty or non-empty while Cluster API has not initialized the Node (the product holds the startup gate meanwhile). SPEC_TAINTS_OWNER=product: always',
    cases: [
      { name: "a value of Cluster API's taint changed", change: (m) => (m.spec.taints = [capiTaint('v2')]), messages: 0 },
      { name: "the propagation of Cluster API's taint changed", change: (m) => (m.spec.taints = [{ ...capiTaint(), propagation: 'OnInitialization' }]), messages: 0 },
      { name: 'a new taint of its own added', change: (m) => (m.spec.taints = [capiTaint(), capiTaint('x', 'other')]), messages: 0 },
      { name: 'its only taint removed, Node initialized by Cluster API', change: (m) => delete m.spec.taints, messages: 0 },
      { name: 'a value changed on a Machine with no Node yet', before: (m) => delete m.status.nodeRef, change: (m) => (m.spec.taints = [capiTaint('v2')]), messages: 0 },
      { name: 'an invalid value', change: (m) => (m.spec.taints = [capiTaint('not valid!')]), messages: 1 },
      { name: 'fixed from invalid', before: (m) => (m.spec.taints = [capiTaint('not valid!')]), change: (m) => (m.spec.taints = [capiTaint('v2')]), messages: 1 },
      { name: "takes over the product's declared taint", change: (m) => (m.spec.taints = [capiTaint(), { key: 'prod', value: 'p', effect: 'NoSchedule', propagation: 'Always' }]), messages: 1 },
      { name: 'takes over a taint the product still tracks on the Node', node: (n) => (n.metadata.annotations[OWN] = 'prod:NoSchedule,old:NoSchedule'), change: (m) => (m.spec.taints = [capiTaint(), capiTaint('x', 'old')]), messages: 1 },
      { name: 'declares its first taint while Cluster API has not initialized the Node', before: (m) => delete m.spec.taints, node: (n) => delete capiNode(n)[CAPI], change: (m) => (m.spec.taints = [capiTaint()]), messages: 1 },
      { name: 'declares its first taint, Node state unknown', before: (m) => delete m.spec.taints, node: null, change: (m) => (m.spec.taints = [capiTaint()]), messages: 1 },
      { name: 'a value changed, the product owns spec.taints', specTaintsOwner: SpecTaintsOwner.product, change: (m) => (m.spec.taints = [capiTaint('v2')]), messages: 1 },
    ],
  },
  {
    object: 'Machine', field: 'metadata.annotations[taints.capi-taint-propagator.dev/{machine,cluster,class}]', fact: ['annotations[taints.capi-taint-propagator.dev/machine]', 'annotations[taints.capi-taint-propagator.dev/cluster]', 'annotations[taints.capi-taint-propagator.dev/class]'],
    when: "always (the product's own declaration, as the Machine carries it: a MachineSet template's value counts once Cluster API has copied it onto the Machine)",
    cases: [
      { name: 'a declared value changed', change: (m) => (m.metadata.annotations[DECL] = 'prod=q:NoSchedule'), messages: 1 },
      { name: 'a cluster-level declaration added', change: (m) => (m.metadata.annotations['taints.capi-taint-propagator.dev/cluster'] = 'x:NoSchedule'), messages: 1 },
      { name: 'a declaration removed', change: (m) => delete m.metadata.annotations[DECL], messages: 1 },
    ],
  },
  {
    object: 'Machine', field: 'status.nodeRef.name', fact: 'nodeName',
    when: "always (which Node), but Cluster API's nodeRef confirming the link the product acts on (naming the Node the forwarder linked by provider ID) and changing nothing else: never",
    cases: [
      { name: 'the Node is known', before: (m) => delete m.status.nodeRef, change: (m) => (m.status.nodeRef = { name: 'n1' }), messages: 1 },
      { name: 'confirming the provider-ID link, Node initialized by the product', before: (m) => delete m.status.nodeRef, node: unlinkedNode, change: (m) => (m.status.nodeRef = { name: 'n1' }), messages: 0 },
      { name: 'confirming the provider-ID link, Node not initialized by the product yet', before: (m) => delete m.status.nodeRef, node: (n) => { unlinkedNode(n); delete n.metadata.annotations[OWN]; }, change: (m) => (m.status.nodeRef = { name: 'n1' }), messages: 0 },
      { name: 'naming a Node the forwarder did not link (no Node with its provider ID known)', before: (m) => delete m.status.nodeRef, node: (n) => { unlinkedNode(n); n.spec.providerID = 'local://other'; }, change: (m) => (m.status.nodeRef = { name: 'n1' }), messages: 1 },
      { name: 'naming another Node than the one linked', before: (m) => delete m.status.nodeRef, node: unlinkedNode, change: (m) => (m.status.nodeRef = { name: 'n2' }), messages: 1 },
      { name: 'confirming the link, with a declaration change in the same write', before: (m) => delete m.status.nodeRef, node: unlinkedNode, change: (m) => { m.status.nodeRef = { name: 'n1' }; m.metadata.annotations['taints.capi-taint-propagator.dev/cluster'] = 'x:NoSchedule'; }, messages: 1 },
    ],
  },
  {
    object: 'Machine', field: 'spec.clusterName', fact: 'clusterName',
    when: 'always (which workload cluster)',
    cases: [{ name: 'another cluster', change: (m) => (m.spec.clusterName = 'c2'), messages: 1 }],
  },
  {
    object: 'Machine', field: 'metadata.labels[cluster.x-k8s.io/cluster-name]', fact: 'labels[cluster.x-k8s.io/cluster-name]',
    when: 'always (the cluster when spec.clusterName is empty)',
    cases: [{ name: 'label changed', change: (m) => (m.metadata.labels['cluster.x-k8s.io/cluster-name'] = 'c2'), messages: 1 }],
  },
  {
    object: 'Machine', field: 'metadata.labels[cluster.x-k8s.io/control-plane]', fact: 'labels[cluster.x-k8s.io/control-plane]',
    when: 'always (validation: the control-plane taint is refused on workers)',
    cases: [{ name: 'label added', change: (m) => (m.metadata.labels['cluster.x-k8s.io/control-plane'] = ''), messages: 1 }],
  },
  {
    object: 'Machine', field: 'metadata.annotations[cluster.x-k8s.io/paused]', fact: 'annotations[cluster.x-k8s.io/paused]',
    when: 'always, either way (paused: the reconcile answers paused and writes nothing; unpaused: it converges), but on a Machine that names no Node: never (no-node)',
    cases: [
      { name: 'paused', change: (m) => (m.metadata.annotations[PAUSED] = ''), messages: 1 },
      { name: 'unpaused', before: (m) => (m.metadata.annotations[PAUSED] = ''), change: (m) => delete m.metadata.annotations[PAUSED], messages: 1 },
      { name: 'paused, no Node yet', before: (m) => delete m.status.nodeRef, change: (m) => (m.metadata.annotations[PAUSED] = ''), messages: 0 },
    ],
  },
  {
    object: 'Machine', field: 'metadata.deletionTimestamp', fact: 'deleting',
    when: 'always (a deleting Machine\'s Node is left alone)',
    cases: [{ name: 'deletion started', change: (m) => (m.metadata.deletionTimestamp = '2026-11-25T01:00:00Z'), messages: 1 }],
  },
  {
    object: 'Machine', field: 'metadata.uid', fact: 'uid',
    when: 'a new uid is a new Machine: an addition (or, after a missed deletion, a relist announcement), always forwarded',
    cases: [{ name: 're-created under the same name while the forwarder was away', seen: 'resynced', change: (m) => (m.metadata.uid = 'u-m1b'), messages: 1 }],
  },
  {
    object: 'Machine', field: 'metadata.{name,namespace}, metadata.resourceVersion', fact: null,
    when: 'identity and version only: never on their own',
    cases: [{ name: 'a new resourceVersion only', change: () => undefined, messages: 0 }],
  },
  {
    object: 'Machine', field: 'spec.providerID', fact: 'providerID',
    when: 'only while the Machine has no status.nodeRef: it links a joining Node to the Machine (Cluster API\'s own rule), forwarded when the forwarder knows an unlinked Node with that provider ID (its arrival before any Node has it is not: that reconcile could only end no-node, and the Node\'s addition names the Machine); never once nodeRef is set',
    cases: [
      { name: 'set before nodeRef, its Node known', before: (m) => { delete m.status.nodeRef; delete m.spec.providerID; }, node: (n) => delete n.metadata.annotations['cluster.x-k8s.io/machine'], change: (m) => (m.spec.providerID = 'local://m1'), messages: 1 },
      { name: 'set before nodeRef, no Node with it known', before: (m) => { delete m.status.nodeRef; delete m.spec.providerID; }, node: (n) => (n.spec.providerID = 'local://other'), change: (m) => (m.spec.providerID = 'local://m1'), messages: 0 },
      { name: 'a Machine added with it, no Node with it known', seen: 'added', before: (m) => delete m.status.nodeRef, node: (n) => (n.spec.providerID = 'local://other'), change: () => undefined, messages: 0 },
      { name: 'a relist of a Machine with it, no Node with it known', seen: 'resynced', before: (m) => delete m.status.nodeRef, node: (n) => (n.spec.providerID = 'local://other'), change: () => undefined, messages: 0 },
      { name: 'other changes of a Machine with it, no Node with it known', before: (m) => delete m.status.nodeRef, node: (n) => (n.spec.providerID = 'local://other'), change: (m) => { m.spec.taints = [capiTaint('v2')]; m.metadata.labels['cluster.x-k8s.io/control-plane'] = ''; }, messages: 0 },
      { name: 'set on a deleting Machine, no Node with it known', before: (m) => { delete m.status.nodeRef; delete m.spec.providerID; m.metadata.deletionTimestamp = '2026-01-01T00:00:00Z'; }, node: (n) => (n.spec.providerID = 'local://other'), change: (m) => (m.spec.providerID = 'local://m1'), messages: 0 },
      { name: 'changed after nodeRef', change: (m) => (m.spec.providerID = 'local://m1b'), messages: 0 },
    ],
  },
  {
    object: 'Machine', field: 'metadata.labels[cluster.x-k8s.io/{deployment-name,set-name,control-plane-name,pool-name}], metadata.annotations[rollout.capi-taint-propagator.dev/no-execute]', fact: ['labels[cluster.x-k8s.io/deployment-name]', 'labels[cluster.x-k8s.io/set-name]', 'labels[cluster.x-k8s.io/control-plane-name]', 'labels[cluster.x-k8s.io/pool-name]', 'annotations[rollout.capi-taint-propagator.dev/no-execute]'],
    when: 'never on their own (the reconcile function reads them from the Machine as it is then: its node group for a staged NoExecute rollout, its MachinePool)',
    cases: [
      { name: 'another MachineDeployment label', change: (m) => (m.metadata.labels['cluster.x-k8s.io/deployment-name'] = 'md2'), messages: 0 },
      { name: 'the rollout opt-in added', change: (m) => (m.metadata.annotations['rollout.capi-taint-propagator.dev/no-execute'] = '1'), messages: 0 },
    ],
  },
  {
    object: 'Machine', field: 'anything else (status, conditions, other labels and annotations, …)', fact: null,
    when: 'never',
    cases: [
      { name: 'a status heartbeat', change: (m) => (m.status.conditions[0].lastTransitionTime = '2026-11-25T01:00:00Z'), messages: 0 },
      { name: 'another annotation', change: (m) => (m.metadata.annotations['other/annotation'] = 'y'), messages: 0 },
    ],
  },
  // ---- Node ----
  {
    object: 'Node', field: 'spec.taints', fact: 'taints',
    when: 'written by the product itself: never (the echo of its write). By anyone else: only when a taint the product tracks there or the startup gate changes, or the product has not initialized the Node',
    cases: [
      { name: "Cluster API changed its own taint's value", change: (n) => (n.spec.taints[0].value = 'v2'), messages: 0 },
      { name: 'the node lifecycle controller added unreachable:NoExecute', change: (n) => n.spec.taints.push({ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' }), messages: 0 },
      { name: "the product's own write", change: (n) => { n.spec.taints[1].value = 'q'; n.metadata.managedFields = [{ manager: 'capi-taint-propagator', fieldsV1: { 'f:spec': { 'f:taints': {} } } }]; }, messages: 0 },
      { name: "someone removed the product's taint", change: (n) => n.spec.taints.pop(), messages: 1 },
      { name: 'someone added the startup gate', change: (n) => n.spec.taints.push(GATE), messages: 1 },
      { name: 'a Node the product has not initialized', before: (n) => delete n.metadata.annotations[OWN], change: (n) => (n.spec.taints[0].value = 'v2'), messages: 1 },
    ],
  },
  {
    object: 'Node', field: 'metadata.annotations[cluster.x-k8s.io/taints-from-machine]', fact: 'annotations[cluster.x-k8s.io/taints-from-machine]',
    when: 'only when a key:effect the product tracks enters or leaves it (the taint changes owner), or when it appears or goes on a Node that carries the startup gate',
    cases: [
      { name: 'Cluster API tracks a new taint of its own', change: (n) => { n.metadata.annotations[CAPI] = 'capi:NoSchedule,other:NoSchedule'; n.spec.taints.push({ key: 'other', effect: 'NoSchedule' }); }, messages: 0 },
      { name: 'Cluster API takes over a taint the product tracks', change: (n) => (n.metadata.annotations[CAPI] = 'capi:NoSchedule,prod:NoSchedule'), messages: 1 },
      { name: 'Cluster API initializes a Node that carries the startup gate', before: (n) => { delete n.metadata.annotations[CAPI]; n.spec.taints.push(GATE); }, change: (n) => (n.metadata.annotations[CAPI] = 'capi:NoSchedule'), messages: 1 },
      { name: 'Cluster API initializes a Node without the startup gate', before: (n) => delete n.metadata.annotations[CAPI], change: (n) => (n.metadata.annotations[CAPI] = 'capi:NoSchedule'), messages: 0 },
      { name: 'malformed', change: (n) => (n.metadata.annotations[CAPI] = 'capi'), messages: 1 },
    ],
  },
  {
    object: 'Node', field: 'metadata.annotations[taints.capi-taint-propagator.dev/applied]', fact: 'annotations[taints.capi-taint-propagator.dev/applied]',
    when: 'written by the product itself: never (the echo). By anyone else: always',
    cases: [
      { name: 'edited by someone', change: (n) => (n.metadata.annotations[OWN] = ''), messages: 1 },
      { name: "the product's own write", change: (n) => { n.metadata.annotations[OWN] = ''; n.metadata.managedFields = [{ manager: 'capi-taint-propagator', fieldsV1: { 'f:metadata': { 'f:annotations': { [`f:${OWN}`]: {} } } } }]; }, messages: 0 },
    ],
  },
  {
    object: 'Node', field: 'metadata.annotations[cluster.x-k8s.io/machine]', fact: 'annotations[cluster.x-k8s.io/machine]',
    when: "always (which Machine), but Cluster API's first write of a joining Node confirming the link the product acts on (naming the Machine the forwarder linked by provider ID) is judged without the link: nothing else changed, never; with Cluster API's taints and tracking annotation, as any foreign taint change (on a Node the product has not initialized yet, as on one where it tracks nothing: its addition's reconcile is still to write), its annotation on a gated Node mattering only when the Machine declares spec.taints",
    cases: [
      { name: 'Cluster API names the Machine linked by provider ID, Node initialized by the product', before: unlinkedNode, change: linkNode('m1'), messages: 0 },
      { name: 'Cluster API names another Machine', before: unlinkedNode, change: linkNode('m2'), messages: 1 },
      { name: 'Cluster API names the Machine, no Machine with its provider ID known', before: unlinkedNode, linkedMachine: false, change: linkNode('m1'), messages: 1 },
      { name: 'Cluster API names the Machine, Node not initialized by the product yet', before: (n) => { unlinkedNode(n); delete n.metadata.annotations[OWN]; }, change: linkNode('m1'), messages: 0 },
      { name: 'its first write, with its taints, on a Node not initialized by the product yet', before: (n) => { unlinkedNode(n); delete n.metadata.annotations[OWN]; delete n.metadata.annotations[CAPI]; n.spec.taints.splice(0, 2); }, change: (n) => { linkNode('m1')(n); n.metadata.annotations[CAPI] = 'capi:NoSchedule'; n.spec.taints.unshift({ key: 'capi', value: 'v1', effect: 'NoSchedule' }); }, messages: 0 },
      { name: 'its first write, with its taints, on a Node not initialized yet that carries the startup gate', before: (n) => { unlinkedNode(n); delete n.metadata.annotations[OWN]; delete n.metadata.annotations[CAPI]; n.spec.taints.splice(0, 2, GATE); }, change: (n) => { linkNode('m1')(n); n.metadata.annotations[CAPI] = 'capi:NoSchedule'; n.spec.taints.unshift({ key: 'capi', value: 'v1', effect: 'NoSchedule' }); }, messages: 1 },
      { name: 'its first write on a Node not initialized yet that carries the startup gate, the Machine declaring no spec.taints', machineWithoutSpecTaints: true, before: (n) => { unlinkedNode(n); delete n.metadata.annotations[OWN]; delete n.metadata.annotations[CAPI]; n.spec.taints.splice(0, 2, GATE); }, change: (n) => { linkNode('m1')(n); n.metadata.annotations[CAPI] = ''; }, messages: 0 },
      { name: 'its first write on an initialized Node that carries the startup gate, the Machine declaring no spec.taints', machineWithoutSpecTaints: true, before: (n) => { unlinkedNode(n); delete n.metadata.annotations[CAPI]; n.spec.taints.splice(0, 1, GATE); }, change: (n) => { linkNode('m1')(n); n.metadata.annotations[CAPI] = ''; }, messages: 0 },
      { name: 'its first write on an initialized Node that carries the startup gate, the Machine declaring spec.taints', before: (n) => { unlinkedNode(n); delete n.metadata.annotations[CAPI]; n.spec.taints.splice(0, 1, GATE); }, change: (n) => { linkNode('m1')(n); n.metadata.annotations[CAPI] = 'capi:NoSchedule'; n.spec.taints.unshift({ key: 'capi', value: 'v1', effect: 'NoSchedule' }); }, messages: 1 },
      { name: 'its first write, removing a taint on a Node not initialized yet', before: (n) => { unlinkedNode(n); delete n.metadata.annotations[OWN]; }, change: (n) => { linkNode('m1')(n); n.spec.taints.pop(); n.metadata.managedFields = [{ manager: 'manager', fieldsV1: { 'f:spec': { 'f:taints': {} } } }]; }, messages: 0 },
      { name: 'its first write, with its taints, on a Node without the startup gate', before: (n) => { unlinkedNode(n); delete n.metadata.annotations[CAPI]; n.spec.taints.shift(); }, change: (n) => { linkNode('m1')(n); n.metadata.annotations[CAPI] = 'capi:NoSchedule'; n.spec.taints.unshift({ key: 'capi', value: 'v1', effect: 'NoSchedule' }); }, messages: 0 },
      { name: 'its first write, with its taints, on a Node with the startup gate', before: (n) => { unlinkedNode(n); delete n.metadata.annotations[CAPI]; n.spec.taints.splice(0, 1, GATE); }, change: (n) => { linkNode('m1')(n); n.metadata.annotations[CAPI] = 'capi:NoSchedule'; n.spec.taints.unshift({ key: 'capi', value: 'v1', effect: 'NoSchedule' }); }, messages: 1 },
    ],
  },
  {
    object: 'Node', field: 'metadata.annotations[cluster.x-k8s.io/cluster-name]', fact: 'annotations[cluster.x-k8s.io/cluster-name]',
    when: 'always',
    cases: [{ name: 'changed', change: (n) => (n.metadata.annotations['cluster.x-k8s.io/cluster-name'] = 'c2'), messages: 1 }],
  },
  {
    object: 'Node', field: 'metadata.annotations[cluster.x-k8s.io/cluster-namespace]', fact: 'annotations[cluster.x-k8s.io/cluster-namespace]',
    when: "always (the Machine's namespace)",
    cases: [{ name: 'changed', change: (n) => (n.metadata.annotations['cluster.x-k8s.io/cluster-namespace'] = 'ns2'), messages: 1 }],
  },
  {
    object: 'Node', field: 'metadata.annotations[rollout.capi-taint-propagator.dev/in-progress], metadata.labels[rollout.capi-taint-propagator.dev/in-progress]', fact: ['annotations[rollout.capi-taint-propagator.dev/in-progress]', 'labels[rollout.capi-taint-propagator.dev/in-progress]'],
    when: "never on their own (the staged NoExecute rollout's own mark, written by the reconcile function, which reads it from the Node as it is then)",
    cases: [{ name: 'the mark set', change: (n) => { n.metadata.annotations['rollout.capi-taint-propagator.dev/in-progress'] = '{}'; n.metadata.labels['rollout.capi-taint-propagator.dev/in-progress'] = 'true'; }, messages: 0 }],
  },
  {
    object: 'Node', field: 'metadata.creationTimestamp', fact: 'creationTimestamp',
    when: "always (the first-enablement rule reads it; the API server never changes it)",
    cases: [{ name: 'changed', change: (n) => (n.metadata.creationTimestamp = '2026-11-25T00:00:01Z'), messages: 1 }],
  },
  {
    object: 'Node', field: 'metadata.uid', fact: 'uid',
    when: 'a new uid is a new Node: an addition (or, after a missed deletion, a relist announcement), always forwarded',
    cases: [{ name: 're-created under the same name while the forwarder was away', seen: 'resynced', change: (n) => (n.metadata.uid = 'u-n1b'), messages: 1 }],
  },
  {
    object: 'Node', field: 'metadata.managedFields', fact: 'writers',
    when: 'never on its own (it tells the echo of the product\'s write and foreign writes apart)',
    cases: [{ name: 'a new manager entry only', change: (n) => n.metadata.managedFields.push({ manager: 'kubectl', fieldsV1: { 'f:metadata': { 'f:labels': {} } } }), messages: 0 }],
  },
  {
    object: 'Node', field: 'metadata.{name}, metadata.resourceVersion', fact: null,
    when: 'identity and version only: never on their own',
    cases: [{ name: 'a new resourceVersion only', change: () => undefined, messages: 0 }],
  },
  {
    object: 'Node', field: 'spec.providerID', fact: 'providerID',
    when: "only while no cluster.x-k8s.io/machine annotation names its Machine: it links the joining Node to its Machine (Cluster API's own rule; a Node added with one that no Machine the forwarder knows has is not forwarded: the Machine's provider ID names it later); never after",
    cases: [
      { name: 'set on a joining Node', before: (n) => { delete n.metadata.annotations['cluster.x-k8s.io/machine']; delete n.spec.providerID; }, change: (n) => (n.spec.providerID = 'local://m1'), messages: 1 },
      { name: 'a joining Node added with it, a Machine with it known', seen: 'added', before: unlinkedNode, change: () => undefined, messages: 1 },
      { name: 'a joining Node added with it, no Machine with it known yet', seen: 'added', linkedMachine: false, before: unlinkedNode, change: () => undefined, messages: 0 },
      { name: 'a Node added without it, no Machine annotation', seen: 'added', linkedMachine: false, before: (n) => { unlinkedNode(n); delete n.spec.providerID; }, change: () => undefined, messages: 1 },
      { name: 'changed on a linked Node', change: (n) => (n.spec.providerID = 'local://m1b'), messages: 0 },
    ],
  },
  {
    object: 'Node', field: 'anything else (status, heartbeats, labels, other annotations, …)', fact: null,
    when: 'never',
    cases: [
      { name: 'a kubelet heartbeat', change: (n) => (n.status.conditions[0].lastHeartbeatTime = '2026-11-25T00:01:00Z'), messages: 0 },
      { name: 'a label', change: (n) => (n.metadata.labels.role = 'gpu'), messages: 0 },
    ],
  },
  // ---- MachinePool ----
  {
    object: 'MachinePool', field: 'spec.template.spec.taints', fact: 'specTaints',
    when: 'always, for every Node of the pool (Cluster API refuses pool taints; the product is the only reader)',
    cases: [{ name: 'set', change: (p) => (p.spec.template.spec.taints = [capiTaint()]), messages: 2 }],
  },
  {
    object: 'MachinePool', field: 'metadata.annotations / spec.template.metadata.annotations [taints.capi-taint-propagator.dev/*]', fact: ['annotations[taints.capi-taint-propagator.dev/machine]', 'annotations[taints.capi-taint-propagator.dev/cluster]', 'annotations[taints.capi-taint-propagator.dev/class]'],
    when: 'always, for every Node of the pool',
    cases: [
      { name: 'pool annotation changed', change: (p) => (p.metadata.annotations[DECL] = 'prod=x:NoSchedule'), messages: 2 },
      { name: 'template annotation added (the pool annotation wins, same effective declaration)', change: (p) => (p.spec.template.metadata.annotations[DECL] = 'x:NoSchedule'), messages: 0 },
    ],
  },
  {
    object: 'MachinePool', field: 'status.nodeRefs[].name', fact: 'nodeNames',
    when: 'only for the Nodes that joined; a Node that left is left alone',
    cases: [
      { name: 'scale-up by one', change: (p) => p.status.nodeRefs.push({ name: 'n3' }), messages: 1 },
      { name: 'scale-down by one', change: (p) => p.status.nodeRefs.pop(), messages: 0 },
    ],
  },
  {
    object: 'MachinePool', field: 'spec.clusterName', fact: 'clusterName',
    when: 'always, for every Node of the pool',
    cases: [{ name: 'another cluster', change: (p) => (p.spec.clusterName = 'c2'), messages: 2 }],
  },
  {
    object: 'MachinePool', field: 'metadata.labels[cluster.x-k8s.io/cluster-name]', fact: 'labels[cluster.x-k8s.io/cluster-name]',
    when: 'always, for every Node of the pool',
    cases: [{ name: 'label changed', change: (p) => (p.metadata.labels['cluster.x-k8s.io/cluster-name'] = 'c2'), messages: 2 }],
  },
  {
    object: 'MachinePool', field: 'metadata.labels[cluster.x-k8s.io/control-plane]', fact: 'labels[cluster.x-k8s.io/control-plane]',
    when: 'always, for every Node of the pool (validation, as for a Machine)',
    cases: [{ name: 'label added', change: (p) => (p.metadata.labels['cluster.x-k8s.io/control-plane'] = ''), messages: 2 }],
  },
  {
    object: 'MachinePool', field: 'metadata.annotations[cluster.x-k8s.io/paused]', fact: 'annotations[cluster.x-k8s.io/paused]',
    when: 'always, either way, for every Node of the pool (and a ScalableResource message for its autoscaler annotation)',
    cases: [
      { name: 'paused', change: (p) => (p.metadata.annotations[PAUSED] = ''), messages: 2 },
      { name: 'unpaused', before: (p) => (p.metadata.annotations[PAUSED] = ''), change: (p) => delete p.metadata.annotations[PAUSED], messages: 2 },
    ],
  },
  {
    object: 'MachinePool', field: 'metadata.deletionTimestamp', fact: 'deleting',
    when: 'never: a deleting pool\'s Nodes are left alone',
    cases: [{ name: 'deletion started', change: (p) => (p.metadata.deletionTimestamp = '2026-11-25T01:00:00Z'), messages: 0 }],
  },
  {
    object: 'MachinePool', field: 'metadata.uid', fact: 'uid',
    when: 'a new uid is a new pool: an addition (or, after a missed deletion, a relist announcement), every Node',
    cases: [{ name: 're-created under the same name while the forwarder was away', seen: 'resynced', change: (p) => (p.metadata.uid = 'u-mp2'), messages: 2 }],
  },
  {
    object: 'MachinePool', field: 'metadata.{name,namespace}, metadata.resourceVersion', fact: null,
    when: 'identity and version only: never on their own',
    cases: [{ name: 'a new resourceVersion only', change: () => undefined, messages: 0 }],
  },
  {
    object: 'MachinePool', field: 'metadata.annotations / spec.template.metadata.annotations [rollout.capi-taint-propagator.dev/no-execute]', fact: 'annotations[rollout.capi-taint-propagator.dev/no-execute]',
    when: 'never on its own (the reconcile function reads it from the pool as it is then)',
    cases: [{ name: 'the rollout opt-in added', change: (p) => (p.metadata.annotations['rollout.capi-taint-propagator.dev/no-execute'] = '1'), messages: 0 }],
  },
  {
    object: 'MachinePool', field: 'anything else (replicas, status, conditions, …)', fact: null,
    when: 'never',
    cases: [{ name: 'replicas changed', change: (p) => (p.spec.replicas = 3), messages: 0 }],
  },
  // ---- MachineSet (its Machine m1 has Node n1) ----
  {
    object: 'MachineSet', field: 'spec.template.metadata.annotations[taints.capi-taint-propagator.dev/{machine,cluster,class}]', fact: 'declarations',
    when: "never for the Nodes: a Node takes its Machine's declaration once Cluster API has copied the template's onto the Machine (the Machine row); the cluster-autoscaler annotation has its own rules (docs/autoscaler.md)",
    cases: [
      { name: 'a declared value changed', change: (ms) => (ms.spec.template.metadata.annotations[DECL] = 'prod=q:NoSchedule'), messages: 0 },
      { name: 'a declaration removed', change: (ms) => delete ms.spec.template.metadata.annotations[DECL], messages: 0 },
    ],
  },
  {
    object: 'MachineSet', field: 'metadata.annotations[cluster.x-k8s.io/paused]', fact: 'paused',
    when: 'always, either way: one ScalableResource message (its autoscaler annotation); the same for a MachineDeployment',
    cases: [
      { name: 'paused', change: (ms) => (ms.metadata.annotations[PAUSED] = ''), messages: 1 },
      { name: 'unpaused', before: (ms) => (ms.metadata.annotations[PAUSED] = ''), change: (ms) => delete ms.metadata.annotations[PAUSED], messages: 1 },
    ],
  },
  {
    object: 'MachineSet', field: 'anything else (replicas, status, spec.template.spec, other annotations, …)', fact: null,
    when: 'never for the Nodes (the cluster-autoscaler annotation has its own rules, docs/autoscaler.md)',
    cases: [{ name: 'replicas and a taint of spec.template.spec changed', change: (ms) => { ms.spec.replicas = 3; ms.spec.template.spec.taints = [capiTaint('v2')]; }, messages: 0 }],
  },
  // ---- Cluster (its Machine m1 has Node n1; its MachinePool mp has n1 and n2; its MachineSet ms) ----
  {
    object: 'Cluster', field: 'spec.paused', fact: 'paused',
    when: 'a watch modification, either way: one message per Node of its Machines and MachinePools, and one ScalableResource message per MachineDeployment, MachineSet and MachinePool (as the forwarder last saw them). A relist announcement: never (the periodic resync covers it)',
    cases: [
      { name: 'paused', change: (c) => (c.spec.paused = true), messages: 5 },
      { name: 'unpaused', before: (c) => (c.spec.paused = true), change: (c) => (c.spec.paused = false), messages: 5 },
      { name: 'a relist announcement of a paused Cluster', seen: 'resynced', change: (c) => (c.spec.paused = true), messages: 0 },
    ],
  },
  {
    object: 'Cluster', field: 'metadata.deletionTimestamp', fact: 'deleting',
    when: 'never a message: its Node watch stops',
    cases: [{ name: 'deletion started', change: (c) => (c.metadata.deletionTimestamp = '2026-11-25T01:00:00Z'), messages: 0 }],
  },
  {
    object: 'Cluster', field: 'metadata.uid', fact: 'uid',
    when: 'never a message (a new Cluster\'s Machines and Nodes are announced by their own watches)',
    cases: [{ name: 're-created under the same name', seen: 'resynced', change: (c) => (c.metadata.uid = 'u-c1b'), messages: 0 }],
  },
  {
    object: 'Cluster', field: 'anything else (metadata.{name,namespace}, resourceVersion, topology, status, …)', fact: null,
    when: 'never',
    cases: [{ name: 'a status change', change: (c) => (c.status = { phase: 'Provisioning' }), messages: 0 }],
  },
];


/** How many queue messages the forwarder sends for one modification (one per Node it concerns). */
function messagesFor(row: Row, c: Case): number {
  if (row.object === 'MachineSet') return scalableMessagesFor(c);
  if (row.object === 'Cluster') return clusterMessagesFor(c);
  const beforeObj = build[row.object]();
  c.before?.(beforeObj);
  const afterObj = structuredClone(beforeObj);
  afterObj.metadata.resourceVersion = String(Number(afterObj.metadata.resourceVersion) + 1);
  c.change(afterObj);
  const previous = facts(row.object, beforeObj);
  const current = facts(row.object, afterObj);
  const nodeObj = node();
  if (c.node) c.node(nodeObj);
  const nodeFacts = c.node === null ? undefined : (toNodeFacts(nodeObj) as NodeFacts);
  const seen = c.seen ?? 'modified';
  const decision = forwardDecision(seen, previous, current, {
    startupTaint: GATE,
    specTaintsOwner: c.specTaintsOwner ?? SpecTaintsOwner.upstream,
    nodeFacts: (name) => (nodeFacts?.name === name ? nodeFacts : undefined),
    linkedNodeOf: (m) => (nodeFacts && unlinkedProviderID(nodeFacts) !== undefined && unlinkedProviderID(nodeFacts) === m.providerID ? nodeFacts.name : undefined),
    linkedMachineOf: (n) => (c.linkedMachine !== false && unlinkedProviderID(n) === 'local://m1' ? { namespace: 'ns', name: 'm1' } : undefined),
    machineFactsOf: (m) => {
      if (m.namespace !== 'ns' || m.name !== 'm1') return undefined;
      const linked = machine();
      if (c.machineWithoutSpecTaints) delete linked.spec.taints;
      return toMachineFacts(linked) as MachineFacts;
    },
  });
  if (!decision.forward) return 0;
  return current.kind === 'MachinePool' ? poolNodesToAnnounce(seen, previous, current).length : 1;
}

/** How many queue messages a MachineSet modification gets: none for its Machines' Nodes; one ScalableResource message when its autoscaler annotation needs a reconcile. */
function scalableMessagesFor(c: Case): number {
  const beforeObj = machineSet();
  c.before?.(beforeObj);
  const afterObj = structuredClone(beforeObj);
  afterObj.metadata.resourceVersion = String(Number(afterObj.metadata.resourceVersion) + 1);
  c.change(afterObj);
  const [previous, current] = [beforeObj, afterObj].map((o) => toScalableFacts('MachineSet', o) as ScalableFacts) as [ScalableFacts, ScalableFacts];
  return autoscalerEventNeeded(c.seen ?? 'modified', previous, current, { startupTaint: GATE }) ? 1 : 0;
}

/** How many queue messages a Cluster modification gets: its pause fan-out over m1 (Node n1), mp (n1, n2) and ms. */
function clusterMessagesFor(c: Case): number {
  const beforeObj = clusterObject();
  c.before?.(beforeObj);
  const afterObj = structuredClone(beforeObj);
  afterObj.metadata.resourceVersion = String(Number(afterObj.metadata.resourceVersion) + 1);
  c.change(afterObj);
  const [previous, current] = [beforeObj, afterObj].map((o) => toClusterFacts(o) as ClusterFacts) as [ClusterFacts, ClusterFacts];
  if (!pausedChanged(c.seen ?? 'modified', previous, current)) return 0;
  const members = { machines: [{ machine: toMachineFacts(machine()) as MachineFacts, nodeName: 'n1' }], machinePools: [toMachinePoolFacts(pool()) as MachinePoolFacts], scalables: [toScalableFacts('MachineSet', machineSet()) as ScalableFacts] };
  return toClusterPauseEvents(current, { mode: 'capi', namespace: 'ns', name: 'c1' }, members, new Date(0)).length;
}

/** The facts a view keeps: its fields, with each kept label and annotation on its own. */
function factsKept(view: WatchedFacts): string[] {
  return Object.entries(view).flatMap(([k, v]) => (k === 'labels' || k === 'annotations' ? Object.keys(v as object).map((key) => `${k}[${key}]`) : [k]));
}

describe('The relevance table (docs/relevance.md): which changes reach the queue', () => {
  for (const row of TABLE) {
    for (const c of row.cases) {
      it(`${row.object} ${row.field}: ${c.name} → ${c.messages} message(s)`, () => {
        expect(messagesFor(row, c)).toBe(c.messages);
      });
    }
  }

  it('has exactly one row for every fact the forwarder keeps of a Machine, a Node, a MachinePool and a Cluster', () => {
    for (const kind of ['Machine', 'Node', 'MachinePool', 'Cluster'] as const) {
      const full = build[kind]();
      full.metadata.deletionTimestamp = '2026-11-25T01:00:00Z';
      full.metadata.labels['cluster.x-k8s.io/control-plane'] = '';
      full.metadata.annotations[PAUSED] = '';
      if (kind === 'Machine' || kind === 'MachinePool') {
        for (const layer of ['machine', 'cluster', 'class']) full.metadata.annotations[`taints.capi-taint-propagator.dev/${layer}`] = 'x:NoSchedule';
        full.metadata.annotations['rollout.capi-taint-propagator.dev/no-execute'] = '1';
      }
      if (kind === 'Machine') for (const group of ['set-name', 'control-plane-name', 'pool-name']) full.metadata.labels[`cluster.x-k8s.io/${group}`] = 'g';
      if (kind === 'Node') for (const map of ['labels', 'annotations']) full.metadata[map]['rollout.capi-taint-propagator.dev/in-progress'] = 'x';
      // Not yet linked (no nodeRef, no machine annotation): the facts kept only then are counted too.
      const unlinked = structuredClone(full);
      if (kind === 'Machine') delete unlinked.status.nodeRef;
      if (kind === 'Node') delete unlinked.metadata.annotations['cluster.x-k8s.io/machine'];
      const kept = [...new Set([...factsKept(facts(kind, full)), ...factsKept(facts(kind, unlinked))])].filter((k) => !['kind', 'apiVersion', 'name', 'namespace', 'resourceVersion'].includes(k)).sort();
      const rows = TABLE.filter((r) => r.object === kind).flatMap((r) => r.fact ?? []).sort();
      expect(rows, kind).toEqual(kept);
    }
  });

  it('is the table of docs/relevance.md, row by row', () => {
    const doc = readFileSync(new URL('../../../../docs/relevance.md', import.meta.url), 'utf8');
    const start = doc.indexOf('<!-- relevance-table:start -->');
    const end = doc.indexOf('<!-- relevance-table:end -->');
    expect(start).toBeGreaterThan(-1);
    const rows = doc
      .slice(start, end)
      .split('\n')
      .filter((l) => l.startsWith('| ') && !l.startsWith('| object') && !l.startsWith('|---'))
      .map((l) => l.split(' | ').map((cell) => cell.replace(/^\| ?|\s*\|$/g, '').trim()));
    const wanted = TABLE.map((r) => [r.object, `\`${r.field}\``, r.when]);
    expect(rows.map((r) => [r[0], r[1], r[2]])).toEqual(wanted);
  });
});
