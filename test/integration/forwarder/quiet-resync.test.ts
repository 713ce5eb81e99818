/**
 * A quiet fleet sends nothing, and drift is still healed within one resync (issue 52, point 3), against the real API
 * server: the forwarder's first list and its periodic resync (a short RESYNC_INTERVAL_SECONDS here) announce only the
 * Nodes whose reconcile may write (shared/policy/drift.ts). "Nothing was sent" is shown by a later marker: after the
 * resync's `Relisted` log, a change of a marker Node is the only message. Drift no watch event brings to the reconcile
 * is played by a lost message: the queue drops the message of the change that removed a Node's taint (as a message
 * dead-lettered would be), and the next resync announces that Node.
 */
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { CLUSTER_NAMESPACE_ANNOTATION, MACHINE_ANNOTATION, OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { MERGE_PATCH, adminKubeConfig, createMachine, createNamespace, createNode, describeWithControlPlane, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { sentMessages, sqsMock, startForwarder, type RunningForwarder } from './support.ts';

const DECLARATION = 'taints.capi-taint-propagator.dev/machine';
const GPU = { key: 'example.com/gpu', value: 'a', effect: 'NoSchedule' };

describeWithControlPlane('Watch-forwarder: quiet lists and the periodic resync', () => {
  let kc: KubeConfig;
  let core: CoreV1Api;
  const running: RunningForwarder[] = [];

  beforeAll(() => {
    kc = adminKubeConfig();
    core = kc.makeApiClient(CoreV1Api);
  });
  afterEach(async () => {
    await Promise.all(running.splice(0).map((r) => r.stop()));
  });

  /**
   * A namespace with `count` Nodes in sync with their Machines (each declares `example.com/gpu=a:NoSchedule`, its Node
   * carries it and the product's tracking annotation, linked as Cluster API links them) and a marker Node of no Machine.
   * Every SendMessageBatch succeeds; `drop` says which entries the queue loses (answered as sent, never delivered).
   */
  async function fleet(count: number, drop: (subject: string, change: string) => boolean = () => false) {
    const ns = await createNamespace(kc, 'quiet');
    const label = { 'quiet-test': uniqueName('sel') };
    const nodes = await Promise.all(
      Array.from({ length: count }, async () => {
        const [node, machine] = [uniqueName('node'), uniqueName('m')];
        await createNode(kc, node, { labels: label, taints: [GPU], annotations: { [MACHINE_ANNOTATION]: machine, [CLUSTER_NAMESPACE_ANNOTATION]: ns, [OWN_TRACKING_ANNOTATION]: 'example.com/gpu:NoSchedule' } });
        await createMachine(kc, ns, machine, { nodeName: node, annotations: { [DECLARATION]: 'example.com/gpu=a:NoSchedule' } });
        return node;
      }),
    );
    const marker = uniqueName('marker');
    await createNode(kc, marker, { labels: label });
    const dropped = new Set<string>();
    sqsMock.reset();
    sqsMock.on(SendMessageBatchCommand).callsFake((input: SendMessageBatchCommand['input']) => {
      for (const e of input.Entries ?? []) {
        const event = fromCloudEventBody(e.MessageBody ?? '');
        if (drop(event.subject, event.type.split('.').at(-2) ?? '')) dropped.add(event.id);
      }
      return { Successful: (input.Entries ?? []).map((e) => ({ Id: e.Id, MessageId: `m-${e.Id}`, MD5OfMessageBody: 'x' })), Failed: [] };
    });
    /** `<change> <subject>` of every message the queue kept, in order. */
    const delivered = () => sentMessages().filter((m) => !dropped.has(m.event.id)).map((m) => `${m.event.type.split('.').at(-2)} ${m.event.subject}`);
    const relisted: string[] = [];
    const logger = {
      info: (message: string, attrs: Record<string, unknown> = {}) => void (message === 'Relisted' && relisted.push(`${String(attrs['stream'])} resynced=${String(attrs['resynced'])}`)),
      warn: () => undefined,
      error: () => undefined,
      debug: () => undefined,
    };
    const fwd = startForwarder(
      kc,
      { clusterMode: 'self', stateNamespace: ns, leaseName: uniqueName('lease'), machineNamespace: ns, nodeLabelSelector: `quiet-test=${label['quiet-test']}`, forwarderId: uniqueName('fwd'), resyncIntervalSeconds: 2 },
      { logger: logger as never },
    );
    running.push(fwd);
    return { nodes, marker, fwd, delivered, dropped, relisted };
  }

  /** Sends the marker: a taint change of the marker Node (a modification, always forwarded); resolves once it arrived. */
  async function sendMarker(marker: string, delivered: () => string[], value: string): Promise<void> {
    await core.patchNode({ name: marker, body: { spec: { taints: [{ key: 'example.com/marker', value, effect: 'NoSchedule' }] } } }, MERGE_PATCH);
    await waitFor(() => delivered().includes(`modified nodes/${marker}`), { timeoutMs: 15_000, description: 'the marker arrived' });
  }

  it('sends nothing for a fleet in sync, at its first list and at a periodic resync', async () => {
    // Prepare
    const { marker, fwd, delivered, relisted } = await fleet(6);

    // Act: the first list, then a periodic resync of the Nodes and of the Machines, then the marker.
    await waitFor(() => relisted.some((r) => r.startsWith('nodes/self')) && relisted.some((r) => r.startsWith('machines')), { timeoutMs: 20_000, description: 'a periodic resync of the Node and Machine streams' });
    await sendMarker(marker, delivered, 'm1');

    // Assess: the marker only; each resync announced nothing itself, and its Relists were counted.
    expect(delivered()).toEqual([`modified nodes/${marker}`]);
    expect(relisted.filter((r) => r.startsWith('nodes/self') || r.startsWith('machines')).every((r) => r.endsWith('resynced=0'))).toBe(true);
    expect(fwd.telemetry.counts().Relists).toBeGreaterThanOrEqual(2);
  });

  it('heals within one resync a drift whose message was lost: the resync announces that Node, and only it', async () => {
    // Prepare: the queue loses the message of the change that drifts the first Node.
    let drifted = '';
    const { nodes, marker, delivered, dropped, relisted } = await fleet(4, (subject, change) => subject === `nodes/${drifted}` && change === 'modified');
    drifted = nodes[0] ?? '';
    await waitFor(() => relisted.some((r) => r.startsWith('nodes/self')), { timeoutMs: 20_000, description: 'a first periodic resync of the Nodes' });

    // Act: someone removes the product's taint from the Node; its message is lost.
    const after = await core.patchNode({ name: drifted, body: { spec: { taints: [] } } }, MERGE_PATCH);
    await waitFor(() => dropped.size > 0, { timeoutMs: 15_000, description: 'the drift forwarded, and its message lost' });
    await waitFor(() => delivered().includes(`resynced nodes/${drifted}`), { timeoutMs: 20_000, description: 'the next resync announced the drifted Node' });
    await sendMarker(marker, delivered, 'm1');

    // Assess: the drifted Node's resync (of the drifted version), then the marker; nothing for the Nodes in sync.
    expect(delivered()).toEqual([`resynced nodes/${drifted}`, `modified nodes/${marker}`]);
    const healed = sentMessages().find((m) => m.event.subject === `nodes/${drifted}` && m.event.type.endsWith('.resynced.v1'));
    expect(healed?.event.data).toMatchObject({ node: { resourceVersion: after.metadata?.resourceVersion } });
  });
});
