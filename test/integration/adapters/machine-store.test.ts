import { expect, it } from 'vitest';
import type https from 'node:https';
import { KubernetesCapiDiscovery } from '#shared/adapters/kubernetes/capi-discovery.ts';
import type { ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { KubernetesMachineStore } from '#shared/adapters/kubernetes/machine-store.ts';
import { adminKubeConfig, createMachine, createNamespace, describeWithControlPlane } from '#test/support/control-plane.ts';

/** The admin credentials, with the path of every request made through them (as sent: `limit=500` asks for 2). */
function recording(): { endpoint: ClusterEndpoint; paths: string[] } {
  const kc = adminKubeConfig();
  const paths: string[] = [];
  const endpoint: ClusterEndpoint = {
    getCurrentCluster: () => kc.getCurrentCluster(),
    applyToHTTPSOptions: async (opts: https.RequestOptions) => {
      paths.push(opts.path ?? '');
      // Pages of two, so that five Machines take three pages without creating 1 001 of them.
      opts.path = opts.path?.replace('limit=500', 'limit=2');
      await kc.applyToHTTPSOptions(opts);
    },
  };
  return { endpoint, paths };
}

describeWithControlPlane('Class: KubernetesMachineStore, lists', () => {
  it('reads the Machines of a namespace page by page when it looks for the Machine of a Node', async () => {
    // Prepare: five Machines, pages of two (the store asks for 500, the endpoint sends 2)
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'machine-pages');
    for (let i = 1; i <= 5; i++) await createMachine(kc, ns, `m${i}`, { nodeName: `n${i}` });
    const { endpoint, paths } = recording();
    const store = new KubernetesMachineStore(endpoint, new KubernetesCapiDiscovery(endpoint));

    // Act
    const found = await store.findMachineByNodeName(ns, undefined, 'n5');
    const missing = await store.findMachineByNodeName(ns, undefined, 'n6');

    // Assess: the last Machine is found on the third page; each search reads three pages, asking for 500 at most
    expect(found).toMatchObject({ namespace: ns, name: 'm5', nodeName: 'n5' });
    expect(missing).toBeUndefined();
    const lists = paths.filter((p) => p.startsWith(`/apis/cluster.x-k8s.io/v1beta2/namespaces/${ns}/machines?`));
    expect(lists).toHaveLength(6);
    expect(lists.every((p) => p.includes('limit=500'))).toBe(true);
    expect(lists.filter((p) => p.includes('continue=')).length).toBe(4);
  });
});
