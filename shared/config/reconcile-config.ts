/** Configuration of the reconcile function, read once at cold start. */
import { ConfigError } from '#shared/errors.ts';
import { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { STARTUP_GATE_TAINT_KEY, TaintEffect } from '#shared/domain/taint.ts';
import { booleanVar, integerVar, oneOf, optionalString, requiredString, type Env } from './env.ts';

/** The settings both functions read, from the same variables with the same defaults. */
export interface SharedSettings {
  /** The startup gate taint removed in the write that applies the taints; `none` disables it. */
  readonly startupTaint: { readonly key: string; readonly effect: TaintEffect } | undefined;
  /** Who propagates `Machine.spec.taints`: upstream CAPI (default) or the product (`SPEC_TAINTS_OWNER`). */
  readonly specTaintsOwner: SpecTaintsOwner;
  /** Namespace (management cluster) of the product's state: the first enablement, the forwarder's Leases. */
  readonly stateNamespace: string;
}

/** How reconciles behave: shared by the Lambda and the local pipeline (which retries sooner). */
export interface ReconcileBehaviour extends SharedSettings {
  /** Log the planned write instead of sending it. */
  readonly dryRun: boolean;
  /** Backoff through the queue after a conflict or transient error: base × 2^(receives−1), capped, jittered. */
  readonly retryBaseSeconds: number;
  readonly retryMaxSeconds: number;
  /** Overrides the recorded first-enablement time. */
  readonly firstEnabledAt: Date | undefined;
}

export interface ReconcileConfig extends ReconcileBehaviour {
  readonly queueUrl: string;
  readonly deadLetterQueueUrl: string;
  /** Redrive `maxReceiveCount` (default 10): a record is re-issued one receive before, so the DLQ gets human cases. */
  readonly maxReceiveCount?: number;
  /** Longest wait for one Kubernetes API call, in seconds (default 10); never beyond the invocation's remaining time. */
  readonly apiTimeoutSeconds?: number;
}

/** Reads ReconcileBehaviour, `retryDefaults` sooner for the local pipeline; throws ConfigError naming the variable. */
export function loadReconcileBehaviour(env: Env, retryDefaults = { baseSeconds: 2, maxSeconds: 30 }): ReconcileBehaviour {
  const firstEnabled = optionalString(env, 'FIRST_ENABLED_AT');
  const firstEnabledAt = firstEnabled === undefined ? undefined : new Date(firstEnabled);
  if (firstEnabledAt && Number.isNaN(firstEnabledAt.getTime())) throw new ConfigError('FIRST_ENABLED_AT', `must be an RFC 3339 time, got ${JSON.stringify(firstEnabled)}`);
  const retryBaseSeconds = integerVar(env, 'RETRY_BASE_SECONDS', retryDefaults.baseSeconds, 0, 900);
  const retryMaxSeconds = integerVar(env, 'RETRY_MAX_SECONDS', retryDefaults.maxSeconds, 1, 43_200);
  if (retryMaxSeconds < retryBaseSeconds) throw new ConfigError('RETRY_MAX_SECONDS', 'must not be below RETRY_BASE_SECONDS');
  return {
    ...loadSharedSettings(env),
    dryRun: booleanVar(env, 'DRY_RUN', false),
    retryBaseSeconds,
    retryMaxSeconds,
    firstEnabledAt,
  };
}

/** Reads STARTUP_TAINT_KEY/EFFECT, SPEC_TAINTS_OWNER and STATE_NAMESPACE; throws ConfigError naming the variable. */
export function loadSharedSettings(env: Env): SharedSettings {
  const key = optionalString(env, 'STARTUP_TAINT_KEY', STARTUP_GATE_TAINT_KEY);
  const effect = oneOf(env, 'STARTUP_TAINT_EFFECT', Object.values(TaintEffect), TaintEffect.NoSchedule);
  return {
    startupTaint: key === 'none' ? undefined : { key, effect },
    specTaintsOwner: oneOf(env, 'SPEC_TAINTS_OWNER', Object.values(SpecTaintsOwner), SpecTaintsOwner.upstream),
    stateNamespace: optionalString(env, 'STATE_NAMESPACE', 'capi-taint-propagator'),
  };
}

/** Reads the reconcile function's settings; throws ConfigError naming the variable. */
export function loadReconcileConfig(env: Env): Readonly<ReconcileConfig> {
  return Object.freeze({
    ...loadReconcileBehaviour(env),
    queueUrl: requiredString(env, 'QUEUE_URL'),
    deadLetterQueueUrl: requiredString(env, 'DEAD_LETTER_QUEUE_URL'),
    maxReceiveCount: integerVar(env, 'MAX_RECEIVE_COUNT', 10, 1, 1000),
    apiTimeoutSeconds: integerVar(env, 'API_TIMEOUT_SECONDS', 10, 1, 900),
  });
}
