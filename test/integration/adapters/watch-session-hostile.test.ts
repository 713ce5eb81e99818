/**
 * The watch session against API servers that misbehave: loopback `node:http` servers that answer as a broken or
 * hostile API server (or a proxy or load balancer in front of one) would. Not a fake of the Kubernetes API for the
 * product's logic — the real one is tested against kube-apiserver elsewhere — but the failures kube-apiserver cannot
 * be made to produce on demand.
 *
 * - The three loops the review measured at thousands of requests a second (every watch 410; every list 410; every
 *   watch 200 and ended at once): after the first 5 s at most one request a second, and once the server behaves the
 *   stream recovers within one backoff step.
 * - The caps (issue "One bad workload cluster cannot hurt the others"): an endless watch line, an endless list, a
 *   stream of garbage lines are cut, reported failing with a safe reason, retried with backoff; the garbage is logged
 *   at most once per interval, as a short escaped excerpt.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { ClusterEndpoint } from '#shared/adapters/kubernetes/kube-http.ts';
import { WatchSession, type WatchSessionOptions } from '#shared/adapters/kubernetes/watch-session.ts';
import { toNodeFacts, type NodeFacts } from '#shared/model/views.ts';
import { createForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';
import { ForwarderMetric } from '#shared/observability/metric-names.ts';
import type { StreamEvent } from '#shared/ports/watch-source.ts';

type Mode = 'watch-410' | 'list-410' | 'watch-ends' | 'good' | 'endless-line' | 'endless-pages' | 'garbage';

const GONE = JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', code: 410, message: 'too old resource version' });
const NODE = (name: string, rv: string) => ({ metadata: { name, uid: `uid-${name}`, resourceVersion: rv }, spec: {} });
const SECRET = 'PLANTED-hostile-7c1d';

interface Hostile {
  readonly endpoint: ClusterEndpoint;
  mode: Mode;
  /** Every request: when (ms since start), whether a watch or a list's next page, and whether it was answered as a failure. */
  readonly requests: Array<{ at: number; watch: boolean; continued: boolean; failed: boolean }>;
  close(): Promise<void>;
}

