/**
 * Kubernetes Events off each record's critical path: `record` returns at once; the batch answers only once every Event
 * it started is written or has failed (and logged), so none is dropped by a frozen Lambda.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { EventRecorder, InvolvedObject } from '#shared/ports/event-recorder.ts';

export class DeferredEvents implements EventRecorder {
  readonly #recorder: EventRecorder;
  readonly #logger: Logger;
  readonly #pending: Promise<void>[] = [];

  constructor(recorder: EventRecorder, logger: Logger) {
    this.#recorder = recorder;
    this.#logger = logger;
  }

  async record(object: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    this.#pending.push(
      this.#recorder.record(object, type, reason, message).catch((error: unknown) => {
        this.#logger.warn('Recording a Kubernetes Event failed', { involvedObject: `${object.kind} ${object.namespace}/${object.name}`, eventReason: reason, error });
      }),
    );
  }

  /** Waits for every Event started so far (never rejects: failures were logged). */
  async settle(): Promise<void> {
    while (this.#pending.length > 0) await Promise.all(this.#pending.splice(0));
  }
}

/** Records an Event on a Machine, MachinePool or scalable resource; never throws, so the outcome stands. */
export async function recordEvent(deps: { readonly recorder: EventRecorder }, object: Omit<InvolvedObject, 'kind'> & { readonly kind?: string }, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
  const involved = { apiVersion: object.apiVersion, kind: object.kind ?? 'Machine', namespace: object.namespace, name: object.name, uid: object.uid };
  await deps.recorder.record(involved, type, reason, message).catch(() => undefined);
}
