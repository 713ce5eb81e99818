import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  CLUSTER_ID_HEADER,
  EKS_TOKEN_PREFIX,
  createEksToken,
  createEksTokenSource,
  stsHostname,
  type AwsCredentials,
} from '#shared/adapters/aws/eks-token.ts';

const credentials: AwsCredentials = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  sessionToken: 'IQoJb3JpZ2luX2VjEXAMPLE/session+token==',
};
const now = new Date('2026-01-02T03:04:05.000Z');
const region = 'eu-west-1';
const clusterName = 'mgmt-cluster';

/** Parameters the EKS authenticator accepts (aws-iam-authenticator pkg/token whitelist). */
const ALLOWED_PARAMS = new Set([
  'action',
  'version',
  'x-amz-algorithm',
  'x-amz-credential',
  'x-amz-date',
  'x-amz-expires',
  'x-amz-security-token',
  'x-amz-signature',
  'x-amz-signedheaders',
]);

function decode(token: string): URL {
  return new URL(Buffer.from(token.slice(EKS_TOKEN_PREFIX.length), 'base64url').toString('utf8'));
}

function fakeClock(start: Date): { now: () => Date; advance: (seconds: number) => void } {
  let t = start.getTime();
  return { now: () => new Date(t), advance: (s) => (t += s * 1000) };
}

