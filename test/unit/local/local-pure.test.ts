import { describe, expect, it } from 'vitest';
import { loadLocalConfig } from '#local/local-config.ts';
import { NODE_LIST_FAILED, createActivityFilter, emptyCounters, formatReport, outOfSyncNodes } from '#local/pipeline-report.ts';
import { explainOwner, formatStatusRows, formatStatusTable, summarizeStates } from '#local/status-format.ts';
import { ConfigError } from '#shared/errors.ts';
import { SyncState, TaintOwner, type TaintStatus } from '#local/taint-status.ts';

describe('Function: loadLocalConfig()', () => {
  it('defaults to self mode, the product startup gate, upstream-owned spec.taints and short local backoff', () => {
    // Act
    const c = loadLocalConfig({}, []);

    // Assess
    expect(c).toMatchObject({ kubeconfig: undefined, mode: 'self', retryBaseSeconds: 1, retryMaxSeconds: 30, maxReceiveCount: 5, visibilityTimeoutSeconds: 30, reportIntervalSeconds: 2 });
    expect(c.startupTaint).toEqual({ key: 'taints.capi-taint-propagator.dev/uninitialized', effect: 'NoSchedule' });
    expect(c.specTaintsOwner).toBe('upstream');
  });

  it('runs every shard of FORWARDER_SHARDS, or only FORWARDER_SHARD when set (capi mode only)', () => {
    expect(loadLocalConfig({}, [])).toMatchObject({ shards: 1, shard: undefined });
    expect(loadLocalConfig({ FORWARDER_SHARDS: '3' }, ['--capi'])).toMatchObject({ shards: 3, shard: undefined });
    expect(loadLocalConfig({ FORWARDER_SHARDS: '3', FORWARDER_SHARD: '2' }, ['--capi'])).toMatchObject({ shards: 3, shard: 2 });
    expect(() => loadLocalConfig({ FORWARDER_SHARDS: '3' }, [])).toThrow(/FORWARDER_SHARDS: must be 1 with CLUSTER_MODE=self/);
  });

  it.each([
    { env: { CLUSTER_MODE: 'capi' }, argv: [], mode: 'capi' },
    { env: {}, argv: ['--capi'], mode: 'capi' },
    { env: { CLUSTER_MODE: 'capi' }, argv: ['--self'], mode: 'self' },
    { env: {}, argv: ['--mode=capi'], mode: 'capi' },
  ])('takes the mode from $argv over $env', ({ env, argv, mode }) => {
    expect(loadLocalConfig(env, argv).mode).toBe(mode);
  });

  it.each([
    { env: {}, argv: ['--bogus'] },
    { env: {}, argv: ['--mode=both'] },
    { env: { RETRY_BASE_SECONDS: '10', RETRY_MAX_SECONDS: '5' }, argv: [] },
    { env: { FIRST_ENABLED_AT: 'yesterday' }, argv: [] },
  ])('refuses $argv / $env with a ConfigError', ({ env, argv }) => {
    expect(() => loadLocalConfig(env, argv)).toThrow(ConfigError);
  });

  it('turns the startup gate off with STARTUP_TAINT_KEY=none', () => {
    expect(loadLocalConfig({ STARTUP_TAINT_KEY: 'none', KUBECONFIG: '/k' }, []).startupTaint).toBeNull();
  });
});

describe('Function: formatReport()', () => {
  it('prints non-zero outcomes, writes, conflicts, dead letters and the Nodes out of sync', () => {
    // Prepare
    const c = { ...emptyCounters(), forwarderActive: true, eventsForwarded: 5, eventsFiltered: 2, eventsSeen: 7, writes: 2, conflicts: 3, deadLettered: 1, deadLetterQueueDepth: 1, reconciles: { ...emptyCounters().reconciles, patched: 2, conflict: 3 } };

    // Act
    const lines = formatReport(c, [{ node: 'n1', state: 'out-of-sync' }]);

    // Assess
    expect(lines).toEqual([
      'events    forwarded 5, filtered 2 (seen 7)',
      'reconciles 5: patched 2, conflict 3',
      'writes    2, conflicts retried 3, dead-lettered 1 (DLQ depth 1)',
      'queue     0 waiting, 0 in flight',
      'Nodes     1 not in sync: n1 (out-of-sync)',
    ]);
  });

  it('says when the forwarder waits for the Lease and when every Node is in sync', () => {
    const lines = formatReport(emptyCounters(), []);
    expect(lines[0]).toContain('forwarder waiting for the Lease');
    expect(lines.at(-1)).toBe('Nodes     all in sync');
  });

  it('with a census, tells "no Machine", "waiting for a Node" and "in sync" apart', () => {
    const last = (outOfSync: { node: string; state: string }[], machines: number, waitingForNode: string[]): string | undefined =>
      formatReport(emptyCounters(), outOfSync, { machines, waitingForNode }).at(-1);
    expect(last([], 0, [])).toBe('Nodes     no Machine yet');
    expect(last([], 2, [])).toBe('Nodes     all 2 in sync');
    expect(last([], 3, ['ns/m-1'])).toBe('Nodes     2 in sync; 1 waiting for a Node: ns/m-1');
    expect(last([{ node: 'n1', state: 'out-of-sync' }], 3, ['ns/m-1'])).toBe('Nodes     1 in sync; 1 waiting for a Node: ns/m-1; 1 not in sync: n1 (out-of-sync)');
    expect(last([], 10, Array.from({ length: 10 }, (_, i) => `ns/m-${i}`))).toBe(
      'Nodes     0 in sync; 10 waiting for a Node: ns/m-0, ns/m-1, ns/m-2, ns/m-3, ns/m-4, ns/m-5, ns/m-6, ns/m-7, +2 more',
    );
  });
});

