/** The tracking annotations' value: the `key:effect` of the owned Always taints, sorted, comma-joined, as upstream. */
import { MalformedTrackingAnnotationError } from '#shared/errors.ts';
import type { TaintId } from './taint.ts';

/**
 * Encodes owned taint ids: unique, sorted by UTF-16 code units (equal to Go's byte order for the
 * ASCII keys validation allows), joined with `,`. No owned taints → `""`.
 * @example encodeOwnedTaints(['b:NoSchedule', 'B:NoSchedule']) // 'B:NoSchedule,b:NoSchedule'
 */
export function encodeOwnedTaints(ids: Iterable<string>): string {
  return [...new Set(ids)].sort().join(',');
}

/**
 * Decodes the annotation value into its raw entries, as upstream: no trimming, empty ones dropped, duplicates folded.
 * @example decodeOwnedTaints('a:NoSchedule,,a:NoSchedule') // Set { 'a:NoSchedule' }
 */
export function decodeOwnedTaints(value: string): Set<string> {
  return new Set(value.split(',').filter((entry) => entry !== ''));
}

/**
 * Interprets one entry as key and effect; throws MalformedTrackingAnnotationError unless it splits into exactly two
 * parts on `:`. Oddities such as `":NoSchedule"` are accepted and match nothing, as upstream tolerates them.
 */
export function parseOwnedTaintId(entry: string): TaintId {
  const parts = entry.split(':');
  if (parts.length !== 2) throw new MalformedTrackingAnnotationError(entry);
  return { key: parts[0] as string, effect: parts[1] as string };
}
