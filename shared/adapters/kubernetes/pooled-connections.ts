/**
 * Connection reuse for @kubernetes/client-node 2.x. Its KubeConfig builds a new undici Agent — a new
 * TCP + TLS connection — for every API request and never reuses it, so each reconcile paid three
 * handshakes and left idle sockets behind (measured in BENCHMARKS.md: pooling makes the pipeline 3.3×
 * faster at N = 1 000). This keeps one dispatcher per KubeConfig and context and hands it to every request.
 * Credentials are unaffected: tokens travel in headers set per request; client certificates belong to the
 * KubeConfig, and a rotated kubeconfig is a new KubeConfig with its own pool.
 * The same per-request hook gives every request its deadline (`call-deadline.ts`).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { callSignal } from './call-deadline.ts';

const POOLED = Symbol.for('capi-taint-propagator.pooled-connections');

type Closable = { close?: () => Promise<void> };

/** Makes every API client of `kc` share one connection pool per context, each request bounded in time. Idempotent; returns `kc`. */
export function withPooledConnections(kc: KubeConfig): KubeConfig {
  const marked = kc as KubeConfig & { [POOLED]?: true };
  if (marked[POOLED]) return kc;
  const authenticate = kc.applySecurityAuthentication.bind(kc);
  const pool = new Map<string, ReturnType<Parameters<KubeConfig['applySecurityAuthentication']>[0]['getDispatcher']>>();
  kc.applySecurityAuthentication = async (context) => {
    await authenticate(context);
    context.setSignal(callSignal());
    const created = context.getDispatcher();
    if (created === undefined) return;
    const key = kc.getCurrentContext();
    const shared = pool.get(key);
    if (shared === undefined) {
      pool.set(key, created);
      return;
    }
    // Another wrapper below may already hand out a reused dispatcher: never close the one we pool.
    if (created === shared) return;
    // The fresh agent has opened no connection yet; close it and use the pooled one.
    void (created as Closable).close?.();
    context.setDispatcher(shared);
  };
  marked[POOLED] = true;
  return kc;
}
