/**
 * Fleets: five workload clusters, each with an API server (and certificate authority) of its own, made by the local
 * provider the way a real provider does (Nodes registered there, the Cluster's `<name>-kubeconfig` Secret written for
 * it), Cluster API's manager in the loop, the product in `capi` mode reading every cluster through its Secret. Then the
 * faults fleets live with: one cluster's API server down for 30 s, another's credential rotated and the old one
 * revoked, one hanging (connections accepted, never answered) through a forwarder window of the Lambda form, while
 * every other cluster keeps converging; nothing is lost.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import type { WorkloadApiServer } from '#local/control-plane/workload-servers.ts';
import type { Pipeline } from '#local/pipeline.ts';
import { OWN_TRACKING_ANNOTATION, STARTUP_GATE_TAINT_KEY } from '#shared/domain/taint.ts';
import { createNamespace, MERGE_PATCH, statusOf, waitFor } from '#test/support/control-plane.ts';
import { MACHINE_DEPLOYMENTS, createMachineDeployment, createSelfHostedCluster, describeWithCapi, startProductPipeline, taintText, waitForMachineNodes } from '#test/support/capi.ts';

const CLUSTERS = 5;
const OUTAGE_MS = 30_000;
/** A forwarder window of the Lambda form (the scheduled handler's `watchWindowSeconds`, shortened). */
const WINDOW_MS = 10_000;
/** What the scheduled handler keeps back from the Lambda timeout for draining and handing over (handler.ts). */
const HAND_OVER_RESERVE_MS = 15_000;
const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const MACHINE = 'taints.capi-taint-propagator.dev/machine';

interface Member {
  readonly cluster: string;
  readonly server: WorkloadApiServer;
  /** Admin of the workload API server (the test's own view of its Nodes). */
  readonly kc: KubeConfig;
  md: string;
  node: string;
}

