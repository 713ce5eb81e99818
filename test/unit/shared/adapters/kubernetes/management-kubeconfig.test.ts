import { Logger } from '@aws-lambda-powertools/logger';
import { GetSecretValueCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetParameterCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { mockClient } from 'aws-sdk-client-mock';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AwsCredentials } from '#shared/adapters/aws/eks-token.ts';
import {
  createManagementKubeConfigLoader,
  type ManagementKubeConfigDeps,
} from '#shared/adapters/kubernetes/management-kubeconfig.ts';
import type { ClusterAccessConfig } from '#shared/config/cluster-access-config.ts';
import { ClusterCredentialsError, RefusedKubeconfigError } from '#shared/errors.ts';
import { recordMockedAwsCalls } from '#test/support/record-aws-calls.ts';

// Secret material that must never reach a log line or an error message.
const BEARER = 'sEcReT-bearer-0123456789abcdef';
const KEY_DATA = Buffer.from('-----BEGIN EC PRIVATE KEY-----\nSECRETKEYMATERIAL\n-----END EC PRIVATE KEY-----\n').toString('base64');
const CERT_DATA = Buffer.from('-----BEGIN CERTIFICATE-----\nCLIENTCERTMATERIAL\n-----END CERTIFICATE-----\n').toString('base64');
const CA_DATA = Buffer.from('-----BEGIN CERTIFICATE-----\nCLUSTERCAMATERIAL\n-----END CERTIFICATE-----\n').toString('base64');
const credentials: AwsCredentials = {
  accessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY',
  sessionToken: 'IQoJb3JpZ2luX2VjSESSIONTOKENEXAMPLE',
};

function kubeconfigYaml(server: string, userFields: string): string {
  return [
    'apiVersion: v1',
    'kind: Config',
    'clusters:',
    '- name: mgmt',
    '  cluster:',
    `    server: ${server}`,
    `    certificate-authority-data: ${CA_DATA}`,
    'users:',
    '- name: admin',
    '  user:',
    ...userFields.split('\n').map((l) => `    ${l}`),
    'contexts:',
    '- name: mgmt',
    '  context: { cluster: mgmt, user: admin }',
    'current-context: mgmt',
    '',
  ].join('\n');
}
const TOKEN_KUBECONFIG = kubeconfigYaml('https://mgmt.example:6443', `token: ${BEARER}`);
const CERT_KUBECONFIG = kubeconfigYaml('https://mgmt-2.example:6443', `client-certificate-data: ${CERT_DATA}\nclient-key-data: ${KEY_DATA}`);
// Invalid YAML whose parser error would quote the secret line.
const BROKEN_KUBECONFIG = `clusters: [\n  token: ${BEARER}\n  client-key-data: ${KEY_DATA}\n: : :`;

