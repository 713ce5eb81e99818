/**
 * The management-cluster RBAC that lets the functions read workload credentials — and nothing else: one Role per
 * namespace with `get` on exactly the `<cluster>-kubeconfig` Secrets of the Clusters in it and the optional dedicated
 * `<cluster>-taint-propagator-kubeconfig` next to each (`resourceNames`), bound to both function groups. CA (`<cluster>-ca`), etcd (`<cluster>-etcd`), service-account (`<cluster>-sa`), proxy and
 * bootstrap Secrets next to them stay out of reach, and so does `list`/`watch` (RBAC cannot limit those by name).
 * Pure; `npm run rbac:kubeconfig-secrets` (kubeconfig-secret-rbac-main.ts) prints it for the Clusters that exist.
 */
import { dump } from 'js-yaml';

export const KUBECONFIG_READER = 'capi-taint-propagator-kubeconfig-reader';
export const FUNCTION_GROUPS = ['capi-taint-propagator-forwarder', 'capi-taint-propagator-reconcile'] as const;
const LABELS = { 'app.kubernetes.io/name': 'capi-taint-propagator', 'app.kubernetes.io/component': 'kubeconfig-reader' };

export interface ClusterName {
  readonly namespace: string;
  readonly name: string;
}

type Manifest = Record<string, unknown>;

/** A Role + RoleBinding per namespace, naming each Cluster's `<cluster>-kubeconfig` Secret; sorted, deterministic. */
export function kubeconfigSecretRbac(clusters: readonly ClusterName[]): Manifest[] {
  const byNamespace = new Map<string, Set<string>>();
  for (const c of clusters) {
    if (!byNamespace.has(c.namespace)) byNamespace.set(c.namespace, new Set());
    byNamespace.get(c.namespace)?.add(`${c.name}-kubeconfig`).add(`${c.name}-taint-propagator-kubeconfig`);
  }
  const out: Manifest[] = [];
  for (const namespace of [...byNamespace.keys()].sort()) {
    const secrets = [...(byNamespace.get(namespace) ?? [])].sort();
    out.push(
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'Role',
        metadata: { name: KUBECONFIG_READER, namespace, labels: LABELS },
        rules: [{ apiGroups: [''], resources: ['secrets'], resourceNames: secrets, verbs: ['get'] }],
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: KUBECONFIG_READER, namespace, labels: LABELS },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: KUBECONFIG_READER },
        subjects: FUNCTION_GROUPS.map((name) => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name })),
      },
    );
  }
  return out;
}

/** The manifests as one multi-document YAML stream (for `kubectl apply -f -`). */
export function toYamlStream(manifests: readonly Manifest[]): string {
  return manifests.map((m) => `---\n${dump(m, { lineWidth: -1 })}`).join('');
}

/** Parses `namespace/name` arguments; throws naming the bad one. */
export function parseClusterArgs(args: readonly string[]): ClusterName[] {
  return args.map((arg) => {
    const m = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/.exec(arg);
    if (!m?.[1] || !m[3]) throw new Error(`expected <namespace>/<cluster>, got ${JSON.stringify(arg)}`);
    return { namespace: m[1], name: m[3] };
  });
}