async function hostileServer(mode: Mode, started: number): Promise<Hostile> {
  const requests: Hostile['requests'] = [];
  const state = { mode };
  let pages = 0;
  const server = http.createServer((req, res) => {
    const query = new URL(req.url ?? '/', 'http://x').searchParams;
    const watch = query.get('watch') === '1';
    const m = state.mode;
    const failed = m !== 'good';
    requests.push({ at: Date.now() - started, watch, continued: query.has('continue'), failed });
    if ((m === 'watch-410' && watch) || m === 'list-410') {
      res.writeHead(410, { 'content-type': 'application/json' }).end(GONE);
      return;
    }
    if (!watch) {
      if (m === 'endless-pages') {
        res.writeHead(200).end(JSON.stringify({ kind: 'NodeList', metadata: { resourceVersion: '100', continue: `more-${pages++}` }, items: [] }));
        return;
      }
      res.writeHead(200).end(JSON.stringify({ kind: 'NodeList', metadata: { resourceVersion: '100' }, items: [NODE('n1', '100')] }));
      return;
    }
    if (m === 'watch-ends') {
      res.writeHead(200).end();
      return;
    }
    res.writeHead(200);
    if (m === 'good') {
      res.write(`${JSON.stringify({ type: 'ADDED', object: NODE(`n-${requests.length}`, String(200 + requests.length)) })}\n`);
      return; // and stays open
    }
    const flood = setInterval(() => {
      if (m === 'endless-line') res.write('x'.repeat(64 * 1024));
      else for (let i = 0; i < 50; i++) res.write(`<html>\u001b[31m${SECRET} garbage ${i}\n`);
    }, 2);
    res.on('close', () => clearInterval(flood));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const hostile: Hostile = {
    endpoint: { getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }), applyToHTTPSOptions: async () => undefined },
    get mode() {
      return state.mode;
    },
    set mode(next: Mode) {
      state.mode = next;
    },
    requests,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return hostile;
}

interface Observed {
  readonly health: Array<{ at: number; event: StreamEvent<NodeFacts> }>;
  readonly logs: Array<{ at: number; level: string; message: string; attrs: Record<string, unknown> }>;
  readonly telemetry: ReturnType<typeof createForwarderTelemetry>;
  stop(): Promise<void>;
}

function runSession(server: Hostile, started: number, extra: Partial<WatchSessionOptions<NodeFacts>> = {}): Observed {
  const health: Observed['health'] = [];
  const logs: Observed['logs'] = [];
  const keep = (level: string) => (message: string, attrs: Record<string, unknown> = {}) => void logs.push({ at: Date.now() - started, level, message, attrs });
  const telemetry = createForwarderTelemetry();
  const session = new WatchSession<NodeFacts>({
    name: 'nodes/fleet/hostile',
    kubeConfig: async () => server.endpoint,
    path: '/api/v1/nodes',
    toFacts: toNodeFacts,
    telemetry,
    logger: { info: keep('info'), warn: keep('warn'), error: keep('error'), debug: keep('debug') } as never,
    ...extra,
  });
  const controller = new AbortController();
  const done = session.run(controller.signal, async (event) => {
    if (event.type === 'failing' || event.type === 'recovered') health.push({ at: Date.now() - started, event });
  });
  return {
    health,
    logs,
    telemetry,
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(probe: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

describe('Watch session: the loops the review measured', () => {
  it(
    'every watch 410, every list 410, every watch ended at once: at most one request a second after 5 s, and recovery within one backoff step',
    async () => {
      const loops: Mode[] = ['watch-410', 'list-410', 'watch-ends'];
      const results = await Promise.all(
        loops.map(async (mode) => {
          // Prepare: the default retry numbers; every retry logged (no rate limit), to know the step in progress.
          const started = Date.now();
          const server = await hostileServer(mode, started);
          const observed = runSession(server, started, { logIntervalMs: 0 });
          try {
            // Act 1: 12 s of misbehaviour.
            await sleep(12_000);
            const switchedAt = Date.now() - started;
            const inWindow = server.requests.filter((r) => r.at >= 5_000 && r.at < switchedAt).length;
            // Act 2: the server behaves.
            server.mode = 'good';
            const recovered = await until(() => observed.health.find((h) => h.event.type === 'recovered'), 40_000, `${mode}: recovery`);
            const retries = observed.logs.filter((l) => l.message === 'Retrying watch after error');
            const step = retries.filter((l) => l.at <= recovered.at).at(-1);
            return { mode, inWindow, windowMs: switchedAt - 5_000, switchedAt, recovered, step, retries, server, observed };
          } finally {
            await observed.stop();
            await server.close();
          }
        }),
      );

      for (const r of results) {
        // Assess: rate after the first 5 s.
        expect(r.inWindow, `${r.mode}: requests between 5 s and ${r.switchedAt} ms`).toBeLessThanOrEqual(Math.floor(r.windowMs / 1_000));
        // Reported failing (the loops' failures repeat), with a reason that names the failure.
        const failing = r.observed.health.find((h) => h.event.type === 'failing');
        expect(failing, r.mode).toBeDefined();
        expect(failing?.at).toBeLessThan(r.switchedAt);
        // Recovery: within the backoff step in progress when the server started behaving (plus the time of one
        // list and watch on loopback), and no failing answer after the switch.
        expect(r.step, r.mode).toBeDefined();
        expect(r.recovered.at, `${r.mode}: recovered at`).toBeLessThanOrEqual((r.step?.at ?? 0) + Number(r.step?.attrs['delayMs']) + 1_500);
        expect(r.server.requests.filter((q) => q.at >= r.switchedAt && q.failed), r.mode).toEqual([]);
        expect(r.retries.filter((l) => l.at > r.switchedAt + 200), r.mode).toEqual([]);
      }
      // The requests per 10 s, for the closing note.
      console.info(results.map((r) => `${r.mode}: ${r.server.requests.filter((q) => q.at < 10_000).length} requests in the first 10 s, ${r.inWindow} in the ${r.windowMs} ms after 5 s`).join('\n'));
    },
    90_000,
  );
});

describe('Watch session: caps and bounded logs', () => {
  const cut: ReadonlyArray<{ mode: Mode; reason: RegExp }> = [
    { mode: 'endless-line', reason: /^watching \/api\/v1\/nodes failed: a line exceeds 4194304 bytes$/ },
    { mode: 'endless-pages', reason: /^listing \/api\/v1\/nodes failed: the list has more than 200 pages$/ },
    { mode: 'garbage', reason: /^watching \/api\/v1\/nodes failed: 20 malformed lines in a row$/ },
  ];
  it.each(cut)('cuts a stream at a cap ($mode), reports it failing with a safe reason, and retries with backoff', async ({ mode, reason }) => {
    // Prepare
    const started = Date.now();
    const server = await hostileServer(mode, started);
    const observed = runSession(server, started);

    try {
      // Act: three failed attempts (an endless list: one, then 5 s more).
      const attemptsWanted = mode === 'endless-pages' ? 1 : 3;
      await until(() => (observed.telemetry.counts()[ForwarderMetric.WatchRestarts] >= attemptsWanted ? true : undefined), 20_000, 'failed attempts');
      if (mode === 'endless-pages') await sleep(5_000);

      // Assess
      const failing = observed.health.find((h) => h.event.type === 'failing')?.event;
      expect(failing?.type === 'failing' ? failing.reason : undefined).toMatch(reason);
      const attempts = server.requests.filter((q) => (mode === 'endless-pages' ? !q.watch && !q.continued : q.watch));
      if (mode === 'endless-pages') {
        // A failed attempt waits a second per request it made: the 200 pages, then nothing for 200 s.
        expect(attempts).toHaveLength(1);
        expect(server.requests).toHaveLength(200);
      } else {
        // Backoff: the third attempt no sooner than the two first steps' least waits (0.8 s + 1.6 s).
        expect(attempts.length).toBeGreaterThanOrEqual(3);
        expect(attempts[2]?.at ?? 0).toBeGreaterThanOrEqual((attempts[0]?.at ?? 0) + 2_400 - 50);
      }
      // Logs: one line per kind in the interval, nothing of the server's bytes beyond a short escaped excerpt.
      const text = JSON.stringify(observed.logs);
      expect(observed.logs.filter((l) => l.message === 'Retrying watch after error')).toHaveLength(1);
      expect(observed.logs.filter((l) => l.message === 'Skipping malformed watch event').length).toBeLessThanOrEqual(1);
      expect(text.length).toBeLessThan(4_000);
      if (mode === 'garbage') {
        expect(observed.telemetry.counts()[ForwarderMetric.MalformedWatchEvents]).toBeGreaterThanOrEqual(60);
        const excerpt = observed.logs.find((l) => l.message === 'Skipping malformed watch event')?.attrs['excerpt'];
        expect(excerpt).toBe(`"<html>\\u001b[31m${SECRET} garbage 0"`);
        expect(excerpt).not.toContain('\u001b');
      }
    } finally {
      await observed.stop();
      await server.close();
    }
  }, 30_000);
});
