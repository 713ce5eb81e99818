/**
 * CloudEvents 1.0 structured JSON mode, the SQS message body: building it from a domain TaintEvent
 * and parsing + validating it back. The only place that imports the cloudevents SDK.
 */
import { CloudEvent, HTTP, ValidationError } from 'cloudevents';
import type { ValidateFunction } from 'ajv';
import {
  parseEventType,
  type EventType,
  type TaintEvent,
  type TaintEventData,
} from '#shared/contract/cloud-event.ts';
import { MalformedEventError } from '#shared/errors.ts';
import { validateMachineEventData, validateMachinePoolEventData, validateNodeEventData, validateScalableResourceEventData } from './event-data-validators.generated.ts';

// Compiled at build time from the domain's JSON Schemas (`npm run codegen`, Ajv standalone): nothing is compiled at a
// cold start, and Ajv's compiler is not in the bundle.
const validators: Readonly<Record<TaintEventData['kind'], ValidateFunction>> = {
  Machine: validateMachineEventData as ValidateFunction,
  Node: validateNodeEventData as ValidateFunction,
  MachinePool: validateMachinePoolEventData as ValidateFunction,
  ScalableResource: validateScalableResourceEventData as ValidateFunction,
};

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;
const STRUCTURED_MODE = 'application/cloudevents+json; charset=utf-8';

/**
 * Serialises a TaintEvent as a structured-mode CloudEvent (`datacontenttype: application/json`). Returns the message
 * body; throws the SDK's ValidationError only on a bug (an event that the domain built wrongly).
 */
export function toCloudEventBody(event: TaintEvent): string {
  const ce = new CloudEvent<TaintEventData>({
    specversion: '1.0',
    id: event.id,
    source: event.source,
    type: event.type,
    subject: event.subject,
    time: event.time,
    datacontenttype: 'application/json',
    data: event.data,
  });
  return HTTP.structured(ce).body as string;
}

function describeAjvErrors(validate: ValidateFunction): string {
  return (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`).join('; ');
}

/**
 * Parses a structured-mode CloudEvent body into a validated TaintEvent: CloudEvents 1.0 envelope
 * (validated by the SDK), an accepted `type`, a `subject` and `time`, and `data` that is a JSON object
 * matching the schema of its kind. Throws MalformedEventError with the reason for anything else.
 */
export function fromCloudEventBody(body: string): TaintEvent {
  let raw: unknown;
  try {
    raw = JSON.parse(body);
  } catch (err) {
    throw new MalformedEventError('body is not JSON', err);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) {
    throw new MalformedEventError('body is not a JSON object (batched CloudEvents are not accepted)');
  }
  const envelope = raw as Record<string, unknown>;
  if (envelope.specversion !== '1.0') {
    throw new MalformedEventError(`specversion must be "1.0", got ${JSON.stringify(envelope.specversion)}`);
  }
  // The SDK silently fills a missing `id` (random) and `time` ("now") and does not check the time's
  // format, so both are checked on the raw envelope: the id is what deduplicates, the time is when
  // the change was observed.
  if (typeof envelope.id !== 'string' || envelope.id === '') throw new MalformedEventError('id is missing');
  if (typeof envelope.time !== 'string') throw new MalformedEventError('time is missing');
  if (!RFC3339.test(envelope.time) || Number.isNaN(Date.parse(envelope.time))) {
    throw new MalformedEventError(`time ${JSON.stringify(envelope.time)} is not an RFC 3339 date-time`);
  }
  if (typeof envelope.subject !== 'string' || envelope.subject === '') throw new MalformedEventError('subject is missing');

  let ce: CloudEvent<unknown>;
  try {
    // Structured mode and a body that is no JSON array: one event, never a batch.
    ce = HTTP.toEvent({ headers: { 'content-type': STRUCTURED_MODE }, body }) as CloudEvent<unknown>;
    // HTTP.toEvent does not validate structured input; validate() throws ValidationError (false: specversion ≠ 1.0).
    ce.validate();
  } catch (err) {
    if (err instanceof ValidationError) {
      throw new MalformedEventError(`not a valid CloudEvent: ${err.message} ${JSON.stringify(err.errors ?? [])}`, err);
    }
    throw new MalformedEventError('not a CloudEvent', err);
  }

  const parsedType = parseEventType(ce.type);
  if (!parsedType) throw new MalformedEventError(`unknown event type ${JSON.stringify(ce.type)}`);
  const data: unknown = ce.data;
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    throw new MalformedEventError('data must be a JSON object');
  }
  // The schema of the type's kind fixes `data.kind` (a `const`): data of another kind does not match it.
  const validate = validators[parsedType.kind];
  if (!validate(data)) throw new MalformedEventError(`data does not match the ${parsedType.kind} event schema: ${describeAjvErrors(validate)}`);
  return {
    id: ce.id,
    source: ce.source,
    type: ce.type as EventType,
    subject: envelope.subject,
    time: envelope.time,
    data: data as TaintEventData,
  };
}
