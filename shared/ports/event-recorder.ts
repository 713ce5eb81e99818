/** The object a Kubernetes Event is about. */
export interface InvolvedObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly uid: string;
}

/** Records Kubernetes Events (core/v1) so that users see what happened with `kubectl describe`. */
export interface EventRecorder {
  record(object: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void>;
}
