/**
 * Lambda entry of the reconcile function (SQS FIFO, ReportBatchItemFailures). Configuration is read once per cold start
 * (a bad one fails it); dependencies are rebuilt when the management credentials are refreshed; the set-up starts in
 * the init phase (the function's README, "Before the first record: the init phase").
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { withCallDeadline } from '#shared/adapters/kubernetes/call-deadline.ts';
import { createManagementKubeConfigLoader } from '#shared/adapters/kubernetes/management-kubeconfig.ts';
import type { RestConfig } from '#shared/adapters/kubernetes/rest-config.ts';
import { identifyAs } from '#shared/adapters/kubernetes/user-agent.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { loadClusterAccessConfig } from '#shared/config/cluster-access-config.ts';
import { processEnv } from '#shared/config/env.ts';
import { loadReconcileConfig } from '#shared/config/reconcile-config.ts';
import { logger } from '#shared/observability/logger.ts';
import { sqsSdk } from '#shared/adapters/sqs/sdk.ts';
import { composeReconcile, type ReconcileComposition } from './compose.ts';
import { processBatch } from './process-batch.ts';

identifyAs('reconcile-node-taints', 'lambda');
const config = loadReconcileConfig(processEnv());
const access = loadClusterAccessConfig(processEnv());
const management = createManagementKubeConfigLoader(access);
// Loaded on first use: the SQS SDK is needed only for retries, re-issues and dead letters, not on the happy path.
const sqs = async (): Promise<SQSClient> => new (await sqsSdk()).SQSClient({});
let current: { kubeConfig: RestConfig; deps: ReconcileComposition } | undefined;

/** The dependencies for the current management kubeconfig (loaded once, re-read when it is due). */
async function dependencies(): Promise<ReconcileComposition> {
  const kubeConfig = await management.load();
  if (current?.kubeConfig !== kubeConfig) {
    const workload = workloadKubeConfigs(kubeConfig);
    const deps = composeReconcile({ config, clusterMode: access.clusterMode, managementKubeConfig: kubeConfig, workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }), sqs });
    current = { kubeConfig, deps };
  }
  return current.deps;
}

/**
 * The init phase's set-up gives up after this long (Lambda allows an on-demand init 10 s): each Kubernetes call is
 * bounded by it, and so is the whole; whatever is left runs at the first invocation, as it would without this.
 */
const INIT_SET_UP_MS = 5_000;
const initStarted = performance.now();

/** The set-up, bounded; never throws (what failed is logged and tried again by the records that need it). */
async function setUp(): Promise<void> {
  try {
    const setUp = withCallDeadline(Date.now() + INIT_SET_UP_MS, async () => (await dependencies()).warmUp());
    const outcome = await Promise.race([setUp, delay(INIT_SET_UP_MS, 'timeout' as const, { ref: false })]);
    if (outcome === 'timeout') logger.warn('Set-up in the init phase did not finish in time; the first invocation goes on with it', { afterMs: INIT_SET_UP_MS });
    else if (outcome.length > 0) logger.warn('Set-up in the init phase failed; the first invocation tries again', { reasons: outcome });
    else logger.debug('Set-up done in the init phase', { setUpMs: Math.round(performance.now() - initStarted) });
  } catch (error) {
    // Errors of the kubeconfig loaders carry no credential (management-kubeconfig.ts).
    logger.warn('Set-up in the init phase failed; the first invocation tries again', { reason: error instanceof Error ? error.message : String(error) });
  }
}

const settingUp = setUp();
if (processEnv()['AWS_LAMBDA_INITIALIZATION_TYPE'] !== 'on-demand') await settingUp;

export async function handler(event: SQSEvent, context: Context): Promise<SQSBatchResponse> {
  return processBatch(event, context, await dependencies());
}
