/**
 * The conformance runner: runVectors()/summarize() on inline vectors of every kind, and the CLI
 * `npm run conformance -- <file>` end to end (output, last line, exit codes) as conformance/README.md
 * specifies it.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runVectors, summarize, type CaseResult } from '#local/conformance/run-vectors.ts';

const A = 'cluster.x-k8s.io/taints-from-machine';
const always = { key: 'gpu', value: 'v', effect: 'NoSchedule', propagation: 'Always' };

const propagationPass = {
  kind: 'propagation',
  name: 'adds an Always taint',
  source: 'derived',
  machineTaints: [always],
  node: { taints: [], annotations: { other: 'x' } },
  expected: { taints: [{ key: 'gpu', value: 'v', effect: 'NoSchedule' }], annotations: { other: 'x', [A]: 'gpu:NoSchedule' }, changed: true },
};
const propagationFail = { ...propagationPass, name: 'expects the wrong value', expected: { ...propagationPass.expected, taints: [{ key: 'gpu', value: 'w', effect: 'NoSchedule' }] } };
const propagationError = {
  kind: 'propagation',
  name: 'refuses a malformed annotation',
  source: 'derived',
  machineTaints: [],
  node: { taints: [{ key: 'a', effect: 'NoSchedule' }], annotations: { [A]: 'junk' } },
  expected: { taints: [{ key: 'a', effect: 'NoSchedule' }], annotations: { [A]: 'junk' }, changed: false, error: 'invalid taint format: "junk"' },
};
const stepPass = {
  kind: 'nodeTaintStep',
  name: 'removes the uninitialized taint with the propagation',
  source: 'derived',
  featureGateEnabled: true,
  nodeOutdated: null,
  machineTaints: [always],
  node: { taints: [{ key: 'node.cluster.x-k8s.io/uninitialized', effect: 'NoSchedule' }], annotations: {} },
  expected: { taints: [{ key: 'gpu', value: 'v', effect: 'NoSchedule' }], annotations: { [A]: 'gpu:NoSchedule' }, changed: true },
};
const stepUnchanged = {
  ...stepPass,
  name: 'reports no change for a Node already right',
  node: { taints: [{ key: 'gpu', value: 'v', effect: 'NoSchedule' }], annotations: { [A]: 'gpu:NoSchedule' } },
  expected: { taints: [{ key: 'gpu', value: 'v', effect: 'NoSchedule' }], annotations: { [A]: 'gpu:NoSchedule' }, changed: false },
};
const stepError = { ...propagationError, kind: 'nodeTaintStep', name: 'step refuses a malformed annotation', featureGateEnabled: true, nodeOutdated: null };
const stepOutdated = { ...stepPass, name: 'outdated node', nodeOutdated: true };
const stepGateOff = { ...stepPass, name: 'gate off', featureGateEnabled: false };
const removePass = {
  kind: 'helper.removeNodeTaint',
  name: 'removes a taint',
  source: 'derived',
  node: { taints: [{ key: 'a', effect: 'NoSchedule' }, { key: 'b', effect: 'NoSchedule' }] },
  dropTaint: { key: 'a', effect: 'NoSchedule' },
  expected: { taints: [{ key: 'b', effect: 'NoSchedule' }], modified: true },
};
const removeFail = { ...removePass, name: 'expects no modification', expected: { ...removePass.expected, modified: false } };
const validation = (name: string, extra: Record<string, unknown>) => ({ kind: 'validation', name, source: 'derived', featureGateEnabled: true, ...extra });
const validationCases = [
  validation('accepts a taint', { object: 'Machine', controlPlaneMachine: false, taint: { key: 'a', effect: 'NoSchedule', propagation: 'Always' }, valid: true }),
  validation('no taints', { object: 'MachineDeployment', taint: null, valid: true }),
  validation('explicit empty list', { object: 'MachineSet', taints: [], valid: false }),
  validation('control-plane key on a control-plane Machine', { object: 'Machine', controlPlaneMachine: true, taint: { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule', propagation: 'Always' }, valid: true }),
  validation('control-plane key on a worker MachineSet', { object: 'MachineSet', taint: { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule', propagation: 'Always' }, valid: false }),
  validation('control-plane key in a ClusterClass', { object: 'ClusterClass', taint: { key: 'node-role.kubernetes.io/control-plane', effect: 'NoSchedule', propagation: 'Always' }, valid: true }),
];
const validationWrongAccept = validation('expects a valid taint to be rejected', { object: 'Machine', controlPlaneMachine: false, taint: { key: 'a', effect: 'NoSchedule', propagation: 'Always' }, valid: false });
const validationWrongReject = validation('expects a reserved key to be accepted', { object: 'Machine', controlPlaneMachine: false, taint: { key: 'node.kubernetes.io/x', effect: 'NoSchedule', propagation: 'Always' }, valid: true });

describe('Function: runVectors()', () => {
  const cases: ReadonlyArray<{ name: string; vector: Record<string, unknown>; want: Partial<CaseResult> & { difference?: unknown; why?: unknown } }> = [
    // --- passing ---
    { name: 'passes a propagation case', vector: propagationPass, want: { status: 'passed' } },
    { name: 'passes a propagation case that expects an error and an untouched Node', vector: propagationError, want: { status: 'passed' } },
    { name: 'passes a nodeTaintStep case', vector: stepPass, want: { status: 'passed' } },
    { name: 'passes a nodeTaintStep case without a write', vector: stepUnchanged, want: { status: 'passed' } },
    { name: 'passes a nodeTaintStep case that expects an error', vector: stepError, want: { status: 'passed' } },
    { name: 'passes a helper.removeNodeTaint case', vector: removePass, want: { status: 'passed' } },
    ...validationCases.map((vector) => ({ name: `passes a validation case: ${vector.name}`, vector, want: { status: 'passed' as const } })),
    // --- failing, with a readable difference ---
    {
      name: 'fails a propagation case and names the differing field',
      vector: propagationFail,
      want: { status: 'failed', difference: 'taints: expected [{"key":"gpu","value":"w","effect":"NoSchedule"}], got [{"key":"gpu","value":"v","effect":"NoSchedule"}]' },
    },
    { name: 'fails a removeNodeTaint case and names the flag', vector: removeFail, want: { status: 'failed', difference: 'modified: expected false, got true' } },
    { name: 'fails a validation case the product accepts', vector: validationWrongAccept, want: { status: 'failed', difference: 'valid: expected false, product accepted' } },
    {
      name: 'fails a validation case the product rejects, with the issues',
      vector: validationWrongReject,
      want: { status: 'failed', difference: expect.stringMatching(/^valid: expected true, product rejected \(spec\.taints\[0\]\.key: Invalid value: "node\.kubernetes\.io\/x": taint key must not have the prefix node\.kubernetes\.io\//) },
    },
    { name: 'fails an unknown kind', vector: { kind: 'mystery', name: 'x' }, want: { status: 'failed', difference: 'unknown kind "mystery"' } },
    { name: 'fails a case that cannot be evaluated instead of throwing', vector: { kind: 'propagation', name: 'broken', machineTaints: [] }, want: { status: 'failed', difference: expect.stringMatching(/^threw /) } },
    // --- skipped, with the README's reasons ---
    { name: 'skips a case with the feature gate off', vector: stepGateOff, want: { status: 'skipped', why: 'the product has no feature gate' } },
    { name: 'skips a nodeTaintStep case with an outdated Node', vector: stepOutdated, want: { status: 'skipped', why: 'the outdated-revision taint belongs to CAPI rollouts' } },
    { name: 'skips a MachinePool validation case', vector: validation('pool', { object: 'MachinePool', taint: null, valid: true }), want: { status: 'skipped', why: "MachinePool rules are the product's own" } },
    { name: 'skips a topologyMerge case', vector: { kind: 'topologyMerge', name: 't', clusterClassTaints: null, clusterTopologyTaints: null, expected: { taints: null } }, want: { status: 'skipped', why: "CAPI's topology controller merges ClusterClass and Cluster taints" } },
    { name: 'skips a helper.outdatedRevision case', vector: { kind: 'helper.outdatedRevision', name: 'o' }, want: { status: 'skipped', why: 'the outdated-revision taint belongs to CAPI rollouts' } },
  ];

  it.each(cases)('$name', ({ vector, want }) => {
    // Act
    const [result] = runVectors([vector]);

    // Assess
    expect(result).toEqual({ name: vector.name, ...want });
  });

  it('names a case without a name by its position', () => {
    // Act
    const results = runVectors([propagationPass, { kind: 'mystery' }]);

    // Assess
    expect(results.map((r) => r.name)).toEqual(['adds an Always taint', 'case #1']);
  });
});

describe('Function: summarize()', () => {
  it('counts passed, failed and skipped results', () => {
    // Prepare
    const results = runVectors([propagationPass, stepPass, propagationFail, stepGateOff, stepOutdated, removePass]);

    // Act
    const summary = summarize(results);

    // Assess
    expect(summary).toEqual({ passed: 3, failed: 1, skipped: 2 });
  });
});

describe('CLI: npm run conformance -- <file>', () => {
  const repo = resolve(import.meta.dirname, '../../..');
  const dir = mkdtempSync(join(tmpdir(), 'conformance-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  /** Runs the CLI with the project's node (vitest runs on it), returning exit code and output. */
  function runCli(...args: string[]): { code: number; stdout: string; stderr: string } {
    try {
      const stdout = execFileSync(process.execPath, ['--no-warnings=ExperimentalWarning', 'local/conformance.ts', ...args], { cwd: repo, encoding: 'utf8', stdio: 'pipe' });
      return { code: 0, stdout, stderr: '' };
    } catch (error) {
      const e = error as { status: number; stdout: string; stderr: string };
      return { code: e.status, stdout: e.stdout, stderr: e.stderr };
    }
  }
  function file(name: string, content: string): string {
    const path = join(dir, name);
    writeFileSync(path, content);
    return path;
  }

  const cases: ReadonlyArray<{ name: string; args: () => string[]; code: number; stdout: string[]; stderr?: RegExp }> = [
    {
      name: 'prints only the summary and exits 0 when every case passes or is skipped',
      args: () => [file('pass.json', JSON.stringify([propagationPass, stepPass, stepGateOff]))],
      code: 0,
      stdout: ['conformance: 2 passed, 0 failed, 1 skipped'],
    },
    {
      name: 'prints one line per failing case with its difference and exits 1',
      args: () => [file('fail.json', JSON.stringify([propagationPass, removeFail, validationWrongAccept]))],
      code: 1,
      stdout: [
        'FAIL expects no modification: modified: expected false, got true',
        'FAIL expects a valid taint to be rejected: valid: expected false, product accepted',
        'conformance: 1 passed, 2 failed, 0 skipped',
      ],
    },
    { name: 'counts an empty file of cases', args: () => [file('empty.json', '[]')], code: 0, stdout: ['conformance: 0 passed, 0 failed, 0 skipped'] },
    { name: 'exits 2 with a clear message on invalid JSON', args: () => [file('bad.json', '[{')], code: 2, stdout: [], stderr: /^conformance: cannot read .*bad\.json: / },
    { name: 'exits 2 when the JSON is not an array', args: () => [file('object.json', '{}')], code: 2, stdout: [], stderr: /is not a JSON array of cases/ },
    { name: 'exits 2 when the file does not exist', args: () => [join(dir, 'missing.json')], code: 2, stdout: [], stderr: /^conformance: cannot read .*missing\.json: .*ENOENT/ },
    { name: 'exits 2 with the usage without a file argument', args: () => [], code: 2, stdout: [], stderr: /^usage: npm run conformance -- <vectors\.json>/ },
  ];

  it.each(cases)('$name', ({ args, code, stdout, stderr }) => {
    // Act
    const run = runCli(...args());

    // Assess
    expect(run.code).toBe(code);
    expect(run.stdout.split('\n').filter((l) => l !== '')).toEqual(stdout);
    if (stderr) expect(run.stderr).toMatch(stderr);
  });

  const publicVectors = resolve(repo, '../shared/conformance/public.json');
  it('runs the public vectors with 0 failed (skipped when ../shared/conformance/public.json is absent)', (ctx) => {
    if (!existsSync(publicVectors)) {
      ctx.skip('../shared/conformance/public.json is not present in this checkout');
      return;
    }
    // Act
    const run = runCli(publicVectors);

    // Assess
    const last = run.stdout.trimEnd().split('\n').at(-1);
    expect(last).toMatch(/^conformance: \d+ passed, 0 failed, \d+ skipped$/);
    expect(run.code).toBe(0);
  });
});
