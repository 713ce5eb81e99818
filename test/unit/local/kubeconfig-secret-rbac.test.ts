import { loadAll } from 'js-yaml';
import { describe, expect, it } from 'vitest';
import { kubeconfigSecretRbac, parseClusterArgs, toYamlStream } from '#local/rbac/kubeconfig-secret-rbac.ts';

describe('kubeconfigSecretRbac()', () => {
  it('grants get on exactly the <cluster>-kubeconfig Secrets (and the dedicated ones next to them), one Role and RoleBinding per namespace', () => {
    // Act
    const manifests = kubeconfigSecretRbac([
      { namespace: 'team-b', name: 'edge' },
      { namespace: 'team-a', name: 'wc2' },
      { namespace: 'team-a', name: 'wc1' },
      { namespace: 'team-a', name: 'wc1' },
    ]);

    // Assess
    expect(manifests.map((m) => `${m.kind as string} ${(m.metadata as { namespace: string }).namespace}`)).toEqual(['Role team-a', 'RoleBinding team-a', 'Role team-b', 'RoleBinding team-b']);
    expect(manifests[0]?.rules).toEqual([{ apiGroups: [''], resources: ['secrets'], resourceNames: ['wc1-kubeconfig', 'wc1-taint-propagator-kubeconfig', 'wc2-kubeconfig', 'wc2-taint-propagator-kubeconfig'], verbs: ['get'] }]);
    expect(manifests[1]?.subjects).toEqual([
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'capi-taint-propagator-forwarder' },
      { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'capi-taint-propagator-reconcile' },
    ]);
    expect(loadAll(toYamlStream(manifests))).toEqual(manifests);
  });

  it('grants nothing for no Clusters', () => {
    expect(kubeconfigSecretRbac([])).toEqual([]);
  });

  it('parses namespace/cluster arguments and names a bad one', () => {
    expect(parseClusterArgs(['ns-1/wc.1'])).toEqual([{ namespace: 'ns-1', name: 'wc.1' }]);
    expect(() => parseClusterArgs(['wc1'])).toThrow('expected <namespace>/<cluster>, got "wc1"');
    expect(() => parseClusterArgs(['ns/*'])).toThrow('got "ns/*"');
  });
});