const ssmConfig: ClusterAccessConfig = { clusterMode: 'capi', management: { auth: 'ssm', parameterName: '/capi/mgmt-kubeconfig', region: 'eu-west-1' } };
const smConfig: ClusterAccessConfig = { clusterMode: 'capi', management: { auth: 'secretsmanager', secretId: 'capi/mgmt-kubeconfig', region: 'eu-west-1' } };
const eksConfig: ClusterAccessConfig = {
  clusterMode: 'capi',
  management: { auth: 'eks', clusterName: 'mgmt', endpoint: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com', caData: CA_DATA, region: 'eu-west-1' },
};

function fakeClock(start = new Date('2026-01-02T03:04:05.000Z')): { now: () => Date; advance: (seconds: number) => void } {
  let t = start.getTime();
  return { now: () => new Date(t), advance: (s) => (t += s * 1000) };
}

const ssmMock = mockClient(SSMClient);
const smMock = mockClient(SecretsManagerClient);
// Both functions load the management kubeconfig with this adapter; the parameter and secret are the ones they get as
// MANAGEMENT_KUBECONFIG_PARAMETER / MANAGEMENT_KUBECONFIG_SECRET_ID (evaluated by the least-privilege test).
recordMockedAwsCalls('management-kubeconfig', [
  { functions: ['reconcile-node-taints', 'watch-forwarder'], service: 'ssm', mock: ssmMock, bindings: { '/capi/mgmt-kubeconfig': '{env:MANAGEMENT_KUBECONFIG_PARAMETER}' } },
  { functions: ['reconcile-node-taints', 'watch-forwarder'], service: 'secretsmanager', mock: smMock, bindings: { 'capi/mgmt-kubeconfig': '{env:MANAGEMENT_KUBECONFIG_SECRET_ID}' } },
]);
const silent = { debug: () => {}, info: () => {}, warn: () => {} };

beforeEach(() => {
  ssmMock.reset();
  smMock.reset();
});

async function authHeaders(kc: import('#shared/adapters/kubernetes/kube-http.ts').ClusterEndpoint): Promise<Record<string, unknown>> {
  const opts: { headers?: Record<string, unknown>; ca?: unknown } = {};
  await kc.applyToHTTPSOptions(opts as never);
  return opts.headers ?? {};
}

describe('stored kubeconfig (SSM Parameter Store)', () => {
  it('reads the SecureString with decryption and builds the KubeConfig', async () => {
    // Prepare
    ssmMock.on(GetParameterCommand, { Name: '/capi/mgmt-kubeconfig', WithDecryption: true }).resolves({ Parameter: { Value: TOKEN_KUBECONFIG } });
    const loader = createManagementKubeConfigLoader(ssmConfig, { logger: silent });

    // Act
    const kc = await loader.load();

    // Assess
    expect(kc.getCurrentCluster()?.server).toBe('https://mgmt.example:6443');
    expect(await authHeaders(kc)).toMatchObject({ Authorization: `Bearer ${BEARER}` });
  });

  it('caches per warm container and re-reads after reloadAfterSeconds', async () => {
    // Prepare
    const clock = fakeClock();
    ssmMock.on(GetParameterCommand).resolvesOnce({ Parameter: { Value: TOKEN_KUBECONFIG } }).resolves({ Parameter: { Value: CERT_KUBECONFIG } });
    const loader = createManagementKubeConfigLoader(ssmConfig, { clock, logger: silent });

    // Act
    const first = await loader.load();
    clock.advance(299);
    const cached = await loader.load();
    clock.advance(2);
    const reloaded = await loader.load();

    // Assess
    expect(cached).toBe(first);
    expect(reloaded.getCurrentCluster()?.server).toBe('https://mgmt-2.example:6443');
    expect(ssmMock.commandCalls(GetParameterCommand)).toHaveLength(2);
  });

  it('keeps the previous KubeConfig when a re-read fails', async () => {
    // Prepare
    const clock = fakeClock();
    ssmMock.on(GetParameterCommand).resolvesOnce({ Parameter: { Value: TOKEN_KUBECONFIG } }).rejects(new Error('throttled'));
    const loader = createManagementKubeConfigLoader(ssmConfig, { clock, logger: silent });
    const first = await loader.load();
    clock.advance(301);

    // Act
    const again = await loader.load();

    // Assess
    expect(again).toBe(first);
  });

  it.each([
    { name: 'a missing parameter', setup: () => ssmMock.on(GetParameterCommand).rejects(new ParameterNotFound({ message: 'not found', $metadata: {} })), message: 'ParameterNotFound' },
    { name: 'an empty parameter', setup: () => ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: '' } }), message: 'is empty' },
    { name: 'invalid YAML', setup: () => ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: BROKEN_KUBECONFIG } }), message: 'is not a valid kubeconfig' },
    { name: 'no current context', setup: () => ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: 'apiVersion: v1\nkind: Config\n' } }), message: 'no current context' },
  ])('fails with ClusterCredentialsError on $name, naming the parameter only', async ({ setup, message }) => {
    // Prepare
    setup();
    const loader = createManagementKubeConfigLoader(ssmConfig, { logger: silent });

    // Act
    const error = await loader.load().then(() => undefined, (err: unknown) => err);

    // Assess
    expect(error).toBeInstanceOf(ClusterCredentialsError);
    expect((error as Error).message).toContain('SSM parameter /capi/mgmt-kubeconfig');
    expect((error as Error).message).toContain(message);
    expect((error as Error).message).not.toContain(BEARER);
    expect((error as Error).cause).toBeUndefined();
  });
});

