import { describe, expect, it } from 'vitest';
import { DEFAULT_CALL_TIMEOUT_MS, callSignal, isCallTimeout, withCallDeadline } from '#shared/adapters/kubernetes/call-deadline.ts';
import { describeApiError, toProductError } from '#shared/adapters/kubernetes/api-errors.ts';
import { CallTimeoutError, TransientError } from '#shared/errors.ts';

describe('Function: callSignal()', () => {
  it('is aborted already when the scope\'s deadline has passed, with a TimeoutError', async () => {
    // Act
    const signal = await withCallDeadline(Date.now() - 1, async () => callSignal());

    // Assess
    expect(signal.aborted).toBe(true);
    expect(isCallTimeout(signal.reason)).toBe(true);
  });

  it('fires after the call timeout of the innermost scope, never later than an outer deadline', async () => {
    // Act: an outer deadline 10 s away, an inner scope asking for 60 s calls of at most 50 ms.
    const fired = await withCallDeadline(Date.now() + 10_000, () =>
      withCallDeadline(Date.now() + 60_000, async () => {
        const signal = callSignal();
        const started = Date.now();
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        return { after: Date.now() - started, reason: signal.reason as Error };
      }, 50),
    );

    // Assess
    expect(fired.after).toBeGreaterThanOrEqual(40);
    expect(fired.after).toBeLessThan(2_000);
    expect(fired.reason.name).toBe('TimeoutError');
  });

  it('bounds a call outside any scope by the default timeout', () => {
    // Act
    const signal = callSignal();

    // Assess
    expect(signal.aborted).toBe(false);
    expect(DEFAULT_CALL_TIMEOUT_MS).toBe(30_000);
  });
});

describe('Function: toProductError() for a call that ran out of time', () => {
  it('is a CallTimeoutError (a TransientError) that says so, not an "HTTP 23" from the DOMException code', () => {
    // Prepare
    const timeout = new DOMException('The operation was aborted due to timeout', 'TimeoutError');

    // Act
    const error = toProductError('Reading Node n1', timeout);

    // Assess
    expect(error).toBeInstanceOf(CallTimeoutError);
    expect(error).toBeInstanceOf(TransientError);
    expect(toProductError('Reading Node n1', new Error('connect ECONNREFUSED'))).not.toBeInstanceOf(CallTimeoutError);
    expect(error.message).toBe("Reading Node n1 failed: no answer within the call's deadline (The operation was aborted due to timeout)");
    expect(describeApiError(timeout)).not.toContain('HTTP');
  });
});
