/**
 * One watch line → what it means, purely (client-go's `watch.Decoder` plus `watchHandler`'s type switch). Its reasons
 * come from the event type and a Status (escaped, capped), never from the line itself: whether (and how short) an
 * excerpt of a malformed line is logged is the caller's decision.
 */
import type { ChangeKind } from '#shared/contract/cloud-event.ts';
import { isObject } from '#shared/model/json.ts';
import type { WatchedFacts } from '#shared/model/views.ts';
import { escapedText } from '../api-errors.ts';

export type DecodedLine<T extends WatchedFacts> =
  | { readonly kind: 'change'; readonly change: ChangeKind; readonly facts: T }
  | { readonly kind: 'bookmark'; readonly resourceVersion: string }
  /** ERROR with code 410: the watch's resourceVersion is too old; relist. */
  | { readonly kind: 'gone' }
  /** Another ERROR: the watch failed; `reason` names its Status (code, reason, message excerpt). */
  | { readonly kind: 'error'; readonly reason: string }
  | { readonly kind: 'malformed'; readonly reason: string };

const WATCH_TYPES: Readonly<Record<string, ChangeKind>> = { ADDED: 'added', MODIFIED: 'modified', DELETED: 'deleted' };

/**
 * Decodes one (non-empty) watch line; `toFacts` reads an object's facts, undefined when it lacks name, uid or
 * resourceVersion.
 */
export function decodeWatchLine<T extends WatchedFacts>(line: string, toFacts: (obj: unknown) => T | undefined): DecodedLine<T> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return { kind: 'malformed', reason: 'not JSON' };
  }
  if (!isObject(parsed) || typeof parsed.type !== 'string') return { kind: 'malformed', reason: 'no event type' };
  const obj = parsed.object;
  switch (parsed.type) {
    case 'BOOKMARK': {
      const rv = isObject(obj) && isObject(obj.metadata) ? obj.metadata.resourceVersion : undefined;
      return typeof rv === 'string' && rv !== '' ? { kind: 'bookmark', resourceVersion: rv } : { kind: 'malformed', reason: 'bookmark without resourceVersion' };
    }
    case 'ERROR':
      if (isObject(obj) && obj.code === 410) return { kind: 'gone' };
      return { kind: 'error', reason: `watch ERROR ${statusOfEvent(obj)}` };
    default: {
      const change = WATCH_TYPES[parsed.type];
      if (!change) return { kind: 'malformed', reason: `unknown event type ${escapedText(parsed.type, 40)}` };
      const facts = toFacts(obj);
      return facts ? { kind: 'change', change, facts } : { kind: 'malformed', reason: 'object without name, uid or resourceVersion' };
    }
  }
}

/**
 * `code reason: message` of an ERROR event's Status, escaped and capped at 200; `(no Status)` when it carries none.
 * Not api-errors' `statusDetail` (`HTTP <status>`): the stream itself answered 200, and a Status may omit its code.
 */
function statusOfEvent(obj: unknown): string {
  if (!isObject(obj)) return '(no Status)';
  const code = typeof obj.code === 'number' ? String(obj.code) : undefined;
  const reason = typeof obj.reason === 'string' ? obj.reason : undefined;
  const message = typeof obj.message === 'string' ? obj.message : undefined;
  const head = [code, reason].filter((p) => p !== undefined).join(' ');
  const text = [head, message].filter((p) => p !== undefined && p !== '').join(': ');
  return text === '' ? '(no Status)' : escapedText(text, 200);
}
