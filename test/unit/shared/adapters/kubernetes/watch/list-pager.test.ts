import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { StreamCapError } from '#shared/adapters/kubernetes/watch/caps.ts';
import { listPages, readErrorBody, type ListPagesOptions, type PageResponse } from '#shared/adapters/kubernetes/watch/list-pager.ts';
import { TransientError } from '#shared/errors.ts';
import { manualClock } from '#test/support/manual-clock.ts';

const MiB = 1024 * 1024;

/** An answer whose body is `chunks` (pulled lazily); `pulled()` counts the chunks read, `destroyed` whether it was destroyed. */
function answer(status: number, chunks: Iterable<Buffer | string>): PageResponse & { pulled(): number; destroyed: boolean } {
  let pulled = 0;
  const res = {
    statusCode: status,
    destroyed: false,
    pulled: () => pulled,
    destroy() {
      res.destroyed = true;
    },
    async *[Symbol.asyncIterator]() {
      for (const c of chunks) {
        if (res.destroyed) return;
        pulled++;
        yield c;
      }
    },
  };
  return res;
}

const page = (items: unknown[], metadata: Record<string, unknown>): string => JSON.stringify({ kind: 'List', metadata, items });

/** listPages over `pages` (one answer per request, in order); records each request's query. */
async function run(pages: Array<() => PageResponse>, extra: Partial<ListPagesOptions> = {}): Promise<{ items: unknown[]; queries: unknown[]; result?: unknown; error?: unknown }> {
  const items: unknown[] = [];
  const queries: unknown[] = [];
  let i = 0;
  try {
    const result = await listPages({
      openPage: async (query) => {
        queries.push(query);
        const next = pages[Math.min(i++, pages.length - 1)] as () => PageResponse;
        return next();
      },
      failed: async (_res, status) => new Error(`status ${status}`),
      pageSignal: () => new AbortController().signal,
      onItem: (json) => items.push(json === undefined ? undefined : JSON.parse(json)),
      pageSize: 2,
      operation: 'listing /api/v1/nodes',
      ...extra,
    });
    return { items, queries, result };
  } catch (error) {
    return { items, queries, error };
  }
}

