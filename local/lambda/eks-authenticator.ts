/**
 * A stand-in for EKS's IAM authentication, for the local kube-apiserver (its `--authentication-token-webhook-config-file`
 * points here): it takes the token a function minted with `MANAGEMENT_AUTH=eks` (`k8s-aws-v1.` + a SigV4-presigned
 * `GET https://sts.<region>.amazonaws.com/?Action=GetCallerIdentity`, shared/adapters/aws/eks-token.ts), checks it as
 * EKS does through STS, and answers a TokenReview with the identity of the role's access entry.
 *
 * Checked: the prefix and the URL's form (https, the region's STS host, path `/`, `GetCallerIdentity`, version
 * 2011-06-15, SigV4, `x-k8s-aws-id` among the signed headers, `X-Amz-Expires` 0..900), the signing time (at most 15
 * minutes old, not ahead of now by more than a minute), and the signature itself: recomputed from the secret of the
 * token's access key with the header `x-k8s-aws-id: <this cluster>` (so a token minted for another cluster fails),
 * and compared in constant time. The access key names a principal of the runner (a function's role, with its
 * session token); the role's access entry (the packaged template's `AWS::EKS::AccessEntry`) gives the groups, and the
 * user name is EKS's default for an assumed role: `arn:aws:sts::<account>:assumed-role/<role>/<session>`.
 * Nothing here logs a token or a secret.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import { CLUSTER_ID_HEADER, EKS_TOKEN_PREFIX, TOKEN_VALIDITY_SECONDS, presignGetCallerIdentity, stsHostname } from '#shared/adapters/aws/eks-token.ts';

/** A principal the runner hands out credentials for, with its access entry's groups. */
export interface EksPrincipal {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken: string;
  /** `arn:aws:iam::<account>:role/<name>` */
  readonly roleArn: string;
  /** The session name of its assumed-role ARN (Lambda uses the function name). */
  readonly sessionName: string;
  /** The access entry's `KubernetesGroups` (undefined: the role has no access entry, EKS refuses it). */
  readonly groups: readonly string[] | undefined;
}

export type EksTokenReview =
  | { readonly authenticated: true; readonly user: { readonly username: string; readonly uid: string; readonly groups: readonly string[] } }
  | { readonly authenticated: false; readonly error: string };

const MAX_CLOCK_SKEW_MS = 60_000;

/** Reviews one bearer token for `clusterName` in `region`; `principal` looks up an access key. */
export async function reviewEksToken(
  token: string,
  o: { readonly clusterName: string; readonly region: string; readonly principal: (accessKeyId: string) => EksPrincipal | undefined; readonly now: Date },
): Promise<EksTokenReview> {
  const refuse = (error: string): EksTokenReview => ({ authenticated: false, error });
  if (!token.startsWith(EKS_TOKEN_PREFIX)) return refuse('not an EKS token (no k8s-aws-v1. prefix)');
  let url: URL;
  try {
    url = new URL(Buffer.from(token.slice(EKS_TOKEN_PREFIX.length), 'base64url').toString('utf8'));
  } catch {
    return refuse('the token does not hold a URL');
  }
  const q = url.searchParams;
  const host = stsHostname(o.region);
  if (url.protocol !== 'https:' || url.hostname !== host || url.pathname !== '/' || url.port !== '') return refuse(`the URL is not https://${host}/`);
  if (q.get('Action') !== 'GetCallerIdentity' || q.get('Version') !== '2011-06-15') return refuse('the URL is not a GetCallerIdentity call of version 2011-06-15');
  if (q.get('X-Amz-Algorithm') !== 'AWS4-HMAC-SHA256') return refuse('the URL is not signed with AWS4-HMAC-SHA256');
  const signedHeaders = (q.get('X-Amz-SignedHeaders') ?? '').split(';');
  if (!signedHeaders.includes(CLUSTER_ID_HEADER)) return refuse(`${CLUSTER_ID_HEADER} is not a signed header`);
  const expires = Number(q.get('X-Amz-Expires'));
  if (!Number.isInteger(expires) || expires < 0 || expires > 900) return refuse('X-Amz-Expires is not 0..900');
  const date = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(q.get('X-Amz-Date') ?? '');
  if (!date) return refuse('X-Amz-Date is not a SigV4 date');
  const signedAt = new Date(Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3]), Number(date[4]), Number(date[5]), Number(date[6])));
  const age = o.now.getTime() - signedAt.getTime();
  if (age > TOKEN_VALIDITY_SECONDS * 1000) return refuse('the token expired');
  if (age < -MAX_CLOCK_SKEW_MS) return refuse('the token is signed in the future');
  const [accessKeyId] = (q.get('X-Amz-Credential') ?? '').split('/');
  const principal = accessKeyId ? o.principal(accessKeyId) : undefined;
  if (!principal) return refuse('the access key is unknown');
  if (q.get('X-Amz-Security-Token') !== principal.sessionToken) return refuse('the session token does not match the access key');

  const expected = await presignGetCallerIdentity({ clusterName: o.clusterName, region: o.region, credentials: principal, signingDate: signedAt, expiresIn: expires });
  const want = Buffer.from(String(expected['X-Amz-Signature'] ?? ''), 'utf8');
  const got = Buffer.from(q.get('X-Amz-Signature') ?? '', 'utf8');
  if (want.length === 0 || want.length !== got.length || !timingSafeEqual(want, got)) return refuse('the signature does not match (another cluster, or other credentials)');
  if (principal.groups === undefined) return refuse(`${principal.roleArn} has no access entry in this cluster`);

  const [, , , , account, resource] = principal.roleArn.split(':');
  const role = (resource ?? '').replace(/^role\//, '').split('/').at(-1) ?? '';
  return {
    authenticated: true,
    user: { username: `arn:aws:sts::${account}:assumed-role/${role}/${principal.sessionName}`, uid: `aws-iam-authenticator:${account}:${principal.accessKeyId}`, groups: [...principal.groups] },
  };
}

