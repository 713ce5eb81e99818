/**
 * Translates failed Kubernetes API calls (kube-http.ts) and watch streams into the product's error catalogue by one
 * table ({@link errorForStatus}), so that no caller looks at HTTP codes or messages. Text a server sent reaches a
 * message only as a short, escaped excerpt: a server named by a kubeconfig may echo anything.
 */
import { ANSWER_TOO_LARGE, KubeTransportError } from './kube-http.ts';
import { AccessDeniedError, CallTimeoutError, OversizedAnswerError, TaintPropagatorError, TransientError } from '#shared/errors.ts';
import { isCallTimeout } from './call-deadline.ts';

/** Thrown when the requested resourceVersion has been compacted away (HTTP 410 / watch ERROR 410). Retried: relist. */
export class ResourceVersionGoneError extends TransientError {
  readonly resourceVersion: string | undefined;
  constructor(operation: string, resourceVersion: string | undefined, cause?: unknown) {
    super(operation, `resourceVersion ${resourceVersion ?? '(none)'} is too old (410 Gone)`, cause);
    this.resourceVersion = resourceVersion;
  }
}

/** HTTP 404 for a collection: its group version (or CRD) is not served (any more). Retried with backoff. */
export class CollectionNotServedError extends TransientError {}

/**
 * At most `max` characters of text a server sent, safe for a log line or an error message: every character outside
 * printable ASCII (control characters, terminal escapes, bidi overrides) as `\\uXXXX`, and how much was left out.
 */
export function escapedText(text: string, max: number): string {
  const head = text.slice(0, max).replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  return text.length > max ? `${head}… (+${text.length - max} more characters)` : head;
}

/** {@link escapedText} of an unexpected answer (a malformed watch line), quoted so that where it ends is plain. */
export function safeExcerpt(text: string, max = 80): string {
  const head = text.slice(0, max).replace(/["\\]/g, (c) => `\\${c}`);
  const escaped = escapedText(head, head.length);
  return `"${escaped}"${text.length > max ? ` (+${text.length - max} more characters)` : ''}`;
}

/** `HTTP <status>`, with a Kubernetes Status's reason and message (escaped, at most 300 characters) when `body` is one. */
export function statusDetail(status: number, body: unknown): string {
  let parsed: { reason?: unknown; message?: unknown } | undefined;
  try {
    parsed = typeof body === 'string' ? (JSON.parse(body) as typeof parsed) : typeof body === 'object' && body !== null ? body : undefined;
  } catch {
    parsed = undefined; // not a Status: the status code alone
  }
  const text = [parsed?.reason, parsed?.message].filter((v): v is string => typeof v === 'string').join(' ');
  return text === '' ? `HTTP ${status}` : `HTTP ${status}: ${escapedText(text, 300)}`;
}

/** The one table from an API status to the product's error; 429, 5xx, unexpected codes and none are transient. */
function errorForStatus(
  status: number | undefined,
  operation: string,
  detail: string,
  cause?: unknown,
  rv?: string,
): Error {
  switch (status) {
    case 401:
    case 403:
      return new AccessDeniedError(operation, detail, cause);
    case 404:
      return new CollectionNotServedError(operation, detail, cause);
    case 410:
      return new ResourceVersionGoneError(operation, rv, cause);
    default:
      return new TransientError(operation, detail, cause);
  }
}

/** A stream's list or watch answered `status` with `body` (at most some KiB): its error, by the one table. */
export function streamStatusError(status: number, body: string, operation: string, resourceVersion: string | undefined): Error {
  return errorForStatus(status, operation, statusDetail(status, body), undefined, resourceVersion);
}

/** A stream failure safe to log: product and system errors as they are, any other by class (it may quote a body). */
export function describeStreamFailure(err: unknown): string {
  if (err instanceof TaintPropagatorError) return err.message;
  if (isSystemError(err)) return err.message.includes(err.code) ? err.message.slice(0, 300) : `${err.code}: ${err.message.slice(0, 300)}`;
  if (err instanceof Error) return `${err.name} (details withheld: the message may quote a response)`;
  return 'unknown error';
}

/** The HTTP status of a failed API call, or undefined for transport failures. */
export function statusOf(error: unknown): number | undefined {
  // A DOMException (timeout, abort) has a numeric `code` of its own that is no HTTP status.
  if (isCallTimeout(error)) return undefined;
  // KubeApiError's, or client-node's ApiException's (the developer tools).
  const code = typeof error === 'object' && error !== null ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'number' ? code : undefined;
}

/** A short, credential-free description of an API failure (status + Kubernetes `reason`/`message`). */
export function describeApiError(error: unknown): string {
  const status = statusOf(error);
  // The product's KubeApiError, or client-node's ApiException (the developer tools): only the Status's reason and
  // message, never the rest of the body or (client-node's message) the response headers.
  const body = typeof error === 'object' && error !== null && 'body' in error ? (error as { body?: unknown }).body : undefined;
  if (status !== undefined && body !== undefined) return statusDetail(status, body);
  if (isCallTimeout(error)) return `no answer within the call's deadline (${(error as Error).message})`;
  // A system error as the cause (`connect ECONNREFUSED 127.0.0.1:6443`) names an address or a code, never a body.
  const cause = error instanceof Error && isSystemError(error.cause) ? ` (${error.cause.message.slice(0, 200)})` : '';
  const message = error instanceof Error ? `${error.message}${cause}` : String(error);
  return status === undefined ? message : `HTTP ${status}: ${message}`;
}

/** A Node.js system error (`ECONNREFUSED`, `ECONNRESET`, a TLS code…): its message names an address or a code, never a body. */
export function isSystemError(error: unknown): error is Error & { readonly code: string } {
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  return typeof code === 'string' && /^[A-Z][A-Z0-9_]+$/.test(code);
}

/** The product's error for an API failure no caller expects: a status by {@link errorForStatus}, else transient. */
export function toProductError(operation: string, error: unknown): Error {
  const detail = describeApiError(error);
  if (isCallTimeout(error)) return new CallTimeoutError(operation, detail, error);
  const tooLarge = error instanceof KubeTransportError && error.code === ANSWER_TOO_LARGE;
  if (tooLarge) return new OversizedAnswerError(operation, detail, error);
  return errorForStatus(statusOf(error), operation, detail, error);
}

/** A failed create's error: for a 404, the namespace is missing and how to create it; else {@link toProductError}. */
export function createFailure(operation: string, namespace: string, error: unknown): Error {
  if (statusOf(error) !== 404) return toProductError(operation, error);
  const fix = 'apply infra/rbac/management-cluster.yaml or set STATE_NAMESPACE';
  return new TransientError(operation, `namespace ${namespace} does not exist: ${fix}`, error);
}

/** Kubernetes serialises times as RFC 3339 without fractions; client-node hands back Date objects. */
export function toKubeTime(value: Date | string | undefined): string | undefined {
  return value instanceof Date ? value.toISOString().replace(/\.\d{3}Z$/, 'Z') : value;
}
