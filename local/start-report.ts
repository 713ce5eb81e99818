/**
 * `npm start`'s status display as a loop of its own: every interval it reads every Machine's taint status
 * (`readTaintStatuses`, the same as `npm run status`: each workload cluster's Nodes are listed, a failing cluster held
 * back by its backoff, or left alone while the forwarder reports its Node watch failing) and prints the totals and the Nodes out of sync, only when they changed. Shared by `npm start`
 * and the hostile-clusters attack's pipeline child (bench/lib/capi-pipeline-child.ts), so that the attack measures the
 * requests the display really sends.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { describeApiError } from '#shared/adapters/kubernetes/api-errors.ts';
import { readTaintStatuses } from './cluster-status.ts';
import type { Pipeline } from './pipeline.ts';
import { formatReport, outOfSyncNodes, type MachineCensus, type OutOfSyncNode } from './pipeline-report.ts';
import { SyncState } from './taint-status.ts';

export interface StatusReportOptions {
  readonly kubeConfig: KubeConfig;
  readonly mode: 'self' | 'capi';
  readonly machineNamespace?: string;
  readonly pipeline: Pipeline;
  readonly intervalMs: number;
  /** Prints one block (the first line is the time stamp's). */
  readonly print: (lines: readonly string[]) => void;
}

/** The running display: `stop()` ends it (an in-flight read finishes, and prints nothing). */
export interface StatusReport {
  stop(): void;
}

/** Reports once at once, then every `intervalMs` (a read still running skips that turn). */
export async function startStatusReport(o: StatusReportOptions): Promise<StatusReport> {
  let last = '';
  let reading = false;
  let stopped = false;
  const report = async (): Promise<void> => {
    if (reading || stopped) return;
    reading = true;
    try {
      let outOfSync: OutOfSyncNode[] | undefined;
      let census: MachineCensus | undefined;
      let statusError = '';
      try {
        const statuses = await readTaintStatuses({
          kubeConfig: o.kubeConfig,
          mode: o.mode,
          ...(o.machineNamespace ? { machineNamespace: o.machineNamespace } : {}),
          ...(o.pipeline.startupTaint ? { startupTaint: o.pipeline.startupTaint } : {}),
          specTaintsOwner: o.pipeline.specTaintsOwner,
          // A cluster whose Node watch the forwarder sees failing is not listed: its requests would come on top of the
          // forwarder's retries, and a failing cluster gets at most a request a second from the whole product.
          knownFailing: (cluster) => o.pipeline.failingClusters().find((f) => f.cluster === cluster)?.reason,
        });
        // The same verdicts and words as npm run status: out of sync / Node missing, and the pairs left alone on purpose.
        outOfSync = outOfSyncNodes(statuses);
        const live = statuses.filter((s) => s.state !== SyncState.machineDeleting);
        census = { machines: live.length, waitingForNode: live.filter((s) => s.state === SyncState.noNode).map((s) => s.machine) };
      } catch (e) {
        statusError = `Nodes     (status unavailable: ${describeApiError(e)})`;
      }
      const lines = formatReport(o.pipeline.counters(), outOfSync, census);
      if (statusError) lines.push(statusError);
      const block = lines.join('\n');
      if (block !== last && !stopped) {
        last = block;
        o.print(lines);
      }
    } finally {
      reading = false;
    }
  };
  await report();
  const timer = setInterval(() => void report(), o.intervalMs);
  return {
    stop: () => {
      stopped = true;
      clearInterval(timer);
    },
  };
}
