/**
 * infra/forwarder-schedules.cjs, the variable file that gives the watch-forwarder one schedule per shard, on its own
 * (the packaged template with three shards is checked in serverless-package.test.ts).
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';

type Schedules = (args: { resolveVariable: (address: string) => Promise<unknown> }) => Promise<Array<{ schedule: { rate: string; enabled: boolean; input: { shard: number } } }>>;
const schedules = createRequire(import.meta.url)('../../../infra/forwarder-schedules.cjs') as Schedules;
const params = (values: Record<string, unknown>) => ({ resolveVariable: async (address: string) => values[address.replace(/^param:/, '')] });

describe('Variable file: infra/forwarder-schedules.cjs', () => {
  it('gives each shard a schedule with its index as input, at the forwarder schedule', async () => {
    expect(await schedules(params({ forwarderShards: '3', forwarderSchedule: 'rate(1 minute)', forwarderEnabled: 'true' }))).toEqual([0, 1, 2].map((shard) => ({ schedule: { rate: 'rate(1 minute)', enabled: true, input: { shard } } })));
  });

  it('disables every schedule with forwarderEnabled=false', async () => {
    const out = await schedules(params({ forwarderShards: 2, forwarderSchedule: 'rate(2 minutes)', forwarderEnabled: 'false' }));
    expect(out.map((e) => e.schedule.enabled)).toEqual([false, false]);
  });

  it.each([['0'], ['65'], ['many'], ['']])('gives one schedule for forwarderShards=%j (the parameter check then refuses it)', async (shards) => {
    expect(await schedules(params({ forwarderShards: shards, forwarderSchedule: 'rate(1 minute)', forwarderEnabled: 'true' }))).toHaveLength(1);
  });
});
