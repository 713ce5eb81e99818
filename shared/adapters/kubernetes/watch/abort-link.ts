/**
 * Aborts `controller` with the reason of the first of `sources` to abort (at once if one already has); returns the
 * unlink, which removes its listeners from every source. Not AbortSignal.any: each composite of a long-lived signal (a
 * session's) stays on it after its work ends (measured on Node 22.23: about 170 B each, growing for a stream that
 * reconnects once a second for hours).
 */
export function linkAbort(controller: AbortController, sources: readonly AbortSignal[]): () => void {
  const abort = (): void => controller.abort(sources.find((s) => s.aborted)?.reason);
  if (sources.some((s) => s.aborted)) abort();
  for (const source of sources) source.addEventListener('abort', abort, { once: true });
  return () => {
    for (const source of sources) source.removeEventListener('abort', abort);
  };
}
