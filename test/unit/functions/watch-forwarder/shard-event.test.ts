/** The shard a scheduled invocation runs (functions/watch-forwarder/shard-event.ts). */
import { describe, expect, it } from 'vitest';
import { shardOfEvent } from '#functions/watch-forwarder/shard-event.ts';
import { ConfigError } from '#shared/errors.ts';

const config = { shards: 3, shard: 0 };

describe('Function: shardOfEvent()', () => {
  it("runs the schedule input's shard", () => {
    expect(shardOfEvent({ shard: 2 }, config)).toBe(2);
    expect(shardOfEvent({ shard: 0 }, { shards: 3, shard: 1 })).toBe(0);
  });

  it('runs FORWARDER_SHARD for an event without one (an EventBridge scheduled event, a manual invocation)', () => {
    expect(shardOfEvent({ 'detail-type': 'Scheduled Event', source: 'aws.events', detail: {} }, { shards: 3, shard: 1 })).toBe(1);
    expect(shardOfEvent(undefined, config)).toBe(0);
    expect(shardOfEvent(null, config)).toBe(0);
  });

  it.each([[3], [-1], [1.5], ['1'], [null]])('refuses shard %j, saying the count', (shard) => {
    expect(() => shardOfEvent({ shard }, config)).toThrow(ConfigError);
    expect(() => shardOfEvent({ shard }, config)).toThrow(/event\.shard: must be an integer from 0 to 2 \(FORWARDER_SHARDS is 3\)/);
  });
});
