/**
 * `npm start`'s pipeline (local/pipeline.ts: forwarder, queue, reconcile function) in capi mode with every API server
 * reachable only through a proxy: the operator's kubeconfig names `proxy-url`, and so does the workload cluster's
 * `<cluster>-kubeconfig` Secret, each its own CONNECT proxy (test/support/connect-proxy.ts). Both name the API server
 * `api.only-via-proxy.test`, which only the proxies resolve (to the loopback test API server); TLS verifies against
 * the kubeconfig's CA through `tls-server-name: localhost`. A Machine's taints reach its Node, and a Node-side change is
 * repaired through the workload watch: every part of the pipeline went through its proxy.
 */
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { startConnectProxy, type ConnectProxy } from '#test/support/connect-proxy.ts';
import { MERGE_PATCH, adminKubeConfig, createClusterWithKubeconfig, createMachine, describeWithControlPlane, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { expectNode, joinNode, startWorld, type World } from './support.ts';

const HIDDEN = 'api.only-via-proxy.test';
const PASSWORD = `proxy-password-${Date.now()}`;
const FOREIGN = { key: 'foreign.example.com/kubelet', value: 'x', effect: 'NoExecute' };
const FOREIGN_S = 'foreign.example.com/kubelet=x:NoExecute';

describeWithControlPlane('npm start with API servers reachable only through proxies', () => {
  let management: ConnectProxy;
  let workload: ConnectProxy;
  let world: World | undefined;
  const admin = (): KubeConfig => adminKubeConfig();

  beforeAll(async () => {
    management = await startConnectProxy({ hosts: { [HIDDEN]: '127.0.0.1' }, credentials: { user: 'ops', password: PASSWORD } });
    workload = await startConnectProxy({ hosts: { [HIDDEN]: '127.0.0.1' }, credentials: { user: 'wc', password: PASSWORD } });
  });

  afterEach(async () => {
    await world?.pipeline.stop();
    world = undefined;
  });

  afterAll(async () => {
    await management?.close();
    await workload?.close();
  });

  it("converges a workload cluster's Node with the operator's kubeconfig and the cluster's Secret each naming a proxy-url", async () => {
    // Prepare: the operator's kubeconfig (client-node, as `npm start` loads KUBECONFIG) names the hidden server and a proxy.
    const kc = admin();
    const cluster = kc.getCurrentCluster();
    const user = kc.getCurrentUser();
    if (!cluster?.caData || !user?.certData || !user.keyData) throw new Error('the admin kubeconfig has no inline CA, certificate or key');
    const server = `https://${HIDDEN}:${new URL(cluster.server).port}`;
    const operator = new KubeConfig();
    operator.loadFromOptions({
      clusters: [{ name: 'mgmt', server, caData: cluster.caData, tlsServerName: 'localhost', proxyUrl: management.url.replace('http://', `http://ops:${PASSWORD}@`), skipTLSVerify: false }],
      users: [{ name: 'admin', certData: user.certData, keyData: user.keyData }],
      contexts: [{ name: 'mgmt', cluster: 'mgmt', user: 'admin' }],
      currentContext: 'mgmt',
    });
    world = await startWorld(operator, { mode: 'capi' });
    const managementTunnels = management.tunnels();
    const wc = uniqueName('wc');
    await createClusterWithKubeconfig(kc, world.ns, wc, JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server, 'certificate-authority-data': cluster.caData, 'tls-server-name': 'localhost', 'proxy-url': workload.url.replace('http://', `http://wc:${PASSWORD}@`) } }],
      users: [{ name: 'u', user: { 'client-certificate-data': user.certData, 'client-key-data': user.keyData } }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }));
    const node = await joinNode(world, 'proxied', [FOREIGN]);

    // Act
    await createMachine(kc, world.ns, uniqueName('m'), { clusterName: wc, specTaints: [{ key: 'role', value: 'db', effect: 'NoSchedule' }], nodeName: node });

    // Assess: converged, and repaired after a Node-side change seen through the workload cluster's watch.
    await expectNode(kc, node, { taints: [FOREIGN_S, 'role=db:NoSchedule'], tracking: 'role:NoSchedule' });
    await kc.makeApiClient(CoreV1Api).patchNode({ name: node, body: { spec: { taints: [FOREIGN] } } }, MERGE_PATCH);
    await expectNode(kc, node, { taints: [FOREIGN_S, 'role=db:NoSchedule'], tracking: 'role:NoSchedule' });
    expect(managementTunnels).toBeGreaterThanOrEqual(1);
    expect(workload.tunnels()).toBeGreaterThanOrEqual(1);
    expect([...management.targets, ...workload.targets].every((t) => t === new URL(server).host)).toBe(true);
    // The pipeline counts a write when the record's reconcile returns, a moment after the API server shows it.
    const w = world;
    await waitFor(() => w.pipeline.counters().writes >= 2, { timeoutMs: 10_000, description: 'the pipeline counted both writes' });
  });
});