describe('stored kubeconfig (Secrets Manager)', () => {
  it.each([
    { name: 'SecretString', output: { SecretString: CERT_KUBECONFIG } },
    { name: 'SecretBinary', output: { SecretBinary: new Uint8Array(Buffer.from(CERT_KUBECONFIG)) } },
  ])('reads the kubeconfig from $name', async ({ output }) => {
    // Prepare
    smMock.on(GetSecretValueCommand, { SecretId: 'capi/mgmt-kubeconfig' }).resolves(output);
    const loader = createManagementKubeConfigLoader(smConfig, { logger: silent });

    // Act
    const kc = await loader.load();

    // Assess
    const opts: { key?: Buffer } = {};
    await kc.applyToHTTPSOptions(opts);
    expect(kc.getCurrentCluster()?.server).toBe('https://mgmt-2.example:6443');
    expect(opts.key?.toString('base64')).toBe(KEY_DATA);
  });
});

describe('EKS IAM token', () => {
  it('points at the configured endpoint and CA and authenticates with a fresh token', async () => {
    // Prepare
    const loader = createManagementKubeConfigLoader(eksConfig, { credentials: async () => credentials, clock: fakeClock(), logger: silent });

    // Act
    const kc = await loader.load();
    const opts: { headers?: Record<string, unknown>; ca?: Buffer } = {};
    await kc.applyToHTTPSOptions(opts as never);

    // Assess
    expect(kc.getCurrentCluster()?.server).toBe('https://ABC.gr7.eu-west-1.eks.amazonaws.com');
    expect(opts.ca?.toString()).toContain('CLUSTERCAMATERIAL');
    expect(opts.headers?.Authorization).toMatch(/^Bearer k8s-aws-v1\.[A-Za-z0-9_-]+$/);
  });

  it('keeps one KubeConfig per warm container and refreshes its token before expiry', async () => {
    // Prepare
    const clock = fakeClock();
    const deps: ManagementKubeConfigDeps = { credentials: async () => credentials, clock, logger: silent };

    // Act
    const loader = createManagementKubeConfigLoader(eksConfig, deps);
    const kc = await loader.load();
    const first = (await authHeaders(kc)).Authorization;
    clock.advance(10 * 60);
    const same = (await loader.load()) === kc;
    const at10min = (await authHeaders(kc)).Authorization;
    clock.advance(3 * 60 + 1);
    const at13min = (await authHeaders(kc)).Authorization;

    // Assess
    expect(same).toBe(true);
    expect(at10min).toBe(first);
    expect(at13min).not.toBe(first);
  });

  it('fails with ClusterCredentialsError when no AWS credentials are available', async () => {
    // Prepare
    const loader = createManagementKubeConfigLoader(eksConfig, {
      credentials: async () => {
        throw new Error(`provider chain failed near ${credentials.secretAccessKey}`);
      },
      logger: silent,
    });

    // Act
    const error = await loader.load().then(() => undefined, (err: unknown) => err);

    // Assess
    expect(error).toBeInstanceOf(ClusterCredentialsError);
    expect((error as Error).message).toContain('minting an EKS token for mgmt failed');
    expect((error as Error).message).not.toContain(credentials.secretAccessKey);
  });
});

describe('kubeconfig file (MANAGEMENT_AUTH=kubeconfig, local runs of a function)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mgmt-kubeconfig-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const fileConfig = (kubeconfigPath: string): ClusterAccessConfig => ({ clusterMode: 'capi', management: { auth: 'kubeconfig', kubeconfigPath } });

  it('reads the first file of KUBECONFIG that exists, with its inline credentials', async () => {
    // Prepare
    const file = join(dir, 'token.yaml');
    writeFileSync(file, TOKEN_KUBECONFIG);

    // Act
    const kc = await createManagementKubeConfigLoader(fileConfig([join(dir, 'missing.yaml'), file].join(delimiter)), { logger: silent }).load();

    // Assess
    expect(kc.getCurrentCluster().server).toBe('https://mgmt.example:6443');
    expect(await authHeaders(kc)).toMatchObject({ Authorization: `Bearer ${BEARER}` });
  });

  it.each([
    { kind: 'an exec plugin', text: kubeconfigYaml('https://mgmt.example:6443', 'exec: { command: /bin/sh }'), error: RefusedKubeconfigError, message: 'users[0].user.exec (exec plugin)' },
    { kind: 'no file at all', text: undefined, error: ClusterCredentialsError, message: 'could not be read' },
  ])('refuses a kubeconfig file with $kind, naming the file, never its content', async ({ text, error, message }) => {
    // Prepare
    const file = join(dir, `refused-${text === undefined ? 'missing' : 'exec'}.yaml`);
    if (text !== undefined) writeFileSync(file, text);

    // Act
    const failure = await createManagementKubeConfigLoader(fileConfig(file), { logger: silent }).load().catch((e: unknown) => e);

    // Assess
    expect(failure).toBeInstanceOf(error);
    expect((failure as Error).message).toContain(message);
    expect((failure as Error).message).toContain(file);
    expect((failure as Error).message).not.toContain('/bin/sh');
  });
});

