import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { V1MicroTime } from '@kubernetes/client-node';
import type { ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { decodeMembers, encodeMembers, KubernetesLeaderLease, microTime } from '#shared/adapters/kubernetes/lease.ts';
import { manualClock } from '#test/support/manual-clock.ts';

describe('Function: microTime()', () => {
  it.each([
    { at: '2026-11-23T18:00:00.123Z', want: '2026-11-23T18:00:00.123000Z' },
    { at: '2026-11-23T18:00:00Z', want: '2026-11-23T18:00:00.000000Z' },
    { at: '1999-12-31T23:59:59.999Z', want: '1999-12-31T23:59:59.999000Z' },
  ])('writes $at with six fractional digits, as client-node’s V1MicroTime does', ({ at, want }) => {
    // Act
    const written = microTime(Date.parse(at));

    // Assess
    expect(written).toBe(want);
    expect(written).toBe(new V1MicroTime(Date.parse(at)).toISOString());
  });
});

describe('Functions: encodeMembers() / decodeMembers()', () => {
  it('round-trips the rota members as `{ id: { until, seen } }` with sorted ids', () => {
    // Prepare
    const members = [
      { id: 'fwd-b', until: new Date('2026-11-25T02:15:00.000Z'), seenAt: new Date('2026-11-25T02:00:05.000Z') },
      { id: 'fwd-a', until: new Date('2026-11-25T02:10:00.000Z'), seenAt: new Date('2026-11-25T02:00:01.000Z') },
    ];

    // Act
    const text = encodeMembers(members);

    // Assess
    expect(text).toBe('{"fwd-a":{"until":"2026-11-25T02:10:00.000Z","seen":"2026-11-25T02:00:01.000Z"},"fwd-b":{"until":"2026-11-25T02:15:00.000Z","seen":"2026-11-25T02:00:05.000Z"}}');
    expect(decodeMembers(text)).toEqual([members[1], members[0]]);
  });

  it.each([
    { text: undefined, why: 'absent' },
    { text: 'not json', why: 'not JSON' },
    { text: '[]', why: 'an array' },
  ])('reads $why as no member', ({ text }) => {
    expect(decodeMembers(text)).toEqual([]);
  });

  it('leaves out entries it cannot read (they are dropped at the next write) and keeps the others', () => {
    const text = JSON.stringify({ ok: { until: '2026-11-25T02:10:00Z', seen: '2026-11-25T02:00:00Z' }, noSeen: { until: '2026-11-25T02:10:00Z' }, badDate: { until: 'soon', seen: '2026-11-25T02:00:00Z' }, nul: null });
    expect(decodeMembers(text).map((m) => m.id)).toEqual(['ok']);
  });
});

describe('Class: KubernetesLeaderLease (renew and release against a scripted API server)', () => {
  const held = {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: 'fwd', namespace: 'ns', resourceVersion: '7' },
    spec: { holderIdentity: 'fwd-a', leaseDurationSeconds: 10, renewTime: '2026-11-29T15:00:00.000000Z' },
  };
  let putStatus = 200;
  let server: http.Server;
  let endpoint: ClusterEndpoint;

  beforeAll(async () => {
    // Every GET answers the Lease held by fwd-a; every PUT answers `putStatus`.
    server = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        const status = req.method === 'PUT' ? putStatus : 200;
        res.writeHead(status, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify(status === 200 ? held : { kind: 'Status', code: status, reason: 'Conflict' }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    endpoint = {
      getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }),
      applyToHTTPSOptions: async () => {},
    };
  });

  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const lease = (clock: { now: () => Date }) =>
    new KubernetesLeaderLease({
      kubeConfig: endpoint,
      namespace: 'ns',
      name: 'fwd',
      identity: 'fwd-a',
      leaseDurationSeconds: 10,
      now: clock.now,
    });

  it('ends leadership at once when every write of a renewal conflicts, but not when the server fails', async () => {
    // Prepare: fwd-a took the Lease a second ago.
    const clock = manualClock(Date.parse('2026-11-29T15:00:00Z'));
    const a = lease(clock);
    putStatus = 200;
    await a.tryAcquire();
    clock.advance(1_000);

    // Act
    putStatus = 500;
    const afterFailure = await a.renew({});
    putStatus = 409;
    const afterConflicts = await a.renew({});

    // Assess: a failure keeps leadership while the last renewal is valid; conflicts mean others write the Lease.
    expect(afterFailure).toBe(true);
    expect(afterConflicts).toBe(false);
  });

  it('counts a release as no renewal, and names the operation that failed', async () => {
    // Prepare: fwd-a took the Lease longer ago than a renewal stays valid (0.8 of 10 s).
    const clock = manualClock(Date.parse('2026-11-29T15:00:00Z'));
    const a = lease(clock);
    putStatus = 200;
    await a.tryAcquire();
    clock.advance(9_000);

    // Act
    await a.release({});
    putStatus = 500;
    const renewed = await a.renew({});
    const released = a.release({});

    // Assess
    expect(renewed).toBe(false);
    await expect(released).rejects.toThrow(/^releasing Lease ns\/fwd failed: HTTP 500/);
  });
});
