/**
 * A real SOCKS5 proxy (RFC 1928, with RFC 1929 user/password authentication) on loopback for tests of the product's
 * proxy support (docs/proxies.md). Like connect-proxy.ts it resolves host names through `hosts` only, refuses other
 * targets (reply 0x04, host unreachable), and counts the tunnels it opened.
 */
import net from 'node:net';

export interface Socks5Proxy {
  /** `socks5://127.0.0.1:<port>` (no credentials in it). */
  readonly url: string;
  tunnels(): number;
  /** Every CONNECT target (`host:port`) asked for. */
  readonly targets: string[];
  close(): Promise<void>;
}

export async function startSocks5Proxy(o: { readonly hosts: Readonly<Record<string, string>>; readonly credentials?: { readonly user: string; readonly password: string } }): Promise<Socks5Proxy> {
  const sockets = new Set<net.Socket>();
  const targets: string[] = [];
  let tunnels = 0;
  const server = net.createServer((client) => {
    sockets.add(client);
    client.on('error', () => undefined);
    client.on('close', () => sockets.delete(client));
    let buffered = Buffer.alloc(0);
    let stage: 'greeting' | 'auth' | 'request' | 'open' = 'greeting';
    const onData = (chunk: Buffer): void => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        if (stage === 'greeting') {
          if (buffered.length < 2 || buffered.length < 2 + (buffered[1] ?? 0)) return;
          const methods = [...buffered.subarray(2, 2 + (buffered[1] ?? 0))];
          buffered = buffered.subarray(2 + (buffered[1] ?? 0));
          const wanted = o.credentials ? 0x02 : 0x00;
          if (!methods.includes(wanted)) return void client.end(Buffer.from([0x05, 0xff]));
          client.write(Buffer.from([0x05, wanted]));
          stage = o.credentials ? 'auth' : 'request';
        } else if (stage === 'auth') {
          const ulen = buffered[1];
          if (ulen === undefined || buffered.length < 3 + ulen) return;
          const plen = buffered[2 + ulen] ?? 0;
          if (buffered.length < 3 + ulen + plen) return;
          const user = buffered.subarray(2, 2 + ulen).toString();
          const password = buffered.subarray(3 + ulen, 3 + ulen + plen).toString();
          buffered = buffered.subarray(3 + ulen + plen);
          if (user !== o.credentials?.user || password !== o.credentials.password) return void client.end(Buffer.from([0x01, 0x01]));
          client.write(Buffer.from([0x01, 0x00]));
          stage = 'request';
        } else if (stage === 'request') {
          if (buffered.length < 5) return;
          const atyp = buffered[3];
          const addressLength = atyp === 0x01 ? 4 : atyp === 0x04 ? 16 : 1 + (buffered[4] ?? 0);
          if (buffered.length < 4 + addressLength + 2) return;
          const raw = buffered.subarray(4, 4 + addressLength);
          const host = atyp === 0x03 ? raw.subarray(1).toString() : atyp === 0x01 ? [...raw].join('.') : 'ipv6';
          const port = buffered.readUInt16BE(4 + addressLength);
          buffered = buffered.subarray(4 + addressLength + 2);
          targets.push(`${host}:${port}`);
          const address = o.hosts[host];
          const reply = (code: number): Buffer => Buffer.from([0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
          if (address === undefined) return void client.end(reply(0x04));
          stage = 'open';
          client.off('data', onData);
          const upstream = net.connect(port, address, () => {
            tunnels++;
            client.write(reply(0x00));
            if (buffered.length > 0) upstream.write(buffered);
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
          return;
        } else return;
      }
    };
    client.on('data', onData);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `socks5://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    tunnels: () => tunnels,
    targets,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
