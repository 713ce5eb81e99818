/**
 * Fluent builders for the views and snapshots the functions read, and taints, shared by every test tier.
 * Defaults are minimal and valid; each `with…` returns the builder so a test states only what matters.
 * @example nodeBuilder().withTaints(nodeTaint('gpu', 'a100')).withTracking('gpu:NoSchedule').build()
 */
import type { MachineFacts, NodeFacts, NodeWithTaints } from '#shared/model/views.ts';
import {
  CLUSTER_NAME_ANNOTATION,
  CLUSTER_NAMESPACE_ANNOTATION,
  CONTROL_PLANE_LABEL,
  MACHINE_ANNOTATION,
  OWN_TRACKING_ANNOTATION,
  TRACKING_ANNOTATION,
  type MachineTaint,
  type Propagation,
  type Taint,
  type TaintEffect,
} from '#shared/domain/taint.ts';

/** A Node taint; `value` undefined = no value. `effect` is a plain string, as on a Node read from the API. */
export function nodeTaint(key: string, value?: string, effect: string = 'NoSchedule', timeAdded?: string): Taint {
  return {
    key,
    ...(value === undefined ? {} : { value }),
    effect,
    ...(timeAdded === undefined ? {} : { timeAdded }),
  };
}

/** A Machine taint; `value` undefined = no value. */
export function machineTaint(
  key: string,
  value?: string,
  effect: TaintEffect = 'NoSchedule',
  propagation: Propagation = 'Always',
): MachineTaint {
  return { key, ...(value === undefined ? {} : { value }), effect, propagation };
}

/** The annotations of a Node's view, by the short names {@link nodeFacts} takes. */
const NODE_ANNOTATION_NAMES = {
  trackingAnnotation: TRACKING_ANNOTATION,
  ownTrackingAnnotation: OWN_TRACKING_ANNOTATION,
  machineAnnotation: MACHINE_ANNOTATION,
  clusterNameAnnotation: CLUSTER_NAME_ANNOTATION,
  clusterNamespaceAnnotation: CLUSTER_NAMESPACE_ANNOTATION,
} as const;

/** A Node's view in short: its fields, and its annotations by short name (`undefined`: not set). */
export type NodeFactsChange = Partial<NodeFacts> & { readonly [K in keyof typeof NODE_ANNOTATION_NAMES]?: string | undefined };

/**
 * A Node's view (`n1`, no taints, no annotations unless `change` says), e.g.
 * `nodeFacts({ machineAnnotation: 'm1', providerID: 'p1' })`.
 */
export function nodeFacts(change: NodeFactsChange = {}): NodeFacts {
  const annotations: Record<string, string> = { ...change.annotations };
  const fields: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(change)) {
    const key = NODE_ANNOTATION_NAMES[field as keyof typeof NODE_ANNOTATION_NAMES];
    if (key === undefined) fields[field] = value;
    else if (value === undefined) delete annotations[key];
    else annotations[key] = value as string;
  }
  const name = change.name ?? 'n1';
  return { kind: 'Node', name, uid: `uid-${name}`, resourceVersion: '1', labels: {}, taints: [], ...(fields as Partial<NodeFacts>), annotations };
}

/** Builds a Node's view with readable taints (also usable as a `NodeTaintState`). */
export function nodeBuilder() {
  let node: NodeWithTaints = { kind: 'Node', name: 'node-1', uid: 'node-uid-1', resourceVersion: '1', labels: {}, annotations: {}, taints: [] };
  const builder = {
    named(name: string) {
      node = { ...node, name };
      return builder;
    },
    withResourceVersion(resourceVersion: string) {
      node = { ...node, resourceVersion };
      return builder;
    },
    withTaints(...taints: Taint[]) {
      node = { ...node, taints: [...node.taints, ...taints] };
      return builder;
    },
    withAnnotations(annotations: Record<string, string>) {
      node = { ...node, annotations: { ...node.annotations, ...annotations } };
      return builder;
    },
    withLabels(labels: Record<string, string>) {
      node = { ...node, labels: { ...node.labels, ...labels } };
      return builder;
    },
    /** Sets the tracking annotation `cluster.x-k8s.io/taints-from-machine` (`''` = initialized, nothing owned). */
    withTracking(value: string) {
      return builder.withAnnotations({ [TRACKING_ANNOTATION]: value });
    },
    /** Sets the product's own tracking annotation `taints.capi-taint-propagator.dev/applied`. */
    withOwnTracking(value: string) {
      return builder.withAnnotations({ [OWN_TRACKING_ANNOTATION]: value });
    },
    build(): NodeWithTaints {
      return node;
    },
  };
  return builder;
}

/** Builds a Machine's view (a worker Machine unless `.controlPlane()`). */
export function machineBuilder() {
  let machine: MachineFacts = {
    kind: 'Machine',
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    namespace: 'default',
    name: 'machine-1',
    uid: 'machine-uid-1',
    resourceVersion: '1',
    labels: {},
    annotations: {},
    specTaints: undefined,
    deleting: false,
  };
  const builder = {
    named(name: string) {
      machine = { ...machine, name };
      return builder;
    },
    /** Sets `spec.taints` as stored (unvalidated, so tests can pass anything). */
    withSpecTaints(specTaints: unknown) {
      machine = { ...machine, specTaints };
      return builder;
    },
    withAnnotation(key: string, value: string) {
      machine = { ...machine, annotations: { ...machine.annotations, [key]: value } };
      return builder;
    },
    withLabels(labels: Record<string, string>) {
      machine = { ...machine, labels: { ...machine.labels, ...labels } };
      return builder;
    },
    /** Adds the `cluster.x-k8s.io/control-plane` label (any value counts). */
    controlPlane() {
      return builder.withLabels({ [CONTROL_PLANE_LABEL]: '' });
    },
    withNodeName(nodeName: string) {
      machine = { ...machine, nodeName };
      return builder;
    },
    build(): MachineFacts {
      return machine;
    },
  };
  return builder;
}

/** A Machine as the forwarder's watch sees it: m1 in namespace fleet, linked to Node n1 of cluster wc1. */
export function machineFacts(change: Partial<MachineFacts> = {}): MachineFacts {
  return {
    kind: 'Machine',
    apiVersion: 'cluster.x-k8s.io/v1beta2',
    namespace: 'fleet',
    name: 'm1',
    uid: 'uid-m1',
    resourceVersion: '11',
    labels: {},
    annotations: {},
    specTaints: [{ key: 'gpu', effect: 'NoSchedule' }],
    nodeName: 'n1',
    clusterName: 'wc1',
    deleting: false,
    ...change,
  };
}
