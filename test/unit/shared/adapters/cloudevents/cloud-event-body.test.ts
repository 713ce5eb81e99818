import { describe, expect, it } from 'vitest';
import { fromCloudEventBody, toCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import type { TaintEvent } from '#shared/contract/cloud-event.ts';
import { MalformedEventError } from '#shared/errors.ts';

const nodeEvent: TaintEvent = {
  id: 'u-n1:7:added',
  source: '/clusters/fleet/wc1',
  type: 'io.github.capi-taint-propagator.node.added.v1',
  subject: 'nodes/n1',
  time: '2026-11-22T10:00:00.000Z',
  data: { kind: 'Node', cluster: { mode: 'capi', namespace: 'fleet', name: 'wc1' }, node: { name: 'n1', uid: 'u-n1', resourceVersion: '7' }, machine: { namespace: 'fleet', name: 'm1' }, observedAt: '2026-11-22T10:00:00.000Z' },
};
const machineEvent: TaintEvent = {
  id: 'u-m1:9:deleted',
  source: '/clusters/self',
  type: 'io.github.capi-taint-propagator.machine.deleted.v1',
  subject: 'machines/ns/m1',
  time: '2026-11-22T10:00:00.000Z',
  data: { kind: 'Machine', cluster: { mode: 'self' }, machine: { namespace: 'ns', name: 'm1', uid: 'u-m1', resourceVersion: '9' }, observedAt: '2026-11-22T10:00:00.000Z' },
};

const envelope = (): Record<string, unknown> => JSON.parse(toCloudEventBody(nodeEvent));
const mutated = (f: (e: Record<string, any>) => void): string => {
  const e = envelope();
  f(e);
  return JSON.stringify(e);
};

describe('Function: toCloudEventBody()', () => {
  it('writes a structured-mode CloudEvents 1.0 JSON body with the event attributes and object data', () => {
    // Act
    const body = JSON.parse(toCloudEventBody(nodeEvent));
    // Assess
    expect(body).toEqual({ specversion: '1.0', datacontenttype: 'application/json', id: nodeEvent.id, source: nodeEvent.source, type: nodeEvent.type, subject: nodeEvent.subject, time: nodeEvent.time, data: nodeEvent.data });
  });
});

describe('Function: fromCloudEventBody()', () => {
  it.each([nodeEvent, machineEvent])('round-trips $type', (event) => {
    expect(fromCloudEventBody(toCloudEventBody(event))).toEqual(event);
  });

  it("accepts the Node state and template hint of an earlier release's forwarder (still queued during an upgrade)", () => {
    // Prepare: the fields forwarders sent before events named objects only.
    const legacy = mutated((e) => {
      e.data.nodeState = { uid: 'u-n1', resourceVersion: '7', taints: [] };
      e.data.template = { machineSet: 'ms1' };
    });
    // Act
    const event = fromCloudEventBody(legacy);
    // Assess: parsed, not dead-lettered; the names are what the reconcile reads.
    expect(event.data.kind).toBe('Node');
    expect(event.id).toBe(nodeEvent.id);
  });

  const malformed: ReadonlyArray<{ name: string; body: string; reason: RegExp }> = [
    { name: 'not JSON', body: 'hello', reason: /not JSON/ },
    { name: 'a JSON array (batch mode)', body: JSON.stringify([envelope()]), reason: /not a JSON object/ },
    { name: 'specversion 0.3', body: mutated((e) => (e.specversion = '0.3')), reason: /specversion/ },
    { name: 'specversion 2.0', body: mutated((e) => (e.specversion = '2.0')), reason: /specversion/ },
    { name: 'no type', body: mutated((e) => delete e.type), reason: /CloudEvent|type/ },
    { name: 'an unknown type', body: mutated((e) => (e.type = 'io.github.capi-taint-propagator.node.rebooted.v1')), reason: /unknown event type/ },
    { name: 'an unknown version', body: mutated((e) => (e.type = 'io.github.capi-taint-propagator.node.added.v2')), reason: /unknown event type/ },
    { name: 'no source', body: mutated((e) => delete e.source), reason: /CloudEvent/ },
    { name: 'no id', body: mutated((e) => delete e.id), reason: /id is missing/ },
    { name: 'no time', body: mutated((e) => delete e.time), reason: /time is missing/ },
    { name: 'a time that is not a date-time', body: mutated((e) => (e.time = 'yesterday')), reason: /RFC 3339/ },
    { name: 'no subject', body: mutated((e) => delete e.subject), reason: /subject/ },
    { name: 'data as a JSON string', body: mutated((e) => (e.data = JSON.stringify(e.data))), reason: /data must be a JSON object/ },
    { name: 'no data', body: mutated((e) => delete e.data), reason: /data must be a JSON object/ },
    { name: 'data missing the node', body: mutated((e) => delete e.data.node), reason: /Node event schema/ },
    { name: 'data with an extra field', body: mutated((e) => (e.data.whole = { spec: {} })), reason: /Node event schema/ },
    { name: 'data with a bad observedAt', body: mutated((e) => (e.data.observedAt = 'soon')), reason: /Node event schema/ },
    { name: 'Machine data under a node type', body: mutated((e) => (e.data = machineEvent.data)), reason: /Node event schema/ },
  ];
  it.each(malformed)('rejects $name with MalformedEventError', ({ body, reason }) => {
    // Act
    let error: unknown;
    try {
      fromCloudEventBody(body);
    } catch (e) {
      error = e;
    }
    // Assess
    expect(error).toBeInstanceOf(MalformedEventError);
    expect((error as MalformedEventError).reason).toMatch(reason);
    expect((error as MalformedEventError).retryable).toBe(false);
  });
});
