/**
 * `npm run demo`: a small, realistic scenario on a fresh local control plane, run through the whole
 * pipeline until it converges, ending with a summary of what each Node has and why. Exit 0 on
 * convergence, 1 otherwise. It never touches KUBECONFIG's cluster: it always starts its own.
 *
 * Scenario (namespace `demo`, self mode):
 * - gpu-0, gpu-1: `spec.taints` gpu=a100:NoSchedule (Always) + ClusterClass-level annotation
 *   `pool=gpu:NoSchedule, warming:PreferNoSchedule@OnInitialization`;
 * - edge-0: annotations only — class `pool=edge:NoSchedule, maintenance:NoExecute`, cluster cancels
 *   `maintenance:NoExecute-`, machine `zone=eu-1a:PreferNoSchedule@OnInitialization`;
 * - broken-0: an invalid declaration (`NoSchedul` is no effect): its Node is never written;
 * - every Node joins with the startup gate `node.cluster.x-k8s.io/uninitialized:NoSchedule` and a
 *   foreign `node.kubernetes.io/not-ready:NoSchedule`;
 * - an "autoscaler" keeps writing the same Nodes (labels, annotations, its own taint) with its own
 *   optimistic lock, while gpu-0's value is changed to h100 and edge-0's zone becomes Always.
 */
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type V1Taint } from '@kubernetes/client-node';
import { statusOf } from '#shared/adapters/kubernetes/api-errors.ts';
import { MACHINE_API } from '#shared/adapters/kubernetes/machine-store.ts';
import { SyncState, type TaintStatus } from '#shared/domain/taint-status.ts';
import { UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';
import { processEnv } from '#shared/config/env.ts';
import { logger } from '#shared/observability/logger.ts';
import { ControlPlaneUnavailableError, startControlPlane, type ControlPlane } from './control-plane/control-plane.ts';
import { readTaintStatuses } from './cluster-status.ts';
import { startPipeline, type Pipeline } from './pipeline.ts';
import { createActivityFilter, formatReport } from './pipeline-report.ts';
import { formatStatusTable, summarizeStates } from './status-format.ts';

const NS = 'demo';
const CLUSTER = 'demo';
const ACTOR_TAINT = 'autoscaler.example.com/scale-down-candidate';
const CLASS = 'taints.capi-taint-propagator.dev/class';
const CLUSTER_ANNOTATION = 'taints.capi-taint-propagator.dev/cluster';
const MACHINE_ANNOTATION = 'taints.capi-taint-propagator.dev/machine';
const CONVERGE_TIMEOUT_MS = 120_000;

const out = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const started = Date.now();
const elapsed = (): string => `+${((Date.now() - started) / 1000).toFixed(1).padStart(5)}s`;
const step = (text: string): void => out(`${elapsed()}  ${text}`);

if (processEnv()['POWERTOOLS_LOG_LEVEL'] === undefined) logger.setLogLevel('SILENT');

let cp: ControlPlane | undefined;
let pipeline: Pipeline | undefined;
let finishing = false;
async function cleanup(): Promise<void> {
  await pipeline?.stop().catch(() => undefined);
  await cp?.stop();
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(sig, () => {
    if (finishing) return;
    finishing = true;
    out(`\n${sig}: stopping the demo`);
    void cleanup().then(() => process.exit(130));
  });
}

interface MachineSpec {
  readonly name: string;
  readonly specTaints?: readonly { key: string; value?: string; effect: string; propagation: string }[];
  readonly annotations?: Readonly<Record<string, string>>;
}

const MACHINES: readonly MachineSpec[] = [
  {
    name: 'gpu-0',
    specTaints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always' }],
    annotations: { [CLASS]: 'pool=gpu:NoSchedule, warming:PreferNoSchedule@OnInitialization' },
  },
  {
    name: 'gpu-1',
    specTaints: [{ key: 'gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always' }],
    annotations: { [CLASS]: 'pool=gpu:NoSchedule, warming:PreferNoSchedule@OnInitialization' },
  },
  {
    name: 'edge-0',
    annotations: {
      [CLASS]: 'pool=edge:NoSchedule, maintenance:NoExecute',
      [CLUSTER_ANNOTATION]: 'maintenance:NoExecute-',
      [MACHINE_ANNOTATION]: 'zone=eu-1a:PreferNoSchedule@OnInitialization',
    },
  },
  { name: 'broken-0', annotations: { [MACHINE_ANNOTATION]: 'gpu=a100:NoSchedul' } },
];

async function main(): Promise<number> {
  out('capi-taint-propagator demo: a fresh local control plane, the whole pipeline in this process.');
  try {
    cp = await startControlPlane({ log: (line) => out(`  ${line}`), handleSignals: false });
  } catch (e) {
    out(e instanceof ControlPlaneUnavailableError ? e.message : `control plane failed to start: ${e instanceof Error ? e.message : String(e)}`);
    return 2;
  }
  out(`  (to look around while it runs: export KUBECONFIG=${cp.kubeconfigPath})`);
  const enabledAt = new Date(Date.now() - 60_000);
  const isNew = createActivityFilter();
  pipeline = await startPipeline({
    kubeconfig: cp.kubeconfigPath,
    mode: 'self',
    // The product was "enabled" before these Nodes joined, so their OnInitialization taints apply.
    firstEnabledAt: enabledAt,
    // No CAPI controller runs here: the product propagates spec.taints and removes CAPI's startup taint itself.
    specTaintsOwner: 'product',
    startupTaint: { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' },
    visibilityTimeoutSeconds: 10,
    retryBaseSeconds: 1,
    retryMaxSeconds: 4,
    onActivity: (a) => isNew(a) && step(`${a.type === 'Warning' ? 'WARNING ' : ''}${a.reason} ${a.machine}: ${truncate(a.message, 150)}`),
  });
  await pipeline.waitForForwarder();
  const kc = pipeline.kubeConfig;
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  await core.createNamespace({ body: { metadata: { name: NS } } });

  let lastReport = '';
  const report = (): void => {
    if (!pipeline) return;
    const lines = formatReport(pipeline.counters(), undefined);
    const block = lines.join('\n');
    if (block === lastReport) return;
    lastReport = block;
    out(`${elapsed()}  -- ${lines.join('\n           -- ')}`);
  };
  const reporter = setInterval(report, 2000);

  step('Creating 4 Machines (spec.taints and annotations; one invalid declaration)');
  for (const m of MACHINES) await createMachine(custom, m);
  step('Nodes join with the startup gate taint; CAPI sets status.nodeRef');
  for (const m of MACHINES) {
    await core.createNode({
      body: {
        metadata: { name: `demo-${m.name}`, labels: { 'node.kubernetes.io/instance-type': m.name.startsWith('gpu') ? 'p4d.24xlarge' : 'm7g.large' } },
        spec: { taints: [{ key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' }, { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' }] },
      },
    });
    await custom.patchNamespacedCustomObjectStatus(
      { ...MACHINE_API, namespace: NS, name: m.name, body: { status: { nodeRef: { name: `demo-${m.name}` } } } },
      mergePatch,
    );
    await sleep(300);
  }

  step(`Another actor ("autoscaler") starts writing the same Nodes: labels, annotations, its own taint ${ACTOR_TAINT}`);
  const actor = runForeignWriter(core, MACHINES.map((m) => `demo-${m.name}`), 10_000);
  await sleep(2000);
  step('Editing declarations while it writes: gpu-0 gpu=a100 -> a10g -> l4 -> h100 (spec.taints); edge-0 zone OnInitialization -> Always (annotation)');
  for (const value of ['a10g', 'l4', 'h100']) {
    await custom.patchNamespacedCustomObject(
      { ...MACHINE_API, namespace: NS, name: 'gpu-0', body: { spec: { taints: [{ key: 'gpu', value, effect: 'NoSchedule', propagation: 'Always' }] } } },
      mergePatch,
    );
    await sleep(1500);
  }
  await custom.patchNamespacedCustomObject(
    { ...MACHINE_API, namespace: NS, name: 'edge-0', body: { metadata: { annotations: { [MACHINE_ANNOTATION]: 'zone=eu-1b:PreferNoSchedule@Always' } } } },
    mergePatch,
  );
  const writes = await actor;
  step(`The autoscaler stopped after ${writes.written} writes (${writes.conflicts} of its own conflicts retried)`);

  step('Waiting for convergence (every Node in sync, or deliberately left alone; queue empty)...');
  let statuses: TaintStatus[] = [];
  const deadline = Date.now() + CONVERGE_TIMEOUT_MS;
  let converged = false;
  let stableSince = 0;
  while (Date.now() < deadline) {
    statuses = await readTaintStatuses({ kubeConfig: kc, mode: 'self', machineNamespace: NS, ...(pipeline.startupTaint ? { startupTaint: pipeline.startupTaint } : {}), specTaintsOwner: pipeline.specTaintsOwner });
    const c = pipeline.counters();
    const settled = statuses.every((s) => s.state === SyncState.inSync || s.state === SyncState.invalidDeclaration) && c.queueVisible + c.queueInFlight === 0;
    if (settled) {
      stableSince ||= Date.now();
      if (Date.now() - stableSince >= 1500) {
        converged = true;
        break;
      }
    } else stableSince = 0;
    await sleep(250);
  }
  clearInterval(reporter);
  report();
  const counters = pipeline.counters();
  out('');
  out(converged ? `Converged in ${((Date.now() - started) / 1000).toFixed(1)} s. What each Node has and why:` : 'Did NOT converge in time. Current state:');
  out('');
  for (const line of formatStatusTable(statuses)) out(`  ${line}`);
  out('');
  out(`  ${summarizeStates(statuses)}`);
  out(
    `  pipeline: ${counters.eventsForwarded} events forwarded, ${counters.eventsFiltered} filtered; ${Object.values(counters.reconciles).reduce((a, b) => a + b, 0)} reconciles; ` +
      `${counters.writes} Node writes; ${counters.conflicts} conflicts retried through the queue; ${counters.reconciles['invalid-declaration']} invalid-declaration outcomes; ${counters.deadLetterQueueDepth} dead letters`,
  );
  out('  Foreign taints (not-ready, the autoscaler\'s) were never touched; broken-0 keeps its startup gate until its declaration is fixed.');
  return converged ? 0 : 1;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

async function createMachine(custom: CustomObjectsApi, m: MachineSpec): Promise<void> {
  const spec: Record<string, unknown> = {
    clusterName: CLUSTER,
    bootstrap: { dataSecretName: `${m.name}-bootstrap` },
    infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachine', name: m.name },
  };
  if (m.specTaints) spec['taints'] = m.specTaints;
  await custom.createNamespacedCustomObject({
    ...MACHINE_API,
    namespace: NS,
    body: {
      apiVersion: `${MACHINE_API.group}/${MACHINE_API.version}`,
      kind: 'Machine',
      metadata: { name: m.name, namespace: NS, labels: { 'cluster.x-k8s.io/cluster-name': CLUSTER }, annotations: { ...m.annotations } },
      spec,
    },
  });
}

/**
 * A well-behaved other writer: read-modify-write of whole Nodes (labels, an annotation, its own taint
 * with a changing value), each guarded by the resourceVersion it read, retrying its own conflicts.
 */
async function runForeignWriter(core: CoreV1Api, nodes: readonly string[], durationMs: number): Promise<{ written: number; conflicts: number }> {
  const until = Date.now() + durationMs;
  let written = 0;
  let conflicts = 0;
  // One loop per Node, as fast as the API server answers.
  await Promise.all(
    nodes.map(async (name) => {
      for (let round = 1; Date.now() < until; round++) {
        try {
          const node = await core.readNode({ name });
          const others: V1Taint[] = (node.spec?.taints ?? []).filter((t) => t.key !== ACTOR_TAINT);
          node.metadata = { ...node.metadata, labels: { ...node.metadata?.labels, 'autoscaler.example.com/round': String(round) } };
          node.spec = { ...node.spec, taints: [...others, { key: ACTOR_TAINT, value: String(round % 5), effect: 'PreferNoSchedule' }] };
          await core.replaceNode({ name, body: node });
          written++;
          // Heartbeats in between: blind merge patches of a label and an annotation (each bumps the resourceVersion).
          for (let beat = 0; beat < 5; beat++) {
            await core.patchNode({ name, body: { metadata: { labels: { 'autoscaler.example.com/beat': String(beat) }, annotations: { 'autoscaler.example.com/heartbeat': String(Date.now()) } } } }, mergePatch);
            written++;
          }
        } catch (e) {
          if (statusOf(e) === 409) conflicts++;
          else throw e;
        }
      }
    }),
  );
  return { written, conflicts };
}

function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

let code = 1;
try {
  code = await main();
} catch (e) {
  out(`demo failed: ${e instanceof Error ? e.message : String(e)}`);
}
finishing = true;
await cleanup();
process.exit(code);

