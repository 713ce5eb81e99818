/** Events on Machines: `kubectl describe machine` shows what was done to the Node (Normal) or refused (Warning). */
import { randomBytes } from 'node:crypto';
import type { Clock } from '#shared/ports/clock.ts';
import type { EventRecorder, InvolvedObject } from '#shared/ports/event-recorder.ts';
import { toKubeTime, toProductError } from './api-errors.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';

export const EVENT_COMPONENT = 'capi-taint-propagator';
/** An identical Event (same object, type, reason, message) is recorded at most once in this window. */
export const EVENT_DEDUP_WINDOW_MS = 10 * 60_000;
const MAX_REMEMBERED = 2_000;

export class KubernetesEventRecorder implements EventRecorder {
  readonly #endpoint: ClusterEndpoint;
  readonly #clock: Clock;
  /** When each identical Event was last recorded: an invalid declaration is reported once, not on every reconcile. */
  readonly #recent = new Map<string, number>();

  constructor(endpoint: ClusterEndpoint, clock: Clock) {
    this.#endpoint = endpoint;
    this.#clock = clock;
  }

  async record(object: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const now = this.#clock.now();
    const key = `${object.uid}\u0000${type}\u0000${reason}\u0000${message}`;
    if (now.getTime() - (this.#recent.get(key) ?? -Infinity) < EVENT_DEDUP_WINDOW_MS) return;
    // Times as Kubernetes stores them (RFC 3339, whole seconds); no eventTime.
    const at = toKubeTime(now);
    const body = {
      metadata: { name: `${object.name}.${randomBytes(8).toString('hex')}`, namespace: object.namespace },
      involvedObject: { apiVersion: object.apiVersion, kind: object.kind, namespace: object.namespace, name: object.name, uid: object.uid },
      type,
      reason,
      // The API server limits an Event message to 1 KiB.
      message: message.length > 1024 ? `${message.slice(0, 1021)}...` : message,
      source: { component: EVENT_COMPONENT },
      reportingComponent: EVENT_COMPONENT,
      reportingInstance: EVENT_COMPONENT,
      count: 1,
      firstTimestamp: at,
      lastTimestamp: at,
    };
    try {
      await kubeCall(this.#endpoint, { method: 'POST', path: `/api/v1/namespaces/${seg(object.namespace)}/events`, body });
    } catch (error) {
      throw toProductError(`Recording Event ${reason} on ${object.kind} ${object.namespace}/${object.name} at ${toKubeTime(now)}`, error);
    }
    // Maps iterate in insertion order: the key goes last, and the oldest beyond the cap go.
    this.#recent.delete(key);
    this.#recent.set(key, now.getTime());
    while (this.#recent.size > MAX_REMEMBERED) this.#recent.delete(this.#recent.keys().next().value as string);
  }
}
