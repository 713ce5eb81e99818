/**
 * Settings of the local commands (`npm start`, `npm run demo`, `npm run status`), from the
 * environment and the command line, through the project's typed env getters. Pure.
 */
import { integerVar, oneOf, optionalString, type Env } from '#shared/config/env.ts';
import { loadReconcileBehaviour } from '#shared/config/reconcile-config.ts';
import type { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import type { TaintEffect } from '#shared/domain/taint.ts';
import { ConfigError } from '#shared/errors.ts';

export interface LocalConfig {
  /** A kubeconfig to use; undefined → start the local control plane. */
  readonly kubeconfig: string | undefined;
  readonly mode: 'self' | 'capi';
  readonly stateNamespace: string;
  readonly machineNamespace: string | undefined;
  readonly nodeLabelSelector: string | undefined;
  readonly visibilityTimeoutSeconds: number;
  readonly maxReceiveCount: number;
  readonly retryBaseSeconds: number;
  readonly retryMaxSeconds: number;
  readonly dryRun: boolean;
  /** Who propagates `spec.taints` (SPEC_TAINTS_OWNER: upstream CAPI by default). */
  readonly specTaintsOwner: SpecTaintsOwner;
  readonly startupTaint: { readonly key: string; readonly effect: TaintEffect } | null;
  readonly firstEnabledAt: Date | undefined;
  /** Seconds between two looks at the counters (a block is printed only when something changed). */
  readonly reportIntervalSeconds: number;
}

/**
 * Reads the local settings. `--capi` / `--self` / `--mode=<m>` on the command line win over
 * `CLUSTER_MODE`; the default is `self` (one cluster holds Machines and Nodes). Throws ConfigError.
 * @example loadLocalConfig({}, ['--capi']).mode // 'capi'
 */
export function loadLocalConfig(env: Env, argv: readonly string[]): LocalConfig {
  let mode = oneOf(env, 'CLUSTER_MODE', ['capi', 'self'] as const, 'self');
  for (const arg of argv) {
    if (arg === '--capi') mode = 'capi';
    else if (arg === '--self') mode = 'self';
    else if (arg.startsWith('--mode=')) {
      const value = arg.slice('--mode='.length);
      if (value !== 'capi' && value !== 'self') throw new ConfigError('--mode', `must be capi or self, got ${JSON.stringify(value)}`);
      mode = value;
    } else throw new ConfigError(arg, 'unknown argument (known: --capi, --self, --mode=capi|self)');
  }
  const behaviour = loadReconcileBehaviour(env, { baseSeconds: 1, maxSeconds: 30 });
  return Object.freeze({
    kubeconfig: optionalString(env, 'KUBECONFIG'),
    mode,
    stateNamespace: behaviour.stateNamespace,
    machineNamespace: optionalString(env, 'MACHINE_NAMESPACE'),
    nodeLabelSelector: optionalString(env, 'NODE_LABEL_SELECTOR'),
    visibilityTimeoutSeconds: integerVar(env, 'VISIBILITY_TIMEOUT_SECONDS', 30, 1, 43_200),
    maxReceiveCount: integerVar(env, 'MAX_RECEIVE_COUNT', 5, 1, 1000),
    retryBaseSeconds: behaviour.retryBaseSeconds,
    retryMaxSeconds: behaviour.retryMaxSeconds,
    dryRun: behaviour.dryRun,
    specTaintsOwner: behaviour.specTaintsOwner,
    startupTaint: behaviour.startupTaint ?? null,
    firstEnabledAt: behaviour.firstEnabledAt,
    reportIntervalSeconds: integerVar(env, 'REPORT_INTERVAL_SECONDS', 2, 1, 3600),
  });
}
