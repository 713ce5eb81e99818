/**
 * Provisioned concurrency of the reconcile function, end to end offline: serverless.yml's
 * `reconcileProvisionedConcurrency` packaged (`npx serverless package`, shared with the other packaging tests), the
 * template's alias read by local/lambda/template.ts, and the Lambda runner keeping that many reconcile containers
 * initialized from its start. With the default 0 the template has no version and no alias, and the runner starts no
 * container before an invocation.
 */
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LambdaRunner, type InvocationRecord } from '#local/lambda/runner.ts';
import { readPackagedTemplate } from '#local/lambda/template.ts';
import { PACKAGE_VARIANTS, packagedService, type Json, type Packaged } from '#test/support/serverless-package.ts';

const PROVISIONED = 2;
const RECONCILE = 'reconcileNodeTaints';
/** The SSM parameter of the example-ssm set, holding a kubeconfig of a server that is not there: an empty batch needs none. */
const SSM = {
  '/capi-taint-propagator/management-kubeconfig': {
    value: ['apiVersion: v1', 'kind: Config', "clusters: [{ name: c, cluster: { server: 'https://127.0.0.1:9' } }]", 'users: [{ name: u, user: { token: t } }]', 'contexts: [{ name: x, context: { cluster: c, user: u } }]', 'current-context: x', ''].join('\n'),
    keyId: 'arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab',
  },
};
const EMPTY_BATCH = { Records: [] };

const ofType = (template: Json, type: string): [string, Json][] => Object.entries(template.Resources as Record<string, Json>).filter(([, r]) => r.Type === type);

let withProvisioned: Packaged;
let without: Packaged;

beforeAll(async () => {
  [withProvisioned, without] = await Promise.all([packagedService([...PACKAGE_VARIANTS.ssm, `--param=reconcileProvisionedConcurrency=${PROVISIONED}`]), packagedService(PACKAGE_VARIANTS.ssm)]);
}, 480_000);

describe('reconcileProvisionedConcurrency in the packaged template', () => {
  it('> 0: a version of the reconcile function, an alias on it with ProvisionedConcurrentExecutions, the SQS trigger on the alias', () => {
    const t = withProvisioned.template;
    const versions = ofType(t, 'AWS::Lambda::Version');
    expect(versions.map(([, v]) => v.Properties.FunctionName)).toEqual([{ Ref: 'ReconcileNodeTaintsLambdaFunction' }]);
    const aliases = ofType(t, 'AWS::Lambda::Alias');
    expect(aliases).toHaveLength(1);
    const [aliasId, alias] = aliases[0] as [string, Json];
    expect(alias.Properties).toEqual({
      FunctionName: { Ref: 'ReconcileNodeTaintsLambdaFunction' },
      FunctionVersion: { 'Fn::GetAtt': [versions[0]?.[0], 'Version'] },
      Name: 'provisioned',
      ProvisionedConcurrencyConfig: { ProvisionedConcurrentExecutions: PROVISIONED },
    });
    const [, mapping] = ofType(t, 'AWS::Lambda::EventSourceMapping')[0] as [string, Json];
    expect(mapping.Properties.FunctionName).toEqual({ 'Fn::Join': [':', [{ 'Fn::GetAtt': ['ReconcileNodeTaintsLambdaFunction', 'Arn'] }, 'provisioned']] });
    expect(mapping.DependsOn).toContain(aliasId);
    // Provisioned concurrency is carved out of the reserved concurrency, which stays as it was.
    expect(t.Resources.ReconcileNodeTaintsLambdaFunction.Properties.ReservedConcurrentExecutions).toBe(10);

    const fn = readPackagedTemplate(withProvisioned.serviceDir).functions.get(RECONCILE);
    expect([...(fn?.provisionedConcurrency ?? [])]).toEqual([['1', PROVISIONED]]);
    expect(fn?.sqsEventSources.map((m) => [m.queueLogicalId, m.qualifier])).toEqual([['EventQueue', 'provisioned']]);
    expect(readPackagedTemplate(withProvisioned.serviceDir).functions.get('watchForwarder')?.provisionedConcurrency.size).toBe(0);
  });

  it('0 (the default): no version, no alias, the trigger on the function itself', () => {
    const t = without.template;
    expect(ofType(t, 'AWS::Lambda::Version')).toEqual([]);
    expect(ofType(t, 'AWS::Lambda::Alias')).toEqual([]);
    const [, mapping] = ofType(t, 'AWS::Lambda::EventSourceMapping')[0] as [string, Json];
    expect(mapping.Properties.FunctionName).toEqual({ 'Fn::GetAtt': ['ReconcileNodeTaintsLambdaFunction', 'Arn'] });
    const fn = readPackagedTemplate(without.serviceDir).functions.get(RECONCILE);
    expect(fn?.provisionedConcurrency.size).toBe(0);
    expect(fn?.sqsEventSources[0]?.qualifier).toBeUndefined();
  });
});

