/**
 * CRDs of the local Cluster API provider (all `v1alpha1`), with the contract labels Cluster API requires on every
 * provider CRD (`cluster.x-k8s.io/<contract>: <served versions joined by _>`), for both contracts: `v1beta2`
 * (CAPI v1.11 and later) and `v1beta1` (CAPI v1.10 and older):
 *
 * | group | kinds |
 * |---|---|
 * | `infrastructure.cluster.x-k8s.io` | LocalCluster, LocalClusterTemplate, LocalMachine, LocalMachineTemplate, LocalMachinePool |
 * | `controlplane.cluster.x-k8s.io` | LocalControlPlane, LocalControlPlaneTemplate |
 * | `bootstrap.cluster.x-k8s.io` | LocalBootstrapConfig, LocalBootstrapConfigTemplate |
 *
 * Fields the provider reads or writes have a schema; everything else is preserved (Cluster API's topology controller
 * writes contract fields such as `spec.version` and `spec.replicas` into control planes).
 */
import type { V1CustomResourceDefinition, V1JSONSchemaProps } from '@kubernetes/client-node';

export const VERSION = 'v1alpha1';
export const INFRASTRUCTURE_GROUP = 'infrastructure.cluster.x-k8s.io';
export const CONTROL_PLANE_GROUP = 'controlplane.cluster.x-k8s.io';
export const BOOTSTRAP_GROUP = 'bootstrap.cluster.x-k8s.io';

/** Group, version, plural of one kind (for CustomObjectsApi calls and informer paths). */
export interface KindApi {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly kind: string;
}

const api = (group: string, kind: string): KindApi => ({ group, version: VERSION, plural: `${kind.toLowerCase()}s`, kind });

export const LOCAL_CLUSTER = api(INFRASTRUCTURE_GROUP, 'LocalCluster');
export const LOCAL_CLUSTER_TEMPLATE = api(INFRASTRUCTURE_GROUP, 'LocalClusterTemplate');
export const LOCAL_MACHINE = api(INFRASTRUCTURE_GROUP, 'LocalMachine');
export const LOCAL_MACHINE_TEMPLATE = api(INFRASTRUCTURE_GROUP, 'LocalMachineTemplate');
export const LOCAL_MACHINE_POOL = api(INFRASTRUCTURE_GROUP, 'LocalMachinePool');
export const LOCAL_CONTROL_PLANE = api(CONTROL_PLANE_GROUP, 'LocalControlPlane');
export const LOCAL_CONTROL_PLANE_TEMPLATE = api(CONTROL_PLANE_GROUP, 'LocalControlPlaneTemplate');
export const LOCAL_BOOTSTRAP_CONFIG = api(BOOTSTRAP_GROUP, 'LocalBootstrapConfig');
export const LOCAL_BOOTSTRAP_CONFIG_TEMPLATE = api(BOOTSTRAP_GROUP, 'LocalBootstrapConfigTemplate');

const preserve: V1JSONSchemaProps = { type: 'object', x_kubernetes_preserve_unknown_fields: true } as V1JSONSchemaProps;

/** `{host, port}`, as in Cluster API's `APIEndpoint`. */
const endpoint: V1JSONSchemaProps = {
  type: 'object',
  properties: { host: { type: 'string', maxLength: 512 }, port: { type: 'integer', format: 'int32', minimum: 1, maximum: 65535 } },
};

/** A Node taint the "kubelet" registers the Node with (as `--register-with-taints` / kubeadm `nodeRegistration.taints`). */
const startupTaints: V1JSONSchemaProps = {
  type: 'array',
  maxItems: 64,
  description: 'Taints the Node is registered with, as a kubelet started with --register-with-taints would.',
  items: {
    type: 'object',
    required: ['key', 'effect'],
    properties: {
      key: { type: 'string', minLength: 1, maxLength: 316 },
      value: { type: 'string', maxLength: 63 },
      effect: { type: 'string', _enum: ['NoSchedule', 'PreferNoSchedule', 'NoExecute'] },
    },
  },
} as V1JSONSchemaProps;

const machineSpec: V1JSONSchemaProps = {
  type: 'object',
  properties: {
    providerID: { type: 'string', description: 'Set by the provider: local:///<namespace>/<machine>.' },
    startupTaints,
    bootSeconds: {
      type: 'integer',
      minimum: 0,
      maximum: 3600,
      description:
        'Seconds from the machine being provisioned (spec.providerID, provisioned) to its Node registering, as an instance boots before its kubelet joins. 0 (default): the Node registers first, then the machine reports provisioned.',
    },
  },
};

const machineStatus: V1JSONSchemaProps = {
  type: 'object',
  properties: {
    initialization: { type: 'object', properties: { provisioned: { type: 'boolean' } } },
    addresses: {
      type: 'array',
      items: { type: 'object', required: ['type', 'address'], properties: { type: { type: 'string' }, address: { type: 'string' } } },
    },
    nodeName: { type: 'string' },
  },
};

/**
 * An infrastructure MachinePool (the contract's `spec.providerIDList`, written by the provider) with the template its
 * Nodes register from: `template.spec.startupTaints`, read when a Node joins (as a launch template would be).
 */
