import type { TaintEvent } from '#shared/contract/cloud-event.ts';

/** An event that could not be sent, with why. */
export interface UnsentEvent {
  readonly event: TaintEvent;
  readonly reason: string;
  /** False when resending the same message can never succeed (e.g. larger than the queue accepts). */
  readonly retryable: boolean;
}

/** Outcome of one publish call: every input event is in exactly one of the two lists. */
export interface PublishResult {
  readonly sent: readonly TaintEvent[];
  readonly unsent: readonly UnsentEvent[];
}

/** Sends TaintEvents to the event queue (SQS FIFO in AWS, a local SQS server in `npm start`). */
export interface EventPublisher {
  /** Sends the events, one attempt each (the caller resends); never throws for a send failure, reports it in `unsent`. */
  publish(events: readonly TaintEvent[]): Promise<PublishResult>;
}
