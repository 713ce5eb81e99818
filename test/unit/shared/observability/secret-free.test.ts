/**
 * No secret in any log, Event, metric or dead letter: every credential failure path — broken YAML with a token inside,
 * refused kubeconfigs, 401/403 with a response that echoes credentials, SSM and Secrets Manager errors, EKS token
 * errors — driven through the product's boundaries and the real Powertools logger (the product's logger, DEBUG)
 * and Powertools metrics; every captured line, recorded Event and dead letter is searched for the planted secrets.
 */
import type { CapiApi } from '#shared/adapters/kubernetes/capi-discovery.ts';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { GetSecretValueCommand, ResourceNotFoundException, SecretsManagerClient, DecryptionFailure } from '@aws-sdk/client-secrets-manager';
import { ChangeMessageVisibilityCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { GetParameterCommand, ParameterNotFound, SSMClient } from '@aws-sdk/client-ssm';
import { ApiException, KubeConfig, type V1Secret } from '@kubernetes/client-node';
import type { Context } from 'aws-lambda';
import { mockClient } from 'aws-sdk-client-mock';
import { load } from 'js-yaml';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { processBatch, type BatchDeps } from '#functions/reconcile-node-taints/process-batch.ts';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { toProductError } from '#shared/adapters/kubernetes/api-errors.ts';
import { KubeApiError } from '#shared/adapters/kubernetes/kube-http.ts';
import { KubernetesClusterConnections } from '#shared/adapters/kubernetes/cluster-connections.ts';
import { startConnectProxy } from '#test/support/connect-proxy.ts';
import { clusterCredentialsReporter } from '#shared/adapters/kubernetes/credentials-reporter.ts';
import { createManagementKubeConfigLoader } from '#shared/adapters/kubernetes/management-kubeconfig.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { MemoryEventRecorder, MemoryMachineStore } from '#test/support/memory-cluster.ts';
import { SqsRecordQueue } from '#shared/adapters/sqs/record-queue.ts';
import type { ClusterAccessConfig } from '#shared/config/cluster-access-config.ts';
import { TransientError } from '#shared/errors.ts';
import { logger } from '#shared/observability/logger.ts';
import { METRIC_NAMESPACE, ReconcileMetric } from '#shared/observability/metric-names.ts';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import type { ClusterConnections } from '#shared/ports/cluster-connections.ts';
import { machineBuilder } from '#test/support/builders.ts';
import { TEST_DLQ_URL, TEST_QUEUE_URL, machineEvent, sqsEvent, sqsRecord } from '#test/support/sqs-records.ts';

/** Cluster API in v1beta2, without discovery. */
const capiV1beta2: CapiApi = { version: async () => 'v1beta2', notServed: () => undefined };

// Planted secrets: none may appear anywhere.
const TOKEN = 'PLANTED-token-7f3a9c0e11d2';
const KEY_BODY = 'PLANTEDKEYMATERIALxyz';
const KEY = Buffer.from(`-----BEGIN EC PRIVATE KEY-----\n${KEY_BODY}\n-----END EC PRIVATE KEY-----\n`).toString('base64');
const CERT = Buffer.from('-----BEGIN CERTIFICATE-----\nPLANTEDCERTBODY\n-----END CERTIFICATE-----\n').toString('base64');
const AWS_SECRET = 'PLANTEDwJalrXUtnFEMIK7MDENGbPxRfiCY';
const SESSION = 'PLANTED-IQoJb3JpZ2luX2VjSESSION';
const SECRETS = [TOKEN, KEY, KEY_BODY, CERT, 'PLANTEDCERTBODY', AWS_SECRET, SESSION, 'k8s-aws-v1.', 'client-key-data:', 'mark', 'buffer'];

const kubeconfig = (user: string): string =>
  `apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://wc.example:6443\n    certificate-authority-data: ${CERT}\nusers:\n- name: u\n  user:\n${user}\ncontexts:\n- name: x\n  context: { cluster: c, user: u }\ncurrent-context: x\n`;
const BROKEN_YAML = `clusters: [\n  token: ${TOKEN}\n  client-key-data: ${KEY}\n: : :`;
const EXEC_WITH_TOKEN = kubeconfig(`    token: ${TOKEN}\n    exec:\n      command: /bin/sh\n      args: ["-c", "echo ${TOKEN}"]`);
const FILE_PATHS = kubeconfig(`    client-certificate-data: ${CERT}\n    client-key: /etc/${TOKEN}.key`);

const ssmMock = mockClient(SSMClient);
const smMock = mockClient(SecretsManagerClient);
const sqsMock = mockClient(SQSClient);
const context = { functionName: 'reconcile-node-taints', awsRequestId: 'req-1', getRemainingTimeInMillis: () => 30_000 } as unknown as Context;

let captured: string[];
beforeEach(() => {
  captured = [];
  const capture = (chunk: unknown): boolean => (captured.push(String(chunk)), true);
  vi.spyOn(process.stdout, 'write').mockImplementation(capture as never);
  vi.spyOn(process.stderr, 'write').mockImplementation(capture as never);
  for (const m of ['log', 'info', 'warn', 'error', 'debug'] as const) {
    vi.spyOn(console, m).mockImplementation((...args: unknown[]) => void captured.push(args.map((a) => (typeof a === 'string' ? a : JSON.stringify(a))).join(' ')));
  }
  for (const mock of [ssmMock, smMock, sqsMock]) mock.reset();
  sqsMock.on(ChangeMessageVisibilityCommand).resolves({});
  sqsMock.on(SendMessageCommand).resolves({ MessageId: 'dlq' });
});
afterEach(() => {
  vi.restoreAllMocks();
  vi.unstubAllEnvs();
});

function secretOf(text: string, rv: string): V1Secret {
  return { metadata: { resourceVersion: rv }, data: { value: Buffer.from(text).toString('base64') } };
}

/** A 401/403 whose response body echoes the credential (a hostile or misconfigured server), as the product's client rejects it. */
function echoingKubeApiError(code: number): KubeApiError {
  return new KubeApiError(code, JSON.stringify({ kind: 'Status', reason: 'Unauthorized', message: 'Unauthorized', echo: `Bearer ${TOKEN}`, key: KEY }));
}

/** The same as client-node (developer tools) rejects it: body and headers. */
function echoingApiException(code: number): ApiException<string> {
  return new ApiException(code, 'Unauthorized', JSON.stringify({ kind: 'Status', reason: 'Unauthorized', message: 'Unauthorized', echo: `Bearer ${TOKEN}` }), {
    'www-authenticate': `Bearer ${TOKEN}`,
    'x-echo-key': KEY,
  });
}

it('keeps every planted secret out of logs, Events, metrics and dead letters on every credential failure path', async () => {
  // Prepare: the product's logger at DEBUG, real Powertools metrics (on: vitest.config turns them off), the Secrets of
  // three hostile workload clusters.
  vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
  logger.setLogLevel('DEBUG');
  const metrics = new Metrics({ namespace: METRIC_NAMESPACE, serviceName: 'capi-taint-propagator' });
  const recorder = new MemoryEventRecorder();
  const secrets: Record<string, string> = { 'wc-broken-kubeconfig': BROKEN_YAML, 'wc-exec-kubeconfig': EXEC_WITH_TOKEN, 'wc-files-kubeconfig': FILE_PATHS };
  const workload = workloadKubeConfigs(new KubeConfig(), {
    readSecret: async (_ns, name) => {
      if (name === 'wc-forbidden-kubeconfig') throw echoingKubeApiError(403);
      const text = secrets[name];
      if (text === undefined) throw new KubeApiError(404, '{}');
      return secretOf(text, '1');
    },
  });
  const reporter = clusterCredentialsReporter({
    kubeConfig: new KubeConfig(),
    capi: capiV1beta2,
    recorder,
    logger,
    clusterUid: async (_ns, name) => `uid-${name}`,
    count: () => metrics.addMetric(ReconcileMetric.UnusableKubeconfigs, MetricUnit.Count, 1),
  });
  const real = new KubernetesClusterConnections({ management: async () => new KubeConfig(), workload: (c) => workload.get({ mode: 'capi', ...c }), clock: { now: () => new Date() }, reporter });
  // Cluster wc-401 has usable credentials, but its API server answers 401 with the credential echoed back.
  const clusters: ClusterConnections = {
    nodesOf: async (cluster, options) =>
      cluster.mode === 'capi' && cluster.name === 'wc-401'
        ? {
            getNode: async (name) => Promise.reject(toProductError(`Reading Node ${name}`, echoingKubeApiError(401))),
            patchNodeTaints: async () => Promise.reject(new Error('unreachable')),
            listNodes: async () => Promise.reject(new Error('unreachable')),
          }
        : real.nodesOf(cluster, options),
    podsOf: (cluster) => real.podsOf(cluster),
  };
  const machines = new MemoryMachineStore();
  for (const cluster of ['wc-broken', 'wc-exec', 'wc-files', 'wc-forbidden', 'wc-401']) {
    machines.put({ ...machineBuilder().named(`m-${cluster}`).withNodeName(`n-${cluster}`).build(), clusterName: cluster });
  }
  const deps: BatchDeps = {
    machines,
    clusters,
    recorder,
    enablement: { enabledAt: async () => new Date('2020-01-01T00:00:00Z') },
    clock: { now: () => new Date() },
    settings: { clusterMode: 'capi', dryRun: false, startupTaint: undefined },
    queue: new SqsRecordQueue(new SQSClient({ region: 'eu-west-1' }), TEST_QUEUE_URL, TEST_DLQ_URL),
    parse: fromCloudEventBody,
    logger,
    metrics,
    retry: { baseSeconds: 1, maxSeconds: 5 },
    random: () => 0,
  };
  const records = ['wc-broken', 'wc-exec', 'wc-files', 'wc-forbidden', 'wc-401'].map((c, i) =>
    sqsRecord(machineEvent('default', `m-${c}`, { nodeName: `n-${c}` }), { messageId: `msg-${i}`, receiveCount: 10 }),
  );
  // A record whose body is not an event, to go through the dead-letter path.
  records.push(sqsRecord({ rawBody: '{"not":"an event"', groupId: 'default/wc-x/node/n' }, { messageId: 'malformed' }));

  // Management kubeconfigs: SSM (errors, broken YAML, exec), Secrets Manager (errors, file paths), EKS (credential errors).
  ssmMock
    .on(GetParameterCommand)
    .rejectsOnce(new ParameterNotFound({ message: 'Parameter /capi/mgmt not found.', $metadata: { httpStatusCode: 400 } }))
    .resolvesOnce({ Parameter: { Value: BROKEN_YAML } })
    .resolvesOnce({ Parameter: { Value: EXEC_WITH_TOKEN } })
    .rejects(Object.assign(new Error('User: arn:aws:sts::111122223333:assumed-role/r is not authorized to perform: ssm:GetParameter'), { name: 'AccessDeniedException', $metadata: { httpStatusCode: 400 } }));
  smMock
    .on(GetSecretValueCommand)
    .rejectsOnce(new ResourceNotFoundException({ message: "Secrets Manager can't find the specified secret.", $metadata: {} }))
    .rejectsOnce(new DecryptionFailure({ message: 'KMS refused', $metadata: {} }))
    .resolves({ SecretString: FILE_PATHS });
  const ssm: ClusterAccessConfig = { clusterMode: 'capi', management: { auth: 'ssm', parameterName: '/capi/mgmt', region: 'eu-west-1' } };
  const sm: ClusterAccessConfig = { clusterMode: 'capi', management: { auth: 'secretsmanager', secretId: 'capi/mgmt', region: 'eu-west-1' } };
  const eks: ClusterAccessConfig = {
    clusterMode: 'capi',
    management: { auth: 'eks', clusterName: 'mgmt', endpoint: 'https://x.eks.amazonaws.com', caData: CERT, region: 'eu-west-1' },
  };
  const failures: unknown[] = [];
  const loadAndLog = async (config: ClusterAccessConfig, deps: Parameters<typeof createManagementKubeConfigLoader>[1]): Promise<void> => {
    await createManagementKubeConfigLoader(config, { ...deps, logger })
      .load()
      .catch((err: unknown) => {
        failures.push(err);
        logger.error('Loading the management kubeconfig failed', err as Error);
      });
  };

  // Act
  const response = await processBatch(sqsEvent(...records), context, deps);
  for (let i = 0; i < 4; i++) await loadAndLog(ssm, {});
  for (let i = 0; i < 3; i++) await loadAndLog(sm, {});
  await loadAndLog(eks, {
    credentials: async () => {
      throw Object.assign(new Error(`Could not load credentials: secretAccessKey=${AWS_SECRET} sessionToken=${SESSION}`), { name: 'CredentialsProviderError' });
    },
  });
  // A foreign error kept as a cause by mistake is still written without its content: a js-yaml error (snippet,
  // mark.buffer) and raw API errors (body; client-node's also headers).
  let yamlError: unknown;
  try {
    load(BROKEN_YAML);
  } catch (err) {
    yamlError = err;
  }
  logger.warn('Defence in depth', { error: new TransientError('parsing', 'failed', yamlError) });
  logger.warn('Defence in depth', { error: new TransientError('calling', 'failed', echoingKubeApiError(403)) });
  logger.warn('Defence in depth', { error: new TransientError('calling', 'failed', echoingApiException(403)) });
  logger.debug('Defence in depth', { text: `Authorization: Bearer ${TOKEN}`, pem: Buffer.from(KEY, 'base64').toString() });
  metrics.publishStoredMetrics();

  // Assess: the paths ran and reported …
  const output = captured.join('\n');
  expect(response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(['msg-0', 'msg-1', 'msg-2', 'msg-3', 'msg-4']);
  expect(output).toContain('Retrying after a transient failure');
  expect(output).toContain('Skipping cluster: its kubeconfig uses refused features');
  expect(output).toContain('Skipping cluster: its kubeconfig is unusable');
  expect(output).toContain('users[0].user.exec (exec plugin)');
  expect(output).toContain('users[0].user.client-key (file path)');
  expect(output).toContain('YAML error at line');
  expect(output).toContain('HTTP 401');
  expect(output).toContain('ParameterNotFound');
  expect(output).toContain('AccessDeniedException');
  expect(output).toContain('ResourceNotFoundException');
  expect(output).toContain('DecryptionFailure');
  expect(output).toContain('minting an EKS token for mgmt failed');
  expect(output).toContain('Dead-lettering a record that can never succeed');
  expect(output).toContain('"UnusableKubeconfigs"');
  expect(output).toContain('(message withheld: a parser error quotes its input)');
  expect(failures).toHaveLength(8);
  expect(recorder.events.map((e) => `${e.object.kind}/${e.object.name} ${e.reason}`).sort()).toEqual([
    'Cluster/wc-broken KubeconfigUnusable',
    'Cluster/wc-exec KubeconfigRefused',
    'Cluster/wc-files KubeconfigRefused',
    'Cluster/wc-forbidden KubeconfigUnusable',
  ]);
  const deadLetters = JSON.stringify(sqsMock.commandCalls(SendMessageCommand).map((c) => c.args[0].input));
  expect(deadLetters).toContain('failureReason');
  // … and no planted secret is anywhere.
  const everything = [output, JSON.stringify(recorder.events), deadLetters, ...failures.map((f) => `${(f as Error).message} ${String((f as Error).stack)}`)];
  for (const where of everything) {
    for (const secret of SECRETS) expect(where, `found ${secret.slice(0, 16)}…`).not.toContain(secret);
  }
});

it("keeps a proxy's user and password out of logs, Events, metrics and dead letters: refused, rejected and unreachable proxies", async () => {
  // Prepare: three workload clusters whose Secrets name a proxy with a password: a SOCKS4 proxy (refused), an HTTP proxy
  // that answers 407 (the real client, through a real CONNECT proxy on loopback), and one that is not listening.
  vi.stubEnv('POWERTOOLS_METRICS_DISABLED', 'false');
  const PROXY_PASSWORD = 'PLANTED-proxy-password-4b1d';
  const PROXY_SECRETS = [PROXY_PASSWORD, Buffer.from(`ops:${PROXY_PASSWORD}`).toString('base64'), 'ops:PLANTED'];
  logger.setLogLevel('DEBUG');
  const metrics = new Metrics({ namespace: METRIC_NAMESPACE, serviceName: 'capi-taint-propagator' });
  const recorder = new MemoryEventRecorder();
  const proxy = await startConnectProxy({ hosts: {}, credentials: { user: 'ops', password: 'another-password' } });
  const closed = await startConnectProxy({ hosts: {} });
  await closed.close();
  const withProxy = (url: string): string =>
    `apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://wc.example:6443\n    certificate-authority-data: ${CERT}\n    proxy-url: ${url}\nusers:\n- name: u\n  user:\n    token: ${TOKEN}\ncontexts:\n- name: x\n  context: { cluster: c, user: u }\ncurrent-context: x\n`;
  const secrets: Record<string, string> = {
    'wc-socks-kubeconfig': withProxy(`socks4://ops:${PROXY_PASSWORD}@proxy.example:1080`),
    'wc-407-kubeconfig': withProxy(proxy.url.replace('http://', `http://ops:${PROXY_PASSWORD}@`)),
    'wc-down-kubeconfig': withProxy(closed.url.replace('http://', `http://ops:${PROXY_PASSWORD}@`)),
  };
  const workload = workloadKubeConfigs(new KubeConfig(), {
    readSecret: async (_ns, name) => {
      const text = secrets[name];
      if (text === undefined) throw new KubeApiError(404, '{}');
      return secretOf(text, '1');
    },
  });
  const reporter = clusterCredentialsReporter({
    kubeConfig: new KubeConfig(),
    capi: capiV1beta2,
    recorder,
    logger,
    clusterUid: async (_ns, name) => `uid-${name}`,
    count: () => metrics.addMetric(ReconcileMetric.UnusableKubeconfigs, MetricUnit.Count, 1),
  });
  const clusters = new KubernetesClusterConnections({ management: async () => new KubeConfig(), workload: (c) => workload.get({ mode: 'capi', ...c }), clock: { now: () => new Date() }, reporter });
  const machines = new MemoryMachineStore();
  const names = ['wc-socks', 'wc-407', 'wc-down'];
  for (const cluster of names) machines.put({ ...machineBuilder().named(`m-${cluster}`).withNodeName(`n-${cluster}`).build(), clusterName: cluster });
  const deps: BatchDeps = {
    machines,
    clusters,
    recorder,
    enablement: { enabledAt: async () => new Date('2020-01-01T00:00:00Z') },
    clock: { now: () => new Date() },
    settings: { clusterMode: 'capi', dryRun: false, startupTaint: undefined },
    queue: new SqsRecordQueue(new SQSClient({ region: 'eu-west-1' }), TEST_QUEUE_URL, TEST_DLQ_URL),
    parse: fromCloudEventBody,
    logger,
    metrics,
    retry: { baseSeconds: 1, maxSeconds: 5 },
    random: () => 0,
  };
  const records = names.map((c, i) => sqsRecord(machineEvent('default', `m-${c}`, { nodeName: `n-${c}`, cluster: { mode: 'capi', namespace: 'default', name: c } }), { messageId: `msg-${i}` }));
  ssmMock.on(GetParameterCommand).resolves({ Parameter: { Value: secrets['wc-socks-kubeconfig'] } });
  const failures: unknown[] = [];

  // Act
  let response;
  try {
    response = await processBatch(sqsEvent(...records), context, deps);
  } finally {
    await proxy.close();
  }
  await createManagementKubeConfigLoader({ clusterMode: 'capi', management: { auth: 'ssm', parameterName: '/capi/mgmt', region: 'eu-west-1' } }, { logger })
    .load()
    .catch((err: unknown) => {
      failures.push(err);
      logger.error('Loading the management kubeconfig failed', err as Error);
    });
  logger.debug('Defence in depth', { proxy: `http://ops:${PROXY_PASSWORD}@proxy.example:3128`, error: new Error(`connect through https://ops:${PROXY_PASSWORD}@proxy.example failed`) });
  metrics.publishStoredMetrics();

  // Assess: every path ran and reported …
  const output = captured.join('\n');
  expect(response.batchItemFailures.map((f) => f.itemIdentifier)).toEqual(['msg-0', 'msg-1', 'msg-2']);
  expect(output).toContain('clusters[0].cluster.proxy-url (proxy-url uses the scheme \\"socks4\\"');
  expect(output).toContain('no tunnel through the proxy (Bad response: 407)');
  expect(output).toContain('ECONNREFUSED');
  expect(output).toContain('http://[redacted]@proxy.example:3128');
  // The credential went to the proxy (the speculative read and the ordinary one), and nowhere else.
  expect(proxy.authorizations.length).toBeGreaterThanOrEqual(1);
  expect(new Set(proxy.authorizations)).toEqual(new Set([`Basic ${Buffer.from(`ops:${PROXY_PASSWORD}`).toString('base64')}`]));
  expect(recorder.events.map((e) => `${e.object.kind}/${e.object.name} ${e.reason}`)).toEqual(['Cluster/wc-socks KubeconfigRefused']);
  expect(failures).toHaveLength(1);
  // … and the proxy's password is nowhere.
  const deadLetters = JSON.stringify(sqsMock.commandCalls(SendMessageCommand).map((c) => c.args[0].input));
  const everything = [output, JSON.stringify(recorder.events), deadLetters, ...failures.map((f) => `${(f as Error).message} ${String((f as Error).stack)}`)];
  for (const where of everything) {
    for (const secret of [...SECRETS, ...PROXY_SECRETS]) expect(where, `found ${secret.slice(0, 16)}…`).not.toContain(secret);
  }
});
