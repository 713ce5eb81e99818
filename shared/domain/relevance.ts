/**
 * The forwarder's relevance filter: a fingerprint of exactly what the reconcile function reads, and
 * the rules that decide whether a watch event is worth a queue message. Pure.
 */
import type { ChangeKind } from './cloud-event.ts';
import { declaredTaintsOf } from './declarations.ts';
import { CONTROL_PLANE_LABEL, FIELD_MANAGER } from './taint.ts';
import type { MachineFacts, WatchedFacts } from './watch-event.ts';

/** Deterministic JSON: object keys sorted, so that equal facts give equal strings. */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    const entries = Object.entries(v as Record<string, unknown>)
      .filter(([, x]) => x !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, x]) => `${JSON.stringify(k)}:${canonicalJson(x)}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/**
 * The relevant fingerprint of an object: everything the reconcile function reads, and nothing a
 * heartbeat touches (status conditions, resourceVersion, managedFields…). The uid is included so a
 * Node deleted and re-created under the same name while the forwarder was away counts as changed.
 * Returns equal strings exactly when no relevant fact differs.
 * @example fingerprintOf(a) === fingerprintOf({ ...a, resourceVersion: '99' }) // true
 */
export function fingerprintOf(facts: WatchedFacts): string {
  const { resourceVersion: _ignored, ...relevant } = facts;
  if (relevant.kind === 'Node') {
    const { writers: _who, ...node } = relevant;
    return canonicalJson(node);
  }
  return canonicalJson(relevant);
}

/**
 * Recognises the echo of the reconcile function's own write: between two states of a Node only the
 * taints and/or the product's tracking annotation changed, and the field manager that last wrote each changed
 * part is the reconcile function's. The Node is then exactly as that reconcile planned it (its write
 * carried the resourceVersion precondition), so another reconcile would find nothing to do.
 * Any other writer takes ownership of what it writes, so its changes are never mistaken for ours.
 * Returns true when the change need not be forwarded.
 * @example isOwnNodeWrite(before, { ...before, taints: [t], writers: { taints: FIELD_MANAGER } }) // true
 */
export function isOwnNodeWrite(previous: WatchedFacts | undefined, current: WatchedFacts): boolean {
  if (previous?.kind !== 'Node' || current.kind !== 'Node') return false;
  const { resourceVersion: _r1, writers: _w1, taints: beforeTaints, ownTrackingAnnotation: beforeAnnotation, ...beforeRest } = previous;
  const { resourceVersion: _r2, writers, taints, ownTrackingAnnotation, ...rest } = current;
  if (canonicalJson(rest) !== canonicalJson(beforeRest)) return false;
  const taintsChanged = canonicalJson(taints) !== canonicalJson(beforeTaints);
  const annotationChanged = ownTrackingAnnotation !== beforeAnnotation;
  if (!taintsChanged && !annotationChanged) return false;
  if (taintsChanged && writers?.taints !== FIELD_MANAGER) return false;
  if (annotationChanged && writers?.ownTrackingAnnotation !== FIELD_MANAGER) return false;
  return true;
}

/**
 * Decides whether a change is forwarded. Additions and deletions always are; a modification only
 * when the relevant fingerprint differs from the last one seen (or none was seen); a resync only when
 * `full` (periodic resync) or when the fingerprint changed while the forwarder was away.
 * Returns true when the change should become a CloudEvent.
 * @example isRelevantChange('modified', fp, fp) // false: a status-only heartbeat
 */
export function isRelevantChange(change: ChangeKind, previous: string | undefined, current: string, full = false): boolean {
  if (change === 'added' || change === 'deleted') return true;
  if (change === 'resynced' && full) return true;
  return previous === undefined || previous !== current;
}

/** One object of a relist, with the fingerprint computed by {@link fingerprintOf}. */
export interface ListedObject<T> {
  readonly key: string;
  readonly fingerprint: string;
  readonly facts: T;
}

/**
 * Compares a fresh list with what the forwarder knew before (a relist after 410 Gone, a resume, or
 * a periodic resync). Returns `resynced` for objects that are new or whose fingerprint changed (all
 * of them when `full`), and `deleted` for known objects that are gone. Nothing when nothing changed.
 */
export function diffRelist<T>(
  known: ReadonlyMap<string, ListedObject<T>>,
  listed: readonly ListedObject<T>[],
  full: boolean,
): { resynced: ListedObject<T>[]; deleted: ListedObject<T>[] } {
  const seen = new Set<string>();
  const resynced: ListedObject<T>[] = [];
  for (const obj of listed) {
    seen.add(obj.key);
    if (isRelevantChange('resynced', known.get(obj.key)?.fingerprint, obj.fingerprint, full)) resynced.push(obj);
  }
  const deleted = [...known.values()].filter((obj) => !seen.has(obj.key));
  return { resynced, deleted };
}

/** True when the facts' taint declaration (`spec.taints` and the declaration annotations) is valid. */
function declarationValid(m: MachineFacts): boolean {
  const labels: Record<string, string> = m.controlPlaneLabel !== undefined ? { [CONTROL_PLANE_LABEL]: m.controlPlaneLabel } : {};
  return declaredTaintsOf({ specTaints: m.specTaints, annotations: m.declarations, labels }).valid;
}

/**
 * Recognises a Machine whose taint declaration was invalid in the previous version the forwarder saw and is valid
 * in this one: the reconcile function then records a Normal `DeclarationValid` Event, so whoever fixed it sees it
 * took. Only the declaration is compared (validated only when it changed). A hint: the reconcile function checks
 * the declaration itself, so a wrong hint can at most cause an Event that says a valid declaration is valid.
 * @example isDeclarationRecovery(withAnnotation('gpu:NoSchedul'), withAnnotation('gpu:NoSchedule')) // true
 */
export function isDeclarationRecovery(previous: WatchedFacts | undefined, current: WatchedFacts): boolean {
  if (previous?.kind !== 'Machine' || current.kind !== 'Machine') return false;
  const declarationOf = (m: MachineFacts): string => canonicalJson({ s: m.specTaints, d: m.declarations, c: m.controlPlaneLabel });
  if (declarationOf(previous) === declarationOf(current)) return false;
  return !declarationValid(previous) && declarationValid(current);
}
