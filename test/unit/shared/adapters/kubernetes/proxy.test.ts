/** Which proxy a request goes through (proxy.ts), as client-go chooses it: the cluster's proxy-url, else the environment. */
import { describe, expect, it } from 'vitest';
import { isLoopback, noProxyMatches, parseProxyUrl, ProxyConfigError, proxyFor } from '#shared/adapters/kubernetes/proxy.ts';

const server = new URL('https://api.wc1.example:6443');

describe('Function: proxyFor()', () => {
  it("uses the cluster's proxy-url for every request to it, loopback and NO_PROXY hosts included", () => {
    // Act + Assess
    expect(proxyFor(server, 'http://proxy.corp:3128', { NO_PROXY: '*' })?.href).toBe('http://proxy.corp:3128/');
    expect(proxyFor(new URL('https://127.0.0.1:6443'), 'https://proxy.corp:3129', {})?.href).toBe('https://proxy.corp:3129/');
  });

  it('uses HTTPS_PROXY (then https_proxy) for an https server, HTTP_PROXY for an http one, and none without them', () => {
    // Act + Assess
    expect(proxyFor(server, undefined, { HTTPS_PROXY: 'http://a:1', https_proxy: 'http://b:2' })?.host).toBe('a:1');
    expect(proxyFor(server, undefined, { https_proxy: 'http://b:2' })?.host).toBe('b:2');
    expect(proxyFor(server, undefined, { HTTP_PROXY: 'http://c:3' })).toBeUndefined();
    expect(proxyFor(new URL('http://api.wc1.example:8080'), undefined, { HTTP_PROXY: 'http://c:3' })?.host).toBe('c:3');
    expect(proxyFor(server, undefined, { HTTPS_PROXY: 'proxy.corp:3128' })?.href).toBe('http://proxy.corp:3128/');
    expect(proxyFor(server, undefined, {})).toBeUndefined();
  });

  it.each(['127.0.0.1', '127.9.8.7', 'localhost', 'api.localhost', '[::1]'])('never proxies loopback %s through the environment', (host) => {
    // Act + Assess
    expect(proxyFor(new URL(`https://${host}:6443`), undefined, { HTTPS_PROXY: 'http://proxy.corp:3128' })).toBeUndefined();
  });

  it('leaves out the hosts NO_PROXY (or no_proxy) names', () => {
    // Act + Assess
    expect(proxyFor(server, undefined, { HTTPS_PROXY: 'http://p:1', NO_PROXY: 'other.example, wc1.example' })).toBeUndefined();
    expect(proxyFor(server, undefined, { HTTPS_PROXY: 'http://p:1', no_proxy: '.example' })).toBeUndefined();
    expect(proxyFor(server, undefined, { HTTPS_PROXY: 'http://p:1', NO_PROXY: 'other.example' })?.host).toBe('p:1');
  });

  it('refuses a scheme it cannot use, naming the scheme and never the URL (it may hold a password)', () => {
    // Act
    const fromCluster = (): unknown => proxyFor(server, 'socks4://user:s3cret@proxy:1080', {});
    const fromEnv = (): unknown => proxyFor(server, undefined, { HTTPS_PROXY: 'ftp://user:s3cret@proxy:21' });

    // Assess
    expect(fromCluster).toThrow(ProxyConfigError);
    expect(fromCluster).toThrow('the cluster\'s proxy-url uses the scheme "socks4", which the product does not support (http, https, socks5 and socks5h proxies only)');
    expect(fromEnv).toThrow('HTTPS_PROXY uses the scheme "ftp"');
    for (const f of [fromCluster, fromEnv]) expect(() => f()).not.toThrow(/s3cret|user/);
  });
});

describe('Function: noProxyMatches()', () => {
  it.each([
    { list: '*', host: 'anything.example', port: '443', match: true },
    { list: 'example.com', host: 'example.com', port: '443', match: true },
    { list: 'example.com', host: 'api.example.com', port: '443', match: true },
    { list: 'example.com', host: 'notexample.com', port: '443', match: false },
    { list: '.example.com', host: 'example.com', port: '443', match: false },
    { list: '.example.com', host: 'api.example.com', port: '443', match: true },
    { list: '*.example.com', host: 'api.example.com', port: '443', match: true },
    { list: 'example.com:6443', host: 'example.com', port: '6443', match: true },
    { list: 'example.com:6443', host: 'example.com', port: '443', match: false },
    { list: '10.0.0.0/8', host: '10.1.2.3', port: '443', match: true },
    { list: '10.0.0.0/8', host: '11.1.2.3', port: '443', match: false },
    { list: '10.1.2.3', host: '10.1.2.3', port: '443', match: true },
    { list: '[fd00::1]:6443', host: 'fd00::1', port: '6443', match: true },
    { list: 'fd00::/8', host: 'fd00::1', port: '443', match: true },
    { list: ' , ', host: 'example.com', port: '443', match: false },
  ])('$list matches $host:$port: $match', ({ list, host, port, match }) => {
    // Act + Assess
    expect(noProxyMatches(list, host, port)).toBe(match);
  });
});

describe('Function: isLoopback() and parseProxyUrl()', () => {
  it('knows loopback hosts', () => {
    // Act + Assess
    expect(['localhost', '127.0.0.1', '127.255.0.1', '::1'].map(isLoopback)).toEqual([true, true, true, true]);
    expect(['10.0.0.1', 'example.com', '::2', '128.0.0.1'].map(isLoopback)).toEqual([false, false, false, false]);
  });

  it('accepts http, https, socks5 and socks5h proxies, with or without credentials', () => {
    // Act + Assess
    expect(parseProxyUrl('https://u:p@proxy:3129', 'x').protocol).toBe('https:');
    expect(parseProxyUrl('http://proxy:3128', 'x').port).toBe('3128');
    expect(parseProxyUrl('socks5://u:p@proxy:1080', 'x').protocol).toBe('socks5:');
    expect(parseProxyUrl('socks5h://proxy:1080', 'x').protocol).toBe('socks5h:');
    expect(() => parseProxyUrl('http://', 'x')).toThrow('x is not a valid URL');
    expect(parseProxyUrl('proxy.corp:3128', 'HTTPS_PROXY', { fromEnvironment: true }).href).toBe('http://proxy.corp:3128/');
    expect(() => parseProxyUrl('proxy.corp:3128', 'proxy-url')).toThrow('proxy-url uses the scheme "proxy.corp"');
  });
});