describeWithCapi('Fleets: workload clusters with API servers of their own', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let ns: string;
  let pipeline: Pipeline;
  const members: Member[] = [];

  beforeAll(async () => {
    cp = await startControlPlane({ build: false, log: () => undefined, handleSignals: false, capi: { workloadClusters: CLUSTERS } });
    kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    ns = await createNamespace(kc, 'fleet');
    for (let i = 0; i < CLUSTERS; i++) {
      const cluster = await createSelfHostedCluster(kc, ns);
      const server = cp.capi?.workloadServerOf({ namespace: ns, name: cluster });
      if (!server) throw new Error(`Cluster ${cluster} got no workload API server`);
      const wkc = new KubeConfig();
      wkc.loadFromFile(server.adminKubeconfigPath);
      members.push({ cluster, server, kc: wkc, md: '', node: '' });
    }
    // A call deadline below the local event source's function timeout (the queue's visibility timeout, 5 s), as in AWS.
    // The forwarder's list and watch-connect deadline shortened too, so a hung cluster is reported within a short window.
    pipeline = await startProductPipeline(kc, ns, { mode: 'capi', retryMaxSeconds: 2, apiTimeoutSeconds: 3, watchRequestTimeoutMs: 4_000 });
  }, 240_000);

  afterAll(async () => {
    await pipeline?.stop();
    await cp?.stop();
  });

  const converge = async (m: Member, want: string[], timeoutMs = 60_000): Promise<void> => {
    const core = m.kc.makeApiClient(CoreV1Api);
    await waitFor(
      async () => {
        const n = await core.readNode({ name: m.node }).catch(() => undefined);
        const taints = (n?.spec?.taints ?? []).map(taintText).sort();
        const tracking = want.map((t) => `${t.split('=')[0]}:${t.split(':').pop()}`).sort().join(',');
        return JSON.stringify(taints) === JSON.stringify([...want].sort()) && n?.metadata?.annotations?.[OWN_TRACKING_ANNOTATION] === tracking;
      },
      { timeoutMs, intervalMs: 200, description: `Node ${m.node} of ${m.cluster} (${m.server.name}) to carry ${want.join(', ')}` },
    );
  };
  const declare = (m: Member, value: string) =>
    kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: m.md, body: { spec: { template: { metadata: { annotations: { [MACHINE]: value } } } } } }, MERGE_PATCH);

  it('gives every Cluster its own API server and CA, and its declarations land on Nodes that exist only there', async () => {
    // Prepare
    expect(new Set(members.map((m) => m.server.server)).size).toBe(CLUSTERS);
    expect(new Set(members.map((m) => m.server.caCertPath)).size).toBe(CLUSTERS);

    // Act
    for (const [i, m] of members.entries()) m.md = await createMachineDeployment(kc, ns, { cluster: m.cluster, replicas: 1, startupTaints: [GATE], annotations: { [MACHINE]: `fleet=${i}:NoSchedule` } });
    for (const m of members) m.node = (await waitForMachineNodes(kc, ns, m.md, 1, 90_000, 'v1beta2', m.kc))[0]?.node.metadata?.name ?? '';

    // Assess
    for (const [i, m] of members.entries()) await converge(m, [`fleet=${i}:NoSchedule`]);
    const management = kc.makeApiClient(CoreV1Api);
    for (const m of members) expect(statusOf(await management.readNode({ name: m.node }).catch((e: unknown) => e))).toBe(404);
  });

  it('keeps converging the others while one API server is down for 30 s and another credential is rotated (the old one revoked); the stopped one catches up, nothing is lost', async () => {
    // Prepare
    const [down, rotated, ...others] = members as [Member, Member, ...Member[]];
    const stoppedAt = Date.now();
    await down.server.stop();

    // Act: rotate a credential, then edit every cluster's declaration.
    const core = kc.makeApiClient(CoreV1Api);
    const fresh = await rotated.server.mintAdmin('capi-admin-rotated');
    await core.patchNamespacedSecret({ namespace: ns, name: `${rotated.cluster}-kubeconfig`, body: { data: { value: Buffer.from(fresh).toString('base64') } } }, MERGE_PATCH);
    await rotated.server.revokeUser('capi-admin');
    for (const [i, m] of members.entries()) await declare(m, `fleet=${i}:NoSchedule, edited=${i}:NoExecute`);

    // Assess: the running clusters converge during the outage (the rotated one with its new credential), and the
    // forwarder reports the stopped one, and only it, as unreachable.
    for (const m of [rotated, ...others]) await converge(m, [`fleet=${members.indexOf(m)}:NoSchedule`, `edited=${members.indexOf(m)}:NoExecute`]);
    await waitFor(async () => pipeline.failingClusters().length > 0, { timeoutMs: 20_000, intervalMs: 200, description: 'the forwarder to report the stopped cluster' });
    expect(pipeline.failingClusters().map((f) => f.cluster)).toEqual([`${ns}/${down.cluster}`]);
    expect(Date.now() - stoppedAt).toBeLessThan(OUTAGE_MS);
    expect(down.server.running()).toBe(false);

    // Act: the outage ends after 30 s.
    await new Promise((r) => setTimeout(r, Math.max(0, OUTAGE_MS - (Date.now() - stoppedAt))));
    await down.server.start();

    // Assess: the stopped cluster catches up; nothing was dead-lettered.
    await converge(down, ['fleet=0:NoSchedule', 'edited=0:NoExecute'], 90_000);
    await waitFor(async () => pipeline.failingClusters().length === 0, { timeoutMs: 60_000, intervalMs: 200, description: 'the forwarder to see the stopped cluster recover' });
    const c = await pipeline.freshCounters();
    expect(c.deadLetterQueueDepth, JSON.stringify(c)).toBe(0);
    expect(c.transientErrors).toBeGreaterThan(0);
  });

  it("follows the rotated credential in the forwarder too: after its cluster's API server restarts, the Node watch reconnects with the new Secret and a foreign removal of a tracked taint is put back", async () => {
    // Prepare: the second cluster's Secret was rotated and its old credential revoked (previous test). A restart of
    // its API server drops every connection, so the Node watch must connect again, with what the Secret holds now.
    const rotated = members[1] as Member;
    await rotated.server.stop();
    await rotated.server.start();
    const core = rotated.kc.makeApiClient(CoreV1Api);

    // Act: someone removes the tracked Always taint from the Node (only a Node event can bring it back).
    const node = await core.readNode({ name: rotated.node });
    const kept = (node.spec?.taints ?? []).filter((t) => t.key !== 'fleet');
    await core.patchNode({ name: rotated.node, body: { spec: { taints: kept } } }, MERGE_PATCH);

    // Assess: put back, through the reconnected watch.
    await converge(rotated, ['fleet=1:NoSchedule', 'edited=1:NoExecute']);
    const events = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns, fieldSelector: 'reason=TaintRestored' });
    expect(events.items.map((e) => e.message ?? '').join('\n')).toContain(`Node ${rotated.node}: put back fleet=1:NoSchedule`);
  });

  it('costs the others nothing when an API server hangs (connections accepted, never answered): a forwarder window of the Lambda form forwards the other clusters\' Node changes and hands over in time, the reconcile function times out on the hung cluster only, and the hung cluster catches up once it answers', async () => {
    // Prepare: the Lambda form (one window at a time instead of the long-running forwarder); the third cluster hangs.
    const hung = members[2] as Member;
    const others = members.filter((m) => m !== hung);
    const want = (m: Member): string[] => [`fleet=${members.indexOf(m)}:NoSchedule`, `edited=${members.indexOf(m)}:NoExecute`];
    await pipeline.stopForwarder();
    const before = await pipeline.freshCounters();
    hung.server.pause();
    try {
      // Act: a foreign writer removes the tracked Always taint from every other cluster's Node (only a Node event of
      // that cluster's own watch brings it back), the hung cluster's declaration is edited, then one window runs.
      for (const m of others) {
        const core = m.kc.makeApiClient(CoreV1Api);
        const node = await core.readNode({ name: m.node });
        await core.patchNode({ name: m.node, body: { spec: { taints: (node.spec?.taints ?? []).filter((t) => t.key !== 'fleet') } } }, MERGE_PATCH);
      }
      await declare(hung, 'fleet=2:NoSchedule, edited=2:NoExecute, hung=2:NoSchedule');
      const windowStarted = Date.now();
      const summary = await pipeline.runForwarderWindow(WINDOW_MS);
      const windowMs = Date.now() - windowStarted;

      // Assess: the window handed over within the reserve the handler keeps (a hung watch does not hold it), sent
      // everything, and every other cluster's change was forwarded by it (no other forwarder ran).
      expect(summary).toMatchObject({ active: true, unsent: 0 });
      expect(windowMs).toBeLessThan(WINDOW_MS + HAND_OVER_RESERVE_MS);
      // It reported the hung cluster (its watch missed the connect deadline), and only it.
      expect(summary.failingClusters.map((f) => f.cluster)).toEqual([`${ns}/${hung.cluster}`]);
      expect(summary.failingClusters[0]?.reason).toMatch(/within 4000 ms/);
      for (const m of others) await converge(m, want(m));
      // The hung cluster's records met the call deadline (transient, retried through the queue) and still wait.
      await waitFor(async () => (await pipeline.freshCounters()).transientErrors > before.transientErrors, { timeoutMs: 30_000, intervalMs: 200, description: 'a call to the hung cluster to time out' });
      expect(hung.server.running()).toBe(true);
    } finally {
      hung.server.resume();
    }

    // Act: it answers again; the next window runs.
    const next = pipeline.runForwarderWindow(WINDOW_MS);

    // Assess: the hung cluster catches up; nothing was dead-lettered.
    await converge(hung, ['fleet=2:NoSchedule', 'edited=2:NoExecute', 'hung=2:NoSchedule'], 90_000);
    expect(await next).toMatchObject({ active: true, unsent: 0, failingClusters: [] });
    const c = await pipeline.freshCounters();
    expect(c.deadLetterQueueDepth, JSON.stringify(c)).toBe(0);
  });
});
