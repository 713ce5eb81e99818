import { CoreV1Api } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { EVENT_DEDUP_WINDOW_MS, KubernetesEventRecorder } from '#shared/adapters/kubernetes/event-recorder.ts';
import { adminKubeConfig, createMachine, createNamespace, describeWithControlPlane } from '#test/support/control-plane.ts';

describeWithControlPlane('Class: KubernetesEventRecorder', () => {
  it('records an identical Event once per window, and again after it or with another message', async () => {
    // Prepare
    const kc = adminKubeConfig();
    const ns = await createNamespace(kc, 'events');
    const machine = await createMachine(kc, ns, 'm1');
    let now = new Date('2026-11-22T10:00:00Z');
    const recorder = new KubernetesEventRecorder(kc, { now: () => now });
    const object = { apiVersion: 'cluster.x-k8s.io/v1beta2', kind: 'Machine', namespace: ns, name: 'm1', uid: machine.metadata.uid };

    // Act
    await recorder.record(object, 'Warning', 'InvalidTaintDeclaration', 'same problem');
    await recorder.record(object, 'Warning', 'InvalidTaintDeclaration', 'same problem');
    await recorder.record(object, 'Warning', 'InvalidTaintDeclaration', 'another problem');
    now = new Date(now.getTime() + EVENT_DEDUP_WINDOW_MS + 1);
    await recorder.record(object, 'Warning', 'InvalidTaintDeclaration', 'same problem');

    // Assess
    const events = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=m1' });
    expect(events.items.map((e) => e.message).sort()).toEqual(['another problem', 'same problem', 'same problem']);
    expect(events.items.every((e) => e.involvedObject.uid === machine.metadata.uid && e.source?.component === 'capi-taint-propagator')).toBe(true);
  });
});
