/**
 * A workload cluster whose API server misbehaves, next to a healthy one, through the product's own paths: the
 * forwarder (capi mode, the cluster's kubeconfig Secret naming a loopback `node:https` server with a CA of the test's
 * own) and the status CLI's Node lists. The management cluster and the healthy workload cluster are the real
 * kube-apiserver; only the misbehaving one is a loopback server, because kube-apiserver cannot be made to end every
 * watch at once or send a list whose pages never end.
 *
 * - The forwarder backs off (at most one request a second after the first 5 s), reports the cluster failing once
 *   (its log line, `failingClusters`, `UnreachableClusters`), keeps forwarding the healthy cluster, and reports it
 *   recovered once it behaves.
 * - The status CLI names it unreachable, with a reason that names the cap, when its Node list never ends; a read costs
 *   it at most STATUS_NODE_LIST_MAX_PAGES requests, and none while the forwarder reports it failing (issue 48). A Node
 *   list whose Node has a `spec.taints` that is no list is no answer either: unreachable, with that reason.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createServerPki } from '#local/control-plane/pki.ts';
import { ClusterBackoff, STATUS_BACKOFF_POLICY } from '#local/cluster-backoff.ts';
import { STATUS_NODE_LIST_MAX_PAGES, readTaintStatuses } from '#local/cluster-status.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import { adminKubeConfig, createClusterWithKubeconfig, createMachine, createNamespace, createNode, describeWithControlPlane, requireControlPlane, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { manualClock } from '#test/support/manual-clock.ts';
import { acceptAllSends, sentMessages, startForwarder } from './support.ts';

type Mode = 'watch-ends' | 'endless-pages' | 'bad-taints' | 'good';

describeWithControlPlane('A workload cluster whose API server misbehaves', () => {
  let dir: string;
  let server: https.Server;
  let mode: Mode = 'good';
  let pages = 0;
  const requests: Array<{ at: number; watch: boolean; mode: Mode }> = [];
  let kubeconfig: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'hostile-'));
    const { ca, serving } = await createServerPki(dir);
    server = https.createServer({ cert: await readFile(serving.certPath), key: await readFile(serving.keyPath) }, (req, res) => {
      const watch = new URL(req.url ?? '/', 'https://x').searchParams.get('watch') === '1';
      requests.push({ at: Date.now(), watch, mode });
      if (!watch) {
        const more = mode === 'endless-pages' ? { continue: `more-${pages++}` } : {};
        // kube-apiserver validates taints; only a broken or hostile server lists a Node whose spec.taints is no list.
        const items = mode === 'bad-taints' ? [{ metadata: { name: 'n1', uid: 'u1', resourceVersion: '7' }, spec: { taints: 'NoSchedule' } }] : [];
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: '100', ...more }, items }));
        return;
      }
      if (mode !== 'good') {
        res.writeHead(200).end();
        return;
      }
      res.writeHead(200).write(`${JSON.stringify({ type: 'BOOKMARK', object: { kind: 'Node', apiVersion: 'v1', metadata: { resourceVersion: '101' } } })}\n`);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const caData = (await readFile(ca.certPath)).toString('base64');
    kubeconfig = [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: hostile\n  cluster:\n    server: https://127.0.0.1:${port}\n    certificate-authority-data: ${caData}`,
      'users:',
      '- name: hostile\n  user:\n    token: hostile-token',
      'contexts:',
      '- name: hostile\n  context:\n    cluster: hostile\n    user: hostile',
      'current-context: hostile',
      '',
    ].join('\n');
  });

  afterAll(async () => {
    server?.closeAllConnections();
    await new Promise((resolve) => server?.close(resolve));
    await rm(dir, { recursive: true, force: true });
  });

  it(
    'the forwarder backs off, reports it failing once, keeps forwarding the healthy cluster, and reports it recovered once it behaves',
    async () => {
      // Prepare: `hostile` ends every watch at once; `up` is the real API server.
      mode = 'watch-ends';
      const admin = adminKubeConfig();
      acceptAllSends();
      const ns = await createNamespace(admin, 'hostile');
      const label = uniqueName('l');
      await createClusterWithKubeconfig(admin, ns, 'hostile', kubeconfig);
      await createClusterWithKubeconfig(admin, ns, 'up', readFileSync(requireControlPlane().kubeconfigPath, 'utf8'));
      const logged: { message: string; attrs: Record<string, unknown> }[] = [];
      const keep = (message: string, attrs: Record<string, unknown> = {}) => void logged.push({ message, attrs });
      const fwd = startForwarder(
        admin,
        { clusterMode: 'capi', machineNamespace: ns, stateNamespace: ns, leaseName: uniqueName('lease'), nodeLabelSelector: `hostile-test=${label}` },
        { logger: { info: keep, warn: keep, error: keep, debug: keep } as never, options: { healthSampleIntervalMs: 200 } },
      );
      const transitions = () => logged.filter((l) => /^Workload cluster/.test(l.message)).map((l) => `${l.message} ${String(l.attrs['cluster'])}`);
      const since = Date.now();

      try {
        // Act 1: it misbehaves for 15 s after its first request; a Node joins the healthy cluster meanwhile.
        const first = await waitFor(() => requests.find((r) => r.at >= since), { timeoutMs: 20_000, description: 'the first request to the hostile cluster' });
        const failing = await waitFor(() => fwd.forwarder.failingClusters()[0], { timeoutMs: 10_000, description: 'the hostile cluster reported failing' });
        await waitFor(() => fwd.telemetry.counts()[ForwarderMetric.UnreachableClusters] === 1, { timeoutMs: 5_000, description: 'UnreachableClusters sampled as 1' });
        const healthyNode = uniqueName('node');
        await createNode(admin, healthyNode, { labels: { 'hostile-test': label } });
        await waitFor(() => sentMessages().some((m) => m.event.subject === `nodes/${healthyNode}`), { timeoutMs: 20_000, description: "the healthy cluster's Node forwarded" });
        await new Promise((r) => setTimeout(r, Math.max(0, first.at + 15_000 - Date.now())));
        const windowRequests = requests.filter((r) => r.at >= first.at + 5_000 && r.at < first.at + 15_000).length;

        // Act 2: it behaves.
        mode = 'good';
        await waitFor(() => fwd.forwarder.failingClusters().length === 0, { timeoutMs: 35_000, description: 'the hostile cluster recovered' });
        await waitFor(() => fwd.telemetry.counts()[ForwarderMetric.UnreachableClusters] === 0, { timeoutMs: 5_000, description: 'UnreachableClusters sampled as 0' });

        // Assess
        expect(windowRequests).toBeLessThanOrEqual(10);
        expect(failing).toMatchObject({ cluster: `${ns}/hostile` });
        expect(failing.reason).toMatch(/^very short watch: the server ended it after \d+ ms with no event$/);
        expect(transitions()).toEqual([
          `Workload cluster unreachable: its Node watch is failing and retried with backoff ${ns}/hostile`,
          `Workload cluster reachable again: its Node watch recovered ${ns}/hostile`,
        ]);
        expect(JSON.stringify(logged)).not.toContain('hostile-token');
      } finally {
        await fwd.stop();
      }
    },
    120_000,
  );

  it('the status CLI names it unreachable, with the cap it hit, when its Node list never ends', async () => {
    // Prepare: a Machine of the hostile cluster with a Node.
    mode = 'endless-pages';
    const admin = adminKubeConfig();
    const ns = await createNamespace(admin, 'hostile-status');
    await createClusterWithKubeconfig(admin, ns, 'hostile', kubeconfig);
    await createMachine(admin, ns, 'm1', { clusterName: 'hostile', nodeName: 'n1' });
    const before = requests.length;

    // Act
    const statuses = await readTaintStatuses({ kubeConfig: admin, mode: 'capi', machineNamespace: ns });

    // Assess
    expect(statuses).toHaveLength(1);
    expect(statuses[0]?.unreachableCluster).toEqual({ cluster: `${ns}/hostile`, reason: `listing /api/v1/nodes failed: the list has more than ${STATUS_NODE_LIST_MAX_PAGES} pages` });
    expect(requests.length - before).toBe(STATUS_NODE_LIST_MAX_PAGES);
  });

  it('the status CLI names it unreachable, never out of sync, when a listed Node has a spec.taints that is no list', async () => {
    // Prepare: a Machine of the hostile cluster; its Node list answers n1 with `spec.taints: "NoSchedule"`.
    mode = 'bad-taints';
    const admin = adminKubeConfig();
    const ns = await createNamespace(admin, 'hostile-taints');
    await createClusterWithKubeconfig(admin, ns, 'hostile', kubeconfig);
    await createMachine(admin, ns, 'm1', { clusterName: 'hostile', nodeName: 'n1' });

    // Act
    const statuses = await readTaintStatuses({ kubeConfig: admin, mode: 'capi', machineNamespace: ns, backoff: new ClusterBackoff(manualClock()) });

    // Assess: the read is no answer, as for the reconcile (node-store.ts), so nothing is reported as drifted.
    expect(statuses).toHaveLength(1);
    expect(statuses[0]?.unreachableCluster).toEqual({ cluster: `${ns}/hostile`, reason: 'a Node has a spec.taints that is not a list of taints' });
  });

  it("the status display does not call a cluster the forwarder reports failing, and shows the forwarder's reason", async () => {
    // Prepare: a Machine of the hostile cluster; the forwarder of the same process (npm start) sees its watch failing.
    mode = 'watch-ends';
    const admin = adminKubeConfig();
    const ns = await createNamespace(admin, 'hostile-known');
    await createClusterWithKubeconfig(admin, ns, 'hostile', kubeconfig);
    await createMachine(admin, ns, 'm1', { clusterName: 'hostile', nodeName: 'n1' });
    const reason = 'very short watch: the server ended it after 1 ms with no event';
    const before = requests.length;

    // Act
    const statuses = await readTaintStatuses({ kubeConfig: admin, mode: 'capi', machineNamespace: ns, backoff: new ClusterBackoff(manualClock()), knownFailing: (cluster) => (cluster === `${ns}/hostile` ? reason : undefined) });

    // Assess
    expect(requests.length - before).toBe(0);
    expect(statuses[0]?.unreachableCluster).toEqual({ cluster: `${ns}/hostile`, reason: `${reason} (the forwarder's Node watch is failing; not called)` });
  });

  it('the status display does not call it again until its backoff has passed, and shows its last failure meanwhile', async () => {
    // Prepare: a Machine of the hostile cluster whose Node list fails (its pages never end); the display's backoff on a manual clock.
    mode = 'endless-pages';
    const admin = adminKubeConfig();
    const ns = await createNamespace(admin, 'hostile-backoff');
    await createClusterWithKubeconfig(admin, ns, 'hostile', kubeconfig);
    await createMachine(admin, ns, 'm1', { clusterName: 'hostile', nodeName: 'n1' });
    const clock = manualClock();
    const backoff = new ClusterBackoff(clock, STATUS_BACKOFF_POLICY, () => 0);
    const read = () => readTaintStatuses({ kubeConfig: admin, mode: 'capi', machineNamespace: ns, backoff });
    const failure = `listing /api/v1/nodes failed: the list has more than ${STATUS_NODE_LIST_MAX_PAGES} pages`;
    await read();

    // Act: the display reads again at once, then the cluster behaves and the second has passed.
    const beforeHeld = requests.length;
    const [held] = await read();
    const requestsWhileHeld = requests.length - beforeHeld;
    mode = 'good';
    clock.advance(1_000);
    const beforeRetry = requests.length;
    const [retried] = await read();

    // Assess
    expect(requestsWhileHeld).toBe(0);
    expect(held?.unreachableCluster).toEqual({ cluster: `${ns}/hostile`, reason: `${failure} (unreachable, retry in 1 s)` });
    expect(requests.length - beforeRetry).toBe(1);
    expect(retried?.unreachableCluster).toBeUndefined();
    expect(retried?.state).toBe('node-missing');
  });
});
