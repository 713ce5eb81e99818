import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import { linkAbort } from '#shared/adapters/kubernetes/watch/abort-link.ts';

describe('Function: linkAbort()', () => {
  it("aborts the controller with the first source's reason, and the unlink leaves no listener on any source", () => {
    // Prepare
    const [session, page] = [new AbortController(), new AbortController()];
    const linked = new AbortController();
    const unlink = linkAbort(linked, [session.signal, page.signal]);

    // Act
    page.abort(new Error('page deadline'));
    unlink();

    // Assess
    expect(linked.signal.reason).toEqual(new Error('page deadline'));
    expect(getEventListeners(session.signal, 'abort')).toHaveLength(0);
    expect(getEventListeners(page.signal, 'abort')).toHaveLength(0);
  });

  it('aborts at once when a source has already aborted', () => {
    // Prepare
    const session = new AbortController();
    session.abort(new Error('window ended'));
    const linked = new AbortController();

    // Act
    linkAbort(linked, [session.signal])();

    // Assess
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toEqual(new Error('window ended'));
  });
});
