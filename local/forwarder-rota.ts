/**
 * The forwarder outside Lambda (`npm run forwarder`, `npm start`, the tests and the benchmarks), run the way the Lambda
 * form runs it: windows of the rota (`WatchForwarder.runMember`: join → watch → hand over and leave, on the same
 * Lease), started one after another by this process instead of by a schedule. The local default is a rota of one
 * member (`WATCH_MEMBERS=1`): a second process on the same Lease finds the rota full, tries again every `retryMs`, and
 * joins when the first leaves, or when its entry lapses and its Lease expires (killed).
 */
import type { WatchForwarder, ForwarderRunSummary } from '#functions/watch-forwarder/forward-watch-events.ts';
import type { ForwarderConfig } from '#shared/config/forwarder-config.ts';
import type { RotaPolicy } from '#shared/policy/forwarder-rota.ts';
import type { logger as defaultLogger } from '#shared/observability/logger.ts';
import { sleep } from '#shared/sleep.ts';

/** How many members a local rota keeps watching: one process, unless WATCH_MEMBERS says otherwise. */
export const LOCAL_WATCH_MEMBERS = 1;

/**
 * The shards a local process runs (FORWARDER_SHARDS, FORWARDER_SHARD): every shard of the count, each a rota of its
 * own on its own Lease, side by side in this one process; only FORWARDER_SHARD's when it is set (one process per
 * shard, as the benchmarks' children run them).
 */
export function localShards(config: Pick<ForwarderConfig, 'shards' | 'shard' | 'shardPinned'>): number[] {
  return config.shardPinned ? [config.shard] : Array.from({ length: config.shards }, (_, i) => i);
}

/** A local rota: the policy every window joins with, and how long each window watches. */
export interface LocalRota {
  readonly policy: RotaPolicy;
  readonly windowMs: number;
}

/** The rota of `config` (WATCH_MEMBERS, WATCH_OVERLAP_SECONDS, LEASE_DURATION_SECONDS, WATCH_WINDOW_SECONDS). */
export function localRota(config: ForwarderConfig): LocalRota {
  return {
    policy: { targetMembers: config.watchMembers, overlapMs: config.watchOverlapSeconds * 1000, staleAfterMs: config.leaseDurationSeconds * 1000 },
    windowMs: config.watchWindowSeconds * 1000,
  };
}

/**
 * Runs windows of `rota` one after another until `signal` aborts; after a window that did not join, waits `retryMs`
 * before the next. Returns the last window's summary.
 */
export async function runWindows(
  forwarder: WatchForwarder,
  o: { readonly signal: AbortSignal; readonly rota: LocalRota; readonly retryMs: number; readonly logger: Pick<typeof defaultLogger, 'error'> },
): Promise<ForwarderRunSummary> {
  const idle: ForwarderRunSummary =
    { active: false, rota: { joined: false }, unsent: 0, checkpoint: {}, failingClusters: [] };
  let last = idle;
  while (!o.signal.aborted) {
    try {
      last = await forwarder.runMember(o.signal, { policy: o.rota.policy, until: new Date(Date.now() + o.rota.windowMs) });
    } catch (error) {
      o.logger.error('Forwarder window failed; starting another', { error: error as Error });
      last = idle;
    }
    if (!last.rota.joined) await sleep(o.retryMs, o.signal);
  }
  return last;
}
