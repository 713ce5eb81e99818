import { describe, expect, it } from 'vitest';
import { parseStatusArgs } from '#local/status-args.ts';
import {
  explainOwner,
  formatState,
  formatStatusDetail,
  formatStatusRows,
  formatUnreachableClusters,
  isLeftAlone,
  needsAttention,
  STATE_LABEL,
  statusExitCode,
  summarizeStates,
  toStatusDocument,
  unreachableClustersOf,
} from '#local/status-format.ts';
import { outOfSyncNodes } from '#local/pipeline-report.ts';
import { PausedBy, SyncState, TaintOwner, type TaintStatus } from '#local/taint-status.ts';
import { ConfigError } from '#shared/errors.ts';

describe('Function: parseStatusArgs()', () => {
  it('defaults to every Machine in every namespace, as a table, in self mode', () => {
    expect(parseStatusArgs([], {})).toEqual({ help: false, machine: undefined, kubeconfig: undefined, context: undefined, namespace: undefined, output: 'table', mode: 'self', pods: false });
  });

  it('reads kubectl-style flags and one Machine by name', () => {
    // Act
    const a = parseStatusArgs(['gpu-0', '--kubeconfig', '/k', '--context=prod', '-n', 'pools', '-o', 'yaml', '--capi', '--pods'], {});

    // Assess
    expect(a).toEqual({ help: false, machine: 'gpu-0', kubeconfig: '/k', context: 'prod', namespace: 'pools', output: 'yaml', mode: 'capi', pods: true });
  });

  it.each([
    [['-h'], { help: true }],
    [['--help'], { help: true }],
    [['-o', 'wide'], { output: 'wide' }],
    [['--output=json'], { output: 'json' }],
    [['--namespace', 'x'], { namespace: 'x' }],
  ])('%j → %j', (argv, want) => {
    expect(parseStatusArgs(argv, {})).toMatchObject(want);
  });

  it('takes the namespace from MACHINE_NAMESPACE and the mode from CLUSTER_MODE unless flags say otherwise', () => {
    expect(parseStatusArgs([], { MACHINE_NAMESPACE: 'a', CLUSTER_MODE: 'capi' })).toMatchObject({ namespace: 'a', mode: 'capi' });
    expect(parseStatusArgs(['-n', 'b', '--self'], { MACHINE_NAMESPACE: 'a', CLUSTER_MODE: 'capi' })).toMatchObject({ namespace: 'b', mode: 'self' });
  });

  it.each([
    [['-o', 'xml'], '--output: must be one of table, wide, json, yaml, got "xml"'],
    [['--bogus'], "Unknown option '--bogus'"],
    [['a', 'b'], 'one MACHINE at most, got "a" "b"'],
    [['--context', ''], '--context: must not be empty'],
    [['--mode=both'], '--mode: must be capi or self, got "both"'],
    [['-n'], "Option '-n, --namespace <value>' argument missing"],
  ])('refuses %j, quoting what was wrong', (argv, message) => {
    expect(() => parseStatusArgs(argv, {})).toThrow(ConfigError);
    expect(() => parseStatusArgs(argv, {})).toThrow(message);
  });
});

const declared = { key: 'gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always', source: 'spec.taints' } as const;
const inSync: TaintStatus = {
  machine: 'pools/gpu-0',
  node: 'gpu-0',
  state: SyncState.inSync,
  initialized: true,
  desired: [declared],
  actual: [
    { taint: { key: 'gpu', value: 'a100', effect: 'NoSchedule' }, owner: TaintOwner.tracked, declaredAs: declared },
    { taint: { key: 'x', effect: 'NoExecute' }, owner: TaintOwner.foreign },
  ],
};
const invalid: TaintStatus = {
  machine: 'pools/broken-0',
  node: 'broken-0',
  state: SyncState.invalidDeclaration,
  initialized: true,
  desired: [],
  actual: [{ taint: { key: 'gpu', value: 'a100', effect: 'NoSchedule' }, owner: TaintOwner.tracked }],
  reason: 'spec.taints[0].effect: must be one of NoSchedule, PreferNoSchedule, NoExecute',
};

