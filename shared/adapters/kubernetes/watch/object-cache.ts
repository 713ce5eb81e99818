/**
 * What a stream knows of its collection (client-go's Store, client-node cache.ts's `objects`): the last facts seen of
 * each object, by `objectKeyOf`, and the resourceVersion they are current at. A change's `previous` comes from it, and
 * a relist is diffed against it, so deletions while a watch was away are announced.
 */
import type { ChangeKind } from '#shared/contract/cloud-event.ts';
import { changedSince, diffRelist } from '#shared/policy/relevance.ts';
import { objectKeyOf, type WatchedFacts } from '#shared/model/views.ts';

export class ObjectCache<T extends WatchedFacts> {
  private objects = new Map<string, T>();
  private rv: string | undefined;

  /** The resourceVersion the cache is current at (undefined before the first list). */
  get resourceVersion(): string | undefined {
    return this.rv;
  }

  /** Moves the cache to a later resourceVersion without a change (a bookmark). */
  advance(resourceVersion: string): void {
    this.rv = resourceVersion;
  }

  /** The last facts of an object, by key. */
  latest(key: string): T | undefined {
    return this.objects.get(key);
  }

  /** The last facts of every object. */
  values(): Iterable<T> {
    return this.objects.values();
  }

  /** One watch change: the cache takes it (a deletion removes the object); returns the facts it replaced, if any. */
  apply(change: ChangeKind, facts: T): T | undefined {
    const key = objectKeyOf(facts);
    const previous = this.objects.get(key);
    if (change === 'deleted') this.objects.delete(key);
    else this.objects.set(key, facts);
    this.rv = facts.resourceVersion;
    return previous;
  }

  /** A list at `resourceVersion` replaces the whole cache, with no announcement (an exact resume). */
  replace(items: readonly T[], resourceVersion: string): void {
    this.objects = new Map(items.map((facts) => [objectKeyOf(facts), facts]));
    this.rv = resourceVersion;
  }

  /**
   * A relist replaces the cache; returns what to announce: every listed object when `full` (a periodic resync), else
   * what changed relevantly since the cache saw it (diffRelist), and as deletions what the list no longer has.
   */
  relist(items: readonly T[], resourceVersion: string, full: boolean): { resynced: T[]; deleted: T[] } {
    const diff = diffRelist(this.objects, items, full);
    this.replace(items, resourceVersion);
    return diff;
  }

  /** A relist with no baseline (a compacted checkpoint) replaces the cache; returns what changed after `since`. */
  relistSince(items: readonly T[], resourceVersion: string, since: string): T[] {
    this.replace(items, resourceVersion);
    return changedSince(items, since);
  }
}
