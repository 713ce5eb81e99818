/** `npm run status` retries a read answered 429 after its Retry-After, as kubectl does (local/cluster-status.ts). */
import { ApiException } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { retryThrottled } from '#local/cluster-status.ts';

const throttled = (retryAfter?: string): ApiException<string> =>
  new ApiException(429, 'TooManyRequests', '{"kind":"Status","message":"storage is (re)initializing"}', retryAfter === undefined ? {} : { 'retry-after': retryAfter });

describe('retryThrottled', () => {
  it('retries a 429 after its Retry-After (1 s when absent, at most 5 s) and returns the answer that follows', async () => {
    // Prepare
    const answers: Array<() => string> = [
      () => { throw throttled('2'); },
      () => { throw throttled(); },
      () => { throw throttled('60'); },
      () => 'items',
    ];
    const waits: number[] = [];

    // Act
    const result = await retryThrottled(async () => (answers.shift() as () => string)(), async (ms) => { waits.push(ms); });

    // Assess
    expect(result).toBe('items');
    expect(waits).toEqual([2000, 1000, 5000]);
  });

  it('gives up after 5 attempts with the last 429, and never retries other failures', async () => {
    // Prepare
    let calls = 0;
    const waits: number[] = [];

    // Act
    const always429 = retryThrottled(async () => { calls++; throw throttled('1'); }, async (ms) => { waits.push(ms); });
    const forbidden = retryThrottled(async () => { throw new ApiException(403, 'Forbidden', '{}', {}); }, async () => { throw new Error('no wait expected'); });

    // Assess
    await expect(always429).rejects.toMatchObject({ code: 429 });
    expect(calls).toBe(5);
    expect(waits).toHaveLength(4);
    await expect(forbidden).rejects.toMatchObject({ code: 403 });
  });
});
