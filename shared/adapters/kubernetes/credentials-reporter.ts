/**
 * Reports a workload cluster that is skipped because its kubeconfig is unusable or refused: an error log (when the
 * problem appears or changes, and every {@link REPEAT_AFTER_MS}), a metric, and a Warning Event on the Cluster. Only
 * the error's message goes out, which never holds kubeconfig content. Reporting never throws.
 */
import { capiApiVersionString, CAPI_GROUP } from '#shared/domain/capi-api.ts';
import { ClusterCredentialsError, RefusedKubeconfigError } from '#shared/errors.ts';
import { logger as defaultLogger, LogKey } from '#shared/observability/logger.ts';
import type { Clock } from '#shared/ports/clock.ts';
import type { EventRecorder } from '#shared/ports/event-recorder.ts';
import { KubernetesEventRecorder } from './event-recorder.ts';
import { kubeCall, seg, type ClusterEndpoint } from './kube-http.ts';
import { statusOf } from './api-errors.ts';
import type { CapiApi } from './capi-discovery.ts';

export interface ClusterCredentialsReporter {
  /** Reports that `cluster` is skipped because of `error`. Never throws. */
  report(cluster: { readonly namespace: string; readonly name: string }, error: ClusterCredentialsError): Promise<void>;
}

export interface CredentialsReporterOptions {
  /** The management cluster (where the Cluster and its Events live). */
  readonly kubeConfig: ClusterEndpoint;
  /** Which Cluster API group version the Cluster is read in (and its Event names). */
  readonly capi: CapiApi;
  /** Counts one unusable-kubeconfig report (a metric). */
  readonly count: () => void;
  readonly recorder?: EventRecorder;
  readonly logger?: Pick<typeof defaultLogger, 'error' | 'warn'>;
  readonly clock?: Clock;
  /** The Cluster's uid, for the Event (default: read the Cluster from `kubeConfig`; undefined when it does not exist). */
  readonly clusterUid?: (namespace: string, name: string) => Promise<string | undefined>;
}

/** An unchanged problem is logged again after this long. */
const REPEAT_AFTER_MS = 10 * 60_000;

export function clusterCredentialsReporter(o: CredentialsReporterOptions): ClusterCredentialsReporter {
  const clock = o.clock ?? { now: () => new Date() };
  const log = o.logger ?? defaultLogger;
  const recorder = o.recorder ?? new KubernetesEventRecorder(o.kubeConfig, clock);
  const uidOf =
    o.clusterUid ??
    (async (namespace: string, name: string) => {
      const path = `/apis/${CAPI_GROUP}/${await o.capi.version()}/namespaces/${seg(namespace)}/clusters/${seg(name)}`;
      try {
        return (await kubeCall<{ metadata?: { uid?: string } }>(o.kubeConfig, { method: 'GET', path })).metadata?.uid;
      } catch (error) {
        if (statusOf(error) === 404) return undefined; // the Cluster is gone: no Event to record on it
        throw error;
      }
    });
  const logged = new Map<string, { message: string; at: number }>();
  return {
    async report(cluster, error) {
      const key = `${cluster.namespace}/${cluster.name}`;
      const refused = error instanceof RefusedKubeconfigError;
      o.count();
      const now = clock.now().getTime();
      const last = logged.get(key);
      if (!last || last.message !== error.message || now - last.at >= REPEAT_AFTER_MS) {
        logged.set(key, { message: error.message, at: now });
        log.error(refused ? 'Skipping cluster: its kubeconfig uses refused features' : 'Skipping cluster: its kubeconfig is unusable', {
          [LogKey.cluster]: key,
          [LogKey.reason]: error.message,
          ...(refused ? { refused: error.refused } : {}),
        });
      }
      try {
        const uid = await uidOf(cluster.namespace, cluster.name);
        if (!uid) return;
        await recorder.record(
          { apiVersion: capiApiVersionString(await o.capi.version()), kind: 'Cluster', namespace: cluster.namespace, name: cluster.name, uid },
          'Warning',
          refused ? 'KubeconfigRefused' : 'KubeconfigUnusable',
          `Nodes of this cluster are skipped: ${error.message}`,
        );
      } catch (eventError) {
        log.warn('Recording a Warning Event on the Cluster failed', { [LogKey.cluster]: key, error: eventError as Error });
      }
    },
  };
}
