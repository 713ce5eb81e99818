/** EnablementState in a ConfigMap of the management cluster, written once by the first reconcile that needs it. */
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { Clock } from '#shared/ports/clock.ts';
import type { EnablementState } from '#shared/ports/enablement-state.ts';
import { createFailure, statusOf, toKubeTime, toProductError } from './api-errors.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';

export const STATE_CONFIGMAP = 'capi-taint-propagator-state';
export const ENABLED_AT_KEY = 'enabledAt';

export class ConfigMapEnablementState implements EnablementState {
  readonly #endpoint: ClusterEndpoint;
  readonly #namespace: string;
  readonly #clock: Clock;
  #cached: Date | undefined;
  /** The read (and first record) under way: calls made meanwhile share it. */
  #pending: Promise<Date> | undefined;

  constructor(endpoint: ClusterEndpoint, namespace: string, clock: Clock) {
    this.#endpoint = endpoint;
    this.#namespace = namespace;
    this.#clock = clock;
  }

  enabledAt(): Promise<Date> {
    if (this.#cached) return Promise.resolve(this.#cached);
    return (this.#pending ??= this.#load().finally(() => (this.#pending = undefined)));
  }

  async #load(): Promise<Date> {
    const stored = await this.#read();
    if (stored) return (this.#cached = stored);
    const operation = `Recording first enablement in ConfigMap ${this.#namespace}/${STATE_CONFIGMAP}`;
    try {
      await kubeCall(this.#endpoint, {
        method: 'POST',
        path: `/api/v1/namespaces/${seg(this.#namespace)}/configmaps`,
        body: { metadata: { name: STATE_CONFIGMAP, namespace: this.#namespace }, data: { [ENABLED_AT_KEY]: toKubeTime(this.#clock.now()) as string } },
      });
    } catch (error) {
      // 409: another reconcile recorded it first; its value wins.
      if (statusOf(error) !== 409) throw createFailure(operation, this.#namespace, error);
    }
    const created = await this.#read();
    if (!created) throw toProductError(`Reading ConfigMap ${this.#namespace}/${STATE_CONFIGMAP}`, new Error('not found after create'));
    return (this.#cached = created);
  }

  async #read(): Promise<Date | undefined> {
    try {
      const cm = await kubeCall<V1ConfigMap>(this.#endpoint, { method: 'GET', path: `/api/v1/namespaces/${seg(this.#namespace)}/configmaps/${STATE_CONFIGMAP}` });
      const value = cm.data?.[ENABLED_AT_KEY];
      const date = value ? new Date(value) : undefined;
      return date && !Number.isNaN(date.getTime()) ? date : undefined;
    } catch (error) {
      if (statusOf(error) === 404) return undefined;
      throw toProductError(`Reading ConfigMap ${this.#namespace}/${STATE_CONFIGMAP}`, error);
    }
  }
}