describe('Function: listPages()', () => {
  it("ends a page when the caller's long-lived signal aborts, and leaves no listener on it after each page", async () => {
    // Prepare: a session's signal, and a second list whose page never answers until that signal aborts.
    const session = new AbortController();
    const ok = await run([() => answer(200, [page([{ a: 1 }], { resourceVersion: '5', continue: 'c' })]), () => answer(200, [page([{ a: 2 }], { resourceVersion: '5' })])], { signal: session.signal });
    const listenersAfterList = getEventListeners(session.signal, 'abort').length;
    const hanging = listPages({
      openPage: (_query, signal) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))),
      failed: async (_res, status) => new Error(`status ${status}`),
      pageSignal: () => new AbortController().signal,
      onItem: () => undefined,
      pageSize: 2,
      operation: 'listing /api/v1/nodes',
      signal: session.signal,
    });

    // Act
    session.abort(new Error('the window ended'));

    // Assess
    expect(ok.items).toEqual([{ a: 1 }, { a: 2 }]);
    expect(listenersAfterList).toBe(0);
    await expect(hanging).rejects.toThrow('the window ended');
    expect(getEventListeners(session.signal, 'abort')).toHaveLength(0);
  });

  it('reads every page, the first exactly at the resourceVersion asked for, the others by their continue token', async () => {
    // Act
    const { items, queries, result } = await run(
      [() => answer(200, [page([{ a: 1 }, { a: 2 }], { resourceVersion: '10', continue: 'c1' })]), () => answer(200, [page([{ a: 3 }], { resourceVersion: '11' })])],
      { exactly: '9' },
    );

    // Assess
    expect(items).toEqual([{ a: 1 }, { a: 2 }, { a: 3 }]);
    expect(queries).toEqual([
      { limit: '2', resourceVersion: '9', resourceVersionMatch: 'Exact' },
      { limit: '2', continue: 'c1' },
    ]);
    expect(result).toEqual({ resourceVersion: '10' });
  });

  it('rejects a non-200 page with the error `failed` makes of it', async () => {
    const { error } = await run([() => answer(410, ['{}'])]);
    expect((error as Error).message).toBe('status 410');
  });

  const notLists: ReadonlyArray<{ name: string; body: string; detail: string }> = [
    { name: 'an empty answer', body: '', detail: 'the list answer is empty' },
    { name: 'text that is not JSON', body: '<html>PLANTED</html>', detail: 'the list answer is not JSON' },
    { name: 'an item that is not JSON', body: '{"metadata":{},"items":[{"a":PLANTED}]}', detail: 'the list answer is not JSON' },
    { name: 'JSON that is not a list', body: '{"kind":"Status"}', detail: 'the answer is not a list' },
  ];
  it.each(notLists)('rejects $name as a TransientError that does not quote it', async ({ body, detail }) => {
    // Act
    const { error } = await run([() => answer(200, [body])]);

    // Assess
    expect(error).toBeInstanceOf(TransientError);
    expect((error as Error).message).toBe(`listing /api/v1/nodes failed: ${detail}`);
  });

  it('cuts a list whose continue tokens never end at the page cap', async () => {
    // Prepare: every page empty, with a fresh token.
    let n = 0;
    const endless = (): PageResponse => answer(200, [page([], { resourceVersion: '1', continue: `c${n++}` })]);

    // Act
    const { error, queries } = await run([endless], { caps: { maxPages: 50 } });

    // Assess
    expect(error).toBeInstanceOf(StreamCapError);
    expect((error as Error).message).toBe('listing /api/v1/nodes failed: the list has more than 50 pages');
    expect(queries).toHaveLength(50);
  });

  it('cuts a list that takes longer than its time cap (the injected clock)', async () => {
    // Prepare: each page takes a simulated minute.
    const clock = manualClock();
    let n = 0;
    const slow = (): PageResponse => {
      clock.advance(60_000);
      return answer(200, [page([{ n }], { resourceVersion: '1', continue: `c${n++}` })]);
    };

    // Act
    const { error, items } = await run([slow], { caps: { maxListMs: 600_000 }, now: () => clock.now().getTime() });

    // Assess
    expect((error as Error).message).toBe('listing /api/v1/nodes failed: the list took longer than 600000 ms');
    expect(items).toHaveLength(11); // the 11th page started at exactly 10 minutes
  });

  it('cuts an endless page at the page cap, pulling no further, and destroys the answer', async () => {
    // Prepare: 100 MiB of items of 1 KiB, lazily.
    const item = `{"x":"${'a'.repeat(1_000)}"},`;
    const chunk = Buffer.from(item.repeat(64));
    const res = answer(200, (function* () {
      yield Buffer.from('{"metadata":{"resourceVersion":"1"},"items":[');
      for (let i = 0; i < (100 * MiB) / chunk.length; i++) yield chunk;
    })());

    // Act
    const { error, items } = await run([() => res], { caps: { maxPageBytes: 4 * MiB } });

    // Assess
    expect((error as Error).message).toBe(`listing /api/v1/nodes failed: a list page exceeds ${4 * MiB} bytes`);
    expect(res.destroyed).toBe(true);
    expect(res.pulled() * chunk.length).toBeLessThanOrEqual(4 * MiB + 2 * chunk.length);
    expect(items.length).toBeGreaterThan(0);
  });

  it('cuts a list whose pages together exceed the list cap', async () => {
    // Prepare: pages of about 1 KiB each, endless.
    let n = 0;
    const pages = (): PageResponse => answer(200, [page([{ x: 'a'.repeat(1_000) }], { resourceVersion: '1', continue: `c${n++}` })]);

    // Act
    const { error, queries } = await run([pages], { caps: { maxListBytes: 10_000 } });

    // Assess
    expect((error as Error).message).toBe('listing /api/v1/nodes failed: the list exceeds 10000 bytes');
    expect(queries.length).toBeLessThanOrEqual(10);
  });

  it('cuts a 100 MiB item at the item cap, pulling no further', async () => {
    // Prepare
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    const res = answer(200, (function* () {
      yield Buffer.from('{"metadata":{"resourceVersion":"1"},"items":[{"x":"');
      for (let i = 0; i < 1_600; i++) yield chunk;
    })());

    // Act
    const { error } = await run([() => res], { caps: { maxItemBytes: 4 * MiB } });

    // Assess
    expect(error).toBeInstanceOf(StreamCapError);
    expect((error as Error).message).toBe(`listing /api/v1/nodes failed: a list item exceeds ${4 * MiB} bytes`);
    expect(res.pulled()).toBeLessThanOrEqual(4 * 16 + 2);
  });

  it("rejects with the page signal's reason when it fired while the page was read", async () => {
    // Prepare
    const controller = new AbortController();
    const res = answer(200, (function* () {
      yield '{"metadata":{"resourceVersion":"1"},"items":[';
      controller.abort(new DOMException('deadline', 'TimeoutError'));
      throw new Error('aborted');
    })());

    // Act
    const { error } = await run([() => res], { pageSignal: () => controller.signal });

    // Assess
    expect((error as Error).name).toBe('TimeoutError');
  });
});

describe('Function: readErrorBody()', () => {
  it('reads at most the cap of an error body and destroys the answer', async () => {
    // Prepare
    const res = answer(500, (function* () {
      for (let i = 0; i < 1_000; i++) yield Buffer.alloc(1_024, 0x62);
    })());

    // Act
    const text = await readErrorBody(res, 4_096);

    // Assess
    expect(text).toHaveLength(4_096);
    expect(res.destroyed).toBe(true);
    expect(res.pulled()).toBe(4);
  });
});
