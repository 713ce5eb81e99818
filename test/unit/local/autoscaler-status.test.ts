import { describe, expect, it } from 'vitest';
import { formatAutoscalerRows } from '#local/autoscaler-status.ts';

describe('formatAutoscalerRows', () => {
  it('prints nothing without node groups, and one aligned line per node group', () => {
    expect(formatAutoscalerRows([])).toEqual([]);
    const lines = formatAutoscalerRows([
      { kind: 'MachineDeployment', namespace: 'ns', name: 'gpu', state: 'in-sync', assumed: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }], assumedBefore136: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }], newNode: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }], matches: true },
      { kind: 'MachinePool', namespace: 'ns', name: 'p', state: 'foreign', assumed: [], assumedBefore136: [], newNode: [{ key: 'x', effect: 'NoExecute' }], matches: false, annotation: 'bad', desired: 'x:NoExecute' },
      { kind: 'MachineSet', namespace: 'ns', name: 's', state: 'invalid', assumed: [], assumedBefore136: [], matches: false },
    ]);
    expect(lines[0]).toMatch(/^Cluster autoscaler/);
    expect(lines[1]?.split(/\s{2,}/)).toEqual(['NODE GROUP', 'AUTOSCALER ASSUMES', 'NEW NODES GET', 'MATCH', 'ANNOTATION']);
    expect(lines[2]?.split(/\s{2,}/)).toEqual(['MachineDeployment/ns/gpu', 'gpu=a100:NoSchedule', 'gpu=a100:NoSchedule', 'yes', 'in-sync']);
    expect(lines[3]?.split(/\s{2,}/)).toEqual(['MachinePool/ns/p', '<none>', 'x:NoExecute', 'no', 'foreign (would write "x:NoExecute")']);
    expect(lines[4]?.split(/\s{2,}/)).toEqual(['MachineSet/ns/s', '<none>', '(invalid declaration)', 'no', 'invalid']);
  });

  it('shows the reading of releases before 1.36.0 when it differs, and warns about counted startup taints', () => {
    const gpu = { key: 'gpu', effect: 'NoSchedule' };
    const warming = { key: 'warming', effect: 'NoSchedule' };
    const lines = formatAutoscalerRows([
      { kind: 'MachineDeployment', namespace: 'ns', name: 'old', state: 'foreign', assumed: [gpu], assumedBefore136: [], newNode: [gpu], matches: false, annotation: '', desired: 'gpu:NoSchedule' },
      { kind: 'MachineDeployment', namespace: 'ns', name: 'warm', state: 'in-sync', assumed: [warming], assumedBefore136: [warming], newNode: [warming], matches: true, countedStartupTaints: [warming] },
    ]);
    expect(lines[2]?.split(/\s{2,}/)).toEqual(['MachineDeployment/ns/old', 'gpu:NoSchedule (before 1.36: <none>)', 'gpu:NoSchedule', 'no', 'foreign (would write "gpu:NoSchedule")']);
    expect(lines[4]).toBe('WARNING MachineDeployment/ns/warm: the autoscaler counts OnInitialization warming:NoSchedule for scale from zero (docs/autoscaler.md, startup taints)');
  });
});
