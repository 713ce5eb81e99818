/** The SOCKS agent for a plain-http target (proxy-agents.ts): the tunnel's socket carries the request as it is. */
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createProxyAgent } from '#shared/adapters/kubernetes/proxy-agents.ts';
import { startSocks5Proxy } from '#test/support/socks5-proxy.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function get(agent: http.Agent, host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get({ host, port, path: '/', agent }, (res) => {
        let body = '';
        res.on('data', (chunk: Buffer) => (body += chunk.toString()));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
}

describe('Function: createProxyAgent() for an http target through SOCKS5', () => {
  it('sends the request through the tunnel, the proxy resolving the host name, and reuses the connection', async () => {
    // Prepare
    const server = http.createServer((_req, res) => res.end('through the tunnel'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => void server.close());
    const { port } = server.address() as { port: number };
    const credentials = { user: 'ops', password: 'pw' };
    const socks = await startSocks5Proxy({ hosts: { 'hidden.example': '127.0.0.1' }, credentials });
    cleanups.push(() => socks.close());
    const proxy = new URL(socks.url.replace('socks5://', 'socks5h://ops:pw@'));
    const agent = await createProxyAgent('http:', proxy, { keepAlive: true });
    cleanups.push(() => agent.destroy());

    // Act
    const bodies = [await get(agent, 'hidden.example', port), await get(agent, 'hidden.example', port)];

    // Assess
    expect(bodies).toEqual(['through the tunnel', 'through the tunnel']);
    expect(socks.targets).toEqual([`hidden.example:${port}`]);
    expect(socks.tunnels()).toBe(1);
  });
});
