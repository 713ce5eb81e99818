/**
 * The one structured JSON logger (Powertools Logger; level from POWERTOOLS_LOG_LEVEL), secret-free by construction
 * (docs/security.md): foreign errors quote content (a YAML parser its input, an API exception its headers and body).
 */
import { LogFormatter, LogItem, Logger } from '@aws-lambda-powertools/logger';
import type { LogAttributes, UnformattedAttributes } from '@aws-lambda-powertools/logger/types';
import { TaintPropagatorError } from '#shared/errors.ts';

const MAX_FOREIGN_MESSAGE = 300;

/** Replaces credential-looking content in a string (defence in depth: messages are meant to be secret-free already). */
export function scrubSecrets(text: string): string {
  return text
    .replace(/-----BEGIN [A-Z0-9 ]+-----[\s\S]*?(-----END [A-Z0-9 ]+-----|$)/g, '[redacted PEM]')
    .replace(/\b(Bearer|Basic) [A-Za-z0-9._~+/=-]{8,}/g, '$1 [redacted]')
    .replace(/k8s-aws-v1\.[A-Za-z0-9_-]+/g, '[redacted EKS token]')
    // A user and password in a URL (a proxy's `http://user:password@proxy:3128`).
    .replace(/\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@"']+@/gi, '$1[redacted]@')
    .replace(/((?:client-key-data|client-certificate-data|certificate-authority-data|token|password|secretAccessKey|sessionToken)["']?\s*[:=]\s*["']?)[^\s"',}]+/gi, '$1[redacted]');
}

/** Node system errors (ECONNREFUSED, ETIMEDOUT, …) describe the transport only; their messages are kept. */
function isSystemError(error: Error): boolean {
  const e = error as Error & { code?: unknown; syscall?: unknown };
  return typeof e.code === 'string' && /^E[A-Z0-9_]+$/.test(e.code) && typeof e.syscall === 'string';
}

/** Message of a foreign error: withheld for errors known to quote content, scrubbed and capped otherwise. */
function foreignMessage(error: Error): string {
  const e = error as Error & { mark?: unknown; body?: unknown; headers?: unknown; code?: unknown; $metadata?: unknown };
  if (e.mark !== undefined || e.name === 'YAMLException') return '(message withheld: a parser error quotes its input)';
  if (e.body !== undefined || e.headers !== undefined) return typeof e.code === 'number' ? `HTTP ${e.code} (response withheld)` : '(message withheld: it quotes a response)';
  if (isSystemError(error)) return error.message;
  const scrubbed = scrubSecrets(error.message);
  return scrubbed.length > MAX_FOREIGN_MESSAGE ? `${scrubbed.slice(0, MAX_FOREIGN_MESSAGE)}…` : scrubbed;
}

/**
 * Powertools' standard log shape; `formatError` writes own errors as they are (they never hold content), foreign ones
 * as name, safe message, code/status and frames only.
 */
export class SecretFreeLogFormatter extends LogFormatter {
  formatAttributes(attributes: UnformattedAttributes, additional: LogAttributes): LogItem {
    const base: LogAttributes = {
      level: attributes.logLevel,
      message: attributes.message,
      timestamp: this.formatTimestamp(attributes.timestamp),
      service: attributes.serviceName,
      cold_start: attributes.lambdaContext?.coldStart,
      function_arn: attributes.lambdaContext?.invokedFunctionArn,
      function_memory_size: attributes.lambdaContext?.memoryLimitInMB,
      function_name: attributes.lambdaContext?.functionName,
      function_request_id: attributes.lambdaContext?.awsRequestId,
      sampling_rate: attributes.sampleRateValue,
      xray_trace_id: attributes.xRayTraceId,
    };
    return new LogItem({ attributes: base }).addAttributes(additional);
  }

  /** `depth`: of a cause in the chain (five are written). */
  override formatError(error: Error, depth = 0): LogAttributes {
    const cause = (error as { cause?: unknown }).cause;
    const own = error instanceof TaintPropagatorError;
    const message = own ? scrubSecrets(error.message) : foreignMessage(error);
    const e = error as Error & { code?: unknown; statusCode?: unknown; syscall?: unknown; $metadata?: { httpStatusCode?: unknown } };
    // The stack's frames only: its first lines repeat the message.
    const frames = (error.stack ?? '').split('\n').filter((line) => /^\s+at /.test(line));
    return {
      name: error.name,
      location: this.getCodeLocation(error.stack),
      message,
      stack: [`${error.name}: ${message}`, ...frames].join('\n'),
      ...(depth < 5 && cause !== undefined
        ? { cause: cause instanceof Error ? this.formatError(cause, depth + 1) : '(non-error cause withheld)' }
        : {}),
      ...(own
        ? Object.fromEntries(Object.entries(error).filter(([key]) => !['name', 'message', 'stack', 'cause'].includes(key)))
        : {
            ...(typeof e.code === 'string' || typeof e.code === 'number' ? { code: e.code } : {}),
            ...(typeof e.statusCode === 'number' ? { statusCode: e.statusCode } : {}),
            ...(typeof e.$metadata?.httpStatusCode === 'number' ? { httpStatusCode: e.$metadata.httpStatusCode } : {}),
            ...(isSystemError(error) ? { syscall: e.syscall } : {}),
          }),
    };
  }
}

/** A Powertools Logger with the secret-free formatter and a JSON replacer that scrubs every string value written. */
export const logger = new Logger({
  serviceName: 'capi-taint-propagator',
  logFormatter: new SecretFreeLogFormatter(),
  jsonReplacerFn: (_key, value) => (typeof value === 'string' ? scrubSecrets(value) : value),
});

/** Log key names shared by both functions (lowerCamel, as in Cluster API's logs). */
export const LogKey = {
  cluster: 'cluster',
  resourceVersion: 'resourceVersion',
  cloudEventId: 'cloudEventId',
  reason: 'reason',
} as const;
