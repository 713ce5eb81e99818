import { describe, expect, it } from 'vitest';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import { ConfigError } from '#shared/errors.ts';

describe('Function: loadForwarderConfig() — SPEC_TAINTS_OWNER', () => {
  it('defaults to upstream Cluster API, as the reconcile function does', () => {
    expect(loadForwarderConfig({}).specTaintsOwner).toBe('upstream');
  });

  it('reads product', () => {
    expect(loadForwarderConfig({ SPEC_TAINTS_OWNER: 'product' }).specTaintsOwner).toBe('product');
  });

  it('refuses anything else, naming the variable and the value', () => {
    expect(() => loadForwarderConfig({ SPEC_TAINTS_OWNER: 'capi' })).toThrow(ConfigError);
    expect(() => loadForwarderConfig({ SPEC_TAINTS_OWNER: 'capi' })).toThrow(/SPEC_TAINTS_OWNER.*capi/);
  });
});

describe('Function: loadForwarderConfig() — FORWARDER_SHARDS and FORWARDER_SHARD', () => {
  it('defaults to one shard, shard 0, not pinned', () => {
    const config = loadForwarderConfig({});
    expect({ shards: config.shards, shard: config.shard, shardPinned: config.shardPinned }).toEqual({ shards: 1, shard: 0, shardPinned: false });
  });

  it('reads the count and a pinned index below it', () => {
    const config = loadForwarderConfig({ FORWARDER_SHARDS: '4', FORWARDER_SHARD: '3' });
    expect({ shards: config.shards, shard: config.shard, shardPinned: config.shardPinned }).toEqual({ shards: 4, shard: 3, shardPinned: true });
  });

  it('takes an empty FORWARDER_SHARD as not set', () => {
    expect(loadForwarderConfig({ FORWARDER_SHARDS: '2', FORWARDER_SHARD: ' ' }).shardPinned).toBe(false);
  });

  it.each([['0'], ['65'], ['-1'], ['two'], ['1.5']])('refuses FORWARDER_SHARDS=%s, naming the variable', (value) => {
    expect(() => loadForwarderConfig({ FORWARDER_SHARDS: value })).toThrow(ConfigError);
    expect(() => loadForwarderConfig({ FORWARDER_SHARDS: value })).toThrow(/FORWARDER_SHARDS/);
  });

  it('refuses an index at or above the count, and a negative one', () => {
    expect(() => loadForwarderConfig({ FORWARDER_SHARDS: '2', FORWARDER_SHARD: '2' })).toThrow(/FORWARDER_SHARD: must be below FORWARDER_SHARDS \(2\), got 2/);
    expect(() => loadForwarderConfig({ FORWARDER_SHARD: '1' })).toThrow(/FORWARDER_SHARD/);
    expect(() => loadForwarderConfig({ FORWARDER_SHARDS: '2', FORWARDER_SHARD: '-1' })).toThrow(/FORWARDER_SHARD/);
  });

  it('refuses more than one shard in self mode (one cluster, nothing to split)', () => {
    expect(() => loadForwarderConfig({ CLUSTER_MODE: 'self', FORWARDER_SHARDS: '2' })).toThrow(/FORWARDER_SHARDS: must be 1 with CLUSTER_MODE=self/);
    expect(loadForwarderConfig({ CLUSTER_MODE: 'self', FORWARDER_SHARDS: '1' }).shards).toBe(1);
  });
});