export interface EksAuthenticator {
  /** `http://127.0.0.1:<port>/` */
  readonly url: string;
  /** The kubeconfig the kube-apiserver reads (`--authentication-token-webhook-config-file`). */
  webhookConfig(): string;
  /** Sets the principals the runner handed out (they are known once it started). */
  setPrincipals(principals: readonly EksPrincipal[]): void;
  /** Token reviews answered so far, by outcome. */
  reviews(): { readonly authenticated: number; readonly refused: number; readonly lastRefusal?: string };
  close(): Promise<void>;
}

/** Serves TokenReviews (authentication.k8s.io/v1) on 127.0.0.1 for one cluster. */
export async function startEksAuthenticator(o: { readonly clusterName: string; readonly region: string; readonly clock?: () => Date }): Promise<EksAuthenticator> {
  let principals = new Map<string, EksPrincipal>();
  const counts = { authenticated: 0, refused: 0, lastRefusal: undefined as string | undefined };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= 64 * 1024) chunks.push(c);
    });
    req.on('end', () => {
      void (async () => {
        let token = '';
        try {
          token = String((JSON.parse(Buffer.concat(chunks).toString('utf8')) as { spec?: { token?: unknown } }).spec?.token ?? '');
        } catch {
          // an empty token is refused below
        }
        const review = size > 64 * 1024
          ? ({ authenticated: false, error: 'the review is larger than 64 KiB' } as const)
          : await reviewEksToken(token, { clusterName: o.clusterName, region: o.region, principal: (k) => principals.get(k), now: (o.clock ?? (() => new Date()))() });
        if (review.authenticated) counts.authenticated += 1;
        else {
          counts.refused += 1;
          counts.lastRefusal = review.error;
        }
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', status: review.authenticated ? { authenticated: true, user: review.user } : { authenticated: false, error: review.error } }));
      })();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return {
    url,
    webhookConfig: () =>
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'eks-authenticator', cluster: { server: url } }],
        users: [{ name: 'kube-apiserver', user: {} }],
        contexts: [{ name: 'webhook', context: { cluster: 'eks-authenticator', user: 'kube-apiserver' } }],
        'current-context': 'webhook',
      }),
    setPrincipals(list) {
      principals = new Map(list.map((p) => [p.accessKeyId, p]));
    },
    reviews: () => ({ authenticated: counts.authenticated, refused: counts.refused, ...(counts.lastRefusal ? { lastRefusal: counts.lastRefusal } : {}) }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
