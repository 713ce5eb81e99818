/**
 * `npm run rbac:kubeconfig-secrets [-- <namespace>/<cluster> ...]`: prints the Roles + RoleBindings that let the
 * functions `get` exactly the `<cluster>-kubeconfig` Secrets (see kubeconfig-secret-rbac.ts). Without arguments it
 * lists the Cluster API Clusters of the cluster in KUBECONFIG (all namespaces). Apply and keep in sync:
 *   npm run -s rbac:kubeconfig-secrets | kubectl apply -f -
 * (re-run when Clusters are added; a Cluster without it is reported by the product as "reading Secret …: HTTP 403").
 */
import { CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { describeApiError } from '#shared/adapters/kubernetes/api-errors.ts';
import { KubernetesCapiDiscovery } from '#shared/adapters/kubernetes/capi-discovery.ts';
import { kubeconfigSecretRbac, parseClusterArgs, toYamlStream, type ClusterName } from './kubeconfig-secret-rbac.ts';

const args = process.argv.slice(2);
let clusters: ClusterName[];
try {
  if (args.length > 0) {
    clusters = parseClusterArgs(args);
  } else {
    const kc = new KubeConfig();
    kc.loadFromDefault();
    const version = await new KubernetesCapiDiscovery(kc).version(); // v1beta2, or v1beta1 on CAPI v1.10 and older
    const list = (await kc.makeApiClient(CustomObjectsApi).listClusterCustomObject({ group: 'cluster.x-k8s.io', version, plural: 'clusters' })) as {
      items?: Array<{ metadata?: { namespace?: string; name?: string } }>;
    };
    clusters = (list.items ?? []).flatMap((c) => (c.metadata?.namespace && c.metadata.name ? [{ namespace: c.metadata.namespace, name: c.metadata.name }] : []));
  }
} catch (err) {
  process.stderr.write(`rbac:kubeconfig-secrets: ${err instanceof Error && !('body' in err) ? err.message : describeApiError(err)}\n`);
  process.exit(2);
}
if (clusters.length === 0) process.stderr.write('rbac:kubeconfig-secrets: no Clusters found; nothing to grant\n');
process.stdout.write(toYamlStream(kubeconfigSecretRbac(clusters)));