describe('Function: formatStatusRows()', () => {
  it('prints one row per Machine with kubectl-style columns', () => {
    expect(formatStatusRows([inSync, invalid])).toEqual([
      'NAMESPACE   MACHINE    NODE       STATE                              DECLARED   NODE TAINTS',
      'pools       gpu-0      gpu-0      in sync                            1          2',
      'pools       broken-0   broken-0   invalid declaration (left alone)   0          1',
    ]);
  });

  it('adds what is declared, what the Node has with owners, and why, with -o wide', () => {
    const [header, first, second] = formatStatusRows([inSync, invalid], true);
    expect(header).toMatch(/DECLARES\s+NODE HAS\s+WHY$/);
    expect(first).toMatch(/gpu=a100:NoSchedule@Always\s+gpu=a100:NoSchedule\(tracked\),x:NoExecute\(foreign\)$/);
    expect(second).toMatch(/<none>\s+gpu=a100:NoSchedule\(tracked\)\s+spec\.taints\[0\]\.effect: must be one of NoSchedule, PreferNoSchedule, NoExecute$/);
  });

  it('says when there is nothing', () => {
    expect(formatStatusRows([])).toEqual(['No Machines found.']);
  });
});

describe('Function: formatStatusDetail()', () => {
  it('shows one Machine in detail with its overridden and cancelled declarations', () => {
    const lines = formatStatusDetail(inSync, [
      { id: 'gpu:NoSchedule', source: 'taints.capi-taint-propagator.dev/class', by: 'spec.taints', cancelled: false },
      { id: 'spot:PreferNoSchedule', source: 'taints.capi-taint-propagator.dev/class', by: 'taints.capi-taint-propagator.dev/cluster', cancelled: true },
    ]);
    expect(lines.slice(-2)).toEqual([
      '    overridden gpu:NoSchedule from class annotation by spec',
      '    cancelled  spot:PreferNoSchedule from class annotation by cluster annotation',
    ]);
    expect(lines[1]).toBe('pools/gpu-0 -> gpu-0  in sync');
  });

  it('never calls a tracked taint "no longer declared" when the declaration is invalid', () => {
    const lines = formatStatusDetail(invalid, []);
    expect(lines).toContain('    has      gpu=a100:NoSchedule  tracked (kept while the declaration is invalid)');
    expect(lines.join('\n')).not.toContain('no longer declared');
    expect(explainOwner({ taint: { key: 'a', effect: 'NoSchedule' }, owner: TaintOwner.tracked }, SyncState.malformedAnnotation)).toBe('tracked (kept while the tracking annotation is malformed)');
  });
});

describe('One vocabulary for the verdicts', () => {
  it('has a label for every state of the shared planner', () => {
    for (const state of Object.values(SyncState)) expect(STATE_LABEL[state], state).toMatch(/\w/);
    expect(formatState({ state: SyncState.outOfSync })).toBe('out of sync');
  });

  it.each([
    [SyncState.inSync, false, false],
    [SyncState.outOfSync, true, false],
    [SyncState.nodeMissing, true, false],
    [SyncState.invalidDeclaration, false, true],
    [SyncState.malformedAnnotation, false, true],
    [SyncState.machineDeleting, false, true],
    [SyncState.noNode, false, false],
    [SyncState.waitingForUpstream, false, false],
    [SyncState.paused, false, true],
  ])('%s: needs attention %s, left alone %s', (state, attention, leftAlone) => {
    expect([needsAttention({ state }), isLeftAlone({ state })]).toEqual([attention, leftAlone]);
  });
});

describe('Paused pairs (Cluster API\'s pause)', () => {
  const paused = (pausedBy: PausedBy, reason: string): TaintStatus => ({ ...inSync, state: SyncState.paused, pausedBy, reason });
  const byCluster = paused(PausedBy.cluster, 'Cluster pools/c1 has spec.paused: the Node is left as it is until the pause ends');
  const byMachine = paused(PausedBy.machine, 'Machine pools/gpu-0 has the cluster.x-k8s.io/paused annotation: the Node is left as it is until the pause ends');

  it('names whose pause it is in the table, and gives the reason with -o wide', () => {
    // Act
    const rows = formatStatusRows([byCluster, { ...byMachine, machine: 'pools/gpu-1', node: 'gpu-1' }, { ...paused(PausedBy.machinePool, 'x'), machine: 'pools/mp', machinePool: true }]);
    const [, wide] = formatStatusRows([byCluster], true);

    // Assess
    expect(rows.slice(1).map((r) => r.split(/\s{3,}/)[3])).toEqual(['paused (Cluster spec.paused)', 'paused (Machine annotation)', 'paused (MachinePool annotation)']);
    expect(wide).toMatch(/Cluster pools\/c1 has spec\.paused: the Node is left as it is until the pause ends$/);
  });

  it('is state paused with its reason and whose pause in -o json, and not counted out of sync', () => {
    // Act
    const doc = toStatusDocument([{ status: byMachine, overrides: [] }], true);

    // Assess
    expect(doc).toMatchObject({ kind: 'TaintStatus', state: 'paused', pausedBy: 'Machine', stateLabel: 'paused (Machine annotation)', reason: byMachine.reason });
    expect(statusExitCode([byCluster, byMachine])).toBe(0);
    expect(outOfSyncNodes([byCluster])).toEqual([{ node: 'gpu-0', state: 'paused (Cluster spec.paused)' }]);
  });
});

