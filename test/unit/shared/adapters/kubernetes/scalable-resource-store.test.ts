import { describe, expect, it } from 'vitest';
import { toScalableSnapshot } from '#shared/adapters/kubernetes/scalable-resource-store.ts';

describe('Function: toScalableSnapshot()', () => {
  const meta = { name: 'md', namespace: 'ns', uid: 'u', resourceVersion: '3' };
  const cases: ReadonlyArray<{ name: string; obj: Parameters<typeof toScalableSnapshot>[1]; want: string | undefined }> = [
    { name: 'takes the Cluster from spec.clusterName', obj: { metadata: { ...meta, labels: { 'cluster.x-k8s.io/cluster-name': 'label' } }, spec: { clusterName: 'spec' } }, want: 'spec' },
    { name: 'falls back to the cluster-name label', obj: { metadata: { ...meta, labels: { 'cluster.x-k8s.io/cluster-name': 'label' } }, spec: {} }, want: 'label' },
    { name: 'has none without either', obj: { metadata: meta }, want: undefined },
  ];

  it.each(cases)('$name', ({ obj, want }) => {
    // Act
    const snapshot = toScalableSnapshot('MachineDeployment', obj, 'v1beta2');

    // Assess
    expect(snapshot.clusterName).toBe(want);
    expect(Object.hasOwn(snapshot, 'clusterName')).toBe(want !== undefined);
  });
});
