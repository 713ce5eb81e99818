import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { expect, it } from 'vitest';
import { KubernetesNodeStore } from '#shared/adapters/kubernetes/node-store.ts';
import { withPooledConnections } from '#shared/adapters/kubernetes/pooled-connections.ts';
import { controlPlane, createNode, describeWithControlPlane, kubeConfigFromFile, uniqueName } from '#test/support/control-plane.ts';

/** Counts new connections undici opens (every undici instance publishes on this channel). */
async function connectionsOpenedBy(work: () => Promise<void>): Promise<number> {
  let opened = 0;
  const onConnect = () => {
    opened++;
  };
  subscribe('undici:client:connected', onConnect);
  try {
    await work();
  } finally {
    unsubscribe('undici:client:connected', onConnect);
  }
  return opened;
}

describeWithControlPlane('Function: withPooledConnections()', () => {
  it('serves many API calls over one connection instead of one connection per call', async () => {
    // Prepare
    const path = (controlPlane() as { kubeconfigPath: string }).kubeconfigPath;
    const name = uniqueName('node');
    await createNode(kubeConfigFromFile(path), name);
    const plain = new KubernetesNodeStore(kubeConfigFromFile(path));
    const pooled = new KubernetesNodeStore(withPooledConnections(kubeConfigFromFile(path)));
    const tenReads = (store: KubernetesNodeStore) => async () => {
      for (let i = 0; i < 10; i++) expect((await store.getNode(name))?.name).toBe(name);
    };

    // Act
    const withoutPool = await connectionsOpenedBy(tenReads(plain));
    const withPool = await connectionsOpenedBy(tenReads(pooled));

    // Assess
    expect(withoutPool).toBe(10);
    expect(withPool).toBe(1);
  });

  it('keeps working when the dispatcher it receives is already a reused one', async () => {
    // Prepare: a wrapper underneath that itself reuses its first dispatcher (as a caller's own pooling might).
    const path = (controlPlane() as { kubeconfigPath: string }).kubeconfigPath;
    const name = uniqueName('node');
    const kc = kubeConfigFromFile(path);
    await createNode(kc, name);
    const inner = kc.applySecurityAuthentication.bind(kc);
    let first: unknown;
    kc.applySecurityAuthentication = async (context) => {
      await inner(context);
      first ??= context.getDispatcher();
      context.setDispatcher(first as NonNullable<ReturnType<typeof context.getDispatcher>>);
    };
    const store = new KubernetesNodeStore(withPooledConnections(kc));

    // Act
    const names = [];
    for (let i = 0; i < 3; i++) names.push((await store.getNode(name))?.name);

    // Assess
    expect(names).toEqual([name, name, name]);
  });

  it('is idempotent: wrapping twice keeps one pool', async () => {
    // Prepare
    const kc = kubeConfigFromFile((controlPlane() as { kubeconfigPath: string }).kubeconfigPath);
    const once = withPooledConnections(kc);
    const wrapped = once.applySecurityAuthentication;

    // Act
    const twice = withPooledConnections(once);

    // Assess
    expect(twice).toBe(kc);
    expect(twice.applySecurityAuthentication).toBe(wrapped);
  });
});
