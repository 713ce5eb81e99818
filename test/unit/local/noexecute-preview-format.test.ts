/**
 * The NoExecute preview of `npm run status` (docs/noexecute-preview.md): Machines, Nodes and pods in, the statuses the
 * shared planner computes, then the table block, the `--pods` detail and the `-o json` groups.
 */
import { describe, expect, it } from 'vitest';
import { addEvictionCounts, formatNoExecutePreview, formatStatusDetail, formatStatusTable, toStatusDocument } from '#local/status-format.ts';
import { taintStatusOf, type TaintStatus } from '#local/taint-status.ts';
import type { PodOnNode } from '#shared/domain/eviction-preview.ts';
import type { MachineFacts, NodeWithTaints } from '#shared/model/views.ts';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';

const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const MD = { 'cluster.x-k8s.io/deployment-name': 'md-0' };

function machine(name: string, annotations: Record<string, string>, labels: Record<string, string> = MD): MachineFacts {
  return { kind: 'Machine', apiVersion: 'cluster.x-k8s.io/v1beta2', namespace: 'default', name, uid: name, resourceVersion: '1', labels, annotations, specTaints: undefined, nodeName: name, deleting: false };
}

function node(name: string): NodeWithTaints {
  return { kind: 'Node', name, uid: `${name}-u`, resourceVersion: '7', labels: {}, annotations: { [OWN_TRACKING_ANNOTATION]: '' }, taints: [] };
}

const web = (name: string): PodOnNode => ({ namespace: 'app', name, tolerations: [], ownerKind: 'ReplicaSet' });
const db: PodOnNode = { namespace: 'app', name: 'db-0', tolerations: [{ key: 'maintenance', operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }], ownerKind: 'StatefulSet' };
const agent = (name: string): PodOnNode => ({ namespace: 'kube-system', name, tolerations: [{ operator: 'Exists' }], ownerKind: 'DaemonSet' });

/** Two Nodes of MachineDeployment md-0 with a @Preview, and a lone Machine whose next write adds a NoExecute taint. */
function statuses(): TaintStatus[] {
  const preview = { [MACHINE]: 'maintenance=true:NoExecute@Preview' };
  return [
    taintStatusOf({ machine: machine('md-0-a', preview), node: node('md-0-a'), pods: [web('web-1'), web('web-2'), db, agent('agent-a')] }),
    taintStatusOf({ machine: machine('md-0-b', preview), node: node('md-0-b'), pods: [web('web-3'), agent('agent-b')] }),
    taintStatusOf({ machine: machine('solo', { [MACHINE]: 'drain:NoExecute' }, {}), node: node('solo'), pods: [web('web-4')] }),
  ];
}

describe('Function: formatNoExecutePreview()', () => {
  it('sums the counts per node group, then one row per Node, and leaves @Preview Nodes in sync', () => {
    // Prepare
    const all = statuses();

    // Act
    const lines = formatNoExecutePreview(all);

    // Assess
    expect(all.map((s) => s.state)).toEqual(['in-sync', 'in-sync', 'out-of-sync']);
    expect(lines).toEqual([
      'NoExecute preview (what the taint-eviction controller would do once these taints are on the Node; @Preview: never applied):',
      'NODE GROUP / NODE                          NOEXECUTE TAINTS                     EVICT NOW       LATER   KEPT',
      'Machine default/solo (1 Node)              drain:NoExecute                              1           0      0',
      '  solo                                     drain:NoExecute                              1           0      0',
      'MachineDeployment default/md-0 (2 Nodes)   maintenance=true:NoExecute@Preview           3   1 (300 s)      2',
      '  md-0-a                                   maintenance=true:NoExecute@Preview           2   1 (300 s)      1',
      '  md-0-b                                   maintenance=true:NoExecute@Preview           1           0      1',
    ]);
  });

  it('lists every pod under its Node with --pods', () => {
    // Act
    const lines = formatNoExecutePreview(statuses().slice(0, 1), true);

    // Assess
    expect(lines.slice(-4)).toEqual([
      '      now        app/web-1 (ReplicaSet)',
      '      now        app/web-2 (ReplicaSet)',
      '      after 300s app/db-0 (StatefulSet)',
      '      kept       kube-system/agent-a (DaemonSet)',
    ]);
  });

  it('shows unknown counts and the reason when a Node\'s pods could not be read', () => {
    // Prepare
    const s = taintStatusOf({ machine: machine('md-0-a', { [MACHINE]: 'maintenance:NoExecute@Preview' }), node: node('md-0-a'), pods: { error: 'pods is forbidden' } });

    // Act
    const lines = formatNoExecutePreview([s]);

    // Assess
    expect(lines[2]).toMatch(/^MachineDeployment default\/md-0 \(1 Node\)\s+maintenance:NoExecute@Preview\s+\?\s+\?\s+\?$/);
    expect(lines.at(-1)).toBe('  md-0-a: pods not read: pods is forbidden');
  });

  it('prints nothing when no NoExecute taint is about to be added or previewed', () => {
    expect(formatNoExecutePreview([taintStatusOf({ machine: machine('m', { [MACHINE]: 'gpu:NoSchedule' }), node: node('m'), pods: [] })])).toEqual([]);
  });
});

describe('Function: formatStatusTable() and formatStatusDetail() with @Preview', () => {
  it('says what a Machine previews next to what it declares, and details the pods of one Machine', () => {
    // Prepare
    const [first] = statuses();

    // Act
    const table = formatStatusTable([first as TaintStatus]);
    const detail = formatStatusDetail(first as TaintStatus, []);

    // Assess
    expect(table).toContain('    previews maintenance=true:NoExecute (Preview, machine annotation)');
    expect(detail).toContain('      kept       kube-system/agent-a (DaemonSet)');
  });
});

describe('Function: toStatusDocument() with a NoExecute preview', () => {
  it('carries each Node\'s pods in its item and the sums per node group', () => {
    // Act
    const doc = toStatusDocument(statuses().map((status) => ({ status, overrides: [] })), false) as {
      items: { noExecutePreview?: { pods?: { name: string; evict: unknown }[] } }[];
      noExecutePreviewGroups: unknown[];
    };

    // Assess
    expect(doc.items[0]?.noExecutePreview?.pods?.map((p) => [p.name, p.evict])).toEqual([['web-1', 'now'], ['web-2', 'now'], ['db-0', { afterSeconds: 300 }], ['agent-a', 'never']]);
    expect(doc.noExecutePreviewGroups).toEqual([
      { nodeGroup: 'Machine default/solo', taints: ['drain:NoExecute'], nodes: 1, counts: { now: 1, later: 0, laterSeconds: [], kept: 0 } },
      { nodeGroup: 'MachineDeployment default/md-0', taints: ['maintenance=true:NoExecute@Preview'], nodes: 2, counts: { now: 3, later: 1, laterSeconds: [300], kept: 2 } },
    ]);
  });
});

describe('Function: addEvictionCounts()', () => {
  it('sums two Nodes\' counts', () => {
    const a = { now: 1, later: 1, laterSeconds: [300], kept: 0 };
    const b = { now: 2, later: 1, laterSeconds: [30], kept: 4 };
    expect(addEvictionCounts(a, b)).toEqual({ now: 3, later: 2, laterSeconds: [30, 300], kept: 4 });
  });
});
