/**
 * Every AWS call allowed, nothing extra granted: each call the functions make (test/fixtures/aws-calls/code.jsonl,
 * read from the code; test/fixtures/aws-calls/recorded/*.jsonl, the golden recordings of the tests that drive the
 * handlers' AWS clients; any recordings named in AWS_CALL_RECORDINGS, e.g. the e2e tier's or a Lambda-like runner's)
 * is evaluated with an IAM policy simulator against the PACKAGED template of each managementAuth mode: the calling
 * function's role (its inline policies), the queue policies, and the key policy of
 * the customer managed KMS key where one is used. A denied call fails the test; so does a granted action that no
 * recorded call exercises unless it is justified below (docs/security.md, "Least privilege in AWS, checked", says the same).
 *
 * AWS_CALL_RECORDINGS: files, directories (their *.jsonl) or globs, separated by commas.
 */
import { describe, expect, it, beforeAll } from 'vitest';
import { CODE_FIXTURE, RECORDED_DIR, callKey, readCalls, readRecordings, recordingSourcesFromEnv, type RecordedCall } from '#test/support/aws-calls.ts';
import {
  deploymentOf,
  describeEvaluated,
  evaluateCalls,
  grantId,
  grantsOf,
  loadDeployment,
  unexercised,
  type Deployment,
  type Evaluated,
  type Grant,
} from '#test/support/iam-check.ts';
import { PACKAGE_VARIANTS, packagedService, type Json } from '#test/support/serverless-package.ts';

/**
 * Granted but exercised by no recorded call, on purpose (key: `<role> <policy>/<sid> <action>`). Each reason is
 * repeated in docs/security.md. A grant listed here that a recording exercises, or that no longer exists in any
 * parameter set, fails the test too (the list is kept exact).
 */
const ROLES = { ReconcileNodeTaintsRole: 'reconcile', WatchForwarderRole: 'forwarder' } as const;
export const JUSTIFIED: Record<string, string> = Object.fromEntries([
  ...Object.entries(ROLES).flatMap(([role, policy]) => [
    [`${role} ${policy}/Logs logs:CreateLogStream`, "the Lambda runtime writes the function's logs with its role (code.jsonl, by lambda-runtime); no test runs the real runtime"],
    [`${role} ${policy}/Logs logs:PutLogEvents`, "the Lambda runtime writes the function's logs with its role (code.jsonl, by lambda-runtime); no test runs the real runtime"],
    [
      `${role} ${policy}/DecryptManagementKubeconfig kms:Decrypt`,
      'SSM or Secrets Manager decrypts the stored kubeconfig with the caller\'s permission (kms:ViaService; code.jsonl, by aws-service); no test runs the real service',
    ],
    ...['CreateNetworkInterface', 'DescribeNetworkInterfaces', 'DescribeSubnets', 'DeleteNetworkInterface', 'AssignPrivateIpAddresses', 'UnassignPrivateIpAddresses'].map((a) => [
      `${role} ${policy}-vpc-network-interfaces/ManageNetworkInterfaces ec2:${a}`,
      'Lambda manages the network interfaces of a function in a VPC with its role (AWS documents these six actions for it); no test runs Lambda in a VPC',
    ]),
  ]),
  ...['ReceiveMessage', 'DeleteMessage', 'GetQueueAttributes'].map((a) => [
    `ReconcileNodeTaintsRole reconcile/ConsumeEventQueue sqs:${a}`,
    "Lambda's SQS event source polls, deletes and reads the queue's attributes with the function's role (code.jsonl, by lambda-event-source); the e2e tier's local event source records the first two when its recordings are passed in AWS_CALL_RECORDINGS",
  ]),
]);

/** Every managementAuth mode that deploys (PACKAGE_VARIANTS), plus Secrets Manager with a customer managed KMS key. */
const LEAST_PRIVILEGE_VARIANTS: Record<string, readonly string[]> = {
  ...PACKAGE_VARIANTS,
  'secretsmanager + KMS key': [...PACKAGE_VARIANTS.secretsmanager, '--param=managementKubeconfigKmsKeyArn=arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab'],
};
const VARIANTS = Object.keys(LEAST_PRIVILEGE_VARIANTS);
const deployments = new Map<string, Deployment>();
let codeCalls: RecordedCall[] = [];
let recorded: RecordedCall[] = [];

