/**
 * Which shard a scheduled invocation runs: serverless.yml gives each shard a schedule whose input is `{ "shard": i }`.
 * An event without `shard` (an older deployment's, a manual invocation) runs FORWARDER_SHARD's. A shard outside the
 * count is a deployment error, refused rather than watched under a Lease no schedule keeps.
 */
import type { ForwarderConfig } from '#shared/config/forwarder-config.ts';
import { ConfigError } from '#shared/errors.ts';

/** The shard of `event` (its `shard` field, else `config.shard`); throws ConfigError unless an integer below `config.shards`. */
export function shardOfEvent(event: unknown, config: Pick<ForwarderConfig, 'shard' | 'shards'>): number {
  const given = typeof event === 'object' && event !== null && 'shard' in event ? (event as { shard: unknown }).shard : undefined;
  if (given === undefined) return config.shard;
  if (typeof given !== 'number' || !Number.isInteger(given) || given < 0 || given >= config.shards) {
    throw new ConfigError('event.shard', `must be an integer from 0 to ${config.shards - 1} (FORWARDER_SHARDS is ${config.shards}), got ${JSON.stringify(given)}`);
  }
  return given;
}
