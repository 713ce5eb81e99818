import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { SQSEvent } from 'aws-lambda';
import { fromCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { machineEventDataSchema, machinePoolEventDataSchema, scalableResourceEventDataSchema, nodeEventDataSchema } from '#shared/contract/cloud-event.ts';
import { forwardDecision } from '#shared/policy/relevance.ts';
import { toMachineFacts, toNodeFacts } from '#shared/model/views.ts';
import { MalformedEventError } from '#shared/errors.ts';

const root = join(import.meta.dirname, '../../../events');

function jsonFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? jsonFiles(join(dir, e.name)) : e.name.endsWith('.json') ? [join(dir, e.name)] : [],
  );
}
const load = (path: string): any => JSON.parse(readFileSync(path, 'utf8'));
const files = jsonFiles(root).map((p) => relative(root, p));

describe('Sample events in events/', () => {
  it('has samples for both functions and the schemas', () => {
    expect(files.some((f) => f.startsWith('schemas/'))).toBe(true);
    expect(files.some((f) => f.startsWith('watch-forwarder/'))).toBe(true);
    expect(files.some((f) => f.startsWith('reconcile-node-taints/'))).toBe(true);
  });

  it.each(files)('%s is valid JSON', (file) => {
    expect(() => load(join(root, file))).not.toThrow();
  });

  it('ships the data schemas exactly as defined in shared/contract/cloud-event.ts', () => {
    expect(load(join(root, 'schemas/machine-event-data.v1.json'))).toEqual(machineEventDataSchema);
    expect(load(join(root, 'schemas/node-event-data.v1.json'))).toEqual(nodeEventDataSchema);
    expect(load(join(root, 'schemas/machinepool-event-data.v1.json'))).toEqual(machinePoolEventDataSchema);
    expect(load(join(root, 'schemas/scalableresource-event-data.v1.json'))).toEqual(scalableResourceEventDataSchema);
  });

  const sqsSamples = files.filter((f) => f.startsWith('reconcile-node-taints/'));
  it.each(sqsSamples)('%s: every record parses, except those named malformed-*', (file) => {
    // Prepare
    const event = load(join(root, file)) as SQSEvent;
    expect(event.Records.length).toBeGreaterThan(0);
    for (const record of event.Records) {
      // Act
      const parse = (): unknown => fromCloudEventBody(record.body);
      // Assess
      if (record.messageId.startsWith('malformed-')) {
        expect(parse, record.messageId).toThrow(MalformedEventError);
      } else {
        expect(parse(), record.messageId).toMatchObject({ id: expect.any(String) });
        expect(record.attributes.MessageGroupId).toBeTruthy();
      }
    }
  });

  it('watch samples map to facts, and the heartbeat is filtered while the taint change is not', () => {
    const w = (name: string): any => load(join(root, 'watch-forwarder', name));
    const added = toNodeFacts(w('watch-node-added.json').object);
    const heartbeat = toNodeFacts(w('watch-node-heartbeat.json').object);
    expect(added && heartbeat).toBeTruthy();
    expect(forwardDecision('modified', added!, heartbeat!)).toEqual({ forward: false, filtered: 'unchanged' });
    const machine = toMachineFacts(w('watch-machine-taints-changed.json').object);
    expect(machine?.specTaints).toEqual([{ key: 'dedicated', value: 'gpu', effect: 'NoSchedule', propagation: 'Always' }]);
    expect(w('watch-bookmark.json')).toMatchObject({ type: 'BOOKMARK', object: { metadata: { resourceVersion: expect.any(String) } } });
    expect(w('watch-error-410-gone.json')).toMatchObject({ type: 'ERROR', object: { code: 410 } });
    expect(w('scheduled-event.json')).toMatchObject({ 'detail-type': 'Scheduled Event', source: 'aws.events' });
  });
});
