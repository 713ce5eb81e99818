/**
 * Settings of the local commands (`npm start`, `npm run demo`, `npm run status`), from the
 * environment and the command line, through the project's typed env getters. Pure.
 */
import { parseArgs } from 'node:util';
import { integerVar, oneOf, optionalString, type Env } from '#shared/config/env.ts';
import { loadSharding } from '#shared/config/forwarder-config.ts';
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
  /** `--allow-remote`: run against a KUBECONFIG cluster that is not on this machine. */
  readonly allowRemote: boolean;
  /** ALLOW_REMOTE_CONTEXT: the one kubectl context that may be used although it is not on this machine. */
  readonly allowRemoteContext: string | undefined;
  /** `--help`. */
  readonly help: boolean;
  /** FORWARDER_SHARDS (default 1): the forwarder runs every shard's rota side by side, or only FORWARDER_SHARD's when set. */
  readonly shards: number;
  readonly shard: number | undefined;
}

/** `npm start -- --help`. */
export const START_USAGE = `Usage: npm start [-- options]

Runs the whole pipeline on this machine (watch-forwarder, queue, reconcile handler). Without KUBECONFIG it starts a
local control plane. With KUBECONFIG it prints the context and server; a cluster that is not on this machine (server
not on a loopback address) needs --allow-remote, because the run writes there.

Options:
  --capi | --self | --mode=capi|self   Cluster API mode (Nodes in workload clusters) or one cluster (default self; env CLUSTER_MODE)
  --allow-remote                       allow a KUBECONFIG cluster that is not on this machine (env: ALLOW_REMOTE_CONTEXT=<context name>)
  --dry-run                            write no Node; log each planned write instead (env DRY_RUN=true)
  -h, --help                           this text

Environment: STATE_NAMESPACE, MACHINE_NAMESPACE, NODE_LABEL_SELECTOR, VISIBILITY_TIMEOUT_SECONDS, MAX_RECEIVE_COUNT,
RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, STARTUP_TAINT_KEY, STARTUP_TAINT_EFFECT, FIRST_ENABLED_AT, REPORT_INTERVAL_SECONDS,
FORWARDER_SHARDS (every shard in this process), FORWARDER_SHARD (only this one).`;

function shardsOf(s: { readonly shards: number; readonly shard: number; readonly shardPinned: boolean }): { shards: number; shard: number | undefined } {
  return { shards: s.shards, shard: s.shardPinned ? s.shard : undefined };
}

/**
 * Reads the local settings. `--capi` / `--self` / `--mode=<m>` on the command line win over
 * `CLUSTER_MODE`; the default is `self` (one cluster holds Machines and Nodes). Throws ConfigError.
 * @example loadLocalConfig({}, ['--capi']).mode // 'capi'
 */
export function loadLocalConfig(env: Env, argv: readonly string[]): LocalConfig {
  let mode = oneOf(env, 'CLUSTER_MODE', ['capi', 'self'] as const, 'self');
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: false,
      options: {
        capi: { type: 'boolean' },
        self: { type: 'boolean' },
        mode: { type: 'string' },
        'allow-remote': { type: 'boolean' },
        'dry-run': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    throw new ConfigError(argv.join(' '), `${e instanceof Error ? e.message : String(e)} (known: --capi, --self, --mode=capi|self, --allow-remote, --dry-run, --help)`);
  }
  const o = parsed.values;
  if (o.mode !== undefined) {
    if (o.mode !== 'capi' && o.mode !== 'self') throw new ConfigError('--mode', `must be capi or self, got ${JSON.stringify(o.mode)}`);
    mode = o.mode;
  }
  if (o.capi) mode = 'capi';
  if (o.self) mode = 'self';
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
    dryRun: behaviour.dryRun || o['dry-run'] === true,
    specTaintsOwner: behaviour.specTaintsOwner,
    startupTaint: behaviour.startupTaint ?? null,
    firstEnabledAt: behaviour.firstEnabledAt,
    reportIntervalSeconds: integerVar(env, 'REPORT_INTERVAL_SECONDS', 2, 1, 3600),
    allowRemote: o['allow-remote'] === true,
    allowRemoteContext: optionalString(env, 'ALLOW_REMOTE_CONTEXT'),
    help: o.help === true,
    ...shardsOf(loadSharding(env, mode)),
  });
}
