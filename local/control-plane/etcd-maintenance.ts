/**
 * etcd maintenance through etcd's v3 JSON gateway (plain HTTP on the client URL; int64 fields travel as strings,
 * byte fields as base64). Used to force a compaction, so that watches and lists from older resourceVersions get
 * 410 Gone without waiting for the apiserver's own compaction (every 5 min).
 */

async function post(endpoint: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(new URL(path, endpoint), {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${path} answered ${res.status}: ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** etcd's current revision (the store's newest `mod_revision`; the apiserver's resourceVersions are these numbers). */
export async function etcdRevision(endpoint: string): Promise<string> {
  const status = await post(endpoint, '/v3/maintenance/status', {});
  const revision = (status['header'] as { revision?: string } | undefined)?.revision;
  if (!revision) throw new Error(`etcd status has no header.revision: ${JSON.stringify(status)}`);
  return revision;
}

/**
 * Compacts etcd so that every resourceVersion handed out before this call is gone, and returns the revision compacted
 * at. A watch from resourceVersion r starts at revision r + 1, so compacting at the current revision R would still let
 * a watch from R - 1 start (and fail later with a 500 "PrevKv=nil" instead of 410). Two writes of a marker key
 * outside the apiserver's `/registry` prefix move the revision to R + 2 first; compacting there (physically, done when
 * this returns) leaves no revision <= R + 1, so a watch or exact list from any r <= R reaching etcd gets 410 Gone.
 */
export async function compactEtcdAt(endpoint: string): Promise<string> {
  const key = Buffer.from('/capi-taint-propagator/compaction-marker').toString('base64');
  let revision = '';
  for (let i = 0; i < 2; i++) {
    const put = await post(endpoint, '/v3/kv/put', { key, value: Buffer.from(String(Date.now())).toString('base64') });
    revision = (put['header'] as { revision?: string } | undefined)?.revision ?? '';
  }
  if (!revision) revision = await etcdRevision(endpoint);
  await post(endpoint, '/v3/kv/compaction', { revision, physical: true });
  return revision;
}
