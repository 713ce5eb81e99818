import { readFileSync } from 'node:fs';
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { KubernetesClusterConnections } from '#shared/adapters/kubernetes/cluster-connections.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { AccessDeniedError, ClusterCredentialsError } from '#shared/errors.ts';
import { adminKubeConfig, createNamespace, createNode, describeWithControlPlane, mintUser, uniqueName, waitForAccess } from '#test/support/control-plane.ts';

describeWithControlPlane('Class: KubernetesClusterConnections (credential rotation)', () => {
  it('drops a connection whose credential was revoked, so the next call reads the rotated Secret, without waiting for the cache to expire', async () => {
    // Prepare: a "workload cluster" reached through its kubeconfig Secret, as a user allowed to read Nodes.
    const admin = adminKubeConfig();
    const core = admin.makeApiClient(CoreV1Api);
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const ns = await createNamespace(admin, 'rotate');
    const cluster = uniqueName('wc');
    const node = uniqueName('node');
    await createNode(admin, node);
    const role = uniqueName('node-reader');
    await rbac.createClusterRole({ body: { metadata: { name: role }, rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get'] }] } });
    const readNodes = { resource: 'nodes', verb: 'get' };
    const userConfig = (kubeconfig: string): KubeConfig => {
      const kc = new KubeConfig();
      kc.loadFromString(kubeconfig);
      return kc;
    };
    const grant = async (user: string): Promise<string> => {
      const path = await mintUser(user);
      await rbac.createClusterRoleBinding({ body: { metadata: { name: user }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }] } });
      const kubeconfig = readFileSync(path, 'utf8');
      // The API server's authorizer learns of RBAC changes through its informers: wait until the grant is in force.
      await waitForAccess(userConfig(kubeconfig), readNodes, true);
      return kubeconfig;
    };
    const [oldUser, newUser] = [uniqueName('old'), uniqueName('new')];
    const secret = (kubeconfig: string) => ({ metadata: { name: `${cluster}-kubeconfig`, namespace: ns }, type: 'cluster.x-k8s.io/secret', data: { value: Buffer.from(kubeconfig).toString('base64') } });
    const oldKubeconfig = await grant(oldUser);
    await core.createNamespacedSecret({ namespace: ns, body: secret(oldKubeconfig) });
    const workload = workloadKubeConfigs(admin);
    const start = new Date();
    const connections = new KubernetesClusterConnections({
      management: async (): Promise<KubeConfig> => admin,
      workload: (c) => workload.get({ mode: 'capi', ...c }),
      clock: { now: () => start }, // a stopped clock: only the refusal can make it read the Secret again
    });
    const ref = { mode: 'capi' as const, namespace: ns, name: cluster };
    expect((await (await connections.nodesOf(ref)).getNode(node))?.name).toBe(node);

    // Act: the Secret is rotated to a new credential, and the old one revoked.
    await core.replaceNamespacedSecret({ namespace: ns, name: `${cluster}-kubeconfig`, body: secret(await grant(newUser)) });
    await rbac.deleteClusterRoleBinding({ name: oldUser });
    await waitForAccess(userConfig(oldKubeconfig), readNodes, false);
    const refused = await (await connections.nodesOf(ref)).getNode(node).catch((e: unknown) => e);
    const retried = await (await connections.nodesOf(ref)).getNode(node);

    // Assess: one refused call (the cached, revoked credential), then the rotated one works.
    expect(refused).toBeInstanceOf(AccessDeniedError);
    expect(retried?.name).toBe(node);
  });

  it('reads a cluster\'s kubeconfig Secret once for calls made while it is read; a failed load is reported by each caller that reports, not by a speculative one', async () => {
    // Prepare: a healthy cluster (the admin kubeconfig in its Secret) and one whose Secret holds no kubeconfig.
    const admin = adminKubeConfig();
    const core = admin.makeApiClient(CoreV1Api);
    const ns = await createNamespace(admin, 'shared-load');
    const [healthy, broken] = [uniqueName('wc'), uniqueName('broken')];
    const secret = (name: string, value: string) => ({ metadata: { name: `${name}-kubeconfig`, namespace: ns }, type: 'cluster.x-k8s.io/secret', data: { value: Buffer.from(value).toString('base64') } });
    await core.createNamespacedSecret({ namespace: ns, body: secret(healthy, admin.exportConfig()) });
    await core.createNamespacedSecret({ namespace: ns, body: secret(broken, 'not a kubeconfig') });
    const workload = workloadKubeConfigs(admin);
    const loads: string[] = [];
    const reported: string[] = [];
    const connections = new KubernetesClusterConnections({
      management: async (): Promise<KubeConfig> => admin,
      workload: (c) => (loads.push(c.name), workload.get({ mode: 'capi', ...c })),
      clock: { now: () => new Date() },
      reporter: { report: async (c, error) => void reported.push(`${c.name}: ${error.constructor.name}`) },
    });
    const ref = (name: string) => ({ mode: 'capi' as const, namespace: ns, name });

    // Act: a speculative load (not reported) and two ordinary ones at once, per cluster.
    const ok = await Promise.all([connections.nodesOf(ref(healthy), { report: false }), connections.nodesOf(ref(healthy)), connections.nodesOf(ref(healthy))]);
    const failed = await Promise.allSettled([connections.nodesOf(ref(broken), { report: false }), connections.nodesOf(ref(broken)), connections.nodesOf(ref(broken))]);

    // Assess: one load each; the broken cluster reported by the two ordinary callers, each failing with its error.
    expect(loads).toEqual([healthy, broken]);
    expect(ok).toHaveLength(3);
    expect(failed.map((f) => (f.status === 'rejected' ? (f.reason as Error).constructor : undefined))).toEqual([ClusterCredentialsError, ClusterCredentialsError, ClusterCredentialsError]);
    expect(reported).toEqual([`${broken}: ClusterCredentialsError`, `${broken}: ClusterCredentialsError`]);
  });
});