describe('Function: toStatusDocument()', () => {
  it('is a TaintStatusList for many and a TaintStatus for one Machine, with the label and overrides', () => {
    expect(toStatusDocument([{ status: inSync, overrides: [] }, { status: invalid, overrides: [] }], false)).toMatchObject({ kind: 'TaintStatusList', items: [{ machine: 'pools/gpu-0', state: 'in-sync', stateLabel: 'in sync' }, { machine: 'pools/broken-0' }] });
    expect(toStatusDocument([{ status: invalid, overrides: [] }], true)).toMatchObject({ kind: 'TaintStatus', machine: 'pools/broken-0', stateLabel: 'invalid declaration (left alone)', overrides: [] });
  });
});

describe('Workload clusters whose Nodes could not be listed', () => {
  // As local/cluster-status.ts reads them: the state is unknown, so the planner's "Node missing" is replaced in the words.
  const unreachable = (machine: string, cluster: string, reason: string): TaintStatus & { unreachableCluster: { cluster: string; reason: string } } => ({
    machine,
    node: `${machine.split('/')[1]}-node`,
    state: SyncState.nodeMissing,
    initialized: false,
    desired: inSync.desired,
    actual: [],
    reason: `cluster ${cluster}: ${reason}`,
    unreachableCluster: { cluster, reason },
  });
  const refused = 'fetch failed (connect ECONNREFUSED 127.0.0.1:41234)';
  const statuses = [inSync, unreachable('fleet/m1', 'fleet/wc-2', refused), unreachable('fleet/m2', 'fleet/wc-2', refused), unreachable('fleet/m3', 'fleet/wc-1', 'HTTP 401: Unauthorized')];

  it('names each cluster once, sorted, with its reason, and says the state of its Machines is unknown', () => {
    // Act
    const lines = formatUnreachableClusters(unreachableClustersOf(statuses));

    // Assess
    expect(lines).toEqual([
      '2 unreachable clusters (Nodes could not be listed; the state of their Machines is unknown):',
      '  fleet/wc-1  HTTP 401: Unauthorized',
      `  fleet/wc-2  ${refused}`,
    ]);
    expect(formatUnreachableClusters(unreachableClustersOf([inSync]))).toEqual([]);
  });

  it('labels their rows `cluster unreachable` (not "Node missing") in the table, the summary and the documents', () => {
    // Act
    const rows = formatStatusRows(statuses, true);
    const doc = toStatusDocument(statuses.map((status) => ({ status, overrides: [] })), false) as { items: { stateLabel: string }[]; unreachableClusters: unknown };

    // Assess
    expect(rows[2]).toMatch(/^fleet\s+m1\s+m1-node\s+cluster unreachable\s+1\s+0\s+gpu=a100:NoSchedule@Always\s+<none>\s+cluster fleet\/wc-2 unreachable \(see below\)$/);
    expect(summarizeStates(statuses)).toBe('1 in sync, 3 cluster unreachable');
    expect(formatState(statuses[1] as TaintStatus)).toBe('cluster unreachable');
    expect(doc.items.map((i) => i.stateLabel)).toEqual(['in sync', 'cluster unreachable', 'cluster unreachable', 'cluster unreachable']);
    expect(doc.unreachableClusters).toEqual([
      { cluster: 'fleet/wc-1', reason: 'HTTP 401: Unauthorized' },
      { cluster: 'fleet/wc-2', reason: refused },
    ]);
  });

  it.each([
    ['all in sync', [inSync], 0],
    ['an invalid declaration (left alone)', [inSync, invalid], 0],
    ['a Node out of sync', [inSync, { ...inSync, state: SyncState.outOfSync }], 3],
    ['an unreachable cluster, even with a Node out of sync', [{ ...inSync, state: SyncState.outOfSync }, ...statuses], 4],
  ] as const)('exits with the right status: %s', (_name, given, code) => {
    expect(statusExitCode(given)).toBe(code);
  });
});
