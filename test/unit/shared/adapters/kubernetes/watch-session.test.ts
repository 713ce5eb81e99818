import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { describeStreamFailure } from '#shared/adapters/kubernetes/api-errors.ts';
import { WatchSession, type WatchSessionOptions } from '#shared/adapters/kubernetes/watch-session.ts';
import { toNodeFacts, type NodeFacts } from '#shared/model/views.ts';
import { AccessDeniedError, ClusterCredentialsError, TransientError } from '#shared/errors.ts';

const SECRET = 'PLANTED-token-5d1e';

describe('Function: describeStreamFailure()', () => {
  const cases: ReadonlyArray<{ name: string; error: unknown; want: string }> = [
    // the product's own errors: messages built from codes, Status reason/message and deadlines
    { name: 'a transient failure', error: new TransientError('listing /api/v1/nodes', 'HTTP 503: ServiceUnavailable'), want: 'listing /api/v1/nodes failed: HTTP 503: ServiceUnavailable' },
    { name: 'a refused credential', error: new AccessDeniedError('watching /api/v1/nodes', 'HTTP 401: Unauthorized'), want: 'watching /api/v1/nodes was refused: HTTP 401: Unauthorized' },
    { name: 'unusable credentials', error: new ClusterCredentialsError('fleet/wc1', 'Secret fleet/wc1-kubeconfig not found'), want: 'No usable credentials for cluster fleet/wc1: Secret fleet/wc1-kubeconfig not found' },
    // system errors: their code and message
    { name: 'a refused connection', error: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' }), want: 'connect ECONNREFUSED 127.0.0.1:6443' },
    { name: 'a TLS failure', error: Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }), want: 'DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate' },
    // anything else: its class only
    { name: 'a parser error quoting a body', error: new SyntaxError(`Unexpected token '<', "<html>${SECRET}" is not valid JSON`), want: 'SyntaxError (details withheld: the message may quote a response)' },
    { name: 'an error with a code that is not a system code', error: Object.assign(new Error(`body ${SECRET}`), { code: 42 }), want: 'Error (details withheld: the message may quote a response)' },
    { name: 'a thrown string', error: SECRET, want: 'unknown error' },
  ];

  it.each(cases)('$name', ({ error, want }) => {
    // Act
    const described = describeStreamFailure(error);

    // Assess
    expect(described).toBe(want);
    expect(described).not.toContain(SECRET);
  });
});

/**
 * A loopback API server that answers the Node list and watch requests with `respond` (recording each request's URL),
 * and a Node WatchSession against it with the given options (e.g. `resumeFrom`).
 */
async function loopbackSession(
  respond: (watch: boolean, res: http.ServerResponse) => void,
  start: Pick<WatchSessionOptions<NodeFacts>, 'resumeFrom' | 'keep' | 'quietLists' | 'resyncIntervalMs'>,
): Promise<{ session: WatchSession<NodeFacts>; requests: string[]; resolved: () => number; close: () => Promise<void> }> {
  const requests: string[] = [];
  let resolved = 0;
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    respond(new URL(req.url ?? '/', 'http://x').searchParams.get('watch') === '1', res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };
  const session = new WatchSession<NodeFacts>({
    name: 'nodes/self',
    kubeConfig: async () => {
      resolved++;
      return { getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }), applyToHTTPSOptions: async () => undefined };
    },
    path: '/api/v1/nodes',
    toFacts: toNodeFacts,
    ...start,
    backoff: { initialMs: 10, maxMs: 20 },
    logger: silent,
  });
  const close = async (): Promise<void> => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  };
  return { session, requests, resolved: () => resolved, close };
}

