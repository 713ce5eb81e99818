/**
 * The shard assignment (shared/policy/shards.ts): the hash against published vectors, its stability, its spread over
 * the shards, the minimal movement when the count grows, the bounds, the Lease names, and which objects a shard keeps.
 */
import { describe, expect, it } from 'vitest';
import { fnv1a64, jumpHash, shardKeeps, shardLeaseName, shardOf } from '#shared/policy/shards.ts';
import type { ClusterFacts, MachineFacts, NodeFacts, ScalableFacts } from '#shared/model/views.ts';

const keys = Array.from({ length: 10_000 }, (_, i) => `fleet-${i % 37}/cluster-${i}`);

describe('Module: shards', () => {
  it('hashes as the published FNV-1a 64 and jump hash vectors say', () => {
    expect(fnv1a64('')).toBe(0xcbf29ce484222325n);
    expect(fnv1a64('a')).toBe(0xaf63dc4c8601ec8cn);
    expect(fnv1a64('foobar')).toBe(0x85944171f73967e8n);
    // github.com/dgryski/go-jump's vectors (from the paper's C++ code).
    expect(jumpHash(1n, 1)).toBe(0);
    expect(jumpHash(42n, 57)).toBe(43);
    expect(jumpHash(0xdead10ccn, 1)).toBe(0);
    expect(jumpHash(0xdead10ccn, 666)).toBe(361);
    expect(jumpHash(256n, 1024)).toBe(520);
  });

  it('gives a cluster the same shard every time, and shard 0 with one shard', () => {
    const first = keys.map((k) => shardOf(k, 7));
    expect(keys.map((k) => shardOf(k, 7))).toEqual(first);
    expect(shardOf('default/c1', 3)).toBe(shardOf('default/c1', 3));
    expect(new Set(keys.map((k) => shardOf(k, 1)))).toEqual(new Set([0]));
  });

  it('keeps every shard within [0, count) and spreads clusters evenly (each within 10 % of its share)', () => {
    for (const count of [2, 3, 8, 64]) {
      const sizes = new Array<number>(count).fill(0);
      for (const k of keys) {
        const s = shardOf(k, count);
        expect(s).toBeGreaterThanOrEqual(0);
        expect(s).toBeLessThan(count);
        sizes[s] = (sizes[s] ?? 0) + 1;
      }
      const share = keys.length / count;
      for (const size of sizes) expect(Math.abs(size - share) / share).toBeLessThan(count === 64 ? 0.25 : 0.1);
    }
  });

  it('moves only about 1/(n+1) of the clusters when the count grows from n to n+1, all to the new shard', () => {
    for (const n of [1, 2, 4, 9]) {
      const moved = keys.filter((k) => shardOf(k, n) !== shardOf(k, n + 1));
      expect(moved.every((k) => shardOf(k, n + 1) === n)).toBe(true);
      const expected = keys.length / (n + 1);
      expect(Math.abs(moved.length - expected) / expected).toBeLessThan(0.1);
    }
  });

  it('refuses a count below one or not an integer', () => {
    expect(() => jumpHash(1n, 0)).toThrow(RangeError);
    expect(() => jumpHash(1n, 1.5)).toThrow(RangeError);
  });

  it('names the Lease of a shard: the plain name with one shard, <name>-<index>-of-<count> otherwise', () => {
    expect(shardLeaseName('capi-taint-propagator-forwarder', 0, 1)).toBe('capi-taint-propagator-forwarder');
    expect(shardLeaseName('fwd', 0, 2)).toBe('fwd-0-of-2');
    expect(shardLeaseName('fwd', 3, 4)).toBe('fwd-3-of-4');
    expect(() => shardLeaseName('fwd', 2, 2)).toThrow(RangeError);
    expect(() => shardLeaseName('fwd', -1, 2)).toThrow(RangeError);
    expect(() => shardLeaseName('fwd', 0, 0)).toThrow(RangeError);
    expect(() => shardLeaseName('fwd', 0.5, 2)).toThrow(RangeError);
  });
});

describe('Function: shardKeeps()', () => {
  const base = { uid: 'u', resourceVersion: '1', deleting: false };
  const cluster = (namespace: string, name: string): ClusterFacts => ({ ...base, kind: 'Cluster', namespace, name, paused: false });
  const machine = (extra: Partial<MachineFacts>): MachineFacts => ({ ...base, kind: 'Machine', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'ns', name: 'm', specTaints: [], annotations: {}, ...extra });
  const set = (extra: Partial<ScalableFacts>): ScalableFacts => ({ ...base, kind: 'MachineSet', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, namespace: 'ns', name: 's', specTaints: [], templateAnnotations: {}, templateLabels: {}, annotations: {}, ownedByMachineDeployment: false, ...extra });
  const node: NodeFacts = { kind: 'Node', name: 'n', uid: 'u', resourceVersion: '1', labels: {}, annotations: {}, taints: [] };
  // Two clusters of the same namespace that hash to different shards of two.
  const names = Array.from({ length: 50 }, (_, i) => `c${i}`);
  const in0 = names.find((n) => shardOf(`ns/${n}`, 2) === 0) as string;
  const in1 = names.find((n) => shardOf(`ns/${n}`, 2) === 1) as string;

  it("keeps its own clusters' objects: the Cluster itself, spec.clusterName, else the cluster-name label", () => {
    const keeps0 = shardKeeps(0, 2);
    const keeps1 = shardKeeps(1, 2);
    const both = machine({ clusterName: in0, labels: { 'cluster.x-k8s.io/cluster-name': in1 } });
    expect([keeps0(both), keeps1(both)]).toEqual([true, false]);
    expect([keeps0(cluster('ns', in0)), keeps1(cluster('ns', in0))]).toEqual([true, false]);
    expect([keeps0(machine({ clusterName: in1 })), keeps1(machine({ clusterName: in1 }))]).toEqual([false, true]);
    expect([keeps0(set({ labels: { 'cluster.x-k8s.io/cluster-name': in1 } })), keeps1(set({ labels: { 'cluster.x-k8s.io/cluster-name': in1 } }))]).toEqual([false, true]);
  });

  it('keeps an object naming no cluster in shard 0 only, and every Node', () => {
    expect([shardKeeps(0, 2)(machine({})), shardKeeps(1, 2)(machine({}))]).toEqual([true, false]);
    expect([shardKeeps(0, 2)(node), shardKeeps(1, 2)(node)]).toEqual([true, true]);
  });
});
