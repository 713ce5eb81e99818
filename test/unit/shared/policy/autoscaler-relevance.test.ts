import { describe, expect, it } from 'vitest';
import { AUTOSCALER_MAX_SIZE_ANNOTATION, AUTOSCALER_MIN_SIZE_ANNOTATION, AUTOSCALER_OWNED_ANNOTATION, AUTOSCALER_TAINTS_ANNOTATION } from '#shared/domain/autoscaler.ts';
import { autoscalerEventNeeded } from '#shared/policy/autoscaler-relevance.ts';
import { isNodeTaintEvent, messageGroupIdFor, parseEventType, subjectFor, type ScalableResourceEventData } from '#shared/contract/cloud-event.ts';
import { toMachinePoolFacts, toScalableFacts, type ScalableFacts } from '#shared/model/views.ts';
import { toScalableResourceEvent } from '#shared/contract/events.ts';

const SIZE = { [AUTOSCALER_MIN_SIZE_ANNOTATION]: '0', [AUTOSCALER_MAX_SIZE_ANNOTATION]: '3' };
const MACHINE = 'taints.capi-taint-propagator.dev/machine';

function mdJson(over: { annotations?: Record<string, string>; template?: Record<string, string>; labels?: Record<string, string>; owners?: unknown[]; rv?: string; taints?: unknown; deleting?: boolean } = {}): unknown {
  return {
    metadata: {
      name: 'gpu',
      namespace: 'ns',
      uid: 'u1',
      resourceVersion: over.rv ?? '5',
      labels: { 'cluster.x-k8s.io/cluster-name': 'c1' },
      annotations: { ...SIZE, 'unrelated.example.com/x': 'y', ...over.annotations },
      ...(over.owners ? { ownerReferences: over.owners } : {}),
      ...(over.deleting ? { deletionTimestamp: '2026-01-01T00:00:00Z' } : {}),
    },
    spec: {
      clusterName: 'c1',
      template: { metadata: { annotations: { 'other/x': '1', ...over.template }, labels: over.labels ?? {} }, spec: over.taints === undefined ? {} : { taints: over.taints } },
    },
  };
}

const facts = (over: Parameters<typeof mdJson>[0] = {}): ScalableFacts => {
  const f = toScalableFacts('MachineDeployment', mdJson(over));
  if (!f) throw new Error('no facts');
  return f;
};

describe('toScalableFacts / toMachinePoolFacts', () => {
  it('keeps only what decides the annotation', () => {
    const f = facts({ template: { [MACHINE]: 'a:NoSchedule', 'other/x': 'y' }, labels: { 'cluster.x-k8s.io/control-plane': '', other: 'y' }, owners: [{ kind: 'MachineDeployment', name: 'x' }] });
    expect(f).toMatchObject({ kind: 'MachineDeployment', labels: { 'cluster.x-k8s.io/cluster-name': 'c1' }, templateAnnotations: { [MACHINE]: 'a:NoSchedule' }, annotations: SIZE, templateLabels: { 'cluster.x-k8s.io/control-plane': '' }, ownedByMachineDeployment: true, clusterName: 'c1', specTaints: null, deleting: false });
    expect(toScalableFacts('MachineSet', { metadata: { name: 'x' } })).toBeUndefined();
    const bare = toScalableFacts('MachineSet', { metadata: { name: 'x', namespace: 'n', uid: 'u', resourceVersion: '1' } });
    expect(bare).toMatchObject({ kind: 'MachineSet', labels: {}, annotations: {}, templateAnnotations: {}, templateLabels: {}, ownedByMachineDeployment: false });
    expect(bare).not.toHaveProperty('clusterName');
  });

  it('keeps a MachinePool’s autoscaler annotations beside its declarations (its own over its template’s)', () => {
    const pool = (a: Record<string, string>) => toMachinePoolFacts({ metadata: { name: 'p', namespace: 'ns', uid: 'u', resourceVersion: '1', annotations: a }, spec: { template: { metadata: { annotations: { [MACHINE]: 'q:NoSchedule' } } } } });
    expect(pool({})?.annotations).toEqual({ [MACHINE]: 'q:NoSchedule' });
    const p = pool({ ...SIZE, [MACHINE]: 'p:NoSchedule' });
    expect(p?.annotations).toEqual({ ...SIZE, [MACHINE]: 'p:NoSchedule' });
  });
});

