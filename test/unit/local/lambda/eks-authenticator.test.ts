import { afterEach, describe, expect, it } from 'vitest';
import { createEksToken } from '#shared/adapters/aws/eks-token.ts';
import { reviewEksToken, startEksAuthenticator, type EksAuthenticator, type EksPrincipal } from '#local/lambda/eks-authenticator.ts';

const NOW = new Date('2026-11-27T22:00:00Z');
const RECONCILE: EksPrincipal = {
  accessKeyId: 'ASIALOCALRECONCILE01',
  secretAccessKey: 'secret-of-reconcile',
  sessionToken: 'session-of-reconcile',
  roleArn: 'arn:aws:iam::111122223333:role/capi-taint-propagator-dev-reconcile',
  sessionName: 'capi-taint-propagator-dev-reconcile-node-taints',
  groups: ['capi-taint-propagator-reconcile'],
};
const NO_ENTRY: EksPrincipal = { ...RECONCILE, accessKeyId: 'ASIALOCALNOENTRY0001', secretAccessKey: 'other', sessionToken: 'other-session', groups: undefined };
const principal = (k: string): EksPrincipal | undefined => [RECONCILE, NO_ENTRY].find((p) => p.accessKeyId === k);
const mint = async (o: { clusterName?: string; region?: string; now?: Date; credentials?: EksPrincipal } = {}): Promise<string> => {
  const c = o.credentials ?? RECONCILE;
  return (await createEksToken({ clusterName: o.clusterName ?? 'mgmt', region: o.region ?? 'eu-west-1', credentials: { accessKeyId: c.accessKeyId, secretAccessKey: c.secretAccessKey, sessionToken: c.sessionToken }, now: o.now ?? NOW })).token;
};
const review = (token: string, now = NOW) => reviewEksToken(token, { clusterName: 'mgmt', region: 'eu-west-1', principal, now });

describe('Function: reviewEksToken()', () => {
  it("authenticates a token the product minted for this cluster as the role's assumed-role user, in its access entry's groups", async () => {
    // Act
    const out = await review(await mint(), new Date(NOW.getTime() + 14 * 60_000));

    // Assess
    expect(out).toEqual({
      authenticated: true,
      user: {
        username: 'arn:aws:sts::111122223333:assumed-role/capi-taint-propagator-dev-reconcile/capi-taint-propagator-dev-reconcile-node-taints',
        uid: 'aws-iam-authenticator:111122223333:ASIALOCALRECONCILE01',
        groups: ['capi-taint-propagator-reconcile'],
      },
    });
  });

  it('refuses a token of another cluster, another region, other credentials, an old or future one, and one whose role has no access entry, saying why', async () => {
    // Prepare
    const forged = { ...RECONCILE, secretAccessKey: 'not-the-secret' };
    const tampered = `k8s-aws-v1.${Buffer.from(Buffer.from((await mint()).slice(11), 'base64url').toString('utf8').replace('Action=GetCallerIdentity', 'Action=GetSessionToken'), 'utf8').toString('base64url')}`;

    // Act & Assess
    const cases: [string, string][] = [
      [await mint({ clusterName: 'other' }), 'the signature does not match (another cluster, or other credentials)'],
      [await mint({ credentials: forged }), 'the signature does not match (another cluster, or other credentials)'],
      [await mint({ region: 'us-east-1' }), 'the URL is not https://sts.eu-west-1.amazonaws.com/'],
      [await mint({ now: new Date(NOW.getTime() - 15 * 60_000 - 1_000) }), 'the token expired'],
      [await mint({ now: new Date(NOW.getTime() + 2 * 60_000) }), 'the token is signed in the future'],
      [await mint({ credentials: NO_ENTRY }), `${NO_ENTRY.roleArn} has no access entry in this cluster`],
      [await mint({ credentials: { ...RECONCILE, accessKeyId: 'ASIAUNKNOWN000000000' } }), 'the access key is unknown'],
      [await mint({ credentials: { ...RECONCILE, sessionToken: 'stolen' } }), 'the session token does not match the access key'],
      [tampered, 'the URL is not a GetCallerIdentity call of version 2011-06-15'],
      ['Bearer-something-else', 'not an EKS token (no k8s-aws-v1. prefix)'],
    ];
    for (const [token, error] of cases) expect(await review(token), error).toEqual({ authenticated: false, error });
  });
});

describe('Function: startEksAuthenticator()', () => {
  let auth: EksAuthenticator | undefined;
  afterEach(async () => {
    await auth?.close();
    auth = undefined;
  });

  it('answers TokenReviews over HTTP as the kube-apiserver sends them, and counts them', async () => {
    // Prepare
    auth = await startEksAuthenticator({ clusterName: 'mgmt', region: 'eu-west-1', clock: () => NOW });
    auth.setPrincipals([RECONCILE]);
    const send = async (token: string) =>
      (await (await fetch(auth?.url ?? '', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } }) })).json()) as { status: { authenticated: boolean; user?: { groups: string[] }; error?: string } };

    // Act
    const good = await send(await mint());
    const bad = await send(await mint({ clusterName: 'other' }));

    // Assess
    expect(good.status.authenticated).toBe(true);
    expect(good.status.user?.groups).toEqual(['capi-taint-propagator-reconcile']);
    expect(bad.status).toEqual({ authenticated: false, error: 'the signature does not match (another cluster, or other credentials)' });
    expect(auth.reviews()).toEqual({ authenticated: 1, refused: 1, lastRefusal: 'the signature does not match (another cluster, or other credentials)' });
    expect(JSON.parse(auth.webhookConfig()).clusters[0].cluster.server).toBe(auth.url);
  });
});
