import { describe, expect, it } from 'vitest';
import { formatAutoscalerRows } from '#local/autoscaler-status.ts';

describe('formatAutoscalerRows', () => {
  it('prints nothing without node groups, and one aligned line per node group', () => {
    expect(formatAutoscalerRows([])).toEqual([]);
    const lines = formatAutoscalerRows([
      { kind: 'MachineDeployment', namespace: 'ns', name: 'gpu', state: 'in-sync', assumed: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }], newNode: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule' }], matches: true },
      { kind: 'MachinePool', namespace: 'ns', name: 'p', state: 'foreign', assumed: [], newNode: [{ key: 'x', effect: 'NoExecute' }], matches: false, annotation: 'bad', desired: 'x:NoExecute' },
      { kind: 'MachineSet', namespace: 'ns', name: 's', state: 'invalid', assumed: [], matches: false },
    ]);
    expect(lines[0]).toMatch(/^Cluster autoscaler/);
    expect(lines[1]?.split(/\s{2,}/)).toEqual(['NODE GROUP', 'AUTOSCALER ASSUMES', 'NEW NODES GET', 'MATCH', 'ANNOTATION']);
    expect(lines[2]?.split(/\s{2,}/)).toEqual(['MachineDeployment/ns/gpu', 'gpu=a100:NoSchedule', 'gpu=a100:NoSchedule', 'yes', 'in-sync']);
    expect(lines[3]?.split(/\s{2,}/)).toEqual(['MachinePool/ns/p', '<none>', 'x:NoExecute', 'no', 'foreign (would write "x:NoExecute")']);
    expect(lines[4]?.split(/\s{2,}/)).toEqual(['MachineSet/ns/s', '<none>', '(invalid declaration)', 'no', 'invalid']);
  });
});
