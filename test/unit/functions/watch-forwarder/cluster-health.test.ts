/**
 * The forwarder's per-cluster reachability tracking, with its ports faked at the port level: scripted watch streams
 * (the health events a WatchSession emits, see the integration test for the real one), a Lease that is always ours,
 * a publisher that sends everything, and a logger and telemetry that keep what they were given.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { WatchForwarder, type ForwarderRunSummary } from '#functions/watch-forwarder/forward-watch-events.ts';
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import type { ClusterFacts } from '#shared/model/views.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import type { ForwarderTelemetry } from '#shared/ports/forwarder-telemetry.ts';
import { ScriptedSources, until } from '#test/support/scripted-watch-sources.ts';

interface Logged {
  readonly level: 'info' | 'warn' | 'error' | 'debug';
  readonly message: string;
  readonly attrs: Record<string, unknown>;
}

const T0 = new Date('2026-11-22T10:00:00Z');
const clusterFacts = (name: string, change: Partial<ClusterFacts> = {}): ClusterFacts => ({ kind: 'Cluster', namespace: 'fleet', name, uid: `uid-${name}`, resourceVersion: '1', paused: false, deleting: false, ...change });
const wc1: ClusterRef = { mode: 'capi', namespace: 'fleet', name: 'wc1' };
const wc2: ClusterRef = { mode: 'capi', namespace: 'fleet', name: 'wc2' };

let stop: (() => Promise<ForwarderRunSummary>) | undefined;
afterEach(async () => {
  await stop?.();
  stop = undefined;
});

function setup(mode: 'capi' | 'self' = 'capi', healthSampleIntervalMs = 60_000) {
  const sources = new ScriptedSources();
  const logged: Logged[] = [];
  const log = (level: Logged['level']) => (message: string, attrs: Record<string, unknown> = {}) => void logged.push({ level, message, attrs });
  const samples: number[] = [];
  const telemetry: ForwarderTelemetry = {
    record: (metric, value) => {
      if (metric === ForwarderMetric.UnreachableClusters) samples.push(value);
    },
  };
  const forwarder = new WatchForwarder(
    {
      mode,
      sources,
      lease: { tryAcquire: async () => ({ acquired: true, checkpoint: {} }), renew: async () => true, release: async () => undefined },
      publisher: { publish: async (events) => ({ sent: events, unsent: [] }) },
      telemetry,
      clock: { now: () => T0 },
      logger: { info: log('info'), warn: log('warn'), error: log('error'), debug: log('debug') } as never,
    },
    { healthSampleIntervalMs, renewIntervalMs: 60_000, flushIntervalMs: 5, drainTimeoutMs: 100 },
  );
  const controller = new AbortController();
  const done = forwarder.run(controller.signal);
  stop = async () => {
    controller.abort();
    return done;
  };
  const transitions = () => logged.filter((l) => /unreachable|reachable again|Forgetting|Watch failing|Watch recovered/.test(l.message));
  return { sources, forwarder, logged, transitions, samples, stopNow: async () => (await stop?.(), (stop = undefined)) };
}

describe('Class: WatchForwarder (clusters whose Node watch is failing)', () => {
  it('adds a cluster at its stream\'s first failure, logs it once with the reason and since, and removes it when the stream recovers', async () => {
    // Prepare
    const { sources, forwarder, transitions } = setup();
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc1'), observedAt: T0 });
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc2'), observedAt: T0 });
    const [s1, s2] = [await sources.nodesOf(wc1), await sources.nodesOf(wc2)];
    const since = new Date('2026-11-22T10:00:05Z');

    // Act: wc1 fails (its stream tells once per run of failures); wc2 keeps working.
    await s1.emit({ type: 'failing', reason: 'listing /api/v1/nodes failed: connect ECONNREFUSED 127.0.0.1:6443', since });
    const whileFailing = forwarder.failingClusters();
    await s2.emit({ type: 'progress', resourceVersion: '7' });
    await s1.emit({ type: 'recovered', since, at: new Date('2026-11-22T10:00:35Z') });

    // Assess
    expect(whileFailing).toEqual([{ cluster: 'fleet/wc1', reason: 'listing /api/v1/nodes failed: connect ECONNREFUSED 127.0.0.1:6443', since }]);
    expect(forwarder.failingClusters()).toEqual([]);
    expect(transitions().map((l) => [l.level, l.message, l.attrs])).toEqual([
      [
        'warn',
        'Workload cluster unreachable: its Node watch is failing and retried with backoff',
        { cluster: 'fleet/wc1', reason: 'listing /api/v1/nodes failed: connect ECONNREFUSED 127.0.0.1:6443', since: '2026-11-22T10:00:05.000Z', failingClusters: 1 },
      ],
      ['info', 'Workload cluster reachable again: its Node watch recovered', { cluster: 'fleet/wc1', since: '2026-11-22T10:00:05.000Z', failedForMs: 30_000, failingClusters: 0 }],
    ]);
  });

  it('counts every failing cluster once in UnreachableClusters, sampled periodically', async () => {
    // Prepare
    const { sources, samples } = setup('capi', 10);
    for (const name of ['wc1', 'wc2']) await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts(name), observedAt: T0 });
    const [s1, s2] = [await sources.nodesOf(wc1), await sources.nodesOf(wc2)];

    // Act
    await s1.emit({ type: 'failing', reason: 'HTTP 503', since: T0 });
    await s2.emit({ type: 'failing', reason: 'watching /api/v1/nodes failed: not connected within 30000 ms', since: T0 });
    await until(() => samples.includes(2));
    await s2.emit({ type: 'recovered', since: T0, at: T0 });
    await until(() => samples.at(-1) === 1);

    // Assess: 2 while both failed, then 1; a cluster failing for many samples is never counted twice.
    expect(Math.max(...samples)).toBe(2);
    expect(samples.at(-1)).toBe(1);
  });

  it('records the number of failing clusters once more as the run ends (the sample of a Lambda window)', async () => {
    // Prepare: no periodic sample within the test (one a minute).
    const { sources, samples, stopNow } = setup('capi', 60_000);
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc1'), observedAt: T0 });
    await (await sources.nodesOf(wc1)).emit({ type: 'failing', reason: 'HTTP 503', since: T0 });

    // Act
    await stopNow();

    // Assess
    expect(samples).toEqual([1]);
  });

  it('forgets a failing cluster when its Cluster is deleted, and ignores what its stopped stream says afterwards', async () => {
    // Prepare
    const { sources, forwarder, transitions, samples, stopNow } = setup();
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc1'), observedAt: T0 });
    const s1 = await sources.nodesOf(wc1);
    await s1.emit({ type: 'failing', reason: 'HTTP 401: Unauthorized', since: T0 });

    // Act
    await sources.clusterStream.emit({ type: 'change', change: 'deleted', facts: clusterFacts('wc1', { resourceVersion: '2' }), observedAt: T0 });
    await until(() => s1.stopped);
    await s1.emit({ type: 'failing', reason: 'a late report of the stopped stream', since: T0 });
    const after = forwarder.failingClusters();
    await stopNow();

    // Assess
    expect(after).toEqual([]);
    expect(samples.at(-1)).toBe(0);
    expect(transitions().map((l) => [l.message, l.attrs['cluster']])).toEqual([
      ['Workload cluster unreachable: its Node watch is failing and retried with backoff', 'fleet/wc1'],
      ['Forgetting the failing Node watch of a removed cluster', 'fleet/wc1'],
    ]);
  });

  it('also forgets a failing cluster whose Cluster is being deleted (its Node watch stops)', async () => {
    // Prepare
    const { sources, forwarder } = setup();
    await sources.clusterStream.emit({ type: 'change', change: 'added', facts: clusterFacts('wc1'), observedAt: T0 });
    await (await sources.nodesOf(wc1)).emit({ type: 'failing', reason: 'HTTP 503', since: T0 });

    // Act
    await sources.clusterStream.emit({ type: 'change', change: 'modified', facts: clusterFacts('wc1', { resourceVersion: '2', deleting: true }), previous: clusterFacts('wc1'), observedAt: T0 });

    // Assess
    expect(forwarder.failingClusters()).toEqual([]);
  });

  it('logs a failing management stream by its name without counting it as a workload cluster', async () => {
    // Prepare
    const { sources, forwarder, transitions } = setup();

    // Act
    await sources.machineStream.emit({ type: 'failing', reason: 'listing /apis/cluster.x-k8s.io/v1beta2/machines failed: HTTP 503', since: T0 });
    await sources.machineStream.emit({ type: 'recovered', since: T0, at: T0 });

    // Assess
    expect(forwarder.failingClusters()).toEqual([]);
    expect(transitions().map((l) => [l.level, l.message, l.attrs['stream']])).toEqual([
      ['warn', 'Watch failing; retrying with backoff', 'machines'],
      ['info', 'Watch recovered', 'machines'],
    ]);
  });

  it('tracks the one cluster of self mode as `self`', async () => {
    // Prepare
    const { sources, forwarder } = setup('self');
    const nodes = await sources.nodesOf({ mode: 'self' });

    // Act
    await nodes.emit({ type: 'failing', reason: 'HTTP 403: Forbidden', since: T0 });

    // Assess
    expect(forwarder.failingClusters()).toEqual([{ cluster: 'self', reason: 'HTTP 403: Forbidden', since: T0 }]);
  });
});
