/**
 * The per-cluster rate limit of the forwarder's Node streams, against a loopback server of our own whose list pages
 * never end (bench/lib/hostile-servers.ts `endless-pages`): the retry policy does not bound a list's pages (they
 * follow each other without backoff); the stream's bucket does, and only that stream's.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CapiApi } from '#shared/adapters/kubernetes/capi-discovery.ts';
import { kubeConfigFromUntrusted } from '#shared/adapters/kubernetes/untrusted-kubeconfig.ts';
import { kubernetesWatchSources, NODE_LIST_MAX_PAGES } from '#shared/adapters/kubernetes/watch-sources.ts';
import type { RateLimit } from '#shared/policy/rate-limit.ts';
import { startHostileServers, type HostileServer } from '../../../../../bench/lib/hostile-servers.ts';

/** Cluster API in v1beta2, without discovery. */
const capiV1beta2: CapiApi = { version: async () => 'v1beta2', notServed: () => undefined };

const RUN_MS = 3_000;

describe('Node stream rate limit (EndpointRateLimiter)', () => {
  let dir: string;
  let servers: HostileServer[];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'capi-tp-rate-limit-'));
    servers = await startHostileServers({ dir, behaviours: ['endless-pages', 'endless-pages'], lifetimeMs: 60_000 });
  });

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
  });

  /** Runs one cluster's Node stream against `server` for RUN_MS; returns the requests the server saw and the failures told. */
  async function requestsIn(server: HostileServer, limit: RateLimit): Promise<{ requests: number; failing: string[] }> {
    const endpoint = kubeConfigFromUntrusted(server.kubeconfigYaml, { cluster: 'fleet/endless', source: 'the test kubeconfig' });
    const sources = kubernetesWatchSources({ managementKubeConfig: endpoint, workloadKubeConfigs: { get: async () => endpoint }, capi: capiV1beta2, nodeStreamRateLimit: limit });
    const stop = new AbortController();
    const failing: string[] = [];
    const running = sources.nodes({ mode: 'capi', namespace: 'fleet', name: 'endless' }, {}).run(stop.signal, async (e) => {
      if (e.type === 'failing') failing.push(e.reason);
    });
    await new Promise((r) => setTimeout(r, RUN_MS));
    const requests = server.stats().lists;
    stop.abort();
    await running;
    return { requests, failing };
  }

  it('holds a stream whose list never ends to its burst, then its rate; without the limit the same stream asks many times more and is cut at the page cap', async () => {
    // Prepare
    const [limitedServer, unlimitedServer] = servers as [HostileServer, HostileServer];

    // Act
    const limited = await requestsIn(limitedServer, { burst: 5, perSecond: 2 });
    const unlimited = await requestsIn(unlimitedServer, { burst: 1_000_000, perSecond: 1_000_000 });

    // Assess: at most the burst plus the rate over the run (and one request under way at the end); without the limit,
    // many times more, and the list is cut at the Node lists' page cap (the stream is reported failing).
    expect(limited.requests).toBeGreaterThan(5);
    expect(limited.requests).toBeLessThanOrEqual(5 + (2 * RUN_MS) / 1000 + 1);
    expect(unlimited.requests).toBeGreaterThan(4 * limited.requests);
    expect(unlimited.failing[0]).toMatch(new RegExp(`more than ${NODE_LIST_MAX_PAGES} pages`));
  });
});
