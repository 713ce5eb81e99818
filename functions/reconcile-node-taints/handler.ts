/**
 * Lambda entry of the reconcile function (SQS FIFO trigger, ReportBatchItemFailures).
 * Composition root: configuration is read once per cold start (a bad one fails the cold start);
 * dependencies are rebuilt only when the management cluster's credentials are refreshed.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { loadManagementKubeConfig } from '#shared/adapters/kubernetes/management-kubeconfig.ts';
import type { RestConfig } from '#shared/adapters/kubernetes/rest-config.ts';
import { identifyAs } from '#shared/adapters/kubernetes/user-agent.ts';
import { workloadKubeConfigs } from '#shared/adapters/kubernetes/workload-kubeconfig.ts';
import { loadClusterAccessConfig } from '#shared/config/cluster-access-config.ts';
import { processEnv } from '#shared/config/env.ts';
import { loadReconcileConfig } from '#shared/config/reconcile-config.ts';
import type { SqsSender } from '#shared/adapters/sqs/record-queue.ts';
import { sqsSdk } from '#shared/adapters/sqs/sdk.ts';
import { composeReconcile } from './compose.ts';
import { processBatch, type BatchDeps } from './process-batch.ts';

identifyAs('reconcile-node-taints', 'lambda');
const config = loadReconcileConfig(processEnv());
const access = loadClusterAccessConfig(processEnv());
// Loaded on first use: the SQS SDK is needed only for retries, re-issues and dead letters, not on the happy path.
const sqs = async (): Promise<SqsSender> => new (await sqsSdk()).SQSClient({});
let current: { kubeConfig: RestConfig; deps: BatchDeps } | undefined;

export async function handler(event: SQSEvent, context: Context): Promise<SQSBatchResponse> {
  const kubeConfig = await loadManagementKubeConfig(access);
  if (current?.kubeConfig !== kubeConfig) {
    const workload = workloadKubeConfigs(kubeConfig);
    const deps = composeReconcile({ config, clusterMode: access.clusterMode, managementKubeConfig: kubeConfig, workloadKubeConfig: (c) => workload.get({ mode: 'capi', ...c }), sqs });
    current = { kubeConfig, deps };
  }
  return processBatch(event, context, current.deps);
}
