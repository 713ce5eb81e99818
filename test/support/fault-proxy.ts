/**
 * A small fault-injecting TCP proxy for the fault tests: it listens on 127.0.0.1 only, forwards every
 * connection to one upstream (the test API server; TLS passes through untouched, so the serving
 * certificate's 127.0.0.1 SAN still matches) and, on command:
 * - `outage()`: resets every open connection and every new one (connection refused, as for an API
 *   server that is down), until `restore()`;
 * - `hang()`: keeps every connection open but forwards nothing either way (a hung API server or a
 *   black-holed network), until `restore()`, which then resets those connections;
 * - `flaky({ resetEvery, delayMs })`: delays every chunk either way and resets the connection of every
 *   `resetEvery`-th chunk from upstream (open connections included), deterministically, until `steady()`.
 * It is bounded: at most `maxConnections` at once (extra ones are reset) and it stops with `close()`.
 */
import net from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';

type Mode = 'pass' | 'refuse' | 'hang';

interface Pair {
  readonly client: net.Socket;
  readonly upstream: net.Socket;
  blackholed: boolean;
}

export class FaultProxy {
  readonly port: number;
  private readonly server: net.Server;
  private readonly pairs = new Set<Pair>();
  private mode: Mode = 'pass';
  private flakiness: { resetEvery: number; delayMs: number } | undefined;
  private upstreamChunks = 0;
  /** Connections accepted and reset by faults, for assertions that a fault really happened. */
  resets = 0;

  private constructor(server: net.Server, port: number) {
    this.server = server;
    this.port = port;
  }

  /** Starts a proxy on 127.0.0.1 (a free port) in front of `upstream` (`https://127.0.0.1:6443`). */
  static async start(upstream: string, maxConnections = 200): Promise<FaultProxy> {
    const target = new URL(upstream);
    const host = target.hostname;
    const port = Number(target.port || (target.protocol === 'https:' ? 443 : 80));
    let proxy: FaultProxy | undefined;
    const server = net.createServer((client) => proxy?.accept(client, host, port, maxConnections));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    proxy = new FaultProxy(server, (server.address() as net.AddressInfo).port);
    return proxy;
  }

  /** `https://127.0.0.1:<port>` of the proxy. */
  get url(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** A copy of `kc` whose every cluster is reached through this proxy. */
  kubeConfig(kc: KubeConfig): KubeConfig {
    const copy = new KubeConfig();
    copy.loadFromString(kc.exportConfig());
    copy.clusters = copy.clusters.map((c) => ({ ...c, server: this.url }));
    return copy;
  }

  /** The API server is down: every connection, open or new, is reset. */
  outage(): void {
    this.mode = 'refuse';
    for (const p of this.pairs) this.reset(p);
  }

  /** Every connection, open or new, stays open and silent. */
  hang(): void {
    this.mode = 'hang';
    for (const p of this.pairs) p.blackholed = true;
  }

  /** Back to normal; connections that were silenced are reset (their streams lost bytes). */
  restore(): void {
    this.mode = 'pass';
    for (const p of this.pairs) if (p.blackholed) this.reset(p);
  }

  /** Chunks wait `delayMs`; every `resetEvery`-th new connection is reset at its first upstream byte. */
  flaky(options: { resetEvery: number; delayMs: number }): void {
    this.flakiness = options;
  }

  /** No more delays or resets of new connections. */
  steady(): void {
    this.flakiness = undefined;
  }

  /** Stops listening and resets every connection. */
  async close(): Promise<void> {
    for (const p of this.pairs) this.reset(p);
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: net.Socket, host: string, port: number, maxConnections: number): void {
    client.on('error', () => undefined);
    if (this.mode === 'refuse' || this.pairs.size >= maxConnections) {
      this.resets++;
      client.resetAndDestroy();
      return;
    }
    const upstream = net.connect(port, host);
    upstream.on('error', () => undefined);
    const pair: Pair = { client, upstream, blackholed: this.mode === 'hang' };
    this.pairs.add(pair);
    this.forward(pair, client, upstream, false);
    this.forward(pair, upstream, client, true);
    const drop = (): void => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', drop);
    upstream.on('close', drop);
  }

  /** Copies `from` → `to`; while flaky, each chunk after a delay (order kept) or a reset; nothing while black-holed. */
  private forward(pair: Pair, from: net.Socket, to: net.Socket, fromUpstream: boolean): void {
    let chain = Promise.resolve();
    from.on('data', (chunk: Buffer) => {
      if (pair.blackholed) return;
      const flaky = this.flakiness;
      if (flaky && fromUpstream && ++this.upstreamChunks % flaky.resetEvery === 0) {
        this.reset(pair);
        return;
      }
      const delayMs = flaky?.delayMs ?? 0;
      if (delayMs === 0) {
        to.write(chunk);
        return;
      }
      chain = chain.then(
        () =>
          new Promise<void>((resolve) =>
            setTimeout(() => {
              if (!pair.blackholed && !to.destroyed) to.write(chunk);
              resolve();
            }, delayMs),
          ),
      );
    });
  }

  private reset(pair: Pair): void {
    if (!this.pairs.delete(pair)) return;
    this.resets++;
    for (const socket of [pair.client, pair.upstream]) {
      if (socket.connecting || socket.destroyed) socket.destroy();
      else socket.resetAndDestroy();
    }
  }
}
