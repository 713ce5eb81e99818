import { expect, it } from 'vitest';
import { kubeCall, type ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { CHECKPOINT_ANNOTATION, KubernetesLeaderLease, MEMBERS_ANNOTATION } from '#shared/adapters/kubernetes/lease.ts';
import { withMember, type RotaPolicy } from '#shared/policy/forwarder-rota.ts';
import { AccessDeniedError, TransientError } from '#shared/errors.ts';
import { adminKubeConfig, createNamespace, describeWithControlPlane, kubeConfigFromFile, mintUser, uniqueName } from '#test/support/control-plane.ts';
import { manualClock } from '#test/support/manual-clock.ts';

/** A Lease as the API server stores it: the raw JSON, times as the strings it sends. */
interface RawLease {
  metadata: { name: string; namespace: string; resourceVersion: string; annotations?: Record<string, string> };
  spec: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

const leases = (ns: string): string => `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases`;
const readRaw = (kc: ClusterEndpoint, ns: string, name: string): Promise<RawLease> => kubeCall<RawLease>(kc, { method: 'GET', path: `${leases(ns)}/${name}` });

describeWithControlPlane('Class: KubernetesLeaderLease', () => {
  it('writes renewTime and acquireTime as MicroTime (six fractional digits), and keeps a stored acquireTime to the microsecond', async () => {
    // Prepare
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'lease');
    const name = uniqueName('lease');
    const clock = manualClock(Date.parse('2026-11-23T18:00:00.123Z'));
    const lease = new KubernetesLeaderLease({ kubeConfig: kc, namespace: ns, name, identity: 'fwd-a', leaseDurationSeconds: 4, now: clock.now });

    // Act: acquire (creates the Lease), then renew a second later.
    const attempt = await lease.tryAcquire();
    const created = await readRaw(kc, ns, name);
    clock.advance(1_001);
    const renewed = await lease.renew({ machines: '7' });
    const afterRenewal = await readRaw(kc, ns, name);

    // Assess: the server took and returns both times with six digits; the renewal moved renewTime only.
    expect(attempt).toEqual({ acquired: true, checkpoint: {} });
    expect(created.spec).toMatchObject({ holderIdentity: 'fwd-a', acquireTime: '2026-11-23T18:00:00.123000Z', renewTime: '2026-11-23T18:00:00.123000Z', leaseTransitions: 1 });
    expect(renewed).toBe(true);
    expect(afterRenewal.spec).toMatchObject({ holderIdentity: 'fwd-a', acquireTime: '2026-11-23T18:00:00.123000Z', renewTime: '2026-11-23T18:00:01.124000Z' });
    expect(afterRenewal.metadata.annotations?.[CHECKPOINT_ANNOTATION]).toBe('{"machines":"7"}');

    // Act: a holder's record written by another client with real microseconds (as client-go writes it).
    await kubeCall(kc, {
      method: 'PUT',
      path: `${leases(ns)}/${name}`,
      body: { ...afterRenewal, spec: { ...afterRenewal.spec, acquireTime: '2026-11-23T17:59:00.654321Z', renewTime: '2026-11-23T18:00:01.987654Z' } },
    });
    clock.advance(1_000);
    expect(await lease.renew({ machines: '8' })).toBe(true);

    // Assess: the acquireTime went back exactly as it came (a Date would have cut it to milliseconds).
    const kept = await readRaw(kc, ns, name);
    expect(kept.spec).toMatchObject({ acquireTime: '2026-11-23T17:59:00.654321Z', renewTime: '2026-11-23T18:00:02.124000Z' });
  });

  it('takes over from a holder whose string renewTime has not changed for the lease duration on its own clock, and not before', async () => {
    // Prepare: a Lease held by another forwarder, with a checkpoint, as the API server sends it (times are strings).
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'lease');
    const name = uniqueName('lease');
    const body = (renewTime: string, resourceVersion?: string) => ({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name, namespace: ns, annotations: { [CHECKPOINT_ANNOTATION]: '{"machines":"41"}' }, ...(resourceVersion ? { resourceVersion } : {}) },
      spec: { holderIdentity: 'fwd-other', leaseDurationSeconds: 4, acquireTime: '2026-11-23T17:00:00.000001Z', renewTime, leaseTransitions: 3 },
    });
    await kubeCall(kc, { method: 'POST', path: leases(ns), body: body('2026-11-23T17:59:59.999999Z') });
    const clock = manualClock(Date.parse('2026-11-23T18:00:00Z'));
    const lease = new KubernetesLeaderLease({ kubeConfig: kc, namespace: ns, name, identity: 'fwd-b', leaseDurationSeconds: 4, now: clock.now });

    // Act + Assess: held while its record is fresh on our clock (the renewTime's age on the holder's clock is no matter).
    expect(await lease.tryAcquire()).toEqual({ acquired: false, holder: 'fwd-other' });
    clock.advance(3_000);
    // the holder renews: a new renewTime string, so our observation starts again
    const current = await readRaw(kc, ns, name);
    await kubeCall(kc, { method: 'PUT', path: `${leases(ns)}/${name}`, body: body('2026-11-23T18:00:03.000001Z', current.metadata.resourceVersion) });
    expect(await lease.tryAcquire()).toEqual({ acquired: false, holder: 'fwd-other' });
    clock.advance(4_000);
    expect(await lease.tryAcquire()).toEqual({ acquired: false, holder: 'fwd-other' }); // exactly the duration: not yet
    clock.advance(1);
    const taken = await lease.tryAcquire();

    // Assess: taken with the holder's checkpoint; a new term (transitions + 1, acquireTime now).
    expect(taken).toEqual({ acquired: true, checkpoint: { machines: '41' } });
    const after = await readRaw(kc, ns, name);
    expect(after.spec).toMatchObject({ holderIdentity: 'fwd-b', leaseTransitions: 4, acquireTime: '2026-11-23T18:00:07.001000Z', renewTime: '2026-11-23T18:00:07.001000Z' });
  });

  it('keeps the rota members in an annotation of the same Lease: creates it when absent, never touches holder or checkpoint, and re-decides after a conflict', async () => {
    // Prepare: fwd-a holds the Lease with a checkpoint.
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'lease');
    const name = uniqueName('lease');
    const policy: RotaPolicy = { targetMembers: 2, overlapMs: 150_000, staleAfterMs: 15_000 };
    const until = new Date(Date.now() + 600_000);
    const make = (identity: string) => new KubernetesLeaderLease({ kubeConfig: kc, namespace: ns, name, identity, leaseDurationSeconds: 15 });
    const [a, b, c] = [make('fwd-a'), make('fwd-b'), make('fwd-c')];
    const first = await b.updateMembers((r, now) => withMember(r.members, { id: 'fwd-b', until, seenAt: now }, now, policy)); // creates the Lease, no holder
    await a.tryAcquire();
    await a.renew({ machines: '9' });
    const before = await readRaw(kc, ns, name);

    // Act: two members record themselves at the same moment (one of the writes conflicts and is decided again).
    const record = (lease: KubernetesLeaderLease, id: string) => lease.updateMembers((r, now) => withMember(r.members, { id, until, seenAt: now }, now, policy));
    const [afterA, afterC] = await Promise.all([record(a, 'fwd-a'), record(c, 'fwd-c')]);
    const after = await readRaw(kc, ns, name);
    const readOnly = await c.updateMembers(() => undefined);

    // Assess
    expect(first).toMatchObject({ holder: undefined, checkpoint: {} });
    expect(Object.keys(JSON.parse(after.metadata.annotations?.[MEMBERS_ANNOTATION] ?? '{}'))).toEqual(['fwd-a', 'fwd-b', 'fwd-c']);
    expect([afterA.members.length, afterC.members.length].sort()).toEqual([2, 3]);
    expect(after.spec.holderIdentity).toBe('fwd-a');
    expect(after.spec.renewTime).toBe(before.spec.renewTime);
    expect(after.metadata.annotations?.[CHECKPOINT_ANNOTATION]).toBe('{"machines":"9"}');
    expect(readOnly).toMatchObject({ holder: 'fwd-a', checkpoint: { machines: '9' } });
    expect(readOnly.members.map((m) => m.id)).toEqual(['fwd-a', 'fwd-b', 'fwd-c']);
    expect(await a.renew({ machines: '10' })).toBe(true); // the holder renews over the members' writes
  });

  it('maps a refused credential to AccessDeniedError, and a missing namespace to a TransientError that says so', async () => {
    // Prepare: an identity without any RBAC grant, and the admin on a namespace that does not exist.
    const nobody = kubeConfigFromFile(await mintUser(uniqueName('no-lease')));
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'lease');
    const options = { namespace: ns, name: uniqueName('lease'), identity: 'fwd-c', leaseDurationSeconds: 4 };

    // Act
    const refused = await new KubernetesLeaderLease({ ...options, kubeConfig: nobody }).tryAcquire().catch((e: unknown) => e);
    const missing = await new KubernetesLeaderLease({ ...options, kubeConfig: kc, namespace: uniqueName('absent') }).tryAcquire().catch((e: unknown) => e);

    // Assess
    expect(refused).toBeInstanceOf(AccessDeniedError);
    expect(missing).toBeInstanceOf(TransientError);
    expect((missing as Error).message).toMatch(/namespace absent-[0-9a-f]+ does not exist/);
  });
});
