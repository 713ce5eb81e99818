/**
 * The local forwarder's windows (local/forwarder-rota.ts): the real WatchForwarder and rota, run one window after
 * another as `npm run forwarder` and `npm start` run them, over an in-memory Lease and scripted watch streams (faked at
 * the port level). Short windows, so that a test sees several.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WatchForwarder } from '#functions/watch-forwarder/forward-watch-events.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';
import type { NodeFacts } from '#shared/model/views.ts';
import { localShards, runWindows, type LocalRota } from '#local/forwarder-rota.ts';
import { memoryLease, newLeaseState, type LeaseState } from '#test/support/memory-lease.ts';
import { ScriptedSources, until } from '#test/support/scripted-watch-sources.ts';

const quiet = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };
const clock = { now: () => new Date() };
const node = (name: string, rv: string): NodeFacts => ({ kind: 'Node', name, uid: `uid-${name}`, resourceVersion: rv, labels: {}, annotations: {}, taints: [{ key: 'k', effect: 'NoSchedule' }] });
const stops: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(stops.splice(0).map((stop) => stop()));
});

function start(id: string, state: LeaseState, rota: LocalRota) {
  const sources = new ScriptedSources();
  const sent: TaintEvent[] = [];
  const lease = memoryLease(state, id, clock);
  const forwarder = new WatchForwarder(
    { mode: 'self', sources, lease, publisher: { publish: async (events) => (sent.push(...events), { sent: [...events], unsent: [] }) }, telemetry: { record: () => undefined }, clock, logger: quiet },
    { renewIntervalMs: 5, acquireRetryMs: 5, flushIntervalMs: 2, drainTimeoutMs: 200 },
  );
  const controller = new AbortController();
  const done = runWindows(forwarder, { signal: controller.signal, rota, retryMs: 5, logger: quiet });
  const stop = async () => (controller.abort(), done);
  stops.push(stop);
  return { sources, sent, stop };
}

describe('Function: runWindows()', () => {
  it('runs windows one after another, each resuming its streams from the checkpoint the one before handed over', async () => {
    // Prepare: a rota of one, windows of 300 ms.
    const state = newLeaseState();
    const fwd = start('a', state, { policy: { targetMembers: 1, overlapMs: 50, staleAfterMs: 15_000 }, windowMs: 300 });
    const first = await fwd.sources.nodesOf({ mode: 'self' });

    // Act: a change in the first window; then the next window opens its streams again.
    await first.emit({ type: 'change', change: 'added', facts: node('n1', '11'), observedAt: new Date(), checkpoint: '11' });
    await until(() => fwd.sources.nodeStreams.get('nodes/self') !== first);
    const summary = await fwd.stop();

    // Assess: sent once; the first window released the Lease with it, and the second started from there.
    expect(fwd.sent.map((e) => e.id)).toEqual(['uid-n1:11:added']);
    expect(state.checkpointWrites.some((w) => w.by === 'a' && w.checkpoint['nodes/self'] === '11')).toBe(true);
    expect(fwd.sources.nodeStarts.get('nodes/self')).toEqual({ resumeFrom: '11', quietLists: true });
    expect(summary).toMatchObject({ active: true, rota: { joined: true }, checkpoint: { 'nodes/self': '11' } });
    expect(state.members).toEqual([]);
  });

  it('watches nothing while the rota is full, and joins once the member that filled it leaves', async () => {
    // Prepare: another process's member with its whole window ahead.
    const state = newLeaseState();
    const now = Date.now();
    state.members = [{ id: 'other', until: new Date(now + 600_000), seenAt: new Date(now) }];
    const fwd = start('a', state, { policy: { targetMembers: 1, overlapMs: 50, staleAfterMs: 15_000 }, windowMs: 60_000 });

    // Act: it asks three times; then the other member leaves.
    await until(() => state.memberUpdates >= 3);
    const streamsWhileFull = fwd.sources.nodeStreams.size;
    state.members = [];
    await fwd.sources.nodesOf({ mode: 'self' });

    // Assess
    expect(streamsWhileFull).toBe(0);
    expect(state.members.map((m) => m.id)).toEqual(['a']);
    expect(state.holder).toBe('a');
  });
});

describe('Function: localShards()', () => {
  it('runs every shard of the count in one process, or only the pinned one', () => {
    expect(localShards({ shards: 1, shard: 0, shardPinned: false })).toEqual([0]);
    expect(localShards({ shards: 3, shard: 0, shardPinned: false })).toEqual([0, 1, 2]);
    expect(localShards({ shards: 3, shard: 1, shardPinned: true })).toEqual([1]);
  });
});
