/**
 * The forwarder against an API server that stops answering (a fault-injecting proxy that holds every
 * connection open and silent): no call may hang. The Lease calls end within the lease duration and the
 * watch connects within their deadline, so the forwarder keeps retrying, stops when told, and forwards
 * what changed once the API server answers again.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { adminKubeConfig, createNamespace, createNode, describeWithControlPlane, requireControlPlane, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { FaultProxy } from '#test/support/fault-proxy.ts';
import { acceptAllSends, sentMessages, startForwarder, type RunningForwarder } from './support.ts';

describeWithControlPlane('Watch-forwarder with an API server that hangs', () => {
  let kc: KubeConfig;
  let proxy: FaultProxy | undefined;
  let running: RunningForwarder | undefined;

  beforeAll(() => {
    kc = adminKubeConfig();
  });

  afterEach(async () => {
    proxy?.restore();
    await running?.stop();
    running = undefined;
    await proxy?.close();
    proxy = undefined;
  });

  async function setup(): Promise<{ ns: string; selector: string; label: Record<string, string>; lease: string }> {
    acceptAllSends();
    proxy = await FaultProxy.start(requireControlPlane().server);
    const ns = await createNamespace(kc, 'fwd-hang');
    const value = uniqueName('sel');
    return { ns, selector: `fwd-test=${value}`, label: { 'fwd-test': value }, lease: uniqueName('lease') };
  }

  it('gives up each Lease call within the lease duration, so a forwarder that cannot reach the API server still stops when told', async () => {
    // Prepare
    const s = await setup();
    proxy!.hang();
    running = startForwarder(proxy!.kubeConfig(kc), { clusterMode: 'self', stateNamespace: s.ns, leaseName: s.lease, machineNamespace: s.ns, nodeLabelSelector: s.selector, leaseDurationSeconds: 4 });
    await new Promise((r) => setTimeout(r, 1_000));

    // Act
    const stopping = Date.now();
    const summary = await running.stop();
    running = undefined;

    // Assess: the Lease read in flight ends at its deadline (0.6 × 4 s at most), not when the API server comes back.
    expect(summary.active).toBe(false);
    expect(Date.now() - stopping).toBeLessThan(4_000);
  });

  it('retries watch connects that get no answer within their deadline, and forwards the change made meanwhile once the API server answers', async () => {
    // Prepare
    const s = await setup();
    running = startForwarder(
      proxy!.kubeConfig(kc),
      { clusterMode: 'self', stateNamespace: s.ns, leaseName: s.lease, machineNamespace: s.ns, nodeLabelSelector: s.selector, leaseDurationSeconds: 30, watchIdleSeconds: 120 },
      // The server ends each watch after 1-2 s, so reconnects happen during the hang; the idle watchdog (120 s) never fires here.
      { requestTimeoutMs: 1_000, watchTimeoutSeconds: 1 },
    );
    const fwd = running;
    await waitFor(() => fwd.forwarder.checkpoint()['nodes/self'] !== undefined && fwd.forwarder.checkpoint()['machines'] !== undefined, { timeoutMs: 15_000 });
    const restartsBefore = fwd.telemetry.counts()[ForwarderMetric.WatchRestarts];

    // Act: the API server hangs; a Node joins meanwhile (directly, not through the proxy). The watches in flight are
    // cut first: their connections are kept alive, so when the server ends a watch behind the silent proxy neither the
    // end nor a close reaches the forwarder, and they would wait for the idle watchdog (120 s), not what is tested here.
    proxy!.outage();
    proxy!.hang();
    const node = uniqueName('node');
    await createNode(kc, node, { labels: s.label });
    // Each stream: one restart for its cut watch (at most), then one per connect that gets no answer within 1 s (plus
    // its backoff): at least four of those.
    await waitFor(() => fwd.telemetry.counts()[ForwarderMetric.WatchRestarts] >= restartsBefore + 2 + 4, { timeoutMs: 20_000, description: 'repeated watch restarts while the API server hangs' });
    proxy!.restore();

    // Assess
    await waitFor(() => sentMessages().some((m) => m.event.subject === `nodes/${node}`), { timeoutMs: 30_000, description: 'the new Node to be forwarded' });
    expect(fwd.forwarder.isActive()).toBe(true);
    await kc.makeApiClient(CoreV1Api).deleteNode({ name: node });
  });
});
