import { describe, expect, it } from 'vitest';
import { decodeWatchLine } from '#shared/adapters/kubernetes/watch/watch-decoder.ts';
import { toNodeFacts } from '#shared/model/views.ts';

const node = { metadata: { name: 'n1', uid: 'u1', resourceVersion: '7' }, spec: {} };
const SECRET = 'PLANTED-secret-9f2c';

describe('Function: decodeWatchLine()', () => {
  it.each([
    { type: 'ADDED', change: 'added' },
    { type: 'MODIFIED', change: 'modified' },
    { type: 'DELETED', change: 'deleted' },
  ])('decodes $type as a change with the facts of the object', ({ type, change }) => {
    // Act
    const decoded = decodeWatchLine(JSON.stringify({ type, object: node }), toNodeFacts);

    // Assess
    expect(decoded).toMatchObject({ kind: 'change', change, facts: { kind: 'Node', name: 'n1', uid: 'u1', resourceVersion: '7' } });
  });

  it('decodes a bookmark as its resourceVersion', () => {
    expect(decodeWatchLine('{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"12"}}}', toNodeFacts)).toEqual({ kind: 'bookmark', resourceVersion: '12' });
  });

  it('decodes ERROR 410 as gone', () => {
    expect(decodeWatchLine('{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired"}}', toNodeFacts)).toEqual({ kind: 'gone' });
  });

  it("names another ERROR by its Status (code, reason, escaped message), never by the rest of the object", () => {
    // Prepare
    const line = JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 500, reason: 'InternalError', message: 'etcd down\u001b[31m', details: { secret: SECRET } } });

    // Act
    const decoded = decodeWatchLine(line, toNodeFacts);

    // Assess
    expect(decoded).toEqual({ kind: 'error', reason: 'watch ERROR 500 InternalError: etcd down\\u001b[31m' });
  });

  it.each([
    {
      name: 'a Status without a code (omitempty)',
      object: { reason: 'Expired', message: `x\n${'y'.repeat(400)}` },
      reason: `watch ERROR Expired: x\\u000a${'y'.repeat(189)}… (+211 more characters)`,
    },
    { name: 'a Status with neither code, reason nor message', object: { kind: 'Status' }, reason: 'watch ERROR (no Status)' },
    { name: 'no Status', object: SECRET, reason: 'watch ERROR (no Status)' },
  ])('names an ERROR with $name by what it has, escaped and capped', ({ object, reason }) => {
    expect(decodeWatchLine(JSON.stringify({ type: 'ERROR', object }), toNodeFacts)).toEqual({ kind: 'error', reason });
  });

  const malformed: ReadonlyArray<{ name: string; line: string; reason: string }> = [
    { name: 'text that is not JSON', line: `<html>${SECRET}`, reason: 'not JSON' },
    { name: 'JSON that is not an event', line: `["${SECRET}"]`, reason: 'no event type' },
    { name: 'an event without a type', line: `{"object":"${SECRET}"}`, reason: 'no event type' },
    { name: 'a bookmark without resourceVersion', line: '{"type":"BOOKMARK","object":{"metadata":{}}}', reason: 'bookmark without resourceVersion' },
    { name: 'an unknown type (escaped, capped)', line: `{"type":"X\\n${'y'.repeat(100)}","object":{}}`, reason: `unknown event type X\\u000a${'y'.repeat(38)}… (+62 more characters)` },
    { name: 'an object without uid', line: '{"type":"ADDED","object":{"metadata":{"name":"n","resourceVersion":"1"}}}', reason: 'object without name, uid or resourceVersion' },
  ];
  it.each(malformed)('calls $name malformed, with a reason that does not quote it', ({ line, reason }) => {
    // Act
    const decoded = decodeWatchLine(line, toNodeFacts);

    // Assess
    expect(decoded).toEqual({ kind: 'malformed', reason });
    expect(JSON.stringify(decoded)).not.toContain(SECRET);
  });
});