const machinePoolSpec: V1JSONSchemaProps = {
  type: 'object',
  properties: {
    providerIDList: {
      type: 'array',
      maxItems: 1000,
      description: 'Set by the provider: the providerIDs of the Nodes of the pool (local:///<namespace>/<pool>-<n>).',
      items: { type: 'string', maxLength: 512 },
    },
    template: { type: 'object', properties: { spec: { type: 'object', properties: { startupTaints } } } },
  },
};

/** Both contracts: v1beta2 `initialization.provisioned`, v1beta1 `ready` (still what CAPI v1.14 reads), and `replicas`. */
const machinePoolStatus: V1JSONSchemaProps = {
  type: 'object',
  properties: {
    initialization: { type: 'object', properties: { provisioned: { type: 'boolean' } } },
    ready: { type: 'boolean' },
    replicas: { type: 'integer', format: 'int32', minimum: 0 },
  },
};

const clusterSpec: V1JSONSchemaProps = { type: 'object', properties: { controlPlaneEndpoint: endpoint } };
const clusterStatus: V1JSONSchemaProps = {
  type: 'object',
  properties: { initialization: { type: 'object', properties: { provisioned: { type: 'boolean' } } } },
};

const template = (spec: V1JSONSchemaProps): V1JSONSchemaProps => ({
  type: 'object',
  properties: {
    spec: {
      type: 'object',
      required: ['template'],
      properties: {
        template: { type: 'object', properties: { metadata: preserve, spec } },
      },
    },
  },
});

interface CrdShape {
  readonly kind: KindApi;
  readonly spec: V1JSONSchemaProps;
  readonly status?: V1JSONSchemaProps;
  readonly columns?: { name: string; type: string; jsonPath: string }[];
}

function crd(o: CrdShape): V1CustomResourceDefinition {
  const root: V1JSONSchemaProps = o.status
    ? { type: 'object', properties: { spec: o.spec, status: o.status } }
    : { type: 'object', properties: (o.spec.properties ?? {}) };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${o.kind.plural}.${o.kind.group}`,
      labels: { 'cluster.x-k8s.io/v1beta2': VERSION, 'cluster.x-k8s.io/v1beta1': VERSION, 'cluster.x-k8s.io/provider': 'local' },
    },
    spec: {
      group: o.kind.group,
      scope: 'Namespaced',
      names: { kind: o.kind.kind, listKind: `${o.kind.kind}List`, plural: o.kind.plural, singular: o.kind.kind.toLowerCase(), categories: ['cluster-api'] },
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          ...(o.status ? { subresources: { status: {} } } : {}),
          ...(o.columns ? { additionalPrinterColumns: [...o.columns, { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }] } : {}),
          schema: { openAPIV3Schema: root },
        },
      ],
    },
  };
}

const spec = (s: V1JSONSchemaProps): V1JSONSchemaProps => ({ ...s, x_kubernetes_preserve_unknown_fields: true }) as V1JSONSchemaProps;

/** Every CRD of the provider. */
export const LOCAL_PROVIDER_CRDS: readonly V1CustomResourceDefinition[] = [
  crd({
    kind: LOCAL_CLUSTER,
    spec: spec(clusterSpec),
    status: spec(clusterStatus),
    columns: [
      { name: 'Cluster', type: 'string', jsonPath: ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']" },
      { name: 'Provisioned', type: 'boolean', jsonPath: '.status.initialization.provisioned' },
    ],
  }),
  crd({ kind: LOCAL_CLUSTER_TEMPLATE, spec: template(spec(clusterSpec)) }),
  crd({
    kind: LOCAL_MACHINE,
    spec: spec(machineSpec),
    status: spec(machineStatus),
    columns: [
      { name: 'Cluster', type: 'string', jsonPath: ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']" },
      { name: 'ProviderID', type: 'string', jsonPath: '.spec.providerID' },
      { name: 'Provisioned', type: 'boolean', jsonPath: '.status.initialization.provisioned' },
    ],
  }),
  crd({ kind: LOCAL_MACHINE_TEMPLATE, spec: template(spec(machineSpec)) }),
  crd({
    kind: LOCAL_MACHINE_POOL,
    spec: spec(machinePoolSpec),
    status: spec(machinePoolStatus),
    columns: [
      { name: 'Cluster', type: 'string', jsonPath: ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']" },
      { name: 'Replicas', type: 'integer', jsonPath: '.status.replicas' },
      { name: 'Provisioned', type: 'boolean', jsonPath: '.status.initialization.provisioned' },
    ],
  }),
  crd({
    kind: LOCAL_CONTROL_PLANE,
    spec: spec({ type: 'object', properties: { controlPlaneEndpoint: endpoint, version: { type: 'string' }, replicas: { type: 'integer', format: 'int32' } } }),
    status: preserve,
    columns: [
      { name: 'Initialized', type: 'boolean', jsonPath: '.status.initialization.controlPlaneInitialized' },
      { name: 'Version', type: 'string', jsonPath: '.status.version' },
    ],
  }),
  crd({ kind: LOCAL_CONTROL_PLANE_TEMPLATE, spec: template(preserve) }),
  crd({
    kind: LOCAL_BOOTSTRAP_CONFIG,
    spec: preserve,
    status: preserve,
    columns: [{ name: 'DataSecret', type: 'string', jsonPath: '.status.dataSecretName' }],
  }),
  crd({ kind: LOCAL_BOOTSTRAP_CONFIG_TEMPLATE, spec: template(preserve) }),
];
