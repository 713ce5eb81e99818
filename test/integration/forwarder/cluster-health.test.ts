/**
 * Per-cluster reachability from the real watch session: a workload cluster with a kube-apiserver of its own (the local
 * control plane's workload server, sharing its etcd) is stopped while the forwarder watches it and a second, healthy
 * cluster. The stopped cluster enters the forwarder's failing set (logged once, with a reason that names no secret,
 * counted in UnreachableClusters) while the other cluster's changes keep being forwarded; once it is started again
 * its stream recovers, it leaves the set, and a change made there is forwarded.
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { resolveBinaries } from '#local/control-plane/assets.ts';
import { startWorkloadApiServer, type WorkloadApiServer } from '#local/control-plane/workload-servers.ts';
import type { Child } from '#local/control-plane/children.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { adminKubeConfig, createClusterWithKubeconfig, createNamespace, createNode, describeWithControlPlane, requireControlPlane, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { acceptAllSends, sentMessages, startForwarder } from './support.ts';

describeWithControlPlane('Watch-forwarder: a workload cluster whose API server stops', () => {
  let workload: WorkloadApiServer | undefined;
  const children: Child[] = [];

  beforeAll(async () => {
    const cp = requireControlPlane();
    const binaries = await resolveBinaries({ build: false, log: () => undefined });
    if (!binaries.available) throw new Error(binaries.reason);
    workload = await startWorkloadApiServer({ name: uniqueName('wc'), dir: cp.dir, kubeApiserver: binaries.value.kubeApiserver, etcdEndpoint: cp.etcdEndpoint, children, timeoutMs: 60_000 });
  });

  afterAll(async () => {
    await workload?.stop();
  });

  it('reports the stopped cluster once as failing, keeps forwarding the other cluster, and reports it recovered once it answers again', async () => {
    // Prepare: two Clusters, `down` on the workload API server and `up` on the management API server.
    const wc = workload as WorkloadApiServer;
    const admin = adminKubeConfig();
    const workloadAdmin = new KubeConfig();
    workloadAdmin.loadFromFile(wc.adminKubeconfigPath);
    acceptAllSends();
    const ns = await createNamespace(admin, 'health');
    const label = uniqueName('l');
    const clusters: Record<string, string> = { down: wc.kubeconfigYaml, up: readFileSync(requireControlPlane().kubeconfigPath, 'utf8') };
    for (const [name, kubeconfig] of Object.entries(clusters)) await createClusterWithKubeconfig(admin, ns, name, kubeconfig);
    const logged: { level: string; message: string; attrs: Record<string, unknown> }[] = [];
    const keep = (level: string) => (message: string, attrs: Record<string, unknown> = {}) => void logged.push({ level, message, attrs });
    const fwd = startForwarder(
      admin,
      { clusterMode: 'capi', machineNamespace: ns, stateNamespace: ns, leaseName: uniqueName('lease'), nodeLabelSelector: `health-test=${label}` },
      { requestTimeoutMs: 3_000, watchBackoff: { initialMs: 100, maxMs: 1_000 }, logger: { info: keep('info'), warn: keep('warn'), error: keep('error'), debug: keep('debug') } as never, options: { healthSampleIntervalMs: 200 } },
    );
    const forwardedFrom = (node: string) => sentMessages().find((m) => m.event.subject === `nodes/${node}`)?.event.source;
    const transitions = () => logged.filter((l) => /^Workload cluster/.test(l.message)).map((l) => `${l.message} ${String(l.attrs['cluster'])}`);

    try {
      await waitFor(() => [`nodes/${ns}/down`, `nodes/${ns}/up`].every((k) => fwd.forwarder.checkpoint()[k] !== undefined), { timeoutMs: 20_000, description: 'both Node streams listed' });
      expect(fwd.forwarder.failingClusters()).toEqual([]);

      // Act 1: the workload API server goes away; the other cluster changes meanwhile.
      await wc.stop();
      const failing = await waitFor(() => fwd.forwarder.failingClusters()[0], { timeoutMs: 20_000, description: 'the stopped cluster reported failing' });
      const healthyNode = uniqueName('node');
      await createNode(admin, healthyNode, { labels: { 'health-test': label } });
      await waitFor(() => forwardedFrom(healthyNode), { timeoutMs: 20_000, description: "the healthy cluster's Node forwarded" });
      await waitFor(() => fwd.telemetry.counts()[ForwarderMetric.UnreachableClusters] === 1, { timeoutMs: 5_000, description: 'UnreachableClusters sampled as 1' });

      // Act 2: it comes back, and a Node is created there.
      await wc.start();
      const recoveredNode = uniqueName('node');
      await createNode(workloadAdmin, recoveredNode, { labels: { 'health-test': label } });
      await waitFor(() => forwardedFrom(recoveredNode), { timeoutMs: 40_000, description: "the recovered cluster's Node forwarded" });
      await waitFor(() => fwd.telemetry.counts()[ForwarderMetric.UnreachableClusters] === 0, { timeoutMs: 5_000, description: 'UnreachableClusters sampled as 0' });

      // Assess
      expect(failing).toMatchObject({ cluster: `${ns}/down` });
      // Said with the operation (the connection reset or refused as the API server stops, e.g. `ECONNRESET: aborted`).
      expect(failing.reason).toMatch(/^(listing|watching) \/api\/v1\/nodes failed: /);
      // No credential: none of the kubeconfig's base64 blobs (certificate, key), no PEM.
      for (const blob of [...(wc.kubeconfigYaml.match(/[A-Za-z0-9+/=]{40,}/g) ?? []), 'BEGIN']) expect(failing.reason).not.toContain(blob);
      expect(forwardedFrom(healthyNode)).toBe(`/clusters/${ns}/up`);
      expect(forwardedFrom(recoveredNode)).toBe(`/clusters/${ns}/down`);
      expect(fwd.forwarder.failingClusters()).toEqual([]);
      expect(transitions()).toEqual([
        `Workload cluster unreachable: its Node watch is failing and retried with backoff ${ns}/down`,
        `Workload cluster reachable again: its Node watch recovered ${ns}/down`,
      ]);
      const warned = logged.find((l) => l.message.startsWith('Workload cluster unreachable'));
      expect(warned?.attrs).toMatchObject({ cluster: `${ns}/down`, reason: failing.reason, since: failing.since.toISOString(), failingClusters: 1 });
    } finally {
      await fwd.stop();
    }
  });
});