describe('Class: WatchSession, relisting after a 410', () => {
  it('relists against what it holds and announces what changed and what was deleted while away', async () => {
    // Prepare: a loopback server whose first list has `kept` and `gone` and whose first watch expires at once
    // (ERROR 410); the relist then lacks `gone` and has a tainted `kept`; the second watch stays open.
    const node = (name: string, rv: string, taints: unknown[] = []) => ({ metadata: { name, uid: `uid-${name}`, resourceVersion: rv }, spec: { taints } });
    const lists = [
      { rv: '20', items: [node('kept', '10'), node('gone', '11')] },
      { rv: '30', items: [node('kept', '25', [{ key: 'k', effect: 'NoSchedule' }])] },
    ];
    let listed = 0;
    let watches = 0;
    const { session, requests, close } = await loopbackSession((watch, res) => {
      if (!watch) {
        const list = lists[Math.min(listed++, lists.length - 1)];
        res.writeHead(200).end(JSON.stringify({ kind: 'NodeList', metadata: { resourceVersion: list?.rv }, items: list?.items }));
        return;
      }
      if (watches++ === 0) res.writeHead(200).end(`${JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } })}\n`);
      else res.writeHead(200).write(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '31' } } })}\n`);
    }, {});
    const events: string[] = [];
    const controller = new AbortController();

    // Act
    await session.run(controller.signal, async (e) => {
      events.push(e.type === 'change' ? `${e.change} ${e.facts.name}` : e.type === 'progress' ? `progress ${e.resourceVersion}` : e.type);
      if (e.type === 'progress' && e.resourceVersion === '31') controller.abort();
    });
    await close();

    // Assess: the first watch was from the first list's resourceVersion; the relist announced only the difference.
    expect(new URL(requests[1] ?? '', 'http://x').searchParams.get('resourceVersion')).toBe('20');
    expect(events).toEqual(['resynced kept', 'resynced gone', 'progress 20', 'resynced kept', 'deleted gone', 'progress 30', 'progress 31']);
    expect([...session.objects()]).toMatchObject([{ name: 'kept', resourceVersion: '25' }]);
  });
});

describe('Class: WatchSession, resumed at a checkpoint', () => {
  it('lists exactly at the checkpoint without announcing the objects, tells its consumer what it listed, then watches from there', async () => {
    // Prepare: a loopback server whose list holds two objects unchanged since the checkpoint; its watch sends a bookmark and stays open.
    const node = (name: string, rv: string) => ({ metadata: { name, uid: `uid-${name}`, resourceVersion: rv }, spec: { providerID: `local://${name}` } });
    const { session, requests, resolved, close } = await loopbackSession((watch, res) => {
      if (!watch) res.writeHead(200).end(JSON.stringify({ kind: 'NodeList', metadata: { resourceVersion: '10' }, items: [node('a', '5'), node('b', '6')] }));
      else res.writeHead(200).write(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: '11' } } })}\n`);
    }, { resumeFrom: '10' });
    const events: string[] = [];
    const controller = new AbortController();

    // Act
    await session.run(controller.signal, async (e) => {
      events.push(e.type === 'change' ? `${e.change} ${e.facts.name}` : e.type === 'progress' ? `progress ${e.resourceVersion}` : e.type === 'listed' ? `listed ${e.items.map((i) => `${i.name}@${i.providerID}`).join(',')}` : e.type);
      if (e.type === 'progress' && e.resourceVersion === '11') controller.abort();
    });
    await close();

    // Assess: the list was made at the checkpoint (exact), no object was announced, the listed ones were told.
    const list = new URL(requests[0] ?? '', 'http://x').searchParams;
    expect([list.get('resourceVersion'), list.get('resourceVersionMatch')]).toEqual(['10', 'Exact']);
    expect(events).toEqual(['listed a@local://a,b@local://b', 'progress 11']);
    // One attempt (its list and its watch) resolved the credentials once: a workload cluster's Secret read once, not twice.
    expect(resolved()).toBe(1);
  });
});

describe('Class: WatchSession, with quiet lists (the consumer judges what a list does not announce)', () => {
  it('announces nothing at its first list and, at a periodic resync, only what changed since it had it and deletions; the rest is handed over unannounced', async () => {
    // Prepare: the first list has a, b and c; the next (the resync) a as it was, b tainted, no c; each watch sends a bookmark.
    const node = (name: string, rv: string, taints: unknown[] = []) => ({ metadata: { name, uid: `uid-${name}`, resourceVersion: rv }, spec: { taints } });
    const lists = [
      { rv: '10', items: [node('a', '5'), node('b', '6'), node('c', '7')] },
      { rv: '20', items: [node('a', '5'), node('b', '15', [{ key: 'k', effect: 'NoSchedule' }])] },
    ];
    let listed = 0;
    const { session, close } = await loopbackSession((watch, res) => {
      if (!watch) {
        const list = lists[Math.min(listed++, lists.length - 1)];
        res.writeHead(200).end(JSON.stringify({ kind: 'NodeList', metadata: { resourceVersion: list?.rv }, items: list?.items }));
        return;
      }
      res.writeHead(200).write(`${JSON.stringify({ type: 'BOOKMARK', object: { metadata: { resourceVersion: listed === 1 ? '11' : '21' } } })}\n`);
    }, { quietLists: true, resyncIntervalMs: 100 });
    const events: string[] = [];
    const controller = new AbortController();

    // Act: until the bookmark after the resync.
    await session.run(controller.signal, async (e) => {
      const names = (items: readonly NodeFacts[] | undefined) => (items ?? []).map((i) => i.name).join(',');
      events.push(e.type === 'change' ? `${e.change} ${e.facts.name}` : e.type === 'progress' ? `progress ${e.resourceVersion}` : e.type === 'listed' ? `listed ${names(e.items)} unannounced ${names(e.unannounced)}` : e.type);
      if (e.type === 'progress' && e.resourceVersion === '21') controller.abort();
    });
    await close();

    // Assess
    expect(events.filter((e) => e !== 'progress 11')).toEqual(['listed a,b,c unannounced a,b,c', 'progress 10', 'listed a,b unannounced a', 'resynced b', 'deleted c', 'progress 20', 'progress 21']);
    expect(session.hasSynced()).toBe(true);
  });
});

describe('Class: WatchSession, hasSynced', () => {
  it('holds nothing before its first list, and counts as holding its collection while the server does not serve it (404)', async () => {
    // Prepare: a server that does not serve the collection.
    const { session, close } = await loopbackSession((_watch, res) => {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'NotFound', code: 404 }));
    }, {});
    const before = session.hasSynced();
    const controller = new AbortController();

    // Act: until the stream reports itself failing.
    await session.run(controller.signal, async (e) => {
      if (e.type === 'failing') controller.abort();
    });
    await close();

    // Assess
    expect(before).toBe(false);
    expect(session.hasSynced()).toBe(true);
  });
});

describe('Class: WatchSession, keeping only some objects (a forwarder shard)', () => {
  it('drops the objects it does not keep from the list and the watch, moves its resume point past them, and forgets one that stops being kept', async () => {
    // Prepare: a list of `mine-a` and `other-b`; the watch then changes `other-b`, then moves `mine-a` out (label), then a bookmark.
    const node = (name: string, rv: string, shard = name.split('-')[0]) => ({ metadata: { name, uid: `uid-${name}`, resourceVersion: rv, annotations: { 'cluster.x-k8s.io/cluster-name': shard } } });
    const line = (type: string, object: unknown) => `${JSON.stringify({ type, object })}\n`;
    const { session, close } = await loopbackSession((watch, res) => {
      if (!watch) res.writeHead(200).end(JSON.stringify({ kind: 'NodeList', metadata: { resourceVersion: '10' }, items: [node('mine-a', '5'), node('other-b', '6')] }));
      else res.writeHead(200).write(line('MODIFIED', node('other-b', '11')) + line('MODIFIED', node('mine-a', '12', 'other')) + line('BOOKMARK', { metadata: { resourceVersion: '13' } }));
    }, { keep: (facts) => facts.annotations['cluster.x-k8s.io/cluster-name'] === 'mine' });
    const events: string[] = [];
    const controller = new AbortController();

    // Act
    await session.run(controller.signal, async (e) => {
      events.push(e.type === 'change' ? `${e.change} ${e.facts.name}` : e.type === 'progress' ? `progress ${e.resourceVersion}` : e.type);
      if (e.type === 'progress' && e.resourceVersion === '13') controller.abort();
    });
    await close();

    // Assess: only `mine-a` was announced and held; every dropped change still moved the resume point.
    expect(events).toEqual(['resynced mine-a', 'progress 10', 'progress 11', 'progress 12', 'progress 13']);
    expect([...session.objects()]).toEqual([]);
  });
});
