/**
 * A real HTTP CONNECT proxy on loopback for tests of the product's proxy support (docs/proxies.md): it counts the
 * tunnels it opened and records their targets and the Proxy-Authorization it saw. Host names are resolved through
 * `hosts` only (e.g. `api.only-via-proxy.test` → `127.0.0.1`), and a target it cannot resolve there is refused (502):
 * a server named that way is reachable through this proxy and nowhere else. With `credentials` it answers 407 to a
 * CONNECT without them. With `tls` it listens for TLS (an https:// proxy).
 */
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

export interface ConnectProxy {
  /** `http://127.0.0.1:<port>` or `https://localhost:<port>` (no credentials in it). */
  readonly url: string;
  /** CONNECT requests answered 200 (tunnels opened). */
  tunnels(): number;
  /** Every CONNECT target (`host:port`) asked for, answered or not. */
  readonly targets: string[];
  /** The Proxy-Authorization header of every CONNECT (undefined when absent). */
  readonly authorizations: Array<string | undefined>;
  /** Closes the listener and every open tunnel. */
  close(): Promise<void>;
}

export async function startConnectProxy(o: {
  readonly hosts: Readonly<Record<string, string>>;
  readonly credentials?: { readonly user: string; readonly password: string };
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer };
}): Promise<ConnectProxy> {
  const sockets = new Set<net.Socket>();
  const targets: string[] = [];
  const authorizations: Array<string | undefined> = [];
  let tunnels = 0;
  const expected = o.credentials ? `Basic ${Buffer.from(`${o.credentials.user}:${o.credentials.password}`).toString('base64')}` : undefined;
  const server = o.tls ? https.createServer({ cert: o.tls.cert, key: o.tls.key }) : http.createServer();
  server.on('request', (_req, res) => res.writeHead(405).end());
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    sockets.add(client);
    client.on('error', () => undefined);
    client.on('close', () => sockets.delete(client));
    const target = req.url ?? '';
    targets.push(target);
    authorizations.push(req.headers['proxy-authorization']);
    if (expected !== undefined && req.headers['proxy-authorization'] !== expected) {
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const m = /^(.+):(\d+)$/.exec(target);
    const address = m ? o.hosts[m[1] ?? ''] : undefined;
    if (!m || address === undefined) {
      client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const upstream = net.connect(Number(m[2]), address, () => {
      tunnels++;
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('error', () => client.destroy());
    upstream.on('close', () => {
      sockets.delete(upstream);
      client.destroy();
    });
    client.on('close', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: o.tls ? `https://localhost:${port}` : `http://127.0.0.1:${port}`,
    tunnels: () => tunnels,
    targets,
    authorizations,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
