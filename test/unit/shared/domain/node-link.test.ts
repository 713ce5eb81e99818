import { describe, expect, it } from 'vitest';
import { isNodeOfMachine } from '#shared/domain/node-link.ts';

describe('Function: isNodeOfMachine()', () => {
  const node = { name: 'n1', providerID: 'local://m1' };
  it.each([
    { name: 'same providerID, no nodeRef yet', machine: { providerID: 'local://m1' }, want: true },
    { name: 'same providerID, nodeRef names this Node', machine: { providerID: 'local://m1', nodeName: 'n1' }, want: true },
    { name: 'same providerID, nodeRef names another Node', machine: { providerID: 'local://m1', nodeName: 'n2' }, want: false },
    { name: 'another providerID', machine: { providerID: 'local://m2' }, want: false },
    { name: 'no providerID on the Machine', machine: {}, want: false },
    { name: 'an empty providerID on both', machine: { providerID: '' }, node: { name: 'n1', providerID: '' }, want: false },
    { name: 'a MachinePool (its Nodes follow status.nodeRefs)', machine: { kind: 'MachinePool' as const, providerID: 'local://m1' }, want: false },
  ])('$name → $want', ({ machine, node: n, want }) => {
    expect(isNodeOfMachine(machine, n ?? node)).toBe(want);
  });

  it('is false for a Node without a providerID', () => {
    expect(isNodeOfMachine({ providerID: 'local://m1' }, { name: 'n1' })).toBe(false);
  });
});