describe('Function: outOfSyncNodes()', () => {
  it('tells a failed Node list apart from a missing Node and leaves out Nodes that need nothing', () => {
    // Act
    const shown = outOfSyncNodes([
      { machine: 'ns/m1', node: 'n1', state: 'node-missing', nodeListError: 'cluster ns/c1: HTTP 503' },
      { machine: 'ns/m2', node: 'n2', state: 'node-missing' },
      { machine: 'ns/m3', node: 'n3', state: 'in-sync' },
      { machine: 'ns/m4', state: 'no-node' },
      { machine: 'ns/m5', node: 'n5', state: 'out-of-sync' },
      { machine: 'ns/m6', node: 'n6', state: 'invalid-declaration' },
      { machine: 'ns/m7', node: 'n7', state: 'machine-deleting' },
    ]);

    // Assess
    expect(shown).toEqual([
      { node: 'n1', state: NODE_LIST_FAILED },
      { node: 'n2', state: 'Node missing' },
      { node: 'n5', state: 'out of sync' },
      { node: 'n6', state: 'invalid declaration (left alone)' },
    ]);
    expect(formatReport(emptyCounters(), shown).at(-1)).toBe('Nodes     4 not in sync: n1 (Node list failed), n2 (Node missing), n5 (out of sync), n6 (invalid declaration (left alone))');
  });
});

describe('Function: createActivityFilter()', () => {
  it('lets each new message of an object and reason through once', () => {
    // Prepare
    const show = createActivityFilter();
    const a = { kind: 'Machine', object: 'ns/m', reason: 'InvalidTaintDeclaration', message: 'bad' };

    // Act + Assess
    expect([show(a), show(a), show({ ...a, message: 'worse' }), show({ ...a, object: 'ns/other' }), show({ ...a, kind: 'MachineDeployment' }), show(a)]).toEqual([true, false, true, true, true, true]);
  });
});

describe('Function: formatStatusTable()', () => {
  const status: TaintStatus = {
    machine: 'ns/m1',
    node: 'n1',
    state: SyncState.inSync,
    initialized: true,
    desired: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always', source: 'spec.taints' }],
    actual: [
      { taint: { key: 'gpu', value: 'a100', effect: 'NoSchedule' }, owner: TaintOwner.tracked, declaredAs: { key: 'gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always', source: 'spec.taints' } },
      { taint: { key: 'x', effect: 'NoExecute' }, owner: TaintOwner.foreign },
    ],
  };

  it('shows each Node taint with its owner and what the Machine declares', () => {
    expect(formatStatusTable([status])).toEqual([
      'MACHINE -> NODE  STATE',
      'ns/m1 -> n1      in sync',
      '    has      gpu=a100:NoSchedule  tracked (Always from spec)',
      '    has      x:NoExecute          foreign',
      '    declares gpu=a100:NoSchedule (Always, spec)',
    ]);
  });

  it('explains why a pair is not in sync and what the next write would leave', () => {
    const lines = formatStatusTable([{ ...status, state: SyncState.outOfSync, reason: 'the next reconcile would write the Node', expected: [{ key: 'gpu', value: 'h100', effect: 'NoSchedule' }] }]);
    expect(lines.slice(1, 2)).toEqual(['ns/m1 -> n1      out of sync']);
    expect(lines.slice(-2)).toEqual(['    why      the next reconcile would write the Node', '    expected gpu=h100:NoSchedule']);
  });

  it('names a MachinePool Node by its pool, in the table and in the kubectl-style rows', () => {
    const member: TaintStatus = { ...status, machine: 'ns/pool-a', node: 'pool-a-0', machinePool: true };
    expect(formatStatusTable([member])[1]).toBe('MachinePool ns/pool-a -> pool-a-0  in sync');
    expect(formatStatusRows([status, member]).slice(1).map((r) => r.split(/\s{3,}/).slice(0, 3))).toEqual([
      ['ns', 'm1', 'n1'],
      ['ns', 'machinepool/pool-a', 'pool-a-0'],
    ]);
  });

  it('summarizes states and names owners', () => {
    expect(summarizeStates([status, status, { ...status, state: SyncState.invalidDeclaration }])).toBe('2 in sync, 1 invalid declaration (left alone)');
    expect(explainOwner({ taint: { key: 'a', effect: 'NoSchedule' }, owner: TaintOwner.tracked })).toBe('tracked (no longer declared: the next write removes it)');
    expect(formatStatusTable([])).toEqual(['No Machines found.']);
  });
});
