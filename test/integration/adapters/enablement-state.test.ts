import type https from 'node:https';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { ConfigMapEnablementState, ENABLED_AT_KEY, STATE_CONFIGMAP } from '#shared/adapters/kubernetes/enablement-state.ts';
import { adminKubeConfig, createNamespace, describeWithControlPlane } from '#test/support/control-plane.ts';

/** A copy of `kc` that lists the method and path of every request it makes. */
function counting(kc: KubeConfig): { kc: KubeConfig; requests: string[] } {
  const copy = new KubeConfig();
  copy.loadFromString(kc.exportConfig());
  const requests: string[] = [];
  const apply = copy.applyToHTTPSOptions.bind(copy);
  copy.applyToHTTPSOptions = async (opts: https.RequestOptions): Promise<void> => {
    requests.push(`${opts.method} ${(opts.path ?? '').split('?')[0]}`);
    await apply(opts);
  };
  return { kc: copy, requests };
}

describeWithControlPlane('Class: ConfigMapEnablementState', () => {
  it('records the first enablement once, and calls made while it is read share that read', async () => {
    // Prepare: a state namespace without the ConfigMap.
    const admin = adminKubeConfig();
    const ns = await createNamespace(admin, 'enablement');
    const { kc, requests } = counting(admin);
    const now = new Date('2026-11-22T10:00:00Z');
    const state = new ConfigMapEnablementState(kc, ns, { now: () => now });

    // Act: three at once (the init phase's set-up and a first invocation's records), then one later.
    const first = await Promise.all([state.enabledAt(), state.enabledAt(), state.enabledAt()]);
    const later = await state.enabledAt();

    // Assess: one read, the record and its read-back; the same time for everyone, as stored.
    const path = `/api/v1/namespaces/${ns}/configmaps`;
    expect(requests).toEqual([`GET ${path}/${STATE_CONFIGMAP}`, `POST ${path}`, `GET ${path}/${STATE_CONFIGMAP}`]);
    expect([...first, later].map((d) => d.toISOString())).toEqual(Array(4).fill(now.toISOString()));
    const stored = await admin.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace: ns, name: STATE_CONFIGMAP });
    expect(new Date(stored.data?.[ENABLED_AT_KEY] ?? '').toISOString()).toBe(now.toISOString());
  });

  it('reads a time recorded before and keeps it; after a failed read the next call reads again', async () => {
    // Prepare: a ConfigMap another container recorded, and a namespace that does not exist.
    const admin = adminKubeConfig();
    const ns = await createNamespace(admin, 'enablement-stored');
    await admin.makeApiClient(CoreV1Api).createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: STATE_CONFIGMAP }, data: { [ENABLED_AT_KEY]: '2025-01-01T00:00:00Z' } } });
    const { kc, requests } = counting(admin);
    const stored = new ConfigMapEnablementState(kc, ns, { now: () => new Date() });
    const missing = new ConfigMapEnablementState(admin, `${ns}-missing`, { now: () => new Date() });

    // Act
    const times = [await stored.enabledAt(), await stored.enabledAt()];
    const failures = await Promise.allSettled([missing.enabledAt(), missing.enabledAt()]);
    const again = await missing.enabledAt().catch((error: unknown) => error);

    // Assess
    expect(times.map((d) => d.toISOString())).toEqual(['2025-01-01T00:00:00.000Z', '2025-01-01T00:00:00.000Z']);
    expect(requests).toHaveLength(1);
    expect(failures.map((f) => f.status)).toEqual(['rejected', 'rejected']);
    expect(String(again)).toContain('does not exist');
  });
});
