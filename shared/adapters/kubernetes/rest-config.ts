/**
 * The credentials of one cluster, built by the product from an untrusted kubeconfig or the EKS access; kube-http.ts
 * applies them to each request. Nothing here reads a file or runs a program.
 */
import type https from 'node:https';
import type { ClusterEndpoint } from './kube-http.ts';

export interface RestConfigOptions {
  /** `https://host:port` (a trailing slash is dropped). */
  readonly server: string;
  /** The CA bundle (PEM), base64 as in a kubeconfig's `certificate-authority-data`; the system CAs without it. */
  readonly caData?: string;
  /** The name the server's certificate is checked against instead of the server's host (`tls-server-name`). */
  readonly tlsServerName?: string;
  /** Client certificate and key (PEM), base64. */
  readonly certData?: string;
  readonly keyData?: string;
  /** The cluster's proxy (kubeconfig `proxy-url`, proxy.ts); it may hold a password: never logged nor quoted. */
  readonly proxyUrl?: string;
  /** A bearer token, or a function that returns the current one (called per request). */
  readonly token?: string | (() => Promise<string>);
}

export class RestConfig implements ClusterEndpoint {
  readonly #cluster: { readonly server: string; readonly proxyUrl?: string };
  readonly #tls: Pick<https.RequestOptions, 'ca' | 'cert' | 'key' | 'servername'>;
  readonly #token: (() => Promise<string>) | undefined;

  constructor(o: RestConfigOptions) {
    const server = o.server.replace(/\/+$/, '');
    this.#cluster = o.proxyUrl ? { server, proxyUrl: o.proxyUrl } : { server };
    const pem = (b64: string | undefined): Buffer | undefined => (b64 === undefined ? undefined : Buffer.from(b64, 'base64'));
    const ca = pem(o.caData);
    const cert = pem(o.certData);
    const key = pem(o.keyData);
    this.#tls = { ...(ca ? { ca } : {}), ...(cert ? { cert } : {}), ...(key ? { key } : {}), ...(o.tlsServerName ? { servername: o.tlsServerName } : {}) };
    const token = o.token;
    this.#token = token === undefined ? undefined : typeof token === 'string' ? () => Promise.resolve(token) : token;
  }

  getCurrentCluster(): { readonly server: string; readonly proxyUrl?: string } {
    return this.#cluster;
  }

  async applyToHTTPSOptions(opts: https.RequestOptions): Promise<void> {
    Object.assign(opts, this.#tls, { rejectUnauthorized: true });
    if (this.#token) opts.headers = { ...(opts.headers as Record<string, string> | undefined), Authorization: `Bearer ${await this.#token()}` };
  }
}
