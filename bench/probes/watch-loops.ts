/**
 * `node bench/probes/watch-loops.ts [--seconds=10]`
 *
 * Probe of the three loops the review measured (shared/guide/code-review.md §1, issue 33): one watch session of
 * the product (its public API only, so that the same probe runs on any commit) against a loopback `node:http`
 * server that
 * - `watch-410`: lists fine and answers every watch with HTTP 410 Expired;
 * - `list-410`: answers every list with HTTP 410 Expired;
 * - `watch-ends`: lists fine and answers every watch with 200 and an empty body that ends at once.
 * For each it prints the requests the server saw in the first `--seconds` (default 10), and those after the first 5 s.
 * The product's own logs are silenced (the session gets a logger that drops everything), so the terminal is not
 * what is measured.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { WatchSession } from '#shared/adapters/kubernetes/watch-session.ts';
import { toNodeFacts } from '#shared/model/views.ts';

type Loop = 'watch-410' | 'list-410' | 'watch-ends';
const LOOPS: readonly Loop[] = ['watch-410', 'list-410', 'watch-ends'];

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, only: { type: 'string' } } });
const seconds = Number(values.seconds);
const only = values.only ? (values.only.split(',') as Loop[]) : LOOPS;

const GONE = JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', code: 410, message: 'too old resource version' });
const LIST = JSON.stringify({ kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: '100' }, items: [] });

async function probe(loop: Loop): Promise<{ loop: Loop; total: number; after5s: number; lists: number; watches: number }> {
  const started = Date.now();
  let total = 0;
  let after5s = 0;
  let lists = 0;
  let watches = 0;
  const server = http.createServer((req, res) => {
    total++;
    if (Date.now() - started >= 5_000) after5s++;
    const isWatch = new URL(req.url ?? '/', 'http://x').searchParams.get('watch') === '1';
    if (isWatch) watches++;
    else lists++;
    const gone = (loop === 'watch-410' && isWatch) || (loop === 'list-410' && !isWatch);
    if (gone) {
      res.writeHead(410, { 'content-type': 'application/json' }).end(GONE);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(isWatch ? '' : LIST);
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const silent = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined };
  const session = new WatchSession({
    name: `probe/${loop}`,
    kubeConfig: async () => ({ getCurrentCluster: () => ({ server: `http://127.0.0.1:${port}` }), applyToHTTPSOptions: async () => undefined }),
    path: '/api/v1/nodes',
    toFacts: toNodeFacts,
    logger: silent,
  });
  const controller = new AbortController();
  const running = session.run(controller.signal, async () => undefined);
  await new Promise((r) => setTimeout(r, seconds * 1_000));
  controller.abort();
  await running;
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  return { loop, total, after5s, lists, watches };
}

for (const loop of only) {
  const r = await probe(loop);
  const perSecondAfter5 = seconds > 5 ? (r.after5s / (seconds - 5)).toFixed(2) : 'n/a';
  process.stdout.write(`${r.loop}: ${r.total} requests in ${seconds} s (${r.lists} lists, ${r.watches} watches); after the first 5 s: ${r.after5s} (${perSecondAfter5}/s)\n`);
}
