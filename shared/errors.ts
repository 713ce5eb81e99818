/**
 * The product's error catalogue. Every error carries `retryable`, decided once here, so that the per-record boundary
 * picks a disposition with `instanceof`, never by matching messages. Errors never log: they are logged where handled.
 */

/** Base class of every error the product throws on purpose. */
export class TaintPropagatorError extends Error {
  /** True when the same input may succeed later (conflict, outage); false when it never will. */
  readonly retryable: boolean;
  constructor(message: string, options: { retryable: boolean; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.retryable = options.retryable;
  }
}

/** Thrown at cold start when configuration is missing or invalid. */
export class ConfigError extends TaintPropagatorError {
  readonly variable: string;
  constructor(variable: string, problem: string) {
    super(`Invalid configuration ${variable}: ${problem}`, { retryable: false });
    this.variable = variable;
  }
}

/** Thrown when a queue record is not an event we accept (not JSON, not a CloudEvent, unknown type, bad data). */
export class MalformedEventError extends TaintPropagatorError {
  readonly reason: string;
  constructor(reason: string, cause?: unknown) {
    super(`Malformed event: ${reason}`, { retryable: false, cause });
    this.reason = reason;
  }
}

/** One broken rule of a taint declaration: which field, which rule, and a message. */
export interface DeclarationIssue {
  readonly field: string;
  readonly rule: string;
  readonly message: string;
}

/** Thrown when the Node's tracking annotation has an entry that is not `key:effect`; nothing is written. */
export class MalformedTrackingAnnotationError extends TaintPropagatorError {
  readonly entry: string;
  constructor(entry: string) {
    super(`invalid taint format: ${JSON.stringify(entry)}`, { retryable: false });
    this.entry = entry;
  }
}

/** Thrown by adapters on 404 for a Node. Callers treat it as the `node-gone` outcome, not a failure. */
export class NodeNotFoundError extends TaintPropagatorError {
  readonly nodeName: string;
  constructor(nodeName: string, cause?: unknown) {
    super(`Node ${nodeName} not found`, { retryable: false, cause });
    this.nodeName = nodeName;
  }
}

/** Thrown by adapters when the Node changed since it was read (409 Conflict on the resourceVersion precondition). */
export class PatchConflictError extends TaintPropagatorError {
  readonly nodeName: string;
  readonly resourceVersion: string;
  /** `object`: what changed when it is not a Node (e.g. `MachineDeployment ns/name`); `nodeName` then names it too. */
  constructor(args: { nodeName: string; resourceVersion: string; cause?: unknown; object?: string }) {
    super(`${args.object ?? `Node ${args.nodeName}`} changed since resourceVersion ${args.resourceVersion} was read`, {
      retryable: true,
      cause: args.cause,
    });
    this.nodeName = args.nodeName;
    this.resourceVersion = args.resourceVersion;
  }
}

/** Thrown for failures that may pass on their own: 5xx, 429 throttling, timeouts, unreachable API servers. */
export class TransientError extends TaintPropagatorError {
  readonly operation: string;
  constructor(operation: string, detail: string, cause?: unknown) {
    super(`${operation} failed: ${detail}`, { retryable: true, cause });
    this.operation = operation;
  }
}

/** A transient failure that is a call with no answer within its deadline (its own timeout, or the invocation's time). */
export class CallTimeoutError extends TransientError {}

/** A transient failure that is an answer larger than the HTTP client reads (kube-http.ts `MAX_RESPONSE_BYTES`). */
export class OversizedAnswerError extends TransientError {}

/** Thrown when the API server refuses our identity (401/403): fix RBAC or credentials; retried, then dead-lettered. */
export class AccessDeniedError extends TaintPropagatorError {
  readonly operation: string;
  constructor(operation: string, detail: string, cause?: unknown) {
    super(`${operation} was refused: ${detail}`, { retryable: true, cause });
    this.operation = operation;
  }
}

/**
 * Thrown when a cluster's credentials cannot be found or used (missing or broken kubeconfig Secret, unreadable stored
 * kubeconfig). Its message says what happened and where, never the content; it keeps no cause, because the causes at
 * hand (YAML parser errors, API exceptions, AWS errors) may quote the kubeconfig, headers or response bodies.
 */
export class ClusterCredentialsError extends TaintPropagatorError {
  readonly cluster: string;
  constructor(cluster: string, detail: string) {
    super(`No usable credentials for cluster ${cluster}: ${detail}`, { retryable: true });
    this.cluster = cluster;
  }
}

/**
 * Thrown when an untrusted kubeconfig uses a feature that would make the product run a program, read a file or send
 * its credential elsewhere (untrusted-kubeconfig.ts). `refused` names each offending field by position
 * (`users[0].user.exec (exec plugin)`), never its value. Retryable: a fixed Secret is picked up on the next attempt.
 */
export class RefusedKubeconfigError extends ClusterCredentialsError {
  readonly refused: readonly string[];
  constructor(cluster: string, source: string, refused: readonly string[]) {
    super(cluster, `${source} uses kubeconfig features the product refuses (only inline credentials are accepted): ${refused.join(', ')}`);
    this.refused = refused;
  }
}

/** Thrown when a Machine cannot be reconciled as configured (no Cluster); not retried: its edit brings a new event. */
export class MachineConfigurationError extends TaintPropagatorError {
  readonly machine: string;
  constructor(machine: string, problem: string) {
    super(`Machine ${machine} ${problem}`, { retryable: false });
    this.machine = machine;
  }
}

/** Thrown when the management cluster serves no supported Cluster API; retried, as installing CAPI fixes it. */
export class UnsupportedClusterApiError extends TaintPropagatorError {
  constructor(problem: string, cause?: unknown) {
    super(`Unsupported Cluster API on the management cluster: ${problem}`, { retryable: true, cause });
  }
}