beforeAll(async () => {
  const packaged = await Promise.all(VARIANTS.map(async (v) => [v, await packagedService(LEAST_PRIVILEGE_VARIANTS[v] as readonly string[])] as const));
  for (const [v, p] of packaged) deployments.set(v, await loadDeployment(v, p.serviceDir, p.template));
  codeCalls = await readCalls(CODE_FIXTURE);
  recorded = await readRecordings([RECORDED_DIR, ...recordingSourcesFromEnv(process.env['AWS_CALL_RECORDINGS'])]);
}, 480_000);

/** The result of the whole check for one deployment. */
async function check(d: Deployment, code: readonly RecordedCall[], rec: readonly RecordedCall[]) {
  const evaluatedCode = await evaluateCalls(d, code);
  const evaluatedRecorded = await evaluateCalls(d, rec);
  const denied = [...evaluatedCode, ...evaluatedRecorded].filter((e) => e.decision !== 'Allowed');
  const grants = grantsOf(d);
  const idle = unexercised(grants, evaluatedRecorded);
  return { evaluatedCode, evaluatedRecorded, denied, grants, idle };
}

const describeGrant = (g: Grant): string => `${grantId(g)} on ${g.resource}${g.conditional ? ' (with a condition)' : ''}`;

describe.each(VARIANTS)('least privilege of the packaged template (%s auth)', (variant) => {
  it('allows every call the functions make (read from the code, and every recorded call)', async () => {
    const d = deployments.get(variant) as Deployment;
    const { evaluatedCode, evaluatedRecorded, denied } = await check(d, codeCalls, recorded);
    expect(denied.map(describeEvaluated)).toEqual([]);
    // Something was evaluated for each function, including the calls of this auth mode.
    expect(new Set(evaluatedCode.map((e) => e.function.key))).toEqual(new Set(d.functions.keys()));
    expect(evaluatedRecorded.length).toBeGreaterThan(0);
    const auth = d.params['managementAuth'];
    const authAction = { ssm: 'ssm:GetParameter', secretsmanager: 'secretsmanager:GetSecretValue', eks: undefined }[auth as 'ssm'];
    if (authAction) expect(evaluatedRecorded.map((e) => e.action)).toContain(authAction);
    // With a customer managed key, the decrypt through this mode's service was evaluated (and allowed) for both roles.
    if (d.params['managementKubeconfigKmsKeyArn']) {
      const decrypts = evaluatedCode.filter((e) => e.action === 'kms:Decrypt').map((e) => `${e.function.key} ${e.context['kms:ViaService']} ${e.decision}`);
      expect(decrypts.sort()).toEqual([`reconcileNodeTaints ${auth}.eu-west-1.amazonaws.com Allowed`, `watchForwarder ${auth}.eu-west-1.amazonaws.com Allowed`]);
    }
  });

  it('grants nothing that no recorded call exercises, except the justified grants', async () => {
    const d = deployments.get(variant) as Deployment;
    const { idle } = await check(d, codeCalls, recorded);
    const unjustified = idle.filter((g) => !(grantId(g) in JUSTIFIED));
    // The list a reviewer reads (also on success): every grant no test exercises, with its justification.
    console.info(`[${variant}] granted, exercised by no recorded call:\n${idle.map((g) => `  ${describeGrant(g)} — ${JUSTIFIED[grantId(g)] ?? 'NOT JUSTIFIED'}`).join('\n') || '  (none)'}`);
    expect(unjustified.map(describeGrant)).toEqual([]);
  });
});

describe('the justifications and the recordings', () => {
  it('every justified grant exists in some parameter set and is exercised by no committed recording there', async () => {
    // Against the committed recordings only: recordings passed in AWS_CALL_RECORDINGS may exercise more.
    const committed = await readRecordings([RECORDED_DIR]);
    const idleAnywhere = new Set<string>();
    const grantedAnywhere = new Set<string>();
    for (const d of deployments.values()) {
      const { idle, grants } = await check(d, codeCalls, committed);
      for (const g of idle) idleAnywhere.add(grantId(g));
      for (const g of grants) grantedAnywhere.add(grantId(g));
    }
    expect(Object.keys(JUSTIFIED).filter((k) => !grantedAnywhere.has(k))).toEqual([]);
    expect(Object.keys(JUSTIFIED).filter((k) => !idleAnywhere.has(k))).toEqual([]);
  });

  it('every recorded call is one the code fixture lists (the fixture is the complete list of calls)', () => {
    const listed = new Set(codeCalls.map((c) => callKey({ ...c, context: undefined })));
    const unlisted = recorded.filter((c) => !listed.has(callKey({ ...c, context: undefined })));
    expect(unlisted.map((c) => `${c.origin}: ${c.function} ${c.action} ${c.resource}`)).toEqual([]);
  });
});

