/** Defensive readers of untrusted Kubernetes JSON: a wrong type reads as absent, never as a throw. Pure. */
import { isRecord as isObject } from '#shared/domain/validation.ts';

export type Json = Record<string, unknown>;
/** The domain's `isRecord`: true for a JSON object (not null, not an array). */
export { isObject };

/** A non-empty string, else undefined. */
export function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** A JSON object, else `{}`. */
export function obj(v: unknown): Json {
  return isObject(v) ? v : {};
}

/** The string entries of a JSON object (labels, annotations). */
export function stringMap(v: unknown): Record<string, string> {
  return Object.fromEntries(Object.entries(obj(v)).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** The entries of `map` whose key is in `keys`. */
export function pick(map: Readonly<Record<string, string>>, keys: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of keys) if (map[key] !== undefined) out[key] = map[key];
  return out;
}

/** The parts of any Kubernetes object, read defensively: a missing namespace is `''`, a missing object `{}`. */
export type ObjectParts = NonNullable<ReturnType<typeof objectParts>>;

/** The object's parts; undefined when it lacks name, uid or resourceVersion (a malformed event). */
export function objectParts(o: unknown) {
  const m = obj(obj(o).metadata);
  const [name, uid, resourceVersion] = [str(m.name), str(m.uid), str(m.resourceVersion)];
  if (!name || !uid || !resourceVersion) return undefined;
  return {
    name,
    uid,
    resourceVersion,
    namespace: str(m.namespace) ?? '',
    labels: stringMap(m.labels),
    annotations: stringMap(m.annotations),
    deleting: m.deletionTimestamp !== undefined && m.deletionTimestamp !== null,
    metadata: m,
    spec: obj(obj(o).spec),
    status: obj(obj(o).status),
  };
}