describe('autoscalerEventNeeded', () => {
  const declared = facts({ template: { [MACHINE]: 'a:NoSchedule' } });
  const written = facts({ template: { [MACHINE]: 'a:NoSchedule' }, annotations: { [AUTOSCALER_TAINTS_ANNOTATION]: 'a:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'a:NoSchedule' }, rv: '6' });
  const foreign = (v: string) => facts({ template: { [MACHINE]: 'a:NoSchedule' }, annotations: { [AUTOSCALER_TAINTS_ANNOTATION]: v }, rv: '7' });

  it('asks for a reconcile when a write is planned, never for a deletion or the echo of our write', () => {
    expect(autoscalerEventNeeded('added', undefined, declared)).toBe(true);
    expect(autoscalerEventNeeded('resynced', undefined, declared)).toBe(true);
    expect(autoscalerEventNeeded('deleted', undefined, declared)).toBe(false);
    expect(autoscalerEventNeeded('modified', declared, written)).toBe(false);
    expect(autoscalerEventNeeded('modified', undefined, facts())).toBe(false);
  });

  it('reports someone else’s value once per value, not on a resync', () => {
    expect(autoscalerEventNeeded('added', undefined, foreign('x:NoSchedule'))).toBe(true);
    expect(autoscalerEventNeeded('modified', declared, foreign('x:NoSchedule'))).toBe(true);
    expect(autoscalerEventNeeded('modified', foreign('x:NoSchedule'), { ...foreign('x:NoSchedule'), resourceVersion: '8' })).toBe(false);
    expect(autoscalerEventNeeded('modified', foreign('x:NoSchedule'), foreign('y:NoSchedule'))).toBe(true);
    expect(autoscalerEventNeeded('resynced', undefined, foreign('x:NoSchedule'))).toBe(false);
  });

  it('forwards a change of spec.template.spec.taints of a node group (the annotation carries them), not the echo', () => {
    const taints = [{ key: 'nvidia.com/gpu', value: 'present', effect: 'NoSchedule', propagation: 'Always' }];
    const specOnly = facts({ taints });
    expect(autoscalerEventNeeded('added', undefined, specOnly)).toBe(true);
    const echo = facts({ taints, annotations: { [AUTOSCALER_TAINTS_ANNOTATION]: 'nvidia.com/gpu=present:NoSchedule', [AUTOSCALER_OWNED_ANNOTATION]: 'nvidia.com/gpu=present:NoSchedule' }, rv: '6' });
    expect(autoscalerEventNeeded('modified', specOnly, echo)).toBe(false);
    // Cluster API's copy onto a MachineSet of the MachineDeployment never asks for a write.
    expect(autoscalerEventNeeded('added', undefined, { ...specOnly, kind: 'MachineSet', apiVersion: 'cluster.x-k8s.io/v1beta2', labels: {}, ownedByMachineDeployment: true })).toBe(false);
    const edited = facts({ taints: [{ ...taints[0], value: 'h100' }], annotations: echo.annotations, rv: '7' });
    expect(autoscalerEventNeeded('modified', echo, edited)).toBe(true);
  });

  it('passes the startup gate on: declaring it is invalid, so nothing is planned', () => {
    const gated = facts({ template: { [MACHINE]: 'gate:NoSchedule' } });
    expect(autoscalerEventNeeded('added', undefined, gated, { startupTaint: { key: 'gate', effect: 'NoSchedule' } })).toBe(false);
  });
});

describe('the ScalableResource event', () => {
  it('is typed, grouped and named per resource, and is not a Node event', () => {
    const e = toScalableResourceEvent(facts(), 'modified', { mode: 'capi', namespace: 'ns', name: 'c1' }, new Date('2026-01-01T00:00:00Z'));
    expect(e.type).toBe('io.github.capi-taint-propagator.scalableresource.modified.v1');
    expect(parseEventType(e.type)).toEqual({ kind: 'ScalableResource', change: 'modified' });
    expect(e.id).toBe('u1:5:modified:autoscaler');
    expect(e.subject).toBe('machinedeployments/ns/gpu');
    expect(messageGroupIdFor(e.data)).toBe('ns/c1/machinedeployment/ns/gpu');
    expect(subjectFor(e.data as ScalableResourceEventData)).toBe('machinedeployments/ns/gpu');
    expect(isNodeTaintEvent(e)).toBe(false);
  });
});
