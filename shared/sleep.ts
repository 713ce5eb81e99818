import { setTimeout as delay } from 'node:timers/promises';

/** Waits `ms`, or less when `signal` aborts (then resolves instead of rejecting). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return delay(ms, undefined, { signal }).catch(() => undefined);
}