describe('logs', () => {
  let captured: string[];
  beforeEach(() => {
    captured = [];
    const capture = (chunk: unknown): boolean => {
      captured.push(String(chunk));
      return true;
    };
    vi.spyOn(process.stdout, 'write').mockImplementation(capture as never);
    vi.spyOn(process.stderr, 'write').mockImplementation(capture as never);
    for (const m of ['log', 'info', 'warn', 'error', 'debug'] as const) {
      vi.spyOn(console, m).mockImplementation((...args: unknown[]) => void captured.push(args.map(String).join(' ')));
    }
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('never contain a token, key, certificate, AWS secret or kubeconfig content', async () => {
    // Prepare: a DEBUG logger writing to the captured streams, as in Lambda
    const logger = new Logger({ serviceName: 'capi-taint-propagator', logLevel: 'DEBUG' });
    const clock = fakeClock();
    ssmMock
      .on(GetParameterCommand)
      .resolvesOnce({ Parameter: { Value: TOKEN_KUBECONFIG } })
      .rejectsOnce(new Error('throttled'))
      .resolves({ Parameter: { Value: BROKEN_KUBECONFIG } });
    smMock.on(GetSecretValueCommand).resolves({ SecretString: CERT_KUBECONFIG });
    const eksTokens: string[] = [];

    // Act: every path that logs, including failures logged at the boundary with their error
    const ssm = createManagementKubeConfigLoader(ssmConfig, { clock, logger });
    await authHeaders(await ssm.load());
    clock.advance(301);
    await ssm.load(); // re-read fails: warning, previous kept
    clock.advance(301);
    await ssm.load(); // broken YAML: warning, previous kept
    await createManagementKubeConfigLoader(ssmConfig, { clock, logger }).load().catch((err: unknown) => logger.error('Loading the management kubeconfig failed', err as Error));

    await authHeaders(await createManagementKubeConfigLoader(smConfig, { clock, logger }).load());

    const eks = await createManagementKubeConfigLoader(eksConfig, { credentials: async () => credentials, clock, logger }).load();
    eksTokens.push(String((await authHeaders(eks)).Authorization));
    clock.advance(14 * 60);
    eksTokens.push(String((await authHeaders(eks)).Authorization));
    await createManagementKubeConfigLoader(eksConfig, {
      credentials: async () => {
        throw new Error(`bad ${credentials.sessionToken}`);
      },
      logger,
    })
      .load()
      .catch((err: unknown) => logger.error('Loading the management kubeconfig failed', err as Error));

    // Assess
    const output = captured.join('\n');
    expect(output).toContain('Loading management kubeconfig'); // the capture works and the paths did log
    expect(output).toContain('keeping the previous one');
    expect(output).toContain('Using a new EKS token');
    const secrets = [
      BEARER,
      KEY_DATA,
      CERT_DATA,
      'SECRETKEYMATERIAL',
      credentials.secretAccessKey,
      String(credentials.sessionToken),
      'k8s-aws-v1.',
      ...eksTokens.map((t) => t.replace('Bearer ', '')),
      'client-key-data',
      'certificate-authority-data',
      'apiVersion: v1',
    ];
    for (const secret of secrets) expect(output, `log output contains ${secret.slice(0, 20)}…`).not.toContain(secret);
  });
});
