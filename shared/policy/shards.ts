/**
 * Which shard of the forwarder a workload cluster belongs to, and the Lease each shard's rota uses. Pure.
 * A cluster's shard is Lamping and Veach's jump consistent hash ("A Fast, Minimal Memory, Consistent Hash Algorithm",
 * 2014) of the 64-bit FNV-1a of its `<namespace>/<name>`: growing the count moves only the clusters the new shard takes
 * (each moved cluster is relisted, docs/fleets-and-sizing.md). FNV-1a spreads short keys that differ in one character
 * over all 64 bits, which the jump hash's generator needs as its seed.
 */
import { clusterNameOf, type WatchedFacts } from '#shared/model/views.ts';

const MASK_64 = (1n << 64n) - 1n;
const FNV_OFFSET_64 = 0xcbf29ce484222325n;
const FNV_PRIME_64 = 0x100000001b3n;
/** The 64-bit linear congruential generator of the jump hash (Lamping and Veach's constant). */
const JUMP_MULTIPLIER = 2862933555777941757n;

/** 64-bit FNV-1a over the UTF-8 bytes of `text`. Returns the hash as an unsigned 64-bit bigint. */
export function fnv1a64(text: string): bigint {
  let hash = FNV_OFFSET_64;
  for (const byte of new TextEncoder().encode(text)) {
    hash ^= BigInt(byte);
    hash = (hash * FNV_PRIME_64) & MASK_64;
  }
  return hash;
}

/** Lamping and Veach's jump consistent hash: the bucket in [0, buckets) of a 64-bit key. */
export function jumpHash(key: bigint, buckets: number): number {
  if (!Number.isInteger(buckets) || buckets < 1) throw new RangeError(`buckets must be a positive integer, got ${buckets}`);
  let k = key & MASK_64;
  let b = -1;
  let j = 0;
  while (j < buckets) {
    b = j;
    k = (k * JUMP_MULTIPLIER + 1n) & MASK_64;
    j = Math.floor((b + 1) * (2 ** 31 / (Number(k >> 33n) + 1)));
  }
  return b;
}

/** The shard in [0, count) of the workload cluster `<namespace>/<name>`. */
export function shardOf(clusterKey: string, count: number): number {
  return count === 1 ? 0 : jumpHash(fnv1a64(clusterKey), count);
}

/**
 * The Lease of shard `index` of `count`: the plain `leaseName` with one shard (so that an upgrade to a release with
 * shards keeps its checkpoint), `<leaseName>-<index>-of-<count>` otherwise (a new count lists afresh on new Leases).
 */
export function shardLeaseName(leaseName: string, index: number, count: number): string {
  if (!Number.isInteger(count) || count < 1 || !Number.isInteger(index) || index < 0 || index >= count) {
    throw new RangeError(`shard ${index} of ${count} is not a shard`);
  }
  return count === 1 ? leaseName : `${leaseName}-${index}-of-${count}`;
}

/**
 * Whether shard `index` of `count` keeps a watched object: one whose cluster (`clusterNameOf`, in its namespace) hashes
 * to it; an object naming no cluster in shard 0 only (so it is reported once); a Node always (a shard runs Node streams
 * only for its own clusters).
 */
export function shardKeeps(index: number, count: number): (facts: WatchedFacts) => boolean {
  return (facts) => {
    if (facts.kind === 'Node') return true;
    const name = facts.kind === 'Cluster' ? facts.name : clusterNameOf(facts);
    return name ? shardOf(`${facts.namespace}/${name}`, count) === index : index === 0;
  };
}
