/**
 * The watch-forwarder's schedules, one per shard (serverless.yml `events: ${file(infra/forwarder-schedules.cjs)}`):
 * each fires every `forwarderSchedule` with the input `{ "shard": i }`, so one deployment runs every shard's rota
 * (functions/watch-forwarder/shard-event.ts; docs/fleets-and-sizing.md). A JS variable file because a YAML list cannot
 * grow with a parameter; CommonJS because osls loads `.js`/`.cjs` variable files with `require`. Shard 0's schedule
 * stays the first event, so a deployment that had one schedule keeps its rule (and gains the input).
 *
 * A `forwarderShards` that is not an integer from 1 to 64 gives one schedule here; infra/check-parameters.ts then
 * refuses it, naming the parameter, before anything is packaged.
 */
const MAX_SHARDS = 64;

module.exports = async ({ resolveVariable }) => {
  const raw = String(await resolveVariable('param:forwarderShards')).trim();
  const rate = await resolveVariable('param:forwarderSchedule');
  const enabled = /^(true|1)$/i.test(String(await resolveVariable('param:forwarderEnabled')).trim());
  const shards = /^\d+$/.test(raw) && Number(raw) >= 1 && Number(raw) <= MAX_SHARDS ? Number(raw) : 1;
  return Array.from({ length: shards }, (_, shard) => ({ schedule: { rate, enabled, input: { shard } } }));
};
