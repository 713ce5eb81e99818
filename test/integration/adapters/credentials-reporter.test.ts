import { CoreV1Api } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { KubernetesCapiDiscovery } from '#shared/adapters/kubernetes/capi-discovery.ts';
import { clusterCredentialsReporter } from '#shared/adapters/kubernetes/credentials-reporter.ts';
import { ClusterCredentialsError } from '#shared/errors.ts';
import { adminKubeConfig, createClusterWithKubeconfig, createNamespace, describeWithControlPlane } from '#test/support/control-plane.ts';

describeWithControlPlane('Function: clusterCredentialsReporter', () => {
  it('records the Warning Event on an existing Cluster, and nothing (no failure logged) for a Cluster that is gone', async () => {
    // Prepare
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'creds');
    await createClusterWithKubeconfig(kc, ns, 'present', 'not a kubeconfig');
    const warnings: string[] = [];
    const quiet = { error: () => undefined, warn: (message: string) => void warnings.push(message), info: () => undefined, debug: () => undefined };
    const reporter = clusterCredentialsReporter({ kubeConfig: kc, capi: new KubernetesCapiDiscovery(kc), count: () => undefined, logger: quiet as never });
    const problem = new ClusterCredentialsError(`${ns}/x`, 'the kubeconfig has no current context');

    // Act
    await reporter.report({ namespace: ns, name: 'gone' }, problem);
    await reporter.report({ namespace: ns, name: 'present' }, problem);

    // Assess
    const events = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns });
    expect(events.items.map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}`)).toEqual(['Cluster/present']);
    expect(warnings).toEqual([]);
  });
});
