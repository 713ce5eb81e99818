import { describe, expect, it } from 'vitest';
import { DECLARATION_ANNOTATIONS } from '#shared/domain/declaration-keys.ts';
import { controllerMachineSetOf, withTemplateDeclarations } from '#shared/domain/template-declarations.ts';
import { toMachineSnapshot } from '#shared/adapters/kubernetes/machine-store.ts';

const [CLASS, CLUSTER, MACHINE] = DECLARATION_ANNOTATIONS;
const owner = (change: Record<string, unknown> = {}) => ({ apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'MachineSet', name: 'ms1', uid: 'u', controller: true, ...change });

describe('Module: template-declarations', () => {
  it("takes each declaration annotation the template sets from the template, keeps the Machine's other keys, and ignores the template's other annotations", () => {
    // Prepare
    const machine = { [MACHINE]: 'a=v1:NoSchedule', [CLASS]: 'own:NoSchedule', unrelated: 'm' };
    const template = { [MACHINE]: 'a=v2:NoSchedule', [CLUSTER]: 'c:NoSchedule', other: 't' };

    // Act
    const result = withTemplateDeclarations(machine, template);

    // Assess
    expect(result).toEqual({ [MACHINE]: 'a=v2:NoSchedule', [CLASS]: 'own:NoSchedule', [CLUSTER]: 'c:NoSchedule', unrelated: 'm' });
  });

  it("names the controlling MachineSet of Cluster API's group only", () => {
    expect(controllerMachineSetOf([owner()])).toBe('ms1');
    expect(controllerMachineSetOf([owner({ controller: false }), owner({ kind: 'MachineDeployment', name: 'md' })])).toBeUndefined();
    expect(controllerMachineSetOf([owner({ apiVersion: 'example.com/v1' })])).toBeUndefined();
    expect(controllerMachineSetOf('not a list')).toBeUndefined();
    expect(controllerMachineSetOf([null, 3, owner({ name: '' })])).toBeUndefined();
  });

  it("is read into the reconcile function's Machine snapshot", () => {
    // Prepare
    const object = { metadata: { namespace: 'fleet', name: 'm1', uid: 'u1', resourceVersion: '5', ownerReferences: [owner()] }, spec: { clusterName: 'wc1' } };

    // Act
    const snapshot = toMachineSnapshot(object, 'v1beta2');

    // Assess
    expect(snapshot.machineSet).toBe('ms1');
  });
});