/** An independent SigV4 check of the presigned URL (query auth, GET, empty payload). */
function expectedSignature(url: URL, secretAccessKey: string, headers: Record<string, string>): string {
  const enc = (v: string) => encodeURIComponent(v).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  const params = [...url.searchParams.entries()].filter(([k]) => k !== 'X-Amz-Signature');
  const canonicalQuery = params
    .map(([k, v]) => [enc(k), enc(v)] as const)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
  const names = Object.keys(headers).sort();
  const canonicalRequest = [
    'GET',
    '/',
    canonicalQuery,
    names.map((n) => `${n}:${headers[n]}`).join('\n') + '\n',
    names.join(';'),
    createHash('sha256').update('').digest('hex'),
  ].join('\n');
  const date = url.searchParams.get('X-Amz-Date') ?? '';
  const scope = `${date.slice(0, 8)}/${region}/sts/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', date, scope, createHash('sha256').update(canonicalRequest).digest('hex')].join('\n');
  const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data).digest();
  const kDate = hmac(`AWS4${secretAccessKey}`, date.slice(0, 8));
  const kSigning = hmac(hmac(hmac(kDate, region), 'sts'), 'aws4_request');
  return createHmac('sha256', kSigning).update(stringToSign).digest('hex');
}

describe('createEksToken', () => {
  it('encodes a presigned STS GetCallerIdentity URL as k8s-aws-v1.<base64url without padding>', async () => {
    // Act
    const { token } = await createEksToken({ clusterName, region, credentials, now });

    // Assess
    expect(token.startsWith(EKS_TOKEN_PREFIX)).toBe(true);
    expect(token.slice(EKS_TOKEN_PREFIX.length)).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(token.length).toBeLessThanOrEqual(4096);
    const url = decode(token);
    expect(url.protocol).toBe('https:');
    expect(url.host).toBe('sts.eu-west-1.amazonaws.com');
    expect(url.pathname).toBe('/');
    expect(url.searchParams.get('Action')).toBe('GetCallerIdentity');
    expect(url.searchParams.get('Version')).toBe('2011-06-15');
  });

  it('signs the x-k8s-aws-id header, expires the URL after 60 s and carries the session token', async () => {
    // Act
    const url = decode((await createEksToken({ clusterName, region, credentials, now })).token);

    // Assess
    const p = url.searchParams;
    expect(p.get('X-Amz-Algorithm')).toBe('AWS4-HMAC-SHA256');
    expect(p.get('X-Amz-Credential')).toBe(`${credentials.accessKeyId}/20260102/eu-west-1/sts/aws4_request`);
    expect(p.get('X-Amz-Date')).toBe('20260102T030405Z');
    expect(p.get('X-Amz-Expires')).toBe('60');
    expect(p.get('X-Amz-SignedHeaders')).toBe(`host;${CLUSTER_ID_HEADER}`);
    expect(p.get('X-Amz-Security-Token')).toBe(credentials.sessionToken);
    expect(p.get('X-Amz-Signature')).toMatch(/^[0-9a-f]{64}$/);
    // The header value itself is not in the URL (EKS supplies it when it calls STS).
    expect(url.toString()).not.toContain(clusterName);
  });

  it('produces a valid SigV4 signature over host and x-k8s-aws-id', async () => {
    // Act
    const url = decode((await createEksToken({ clusterName, region, credentials, now })).token);

    // Assess
    const signature = expectedSignature(url, credentials.secretAccessKey, {
      host: 'sts.eu-west-1.amazonaws.com',
      [CLUSTER_ID_HEADER]: clusterName,
    });
    expect(url.searchParams.get('X-Amz-Signature')).toBe(signature);
  });

  it('uses only the query parameters EKS accepts, each once', async () => {
    // Act
    const url = decode((await createEksToken({ clusterName, region, credentials, now })).token);

    // Assess
    const keys = [...url.searchParams.keys()].map((k) => k.toLowerCase());
    expect(keys.filter((k) => !ALLOWED_PARAMS.has(k))).toEqual([]);
    expect(new Set(keys).size).toBe(keys.length);
  });

  it('is deterministic for fixed inputs and bound to the cluster name', async () => {
    // Act
    const a = await createEksToken({ clusterName, region, credentials, now });
    const b = await createEksToken({ clusterName, region, credentials: async () => credentials, now });
    const other = await createEksToken({ clusterName: 'other', region, credentials, now });

    // Assess
    expect(b.token).toBe(a.token);
    expect(decode(other.token).searchParams.get('X-Amz-Signature')).not.toBe(decode(a.token).searchParams.get('X-Amz-Signature'));
  });

  it.each([
    { name: 'long-lived credentials', creds: { accessKeyId: 'AKIA', secretAccessKey: 's' }, expires: '2026-01-02T03:18:05.000Z' },
    { name: 'credentials expiring in 20 min', creds: { ...credentials, expiration: new Date('2026-01-02T03:24:05.000Z') }, expires: '2026-01-02T03:18:05.000Z' },
    { name: 'credentials expiring in 5 min', creds: { ...credentials, expiration: new Date('2026-01-02T03:09:05.000Z') }, expires: '2026-01-02T03:09:05.000Z' },
  ])('expires 14 min after signing, or with the credentials if sooner ($name)', async ({ creds, expires }) => {
    // Act
    const token = await createEksToken({ clusterName, region, credentials: creds, now });

    // Assess
    expect(token.expiresAt.toISOString()).toBe(expires);
  });

  it('omits the security token for credentials without a session', async () => {
    // Act
    const url = decode((await createEksToken({ clusterName, region, credentials: { accessKeyId: 'AKIA', secretAccessKey: 's' }, now })).token);

    // Assess
    expect(url.searchParams.has('X-Amz-Security-Token')).toBe(false);
  });

  it.each([
    ['eu-west-1', 'sts.eu-west-1.amazonaws.com'],
    ['us-east-1', 'sts.us-east-1.amazonaws.com'],
    ['cn-north-1', 'sts.cn-north-1.amazonaws.com.cn'],
  ])('targets the regional STS endpoint of %s', (r, host) => {
    expect(stsHostname(r)).toBe(host);
  });
});

describe('createEksTokenSource', () => {
  it('reuses the token until shortly before its expiry, then mints a new one', async () => {
    // Prepare
    const clock = fakeClock(now);
    let credentialCalls = 0;
    const source = createEksTokenSource({
      clusterName,
      region,
      clock,
      credentials: async () => {
        credentialCalls++;
        return credentials;
      },
    });

    // Act
    const first = await source();
    clock.advance(12 * 60);
    const at12min = await source();
    clock.advance(60 + 1); // 13 min 1 s: inside the 60 s refresh margin before the 14 min expiry
    const at13min = await source();

    // Assess
    expect(at12min.token).toBe(first.token);
    expect(at13min.token).not.toBe(first.token);
    expect(decode(at13min.token).searchParams.get('X-Amz-Date')).toBe('20260102T031706Z');
    expect(at13min.expiresAt.toISOString()).toBe('2026-01-02T03:31:06.000Z');
    expect(credentialCalls).toBe(2);
  });

  it('mints once for concurrent callers', async () => {
    // Prepare
    let credentialCalls = 0;
    const source = createEksTokenSource({
      clusterName,
      region,
      clock: fakeClock(now),
      credentials: async () => {
        credentialCalls++;
        return credentials;
      },
    });

    // Act
    const tokens = await Promise.all([source(), source(), source()]);

    // Assess
    expect(new Set(tokens.map((t) => t.token)).size).toBe(1);
    expect(credentialCalls).toBe(1);
  });

  it('lets a credentials failure through and retries on the next call', async () => {
    // Prepare
    let fail = true;
    const source = createEksTokenSource({
      clusterName,
      region,
      clock: fakeClock(now),
      credentials: async () => {
        if (fail) throw new Error('no credentials');
        return credentials;
      },
    });

    // Act + Assess
    await expect(source()).rejects.toThrow('no credentials');
    fail = false;
    await expect(source()).resolves.toMatchObject({ token: expect.stringMatching(/^k8s-aws-v1\./) });
  });
});
