/**
 * EKS IAM token minted from the caller's own AWS credentials, the aws-iam-authenticator recipe: a SigV4-presigned
 * `GET https://sts.<region>.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15` with the header
 * `x-k8s-aws-id: <cluster name>` signed in, encoded as `k8s-aws-v1.` + base64url(url) without padding. EKS accepts it
 * for 15 minutes after `X-Amz-Date`; we treat it as expired after 14 (as the Go client does), or earlier when the
 * signing credentials expire first. Token and credentials are secrets: nothing here logs, and errors never carry them.
 */
import { Sha256 } from '@aws-crypto/sha256-js';
import { HttpRequest } from '@smithy/protocol-http';
import { getCanonicalQuery, SIGNATURE_QUERY_PARAM, SignatureV4 } from '@smithy/signature-v4';
import type { Clock } from '#shared/ports/clock.ts';
import { runtimeSdk } from './runtime-sdk.ts';

export const EKS_TOKEN_PREFIX = 'k8s-aws-v1.';
/** The header that binds the token to one cluster; it must be among the signed headers. */
export const CLUSTER_ID_HEADER = 'x-k8s-aws-id';
/** `X-Amz-Expires` of the presigned URL (STS ignores it; EKS checks 0..900). */
const PRESIGN_EXPIRES_SECONDS = 60;
/** EKS rejects a token 15 minutes after its `X-Amz-Date`. */
export const TOKEN_VALIDITY_SECONDS = 15 * 60;
const TOKEN_LOCAL_LIFETIME_SECONDS = 14 * 60;
const REFRESH_BEFORE_MS = 60_000;

/** AWS credentials, structurally compatible with the SDK's AwsCredentialIdentity. */
export interface AwsCredentials {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly sessionToken?: string | undefined;
  readonly expiration?: Date | undefined;
}
export type AwsCredentialsProvider = () => Promise<AwsCredentials>;

export interface EksToken {
  /** `k8s-aws-v1.<base64url>`; send as `Authorization: Bearer <token>`. */
  readonly token: string;
  /** When this process stops using the token (≤ 14 min after signing). */
  readonly expiresAt: Date;
}

/** The STS host of a region (regional endpoint; China regions use the .cn partition). */
export function stsHostname(region: string): string {
  return region.startsWith('cn-') ? `sts.${region}.amazonaws.com.cn` : `sts.${region}.amazonaws.com`;
}

/** The query of the presigned STS request: what a token carries, and what a verifier recomputes to check one. */
export async function presignGetCallerIdentity(args: {
  readonly clusterName: string;
  readonly region: string;
  readonly credentials: AwsCredentials;
  readonly signingDate: Date;
  readonly expiresIn: number;
}): Promise<Record<string, string | string[] | null>> {
  const hostname = stsHostname(args.region);
  const signer = new SignatureV4({
    service: 'sts',
    region: args.region,
    credentials: args.credentials,
    sha256: Sha256,
  });
  const presigned = await signer.presign(
    new HttpRequest({
      method: 'GET',
      protocol: 'https:',
      hostname,
      path: '/',
      headers: { host: hostname, [CLUSTER_ID_HEADER]: args.clusterName },
      query: { Action: 'GetCallerIdentity', Version: '2011-06-15' },
    }),
    { signingDate: args.signingDate, expiresIn: args.expiresIn },
  );
  return presigned.query ?? {};
}

/** Mints one token signed at `now` (`X-Amz-Date`). Pure apart from the signature computation: same inputs, same token. */
export async function createEksToken(args: { readonly clusterName: string; readonly region: string; readonly credentials: AwsCredentials | AwsCredentialsProvider; readonly now: Date }): Promise<EksToken> {
  const credentials = typeof args.credentials === 'function' ? await args.credentials() : args.credentials;
  const query = await presignGetCallerIdentity({ clusterName: args.clusterName, region: args.region, credentials, signingDate: args.now, expiresIn: PRESIGN_EXPIRES_SECONDS });
  // The URL carries exactly what was signed: the signer's own canonical query, which leaves the signature out; that
  // goes last, as botocore's presigner puts it.
  const signature = `${SIGNATURE_QUERY_PARAM}=${String(query[SIGNATURE_QUERY_PARAM])}`;
  const url = `https://${stsHostname(args.region)}/?${getCanonicalQuery(new HttpRequest({ query }))}&${signature}`;
  const token = EKS_TOKEN_PREFIX + Buffer.from(url, 'utf8').toString('base64url');
  const localExpiry = args.now.getTime() + TOKEN_LOCAL_LIFETIME_SECONDS * 1000;
  const credentialExpiry = credentials.expiration?.getTime() ?? Number.POSITIVE_INFINITY;
  return { token, expiresAt: new Date(Math.min(localExpiry, credentialExpiry)) };
}

export interface EksTokenSourceOptions {
  readonly clusterName: string;
  readonly region: string;
  /** Defaults to the SDK's default chain (in Lambda: the function role's credentials). */
  readonly credentials?: AwsCredentialsProvider;
  readonly clock: Clock;
}

/** A per-cluster token cache: the cached token until shortly before expiry, then a new one concurrent callers share. */
export function createEksTokenSource(options: EksTokenSourceOptions): () => Promise<EksToken> {
  const { clock, clusterName, region } = options;
  const credentials = options.credentials ?? defaultCredentials();
  let cached: EksToken | undefined;
  let pending: Promise<EksToken> | undefined;

  return async () => {
    if (cached && clock.now().getTime() < cached.expiresAt.getTime() - REFRESH_BEFORE_MS) return cached;
    return (pending ??= createEksToken({ clusterName, region, credentials, now: clock.now() })
      .then((token) => (cached = token))
      .finally(() => (pending = undefined)));
  };
}

/** The SDK's default credential chain, loaded on first use so that tests with fixed credentials never touch it. */
function defaultCredentials(): AwsCredentialsProvider {
  let provider: AwsCredentialsProvider | undefined;
  return () => (provider ??= runtimeSdk('@aws-sdk/credential-provider-node').defaultProvider())();
}
