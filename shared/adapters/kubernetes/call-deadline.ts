/**
 * Deadlines for Kubernetes API calls: each call's AbortSignal (the body read included) ends at the innermost
 * `withCallDeadline` scope's call timeout or deadline; a call out of time is a retried TransientError, never a hang.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

/** Bound of a call made outside any scope (e.g. a tool's one-off read). */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

interface Scope {
  /** Epoch ms after which no call may run. */
  readonly deadline: number;
  readonly callTimeoutMs: number;
}

const scopes = new AsyncLocalStorage<Scope>();

/** Runs `fn` with each API call it makes (awaited ones too) bounded by `callTimeoutMs` and `deadline` (epoch ms). */
export function withCallDeadline<T>(deadline: number, fn: () => Promise<T>, callTimeoutMs = DEFAULT_CALL_TIMEOUT_MS): Promise<T> {
  const outer = scopes.getStore();
  const scope = { deadline: Math.min(deadline, outer?.deadline ?? Infinity), callTimeoutMs: Math.min(callTimeoutMs, outer?.callTimeoutMs ?? Infinity) };
  return scopes.run(scope, fn);
}

/** The signal for a call starting now: aborts when the current scope's call timeout or deadline passes. */
export function callSignal(): AbortSignal {
  const scope = scopes.getStore();
  const ms = scope === undefined ? DEFAULT_CALL_TIMEOUT_MS : Math.min(scope.callTimeoutMs, scope.deadline - Date.now());
  if (ms <= 0) return AbortSignal.abort(new DOMException('the deadline of this invocation has passed', 'TimeoutError'));
  return AbortSignal.timeout(Math.ceil(ms));
}

/** True for the rejection of a call whose signal ran out of time (or was aborted). */
export function isCallTimeout(error: unknown): boolean {
  return error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError');
}