describe('the Lambda runner with provisioned concurrency', () => {
  let runner: LambdaRunner;
  const records: InvocationRecord[] = [];
  let provisionedIds: string[] = [];

  beforeAll(async () => {
    runner = await LambdaRunner.start({ serviceDir: withProvisioned.serviceDir, startTriggers: false, idleContainerMs: 1_000, ssmParameters: SSM, onInvocation: (r) => records.push(r) });
  }, 120_000);
  afterAll(async () => {
    await runner?.stop();
  });

  it(`starts ${PROVISIONED} reconcile containers, initialized and frozen, before any trigger or invocation`, () => {
    const pool = runner.fn(RECONCILE);
    expect(records).toEqual([]);
    expect(pool.containers()).toHaveLength(PROVISIONED);
    expect(pool.provisionedContainers()).toHaveLength(PROVISIONED);
    expect(pool.containers().every((c) => c.alive && c.frozen && c.initMs > 0)).toBe(true);
    expect(pool.provisionedStats()).toMatchObject({ provisionedConcurrency: PROVISIONED, containers: PROVISIONED, inits: PROVISIONED, invocations: 0 });
    expect(pool.stats().coldStarts).toBe(0);
    // The forwarder has none: no container until it is invoked.
    expect(runner.fn('watchForwarder').containers()).toEqual([]);
    provisionedIds = pool.provisionedContainers().map((c) => c.id).sort();
  });

  it(`runs the first ${PROVISIONED} concurrent invocations of the alias in them without a cold start; one more is a cold start`, async () => {
    const pool = runner.fn(RECONCILE);
    const rs = await Promise.all(Array.from({ length: PROVISIONED + 1 }, () => runner.invoke(RECONCILE, EMPTY_BATCH, 'provisioned')));
    for (const r of rs) expect(r.result, r.containerId).toEqual({ ok: true, value: { batchItemFailures: [] } });
    const warm = rs.slice(0, PROVISIONED);
    expect(warm.map((r) => r.containerId).sort()).toEqual(provisionedIds);
    expect(warm.map((r) => [r.coldStart, r.initMs, r.provisioned, r.version])).toEqual(Array.from({ length: PROVISIONED }, () => [false, 0, true, '1']));
    const extra = rs[PROVISIONED];
    expect([extra?.coldStart, extra?.provisioned, extra?.version]).toEqual([true, false, '1']);
    expect(extra?.initMs).toBeGreaterThan(0);
    expect(pool.stats().coldStarts).toBe(1);
    expect(pool.provisionedStats().invocations).toBe(PROVISIONED);
  });

  it('keeps the provisioned containers however long they idle, and reclaims the on-demand one', async () => {
    const pool = runner.fn(RECONCILE);
    const onDemand = pool.containers().filter((c) => !provisionedIds.includes(c.id));
    expect(onDemand).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 1_500));
    const r = await runner.invoke(RECONCILE, EMPTY_BATCH, 'provisioned');
    expect([r.coldStart, r.provisioned]).toEqual([false, true]);
    const gone = await Promise.race([onDemand[0]?.exited, new Promise((r) => setTimeout(() => r('still alive after 5 s'), 5_000))]);
    expect(gone).toBe('reclaimed while idle');
    expect(pool.containers().map((c) => c.id).sort()).toEqual(provisionedIds);
  });

  it('runs an unqualified invocation on $LATEST, which the provisioned containers do not serve (a cold start, as on AWS)', async () => {
    const r = await runner.invoke(RECONCILE, EMPTY_BATCH);
    expect([r.coldStart, r.provisioned, r.version]).toEqual([true, false, '$LATEST']);
    await expect(runner.invoke(RECONCILE, EMPTY_BATCH, 'live')).rejects.toThrow('no such alias or version');
  });

  it('delivers the queue through the alias: the event source mapping runs in a provisioned container', async () => {
    runner.startTriggers();
    const before = records.length;
    const queue = runner.queue('EventQueue');
    // Not a CloudEvent: the reconcile function refuses the record, which is all this test needs of it.
    await runner.sqs.client.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: '{}', MessageGroupId: 'g', MessageDeduplicationId: 'd1' }));
    const deadline = Date.now() + 30_000;
    while (!records.slice(before).some((r) => r.trigger === 'sqs') && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const sqs = records.slice(before).find((r) => r.trigger === 'sqs');
    expect(sqs, 'no SQS invocation within 30 s').toBeDefined();
    expect([sqs?.coldStart, sqs?.provisioned, sqs?.version]).toEqual([false, true, '1']);
    await runner.stopTriggers();
  });

  it('replaces a provisioned container that dies, as Lambda keeps the configured number initialized', async () => {
    const pool = runner.fn(RECONCILE);
    const [victim] = pool.provisionedContainers();
    victim?.kill();
    await victim?.exited;
    const deadline = Date.now() + 20_000;
    while (pool.provisionedContainers().length < PROVISIONED && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const now = pool.provisionedContainers().map((c) => c.id);
    expect(now).toHaveLength(PROVISIONED);
    expect(now).not.toContain(victim?.id);
    expect(pool.provisionedStats().inits).toBe(PROVISIONED + 1);
    expect(pool.stats().coldStarts).toBe(2); // the on-demand one and the $LATEST one above: a replacement is not a cold start
  });
});

describe('the Lambda runner without provisioned concurrency (the default)', () => {
  let runner: LambdaRunner;
  beforeAll(async () => {
    runner = await LambdaRunner.start({ serviceDir: without.serviceDir, startTriggers: false, ssmParameters: SSM });
  }, 120_000);
  afterAll(async () => {
    await runner?.stop();
  });

  it('starts no container before an invocation, and the first invocation is a cold start of $LATEST', async () => {
    const pool = runner.fn(RECONCILE);
    expect(pool.containers()).toEqual([]);
    expect(pool.provisionedStats()).toEqual({ provisionedConcurrency: 0, containers: 0, inits: 0, initMs: 0, invocations: 0 });
    const r = await runner.invoke(RECONCILE, EMPTY_BATCH);
    expect([r.coldStart, r.provisioned, r.version]).toEqual([true, false, '$LATEST']);
    expect(r.initMs).toBeGreaterThan(0);
    await expect(runner.invoke(RECONCILE, EMPTY_BATCH, 'provisioned')).rejects.toThrow('no such alias or version');
  });
});
