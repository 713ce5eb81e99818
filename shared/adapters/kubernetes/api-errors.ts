/**
 * Translates failed Kubernetes API calls (kube-http.ts) into the product's error catalogue, so that no caller ever
 * looks at HTTP codes or messages. 404 is returned as `undefined` by the callers that expect it.
 */
import { ANSWER_TOO_LARGE, KubeApiError, KubeTransportError } from './kube-http.ts';
import { AccessDeniedError, CallTimeoutError, OversizedAnswerError, TransientError } from '#shared/errors.ts';
import { isCallTimeout } from './call-deadline.ts';

/** The HTTP status of a failed API call, or undefined for transport failures. */
export function statusOf(error: unknown): number | undefined {
  if (error instanceof KubeApiError) return error.code;
  // A DOMException (timeout, abort) has a numeric `code` of its own that is no HTTP status.
  if (isCallTimeout(error)) return undefined;
  if (typeof error === 'object' && error !== null) {
    const e = error as { code?: unknown; statusCode?: unknown };
    if (typeof e.statusCode === 'number') return e.statusCode;
    if (typeof e.code === 'number') return e.code;
  }
  return undefined;
}

/** A short, credential-free description of an API failure (status + Kubernetes `reason`/`message`). */
export function describeApiError(error: unknown): string {
  const status = statusOf(error);
  // The product's KubeApiError, or client-node's ApiException (the developer tools): only the Status's reason and
  // message, never the rest of the body or (client-node's message) the response headers.
  const body = typeof error === 'object' && error !== null && 'body' in error ? (error as { body?: unknown }).body : undefined;
  if (status !== undefined && body !== undefined) {
    let parsed: { reason?: unknown; message?: unknown } | undefined;
    try {
      parsed = typeof body === 'string' ? (JSON.parse(body) as typeof parsed) : typeof body === 'object' && body !== null ? body : undefined;
    } catch {
      parsed = undefined;
    }
    const text = [parsed?.reason, parsed?.message].filter((v): v is string => typeof v === 'string').join(' ');
    return text === '' ? `HTTP ${status}` : `HTTP ${status}: ${text}`;
  }
  if (isCallTimeout(error)) return `no answer within the call's deadline (${(error as Error).message})`;
  const message = error instanceof Error ? `${error.message}${transportCause(error)}` : String(error);
  return status === undefined ? message : `HTTP ${status}: ${message}`;
}

/** The cause of an error when that is a system error (`connect ECONNREFUSED 127.0.0.1:6443`): it names an address or a code, never a body. */
function transportCause(error: Error): string {
  const cause = error.cause;
  return cause instanceof Error && isSystemError(cause) ? ` (${cause.message.slice(0, 200)})` : '';
}

/** A Node.js system error (`ECONNREFUSED`, `ECONNRESET`, a TLS code…): its message names an address or a code, never a body. */
export function isSystemError(error: unknown): error is Error & { readonly code: string } {
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]+$/.test(code);
}

/**
 * Maps an API failure that no caller expects: 401/403 → AccessDeniedError; a call past its deadline →
 * CallTimeoutError; an answer past the client's byte cap → OversizedAnswerError; anything else (429, 5xx,
 * connection errors, unexpected codes) → TransientError. All of them are retried through the queue.
 */
export function toProductError(operation: string, error: unknown): Error {
  const status = statusOf(error);
  if (status === 401 || status === 403) return new AccessDeniedError(operation, describeApiError(error), error);
  if (isCallTimeout(error)) return new CallTimeoutError(operation, describeApiError(error), error);
  if (error instanceof KubeTransportError && error.code === ANSWER_TOO_LARGE) return new OversizedAnswerError(operation, describeApiError(error), error);
  return new TransientError(operation, describeApiError(error), error);
}

/** Kubernetes serialises times as RFC 3339 without fractions; client-node hands back Date objects. */
export function toKubeTime(value: Date | string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return value;
  return value.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
