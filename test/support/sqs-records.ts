/**
 * Factories for SQS records that wrap CloudEvents, shaped as Lambda delivers them from a FIFO queue.
 */
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { toCloudEventBody } from '#shared/adapters/cloudevents/cloud-event-body.ts';
import { eventIdFor, eventTypeFor, messageGroupIdFor, sourceFor, subjectFor, type ChangeKind, type ClusterRef, type TaintEvent, type TaintEventData } from '#shared/contract/cloud-event.ts';

export const TEST_QUEUE_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/taints.fifo';
export const TEST_DLQ_URL = 'https://sqs.eu-west-1.amazonaws.com/123456789012/taints-dlq.fifo';
const OBSERVED = '2026-11-22T10:00:00Z';

/** A Machine event about `namespace/name` whose Node is `nodeName`. */
export function machineEvent(namespace: string, name: string, opts: { nodeName?: string; change?: ChangeKind; cluster?: ClusterRef; rv?: string; declarationRecovered?: true } = {}): TaintEvent {
  const cluster = opts.cluster ?? { mode: 'capi', namespace, name: 'wc1' };
  const change = opts.change ?? 'modified';
  const data: TaintEventData = {
    kind: 'Machine',
    cluster,
    machine: { namespace, name, uid: `uid-${name}`, resourceVersion: opts.rv ?? '10' },
    ...(opts.nodeName ? { nodeName: opts.nodeName } : {}),
    ...(opts.declarationRecovered ? { declarationRecovered: true as const } : {}),
    observedAt: OBSERVED,
  };
  return wrap(data, eventTypeFor('Machine', change), eventIdFor(`uid-${name}`, opts.rv ?? '10', change));
}

/** A Node event about `name`, optionally naming its Machine (from the Node's CAPI annotations). */
export function nodeEvent(name: string, opts: { machine?: { namespace: string; name: string }; change?: ChangeKind; cluster?: ClusterRef; rv?: string } = {}): TaintEvent {
  const cluster = opts.cluster ?? { mode: 'capi', namespace: 'default', name: 'wc1' };
  const change = opts.change ?? 'modified';
  const data: TaintEventData = {
    kind: 'Node',
    cluster,
    node: { name, uid: `uid-${name}`, resourceVersion: opts.rv ?? '20' },
    ...(opts.machine ? { machine: opts.machine } : {}),
    observedAt: OBSERVED,
  };
  return wrap(data, eventTypeFor('Node', change), eventIdFor(`uid-${name}`, opts.rv ?? '20', change));
}

/** A MachinePool event about one of its Nodes. */
export function machinePoolEvent(namespace: string, name: string, nodeName: string, opts: { change?: ChangeKind; cluster?: ClusterRef; rv?: string } = {}): TaintEvent {
  const cluster = opts.cluster ?? { mode: 'capi', namespace, name: 'wc1' };
  const change = opts.change ?? 'modified';
  const data: TaintEventData = {
    kind: 'MachinePool',
    cluster,
    machinePool: { namespace, name, uid: `uid-${name}`, resourceVersion: opts.rv ?? '30' },
    nodeName,
    observedAt: OBSERVED,
  };
  return wrap(data, eventTypeFor('MachinePool', change), eventIdFor(`uid-${name}`, opts.rv ?? '30', change, nodeName));
}

function wrap(data: TaintEventData, type: TaintEvent['type'], id: string): TaintEvent {
  return { id, source: sourceFor(data.cluster), type, subject: subjectFor(data), time: OBSERVED, data };
}

let sequence = 0;
/** An SQS record whose body is the CloudEvent (or a raw body), in the event's message group. */
export function sqsRecord(event: TaintEvent | { rawBody: string; groupId: string }, opts: { messageId?: string; receiveCount?: number } = {}): SQSRecord {
  sequence++;
  const body = 'rawBody' in event ? event.rawBody : toCloudEventBody(event);
  const group = 'rawBody' in event ? event.groupId : messageGroupIdFor(event.data);
  const messageId = opts.messageId ?? `msg-${sequence}`;
  return {
    messageId,
    receiptHandle: `rh-${messageId}`,
    body,
    attributes: {
      ApproximateReceiveCount: String(opts.receiveCount ?? 1),
      SentTimestamp: '1763805600000',
      SenderId: 'AIDAEXAMPLE',
      ApproximateFirstReceiveTimestamp: '1763805600000',
      SequenceNumber: String(18_000_000_000_000_000_000 + sequence),
      MessageGroupId: group,
      MessageDeduplicationId: 'rawBody' in event ? messageId : event.id,
    },
    messageAttributes: {},
    md5OfBody: '',
    eventSource: 'aws:sqs',
    eventSourceARN: 'arn:aws:sqs:eu-west-1:123456789012:taints.fifo',
    awsRegion: 'eu-west-1',
  };
}

/** Wraps records into the event Lambda hands to the handler. */
export function sqsEvent(...records: SQSRecord[]): SQSEvent {
  return { Records: records };
}
