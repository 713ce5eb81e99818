/**
 * Cluster API version discovery against a real API server (its own bare control plane, because the test changes
 * which versions the Machine and Cluster CRDs serve): v1beta2 preferred, v1beta1 when v1beta2 is not served, a
 * version that stops being served is followed by the MachineStore without a restart, and a management cluster
 * serving neither gives one clear, retryable error.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ApiextensionsV1Api, KubeConfig } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import { KubernetesCapiDiscovery, type CapiApi } from '#shared/adapters/kubernetes/capi-discovery.ts';
import { KubernetesMachineStore } from '#shared/adapters/kubernetes/machine-store.ts';
import { kubernetesWatchSources } from '#shared/adapters/kubernetes/watch-sources.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import type { MachineFacts } from '#shared/model/views.ts';
import type { CapiApiVersion } from '#shared/domain/capi-api.ts';
import { UnsupportedClusterApiError } from '#shared/errors.ts';
import { createMachine, createNamespace, describeWithControlPlane, MERGE_PATCH, waitFor } from '#test/support/control-plane.ts';

/** Sets which versions of the Machine and Cluster CRDs are served, then waits until discovery shows it. */
async function serve(kc: KubeConfig, versions: Record<CapiApiVersion, boolean>): Promise<void> {
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  for (const plural of ['machines', 'clusters']) {
    const crd = await ext.readCustomResourceDefinition({ name: `${plural}.cluster.x-k8s.io` });
    for (const v of crd.spec.versions) if (v.name in versions) v.served = versions[v.name as CapiApiVersion];
    await ext.replaceCustomResourceDefinition({ name: crd.metadata?.name ?? '', body: crd });
  }
  const { CustomObjectsApi } = await import('@kubernetes/client-node');
  const custom = kc.makeApiClient(CustomObjectsApi);
  for (const [version, served] of Object.entries(versions)) {
    await waitFor(
      async () => {
        const names = await custom.getAPIResources({ group: 'cluster.x-k8s.io', version }).then(
          (l) => l.resources.map((r) => r.name),
          () => [] as string[],
        );
        return served === (names.includes('machines') && names.includes('clusters'));
      },
      { timeoutMs: 20_000, description: `cluster.x-k8s.io/${version} served=${String(served)}` },
    );
  }
}

