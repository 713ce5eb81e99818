/**
 * `npm run demo`: a small, realistic scenario on a fresh local control plane WITH Cluster API (the upstream core
 * manager, default gates: MachineTaintPropagation off, ClusterTopology on) and the local infrastructure provider,
 * run through the whole pipeline until it converges, ending with a summary of what each Node has and why. Exit 0 on
 * convergence, 1 otherwise. It never touches KUBECONFIG's cluster: it always starts its own.
 *
 * Seeded through Cluster API only (no hand-written Machine, no hand-set nodeRef), namespace `demo`, self mode:
 * - ClusterClass `demo` (local provider templates), worker classes `gpu` (class annotation
 *   `pool=gpu:NoSchedule, warming:PreferNoSchedule@OnInitialization`) and `edge` (`pool=edge:NoSchedule,
 *   maintenance:NoExecute`); every Node registers with Cluster API's `node.cluster.x-k8s.io/uninitialized`, the
 *   product's startup gate `taints.capi-taint-propagator.dev/uninitialized` and a foreign
 *   `node.kubernetes.io/not-ready:NoSchedule`;
 * - topology Cluster `demo`: MachineDeployment `gpu` (2 replicas, cluster annotation `gpu=a100:NoSchedule`), `edge`
 *   (1 replica, cancels `maintenance:NoExecute-`, adds `zone=eu-1a:PreferNoSchedule@OnInitialization`) and `broken`
 *   (1 replica, `NoSchedul` is no effect: its Node is never written);
 * - an "autoscaler" keeps writing the same Nodes (labels, annotations, its own taint) with its own optimistic lock,
 *   while the topology changes gpu a100 → a10g → l4 → h100 and edge's zone becomes Always (Cluster API carries the
 *   annotations down to the Machines in place).
 */
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions, type V1Taint } from '@kubernetes/client-node';
import { statusOf } from '#shared/adapters/kubernetes/api-errors.ts';
import { SyncState, type TaintStatus } from './taint-status.ts';
import { STARTUP_GATE_TAINT_KEY, UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';
import { processEnv } from '#shared/config/env.ts';
import { logger } from '#shared/observability/logger.ts';
import { ControlPlaneUnavailableError, startControlPlane, type ControlPlane } from './control-plane/control-plane.ts';
import {
  BOOTSTRAP_GROUP,
  CONTROL_PLANE_GROUP,
  INFRASTRUCTURE_GROUP,
  LOCAL_BOOTSTRAP_CONFIG_TEMPLATE,
  LOCAL_CLUSTER_TEMPLATE,
  LOCAL_CONTROL_PLANE_TEMPLATE,
  LOCAL_MACHINE_TEMPLATE,
  VERSION as LOCAL_VERSION,
} from './infrastructure/crds.ts';
import { readTaintStatuses } from './cluster-status.ts';
import { startPipeline, type Pipeline } from './pipeline.ts';
import { createActivityFilter, formatReport } from './pipeline-report.ts';
import { formatStatusTable, summarizeStates } from './status-format.ts';

const NS = 'demo';
const CLUSTER = 'demo';
const ACTOR_TAINT = 'autoscaler.example.com/scale-down-candidate';
const CLASS = 'taints.capi-taint-propagator.dev/class';
const CLUSTER_ANNOTATION = 'taints.capi-taint-propagator.dev/cluster';
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

const CAPI = { group: 'cluster.x-k8s.io', version: 'v1beta2' } as const;
const CLUSTERS = { ...CAPI, plural: 'clusters' } as const;
const KUBERNETES_VERSION = 'v1.34.3';

/** The topology's MachineDeployments: name, worker class, replicas, cluster-level declaration. */
const DEPLOYMENTS = [
  { name: 'gpu', class: 'gpu', replicas: 2, cluster: 'gpu=a100:NoSchedule' },
  { name: 'edge', class: 'edge', replicas: 1, cluster: 'maintenance:NoExecute-, zone=eu-1a:PreferNoSchedule@OnInitialization' },
  { name: 'broken', class: 'edge', replicas: 1, cluster: 'gpu=a100:NoSchedul' },
] as const;

async function main(): Promise<number> {
  out('capi-taint-propagator demo: a fresh local control plane with Cluster API, the whole pipeline in this process.');
  try {
    cp = await startControlPlane({ log: (line) => line.startsWith('[local-provider]') || out(`  ${line}`), handleSignals: false, capi: {} });
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
    visibilityTimeoutSeconds: 10,
    retryBaseSeconds: 1,
    retryMaxSeconds: 4,
    onActivity: (a) => isNew(a) && step(`${a.type === 'Warning' ? 'WARNING ' : ''}${a.reason} ${a.kind} ${a.object}: ${truncate(a.message, 150)}`),
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

  step('Creating a ClusterClass (class-level taints) and a topology Cluster with 3 MachineDeployments (cluster-level taints, one invalid)');
  await seed(custom);
  step('Cluster API creates MachineSets and Machines; the local provider registers their Nodes; Cluster API sets status.nodeRef');
  const nodes = await waitForNodes(custom, DEPLOYMENTS.reduce((n, d) => n + d.replicas, 0));
  step(`${nodes.length} Nodes joined: ${nodes.join(', ')}`);

  step(`Another actor ("autoscaler") starts writing the same Nodes: labels, annotations, its own taint ${ACTOR_TAINT}`);
  const actor = runForeignWriter(core, nodes, 10_000);
  await sleep(2000);
  step('Editing the topology while it writes: gpu=a100 -> a10g -> l4 -> h100; edge zone OnInitialization -> Always (Cluster API carries them to the Machines in place)');
  for (const value of ['a10g', 'l4', 'h100']) {
    await setClusterDeclaration(custom, 'gpu', `gpu=${value}:NoSchedule`);
    await sleep(1500);
  }
  await setClusterDeclaration(custom, 'edge', 'maintenance:NoExecute-, zone=eu-1b:PreferNoSchedule@Always');
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
  out('  Foreign taints (not-ready, the autoscaler\'s) were never touched; the broken MachineDeployment\'s Node keeps the startup gate until its declaration is fixed.');
  return converged ? 0 : 1;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const apiVersion = (group: string): string => `${group}/${LOCAL_VERSION}`;

/** ClusterClass `demo` with its templates, and the topology Cluster `demo`. */
async function seed(custom: CustomObjectsApi): Promise<void> {
  const create = (api: { group: string; version: string; plural: string }, kind: string, name: string, spec: Record<string, unknown>): Promise<unknown> =>
    custom.createNamespacedCustomObject({ ...api, namespace: NS, body: { apiVersion: `${api.group}/${api.version}`, kind, metadata: { name, namespace: NS }, spec } });
  const gvp = (k: { group: string; version: string; plural: string }): { group: string; version: string; plural: string } => ({ group: k.group, version: k.version, plural: k.plural });
  await create(gvp(LOCAL_CLUSTER_TEMPLATE), LOCAL_CLUSTER_TEMPLATE.kind, 'demo', { template: { spec: {} } });
  await create(gvp(LOCAL_CONTROL_PLANE_TEMPLATE), LOCAL_CONTROL_PLANE_TEMPLATE.kind, 'demo', { template: { spec: {} } });
  await create(gvp(LOCAL_BOOTSTRAP_CONFIG_TEMPLATE), LOCAL_BOOTSTRAP_CONFIG_TEMPLATE.kind, 'demo', { template: { spec: {} } });
  await create(gvp(LOCAL_MACHINE_TEMPLATE), LOCAL_MACHINE_TEMPLATE.kind, 'demo', {
    // As kubeadm would register them: CAPI's own startup taint (CAPI removes it), the product's startup gate (the
    // product removes it once the declared taints are on) and a foreign one nobody here owns.
    template: {
      spec: {
        startupTaints: [
          { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' },
          { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' },
          { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' },
        ],
      },
    },
  });
  const worker = (name: string, classTaints: string): Record<string, unknown> => ({
    class: name,
    metadata: { annotations: { [CLASS]: classTaints } },
    bootstrap: { templateRef: { apiVersion: apiVersion(BOOTSTRAP_GROUP), kind: LOCAL_BOOTSTRAP_CONFIG_TEMPLATE.kind, name: 'demo' } },
    infrastructure: { templateRef: { apiVersion: apiVersion(INFRASTRUCTURE_GROUP), kind: LOCAL_MACHINE_TEMPLATE.kind, name: 'demo' } },
  });
  await create({ ...CAPI, plural: 'clusterclasses' }, 'ClusterClass', 'demo', {
    infrastructure: { templateRef: { apiVersion: apiVersion(INFRASTRUCTURE_GROUP), kind: LOCAL_CLUSTER_TEMPLATE.kind, name: 'demo' } },
    controlPlane: { templateRef: { apiVersion: apiVersion(CONTROL_PLANE_GROUP), kind: LOCAL_CONTROL_PLANE_TEMPLATE.kind, name: 'demo' } },
    workers: {
      machineDeployments: [worker('gpu', 'pool=gpu:NoSchedule, warming:PreferNoSchedule@OnInitialization'), worker('edge', 'pool=edge:NoSchedule, maintenance:NoExecute')],
    },
  });
  await create(CLUSTERS, 'Cluster', CLUSTER, {
    topology: {
      classRef: { name: 'demo' },
      version: KUBERNETES_VERSION,
      controlPlane: { replicas: 1 },
      workers: {
        machineDeployments: DEPLOYMENTS.map((d) => ({ class: d.class, name: d.name, replicas: d.replicas, metadata: { annotations: { [CLUSTER_ANNOTATION]: d.cluster } } })),
      },
    },
  });
}

/** Waits until `count` Machines of the demo Cluster have a Node (Cluster API's status.nodeRef); returns the Node names. */
async function waitForNodes(custom: CustomObjectsApi, count: number): Promise<string[]> {
  const deadline = Date.now() + CONVERGE_TIMEOUT_MS;
  while (Date.now() < deadline) {
    const list = (await custom.listNamespacedCustomObject({ ...CAPI, plural: 'machines', namespace: NS })) as { items: { status?: { nodeRef?: { name?: string } } }[] };
    const names = list.items.map((m) => m.status?.nodeRef?.name).filter((n): n is string => Boolean(n));
    if (names.length === count) return names.sort();
    await sleep(250);
  }
  throw new Error(`Cluster API did not give ${count} Machines a Node within ${CONVERGE_TIMEOUT_MS / 1000} s`);
}

/** Sets the cluster-level declaration of one topology MachineDeployment (read-modify-write of the Cluster). */
async function setClusterDeclaration(custom: CustomObjectsApi, deployment: string, value: string): Promise<void> {
  for (;;) {
    const cluster = (await custom.getNamespacedCustomObject({ ...CLUSTERS, namespace: NS, name: CLUSTER })) as {
      spec: { topology: { workers: { machineDeployments: { name: string; metadata?: { annotations?: Record<string, string> } }[] } } };
    };
    for (const md of cluster.spec.topology.workers.machineDeployments) {
      if (md.name === deployment) md.metadata = { ...md.metadata, annotations: { ...md.metadata?.annotations, [CLUSTER_ANNOTATION]: value } };
    }
    try {
      await custom.replaceNamespacedCustomObject({ ...CLUSTERS, namespace: NS, name: CLUSTER, body: cluster });
      return;
    } catch (e) {
      if (statusOf(e) !== 409) throw e; // the topology controller wrote the Cluster meanwhile: read again
    }
  }
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

