import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { ConfigError } from '#shared/errors.ts';
import { ClusterMode } from './cluster-access-config.ts';
import { integerVar, oneOf, optionalString, type Env } from './env.ts';
import { loadSharedSettings, type SharedSettings } from './reconcile-config.ts';

/** The watch-forwarder's configuration (its use of the shared settings: WatchForwarderDeps, forward-watch-events). */
export interface ForwarderConfig extends SharedSettings {
  /** SQS FIFO queue URL; optional only for local runs that inject their own queue. */
  readonly queueUrl: string | undefined;
  readonly clusterMode: ClusterMode;
  /** Length of one window of the rota (a Lambda run's; `npm run forwarder` runs windows one after another). */
  readonly watchWindowSeconds: number;
  /**
   * How many members with time left make a new window exit instead of joining (local runs: 1); why two:
   * functions/watch-forwarder/README.md, "Deployed form".
   */
  readonly watchMembers: number;
  /**
   * A member with less than this left no longer counts, so that its successor joins in time (Lambda form: at least two
   * schedule intervals + 30 s; functions/watch-forwarder/README.md, "Settings").
   */
  readonly watchOverlapSeconds: number;
  /** Period of the full resync that re-announces every object; 0 turns it off. */
  readonly resyncIntervalSeconds: number;
  /** A watch silent this long (no bookmark either, which kube-apiserver sends about once a minute) is restarted. */
  readonly watchIdleSeconds: number;
  /** The Lease that holds the rota's members and elects the one that stores the checkpoint. */
  readonly leaseName: string;
  readonly forwarderId: string;
  /** A holder that has not renewed for this long can be replaced; a member's entry lapses. */
  readonly leaseDurationSeconds: number;
  /** Only Machines in this namespace, only Nodes matching this label selector (default: all). */
  readonly machineNamespace: string | undefined;
  readonly nodeLabelSelector: string | undefined;
  /** Shards of the workload clusters, each a rota with a Lease of its own (docs/fleets-and-sizing.md). */
  readonly shards: number;
  /** This process's shard, 0-based; the Lambda form takes it from the scheduled event (`{ "shard": i }`). */
  readonly shard: number;
  /** FORWARDER_SHARD was set: the local forms, which otherwise run every shard in one process, run only `shard`. */
  readonly shardPinned: boolean;
}

/** Most shards one deployment may split its fleet into (each costs one schedule and up to 2 × WATCH_MEMBERS + 1 concurrent executions). */
const MAX_FORWARDER_SHARDS = 64;

/** Reads and validates the forwarder's settings; throws ConfigError naming the variable. */
export function loadForwarderConfig(env: Env): ForwarderConfig {
  const clusterMode = oneOf(env, 'CLUSTER_MODE', Object.values(ClusterMode), ClusterMode.Capi);
  const { shards, shard, shardPinned } = loadSharding(env, clusterMode);
  return Object.freeze({
    queueUrl: optionalString(env, 'QUEUE_URL'),
    clusterMode,
    watchWindowSeconds: integerVar(env, 'WATCH_WINDOW_SECONDS', 885, 10, 900),
    watchMembers: integerVar(env, 'WATCH_MEMBERS', 2, 1, 5),
    watchOverlapSeconds: integerVar(env, 'WATCH_OVERLAP_SECONDS', 150, 1, 850),
    resyncIntervalSeconds: integerVar(env, 'RESYNC_INTERVAL_SECONDS', 1800, 0, 7 * 24 * 3600),
    watchIdleSeconds: integerVar(env, 'WATCH_IDLE_SECONDS', 90, 70, 3600),
    leaseName: optionalString(env, 'LEASE_NAME', 'capi-taint-propagator-forwarder'),
    forwarderId: optionalString(env, 'FORWARDER_ID', `${hostname()}-${randomBytes(4).toString('hex')}`),
    leaseDurationSeconds: integerVar(env, 'LEASE_DURATION_SECONDS', 15, 3, 600),
    machineNamespace: optionalString(env, 'MACHINE_NAMESPACE'),
    nodeLabelSelector: optionalString(env, 'NODE_LABEL_SELECTOR'),
    ...loadSharedSettings(env),
    shards,
    shard,
    shardPinned,
  });
}

/** FORWARDER_SHARDS and FORWARDER_SHARD (also read by `npm start`'s settings); throws ConfigError naming the variable. */
export function loadSharding(env: Env, clusterMode: 'capi' | 'self'): Pick<ForwarderConfig, 'shards' | 'shard' | 'shardPinned'> {
  const shards = integerVar(env, 'FORWARDER_SHARDS', 1, 1, MAX_FORWARDER_SHARDS);
  if (clusterMode === 'self' && shards > 1) throw new ConfigError('FORWARDER_SHARDS', `must be 1 with CLUSTER_MODE=self (one cluster), got ${shards}`);
  const shardPinned = optionalString(env, 'FORWARDER_SHARD') !== undefined;
  const shard = shardPinned ? integerVar(env, 'FORWARDER_SHARD', 0, 0, MAX_FORWARDER_SHARDS - 1) : 0;
  if (shard >= shards) throw new ConfigError('FORWARDER_SHARD', `must be below FORWARDER_SHARDS (${shards}), got ${shard}`);
  return { shards, shard, shardPinned };
}
