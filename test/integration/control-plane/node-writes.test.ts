import { beforeAll, expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import type { KubeConfig } from '@kubernetes/client-node';
import { adminKubeConfig, createNode, describeWithControlPlane, MERGE_PATCH, statusOf, uniqueName } from '#test/support/control-plane.ts';

describeWithControlPlane('Kubernetes API: Node writes', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  beforeAll(() => {
    kc = adminKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
  });

  it('refuses a merge patch that carries a stale resourceVersion with 409 Conflict', async () => {
    // Prepare
    const name = uniqueName('node');
    const created = await createNode(kc, name, { taints: [{ key: 'example.com/a', effect: 'NoSchedule' }] });
    const staleRv = created.metadata?.resourceVersion;
    await core.patchNode({ name, body: { metadata: { labels: { touched: 'yes' } } } }, MERGE_PATCH);

    // Act
    const error = await core
      .patchNode({ name, body: { metadata: { resourceVersion: staleRv }, spec: { taints: [] } } }, MERGE_PATCH)
      .then(() => undefined, (e: unknown) => e);

    // Assess
    expect(statusOf(error)).toBe(409);
    const node = await core.readNode({ name });
    expect(node.spec?.taints).toEqual([{ key: 'example.com/a', effect: 'NoSchedule' }]);
  });

  it('accepts a merge patch that carries the current resourceVersion', async () => {
    // Prepare
    const name = uniqueName('node');
    const created = await createNode(kc, name);

    // Act
    const patched = await core.patchNode(
      { name, body: { metadata: { resourceVersion: created.metadata?.resourceVersion }, spec: { taints: [{ key: 'example.com/b', effect: 'NoExecute' }] } } },
      MERGE_PATCH,
    );

    // Assess
    expect(patched.spec?.taints).toEqual([{ key: 'example.com/b', effect: 'NoExecute' }]);
    expect(patched.metadata?.resourceVersion).not.toBe(created.metadata?.resourceVersion);
  });

  it('replaces the whole spec.taints list on a merge patch, dropping taints the patch does not mention', async () => {
    // Prepare
    const name = uniqueName('node');
    await createNode(kc, name, {
      taints: [
        { key: 'someone-else.io/keep-me', value: 'x', effect: 'NoSchedule' },
        { key: 'example.com/old', effect: 'PreferNoSchedule' },
      ],
    });

    // Act
    const patched = await core.patchNode({ name, body: { spec: { taints: [{ key: 'example.com/new', effect: 'NoSchedule' }] } } }, MERGE_PATCH);

    // Assess
    expect(patched.spec?.taints).toEqual([{ key: 'example.com/new', effect: 'NoSchedule' }]);
  });

  it('keeps exactly the taints a Node is created with (no admission plugin adds node.kubernetes.io/not-ready)', async () => {
    // Prepare
    const name = uniqueName('node');

    // Act
    await createNode(kc, name, { labels: { role: 'worker' } });

    // Assess
    const node = await core.readNode({ name });
    expect(node.spec?.taints ?? []).toEqual([]);
  });
});