describe('the check itself', () => {
  /** A copy of the ssm deployment whose template has been changed by `edit`. */
  function edited(edit: (template: Json) => void): Deployment {
    const d = deployments.get('ssm') as Deployment;
    const template = structuredClone(d.template);
    edit(template);
    return deploymentOf('ssm (edited)', template, {
      region: d.region,
      stage: d.stage,
      service: d.service,
      params: { ...d.params },
      functionNames: Object.fromEntries([...d.functions.values()].map((f) => [f.key, f.name])),
    });
  }
  /** The role's statement with this Sid, in the first policy (where the function's own statements are). */
  const statement = (template: Json, role: string, sid: string): Json => {
    const found = (template.Resources[role].Properties.Policies[0].PolicyDocument.Statement as Json[]).find((s) => s?.Sid === sid || s?.['Fn::If']?.[1]?.Sid === sid);
    if (!found) throw new Error(`no statement ${sid} in ${role}`);
    return found;
  };

  it('fails when an action the code needs is removed from a role (sqs:ChangeMessageVisibility from the reconcile role)', async () => {
    const d = edited((t) => {
      const s = statement(t, 'ReconcileNodeTaintsRole', 'ConsumeEventQueue');
      s.Action = (s.Action as string[]).filter((a) => a !== 'sqs:ChangeMessageVisibility');
    });
    const { denied } = await check(d, codeCalls, recorded);
    expect(denied.map((e: Evaluated) => `${e.function.key} ${e.action} ${e.decision}`)).toEqual(expect.arrayContaining(['reconcileNodeTaints sqs:ChangeMessageVisibility ImplicitlyDenied']));
    expect(new Set(denied.map((e) => e.action))).toEqual(new Set(['sqs:ChangeMessageVisibility']));
  });

  it('fails when a queue policy denies a caller (the forwarder role left out of the event queue\'s senders)', async () => {
    const d = edited((t) => {
      const s = (t.Resources.EventQueuePolicy.Properties.PolicyDocument.Statement as Json[]).find((x) => x.Sid === 'OnlyTheForwarderAndReissuesSend');
      const arns = s.Condition.ArnNotEquals['aws:PrincipalArn'] as Json[];
      s.Condition.ArnNotEquals['aws:PrincipalArn'] = arns.filter((a) => JSON.stringify(a) !== JSON.stringify({ 'Fn::GetAtt': ['WatchForwarderRole', 'Arn'] }));
    });
    const { denied } = await check(d, codeCalls, recorded);
    expect(denied.length).toBeGreaterThan(0);
    expect(new Set(denied.map((e) => `${e.function.key} ${e.action} ${e.decision}`))).toEqual(new Set(['watchForwarder sqs:SendMessage ExplicitlyDenied']));
  });

  it('fails when the KMS grant loses its condition value (kms:ViaService names another service)', async () => {
    const d = edited((t) => {
      const s = statement(t, 'WatchForwarderRole', 'DecryptManagementKubeconfig');
      const target = s['Fn::If'] ? s['Fn::If'][1] : s;
      target.Condition.StringEquals['kms:ViaService'] = 's3.eu-west-1.amazonaws.com';
    });
    const { denied } = await check(d, codeCalls, recorded);
    expect(new Set(denied.map((e) => `${e.function.key} ${e.action}`))).toEqual(new Set(['watchForwarder kms:Decrypt']));
  });

  it('lists an extra grant no call exercises (sqs:PurgeQueue added to the forwarder role)', async () => {
    const d = edited((t) => {
      const s = statement(t, 'WatchForwarderRole', 'PublishEvents');
      s.Action = [...(s.Action as string[]), 'sqs:PurgeQueue'];
    });
    const { idle, denied } = await check(d, codeCalls, recorded);
    expect(denied).toEqual([]);
    expect(idle.map(grantId).filter((id) => !(id in JUSTIFIED))).toEqual(['WatchForwarderRole forwarder/PublishEvents sqs:PurgeQueue']);
  });

  it('fails when a recorded call is missing from its role (a recording of a call the fixture and the template lack)', async () => {
    const d = deployments.get('eks') as Deployment;
    const stray: RecordedCall = { function: 'watch-forwarder', action: 'sqs:DeleteMessage', resource: 'arn:{partition}:sqs:{region}:{account}:{queue:QUEUE_URL}', origin: 'the check itself' };
    const { denied } = await check(d, codeCalls, [...recorded, stray]);
    expect(denied.map((e) => `${e.function.key} ${e.action} ${e.decision}`)).toEqual(['watchForwarder sqs:DeleteMessage ExplicitlyDenied']);
  });
});