describeWithControlPlane('Class: KubernetesCapiDiscovery, with KubernetesMachineStore', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let ns: string;
  const chosen: CapiApiVersion[] = [];
  const unsupported: string[] = [];
  let discovery: KubernetesCapiDiscovery;
  let versionCalls = 0;
  let store: KubernetesMachineStore;

  beforeAll(async () => {
    cp = await startControlPlane({ build: false, log: () => undefined });
    kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    ns = await createNamespace(kc, 'discovery');
    await createMachine(kc, ns, 'm1', { nodeName: 'n1' });
    discovery = new KubernetesCapiDiscovery(kc, { onChosen: (v) => chosen.push(v), onUnsupported: (e) => unsupported.push(e.message) });
    const counted: CapiApi = {
      version: () => {
        versionCalls++;
        return discovery.version();
      },
      notServed: (v) => discovery.notServed(v),
    };
    store = new KubernetesMachineStore(kc, counted);
  }, 60_000);

  afterAll(async () => {
    await cp?.stop();
  });

  it('chooses v1beta2 when both are served, and a missing Machine is just missing (no new discovery)', async () => {
    // Act
    const machine = await store.getMachine(ns, 'm1');
    const missing = await store.getMachine(ns, 'no-such-machine');

    // Assess
    expect(machine).toMatchObject({ apiVersion: 'cluster.x-k8s.io/v1beta2', name: 'm1', nodeName: 'n1' });
    expect(missing).toBeUndefined();
    expect(chosen).toEqual(['v1beta2']);
    expect(versionCalls).toBe(2);
  });

  it('follows a version that stops being served: discovers again and reads the same Machine as v1beta1', async () => {
    // Prepare: the store has discovered v1beta2 already (previous test); now only v1beta1 is served.
    await serve(kc, { v1beta2: false, v1beta1: true });

    // Act
    const machine = await store.getMachine(ns, 'm1');
    const byNode = await store.findMachineByNodeName(ns, undefined, 'n1');

    // Assess
    expect(machine).toMatchObject({ apiVersion: 'cluster.x-k8s.io/v1beta1', name: 'm1', nodeName: 'n1' });
    expect(byNode).toMatchObject({ apiVersion: 'cluster.x-k8s.io/v1beta1', name: 'm1' });
    expect(chosen).toEqual(['v1beta2', 'v1beta1']);
  });

  it('serving neither gives one clear, retryable error quoting what is served; once served again it works without a restart', async () => {
    // Prepare
    await serve(kc, { v1beta2: false, v1beta1: false });

    // Act
    const failure = await store.getMachine(ns, 'm1').catch((e: unknown) => e);

    // Assess
    expect(failure).toBeInstanceOf(UnsupportedClusterApiError);
    expect((failure as UnsupportedClusterApiError).retryable).toBe(true);
    expect((failure as Error).message).toBe(
      'Unsupported Cluster API on the management cluster: cluster.x-k8s.io/v1beta2 is served without machines, clusters (a Cluster API CRD is missing); ' +
        'cluster.x-k8s.io/v1beta1 is served without machines, clusters (a Cluster API CRD is missing); the product needs machines and clusters in cluster.x-k8s.io/v1beta2 or cluster.x-k8s.io/v1beta1',
    );
    expect(unsupported).toEqual([(failure as Error).message]);

    // Act: Cluster API is back (upgraded): the failure was not remembered.
    await serve(kc, { v1beta2: true, v1beta1: true });
    const machine = await store.getMachine(ns, 'm1');

    // Assess
    expect(machine).toMatchObject({ apiVersion: 'cluster.x-k8s.io/v1beta2', name: 'm1' });
    expect(chosen).toEqual(['v1beta2', 'v1beta1', 'v1beta2']);
  });

  it("the forwarder's Machine watch follows a version that stops being served, without a restart", async () => {
    // Prepare: both served (as the previous test left it); a watch in v1beta2. A watch already open keeps delivering
    // after the version stops being served (same storage); the next (re)connect gets 404 and discovers again. A 1 s
    // server-side watch timeout makes that reconnect come soon.
    const watchChosen: CapiApiVersion[] = [];
    const capi = new KubernetesCapiDiscovery(kc, { onChosen: (v) => watchChosen.push(v) });
    const sources = kubernetesWatchSources({ managementKubeConfig: kc, workloadKubeConfigs: workloadKubeConfigs(kc), capi, machineNamespace: ns, backoff: { initialMs: 50, maxMs: 200 }, watchTimeoutSeconds: 1 });
    const seen: MachineFacts[] = [];
    const abort = new AbortController();
    const running = sources.machines({}).run(abort.signal, async (e) => {
      if (e.type === 'change') seen.push(e.facts);
    });
    try {
      await waitFor(() => seen.some((f) => f.name === 'm1'), { timeoutMs: 20_000, description: 'the first list' });

      // Act: only v1beta1 is served from now on; then the Machine changes (written through v1beta1).
      await serve(kc, { v1beta2: false, v1beta1: true });
      await waitFor(() => watchChosen.length === 2, { timeoutMs: 20_000, description: 'the watch to reconnect and discover again' });
      const { CustomObjectsApi } = await import('@kubernetes/client-node');
      await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
        { group: 'cluster.x-k8s.io', version: 'v1beta1', plural: 'machines', namespace: ns, name: 'm1', body: { metadata: { annotations: { 'taints.capi-taint-propagator.dev/machine': 'after=1:NoSchedule' } } } },
        MERGE_PATCH,
      );

      // Assess: the change arrives, through a watch in the re-discovered version.
      await waitFor(() => seen.some((f) => f.name === 'm1' && f.annotations['taints.capi-taint-propagator.dev/machine'] === 'after=1:NoSchedule'), {
        timeoutMs: 30_000,
        description: 'the change made after v1beta2 stopped being served',
      });
      expect(watchChosen).toEqual(['v1beta2', 'v1beta1']);
    } finally {
      abort.abort();
      await running;
      await serve(kc, { v1beta2: true, v1beta1: true });
    }
  });
});
