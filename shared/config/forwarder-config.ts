/**
 * The watch-forwarder's configuration, read once from the environment through typed getters.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { SpecTaintsOwner } from '#shared/domain/ownership.ts';
import { STARTUP_GATE_TAINT_KEY, TaintEffect, type TaintId } from '#shared/domain/taint.ts';
import { ConfigError } from '#shared/errors.ts';
import { integerVar, oneOf, optionalString, type Env } from './env.ts';

export interface ForwarderConfig {
  /** SQS FIFO queue URL; optional only for local runs that inject their own queue. */
  readonly queueUrl: string | undefined;
  /** `capi`: Machines in the management cluster, Nodes in each workload cluster. `self`: one cluster. */
  readonly clusterMode: 'capi' | 'self';
  /** Length of one window of the rota (a Lambda run's; `npm run forwarder` runs windows one after another). */
  readonly watchWindowSeconds: number;
  /**
   * How many members of the rota with time left make a new window exit instead of joining
   * (shared/policy/forwarder-rota.ts). 2 (the Lambda form): one may be killed and another still watches. The local
   * runners (`npm run forwarder`, `npm start`) default to 1.
   */
  readonly watchMembers: number;
  /**
   * A member with less than this left of its window no longer counts, so that its successor joins while it still
   * watches. Lambda form: at least two schedule intervals (a schedule fires anywhere in its minute) plus a cold start.
   */
  readonly watchOverlapSeconds: number;
  /** Period of the full resync that re-announces every object; 0 turns it off. */
  readonly resyncIntervalSeconds: number;
  /**
   * A watch that delivers nothing (not even a bookmark) for this long is restarted. kube-apiserver
   * sends a bookmark about once a minute on a quiet watch, so this stays above that (minimum 70 s).
   */
  readonly watchIdleSeconds: number;
  /** Namespace of the Lease that holds the rota's members, elects the member that stores the checkpoint, and holds it. */
  readonly stateNamespace: string;
  readonly leaseName: string;
  /** This forwarder's identity in the Lease. */
  readonly forwarderId: string;
  /** Lease duration; a holder that has not renewed for this long can be replaced, a member's entry lapses. */
  readonly leaseDurationSeconds: number;
  /** Only watch Machines in this namespace (default: all namespaces). */
  readonly machineNamespace: string | undefined;
  /** Only watch Nodes matching this label selector (default: all Nodes). */
  readonly nodeLabelSelector: string | undefined;
  /**
   * The startup gate the reconcile function removes (STARTUP_TAINT_KEY/EFFECT, same variables and defaults as the
   * reconcile function's; `none` = off): a foreign write of it is never filtered as noise.
   */
  readonly startupTaint?: TaintId | undefined;
  /**
   * Who propagates `Machine.spec.taints` (SPEC_TAINTS_OWNER, same variable and default as the reconcile function's):
   * with `upstream`, Machine changes of `spec.taints` that cannot change the product's decision are not forwarded.
   */
  readonly specTaintsOwner?: SpecTaintsOwner;
  /**
   * How many shards split the workload clusters (FORWARDER_SHARDS, default 1): each shard is a rota of its own, with a
   * Lease of its own, watching only the clusters that hash to it (shared/policy/shards.ts, docs/fleets-and-sizing.md).
   */
  readonly shards: number;
  /**
   * This process's shard, 0-based (FORWARDER_SHARD, default 0; below `shards`). The Lambda form takes it from the
   * scheduled event (`{ "shard": i }`), which overrides this.
   */
  readonly shard: number;
  /**
   * FORWARDER_SHARD was set: the local forms, which otherwise run every shard in one process, run only `shard`
   * (a benchmark's child process, or one process per shard).
   */
  readonly shardPinned: boolean;
}

/** Most shards one deployment may split its fleet into (each costs one schedule and up to 2 × WATCH_MEMBERS + 1 concurrent executions). */
export const MAX_FORWARDER_SHARDS = 64;

/** Reads and validates the forwarder's settings; throws ConfigError naming the variable. */
export function loadForwarderConfig(env: Env): ForwarderConfig {
  const clusterMode = oneOf(env, 'CLUSTER_MODE', ['capi', 'self'] as const, 'capi');
  const { shards, shard, shardPinned } = loadSharding(env, clusterMode);
  return Object.freeze({
    queueUrl: optionalString(env, 'QUEUE_URL'),
    clusterMode,
    watchWindowSeconds: integerVar(env, 'WATCH_WINDOW_SECONDS', 885, 10, 900),
    watchMembers: integerVar(env, 'WATCH_MEMBERS', 2, 1, 5),
    watchOverlapSeconds: integerVar(env, 'WATCH_OVERLAP_SECONDS', 150, 1, 850),
    resyncIntervalSeconds: integerVar(env, 'RESYNC_INTERVAL_SECONDS', 1800, 0, 7 * 24 * 3600),
    watchIdleSeconds: integerVar(env, 'WATCH_IDLE_SECONDS', 90, 70, 3600),
    stateNamespace: optionalString(env, 'STATE_NAMESPACE', 'capi-taint-propagator'),
    leaseName: optionalString(env, 'LEASE_NAME', 'capi-taint-propagator-forwarder'),
    forwarderId: optionalString(env, 'FORWARDER_ID', `${hostname()}-${randomBytes(4).toString('hex')}`),
    leaseDurationSeconds: integerVar(env, 'LEASE_DURATION_SECONDS', 15, 3, 600),
    machineNamespace: optionalString(env, 'MACHINE_NAMESPACE'),
    nodeLabelSelector: optionalString(env, 'NODE_LABEL_SELECTOR'),
    startupTaint: startupTaintOf(env),
    specTaintsOwner: oneOf(env, 'SPEC_TAINTS_OWNER', Object.values(SpecTaintsOwner), SpecTaintsOwner.upstream),
    shards,
    shard,
    shardPinned,
  });
}

/** FORWARDER_SHARDS and FORWARDER_SHARD (also read by `npm start`'s settings); throws ConfigError naming the variable. */
export function loadSharding(env: Env, clusterMode: 'capi' | 'self'): Pick<ForwarderConfig, 'shards' | 'shard' | 'shardPinned'> {
  const shards = integerVar(env, 'FORWARDER_SHARDS', 1, 1, MAX_FORWARDER_SHARDS);
  // In `self` mode there is one cluster: nothing to split.
  if (clusterMode === 'self' && shards > 1) throw new ConfigError('FORWARDER_SHARDS', `must be 1 with CLUSTER_MODE=self (one cluster), got ${shards}`);
  const shardPinned = optionalString(env, 'FORWARDER_SHARD') !== undefined;
  const shard = shardPinned ? integerVar(env, 'FORWARDER_SHARD', 0, 0, MAX_FORWARDER_SHARDS - 1) : 0;
  if (shard >= shards) throw new ConfigError('FORWARDER_SHARD', `must be below FORWARDER_SHARDS (${shards}), got ${shard}`);
  return { shards, shard, shardPinned };
}

function startupTaintOf(env: Env): TaintId | undefined {
  const key = optionalString(env, 'STARTUP_TAINT_KEY', STARTUP_GATE_TAINT_KEY);
  return key === 'none' ? undefined : { key, effect: oneOf(env, 'STARTUP_TAINT_EFFECT', Object.values(TaintEffect), TaintEffect.NoSchedule) };
}
