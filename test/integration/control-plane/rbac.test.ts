import { beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import {
  adminKubeConfig,
  createMachine,
  createNamespace,
  createNode,
  describeWithControlPlane,
  kubeConfigFromFile,
  MACHINES,
  MERGE_PATCH,
  mintUser,
  statusOf,
  uniqueName,
  waitForAccess,
} from '#test/support/control-plane.ts';

async function outcome(call: Promise<unknown>): Promise<number> {
  return call.then(
    () => 200,
    (e: unknown) => statusOf(e) ?? -1,
  );
}

describeWithControlPlane('Kubernetes API: RBAC for a low-privilege identity', () => {
  let admin: KubeConfig;
  let user: KubeConfig;
  let namespace: string;
  let otherNamespace: string;
  let nodeName: string;

  beforeAll(async () => {
    admin = adminKubeConfig();
    [namespace, otherNamespace] = await Promise.all([createNamespace(admin, 'rbac'), createNamespace(admin, 'rbac-other')]);
    nodeName = uniqueName('node');
    await createNode(admin, nodeName);
    await Promise.all([createMachine(admin, namespace, 'm1'), createMachine(admin, otherNamespace, 'm1')]);

    const userName = uniqueName('reader');
    user = kubeConfigFromFile(await mintUser(userName, ['capi-taint-testers']));
    const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
    const clusterRole = uniqueName('node-reader');
    await rbac.createClusterRole({ body: { metadata: { name: clusterRole }, rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] }] } });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: clusterRole },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: clusterRole },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: userName }],
      },
    });
    await rbac.createNamespacedRole({
      namespace,
      body: { metadata: { name: 'machine-reader' }, rules: [{ apiGroups: ['cluster.x-k8s.io'], resources: ['machines'], verbs: ['get', 'list'] }] },
    });
    await rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'machine-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'machine-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'capi-taint-testers' }],
      },
    });
    // RBAC propagation is not instant: wait until the authorizer has seen both bindings.
    await waitForAccess(user, { verb: 'get', resource: 'nodes' }, true);
    await waitForAccess(user, { verb: 'list', group: 'cluster.x-k8s.io', resource: 'machines', namespace }, true);
  });

  it('grants what its ClusterRole allows: reading Nodes', async () => {
    // Act
    const status = await outcome(user.makeApiClient(CoreV1Api).readNode({ name: nodeName }));

    // Assess
    expect(status).toBe(200);
  });

  it('refuses what its ClusterRole does not allow: patching Nodes', async () => {
    // Act
    const status = await outcome(user.makeApiClient(CoreV1Api).patchNode({ name: nodeName, body: { metadata: { labels: { x: 'y' } } } }, MERGE_PATCH));

    // Assess
    expect(status).toBe(403);
  });

  it('grants listing Machines in the namespace its Role is bound in', async () => {
    // Act
    const status = await outcome(user.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({ ...MACHINES, namespace }));

    // Assess
    expect(status).toBe(200);
  });

  it('refuses listing Machines in another namespace and writing Machines anywhere', async () => {
    // Prepare
    const objects = user.makeApiClient(CustomObjectsApi);

    // Act
    const listElsewhere = await outcome(objects.listNamespacedCustomObject({ ...MACHINES, namespace: otherNamespace }));
    const patchOwn = await outcome(objects.patchNamespacedCustomObject({ ...MACHINES, namespace, name: 'm1', body: { metadata: { labels: { x: 'y' } } } }, MERGE_PATCH));

    // Assess
    expect(listElsewhere).toBe(403);
    expect(patchOwn).toBe(403);
  });
});
