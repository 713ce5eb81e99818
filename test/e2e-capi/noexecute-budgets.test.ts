/**
 * NoExecute with Cluster API's manager AND kube-controller-manager (taint-eviction and disruption controllers) on one
 * control plane of this file's own (the shared e2e-capi tier runs no kube-controller-manager; same feature gates;
 * issue 51, point 5): the taint is declared in a MachineDeployment's template, Cluster API copies it to the Machines in place,
 * the product's whole pipeline (forwarder, queue, reconcile) acts on it, and the Eviction API answers from the
 * disruption controller's real budget accounting.
 *
 * - a staged rollout (bound 1) never drops a PodDisruptionBudget below its minimum, never has more than one Node
 *   evicting, and every Node ends with the taint;
 * - a budget that allows no disruption holds its Node (reported in its mark and by an `EvictionRefused` Event on its
 *   Machine) while the group's other Nodes converge; relaxed, the Node converges;
 * - immediate mode (no opt-in): the taint is on every Node, and kube-controller-manager's taint-eviction controller
 *   deletes exactly the pods the `NoExecutePreview` Event counted as evicted now;
 * - the pipeline's process killed (SIGKILL) while a Node is evicting, a fresh one started: the bound and the budget
 *   hold, every Node converges, nothing is dead-lettered;
 * - the Cluster paused while a Node is evicting: nothing of its group changes (an unpaused group beside it converges,
 *   twice) even once its budget allows; unpaused, the rollout completes, one Node at a time.
 *
 * No kubelet and no scheduler run: pods are bound to their Node directly, with no grace period, and made Ready through
 * the status subresource.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, KubeConfig, PolicyV1Api, Watch, type V1Node, type V1Pod, type V1PodDisruptionBudget, type V1Toleration } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import type { Pipeline, PipelineCounters, PipelineOptions } from '#local/pipeline.ts';
import { ROLLOUT_ANNOTATION, ROLLOUT_EVICTING_TAINT, ROLLOUT_MARK_ANNOTATION } from '#shared/domain/noexecute-rollout.ts';
import { STARTUP_GATE_TAINT_KEY } from '#shared/domain/taint.ts';
import { createNamespace, createNode, MERGE_PATCH, statusOf, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { CLUSTERS, createMachineDeployment, createSelfHostedCluster, drained, MACHINE_DEPLOYMENTS, startProductPipeline, taintText, waitForMachineNodes, type MachineNode } from '#test/support/capi.ts';

const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const DECLARE = 'taints.capi-taint-propagator.dev/machine';
const MAINT = 'example.com/maintenance=yes:NoExecute';
const TOLERATE: V1Toleration[] = [{ key: 'example.com/maintenance', operator: 'Exists' }];

function podBody(name: string, nodeName: string, labels: Record<string, string>, tolerations: V1Toleration[] = []): V1Pod {
  return { metadata: { name, labels }, spec: { nodeName, terminationGracePeriodSeconds: 0, tolerations, containers: [{ name: 'c', image: 'registry.invalid/pause:never-pulled' }] } };
}

const isReady = (p: V1Pod): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true && !p.metadata?.deletionTimestamp;
const hasMaint = (n: V1Node): boolean => (n.spec?.taints ?? []).map(taintText).includes(MAINT);

describe('Cluster API and kube-controller-manager in the loop: NoExecute under disruption budgets', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let policy: PolicyV1Api;
  let ns: string;
  let cluster: string;
  let pipeline: Pipeline;
  let child: ChildProcess | undefined;
  const ROLLOUT = { claimedSeconds: 0, waitSeconds: 1, evictingSeconds: 1, refusedSeconds: 1, stuckAfterSeconds: 300 };

  beforeAll(async () => {
    cp = await startControlPlane({ build: false, log: () => undefined, capi: { featureGates: { MachineTaintPropagation: true } }, controllerManager: true });
    kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    core = kc.makeApiClient(CoreV1Api);
    policy = kc.makeApiClient(PolicyV1Api);
    ns = await createNamespace(kc, 'budgets');
    cluster = await createSelfHostedCluster(kc, ns);
    pipeline = await startProductPipeline(kc, ns, { rollout: ROLLOUT });
  }, 180_000);

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await pipeline?.stop();
    await cp?.stop();
  });

  /** A converged MachineDeployment (startup gate off every Node, queue empty); its Machines and Nodes. */
  const group = async (replicas: number, annotations: Record<string, string>, on = cluster): Promise<{ md: string; pairs: MachineNode[]; nodes: string[] }> => {
    const md = await createMachineDeployment(kc, ns, { cluster: on, replicas, startupTaints: [GATE], annotations });
    const pairs = await waitForMachineNodes(kc, ns, md, replicas);
    const nodes = pairs.map((p) => p.node.metadata?.name as string);
    for (const node of nodes) await waitFor(async () => !(await core.readNode({ name: node })).spec?.taints?.some((t) => t.key === GATE.key), { timeoutMs: 30_000, description: `the startup gate off ${node}` });
    await drained(pipeline);
    return { md, pairs, nodes };
  };

  /** Declares the taint in the MachineDeployment's template; Cluster API copies it to the Machines in place. */
  const declare = async (md: string, annotations: Record<string, string>): Promise<void> => {
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body: { spec: { template: { metadata: { annotations: { ...annotations, [DECLARE]: MAINT } } } } } }, MERGE_PATCH);
  };

  const makeReady = async (name: string): Promise<void> => {
    await core.patchNamespacedPodStatus({ namespace: ns, name, body: { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date() }] } } }, MERGE_PATCH);
  };

  const createReadyPod = async (body: V1Pod): Promise<void> => {
    await core.createNamespacedPod({ namespace: ns, body });
    await makeReady(body.metadata?.name as string);
  };

  /** Collects every watch event of a path until stopped. */
  const record = async <T>(path: string, query: Record<string, string> = {}): Promise<{ events: { type: string; object: T }[]; stop: () => void }> => {
    const events: { type: string; object: T }[] = [];
    const controller = await new Watch(kc).watch(path, query, (type, object: T) => void events.push({ type, object }), () => undefined);
    return { events, stop: () => controller.abort() };
  };

  const converged = async (node: string): Promise<void> => {
    await waitFor(
      async () => {
        const n = await core.readNode({ name: node });
        return hasMaint(n) && n.metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION] === undefined;
      },
      { timeoutMs: 120_000, intervalMs: 250, description: `${MAINT} on ${node}, its mark gone` },
    );
  };

  /** The most Nodes (of `names`, default all) carrying the evicting taint at once, replayed from a Node watch in order. */
  const mostEvicting = (events: { type: string; object: V1Node }[], names?: string[]): number => {
    const evicting = new Set<string>();
    let most = 0;
    for (const e of events) {
      const name = e.object.metadata?.name ?? '';
      if (names && !names.includes(name)) continue;
      if (e.type !== 'DELETED' && (e.object.spec?.taints ?? []).some((t) => t.key === ROLLOUT_EVICTING_TAINT.key)) evicting.add(name);
      else evicting.delete(name);
      most = Math.max(most, evicting.size);
    }
    return most;
  };

  /**
   * Two Ready web pods per Node under a budget keeping 5 of 6 (one disruption at a time), a tolerating pod per Node, and
   * the test standing in for a ReplicaSet and a kubelet: a Ready replacement on a spare Node outside the group for each
   * web pod that goes. Watches the budget, the Nodes and the web pods; `settled` waits for six replacements counted by
   * the budget; `stop` ends the stand-in and the watches.
   */
  const webUnderBudget = async (nodes: string[]) => {
    const spare = uniqueName('spare');
    await createNode(kc, spare);
    const app = uniqueName('web');
    for (const node of nodes) {
      for (const k of [0, 1]) await createReadyPod(podBody(`${node}-web-${k}`, node, { app }));
      await core.createNamespacedPod({ namespace: ns, body: podBody(`${node}-tolerating`, node, { app: `${app}-t` }, TOLERATE) });
    }
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: app }, spec: { minAvailable: 5, selector: { matchLabels: { app } } } } });
    await waitFor(async () => (await policy.readNamespacedPodDisruptionBudget({ namespace: ns, name: app })).status?.disruptionsAllowed === 1, { timeoutMs: 30_000, description: 'the budget to be computed' });
    const budget = await record<V1PodDisruptionBudget>(`/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`, { fieldSelector: `metadata.name=${app}` });
    const nodeWatch = await record<V1Node>('/api/v1/nodes');
    const pods = await record<V1Pod>(`/api/v1/namespaces/${ns}/pods`, { labelSelector: `app=${app}` });
    let replacements = 0;
    let replacing = true;
    const replicaSet = (async () => {
      let handled = 0;
      while (replacing) {
        const deleted = pods.events.slice(handled).filter((e) => e.type === 'DELETED' && e.object.spec?.nodeName !== spare);
        handled = pods.events.length;
        for (const _ of deleted) await createReadyPod(podBody(`${app}-r${replacements++}`, spare, { app }));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    return {
      budget,
      nodeWatch,
      /** The marker: all six replacements Ready, as the budget's own watch reports it. */
      settled: () =>
        waitFor(async () => (replacements === 6 && budget.events.some((e) => e.object.status?.currentHealthy === 6 && e.object.status.observedGeneration === e.object.metadata?.generation) ? true : undefined), {
          timeoutMs: 30_000,
          description: 'six Ready replacements counted by the budget',
        }),
      stop: async () => {
        replacing = false;
        await replicaSet;
        budget.stop();
        nodeWatch.stop();
        pods.stop();
      },
    };
  };

  /** Every Node carries the taint and no mark, every web pod of the group went, every tolerating pod stayed. */
  const expectWebRolledOut = async (nodes: string[]): Promise<void> => {
    for (const node of nodes) {
      const n = await core.readNode({ name: node });
      expect(n.spec?.taints?.map(taintText)).toEqual([MAINT]);
      expect(n.metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION]).toBeUndefined();
      for (const k of [0, 1]) expect(statusOf(await core.readNamespacedPod({ namespace: ns, name: `${node}-web-${k}` }).catch((e: unknown) => e))).toBe(404);
      expect((await core.readNamespacedPod({ namespace: ns, name: `${node}-tolerating` })).metadata?.deletionTimestamp).toBeUndefined();
    }
  };

  /** The budget never below its minimum, from its watch. */
  const expectBudgetHeld = (budget: { events: { object: V1PodDisruptionBudget }[] }): void => {
    const statuses = budget.events.map((e) => e.object.status).filter((s) => s !== undefined);
    expect(statuses.length).toBeGreaterThan(1);
    for (const s of statuses) expect(s.currentHealthy).toBeGreaterThanOrEqual(s.desiredHealthy ?? Number.NaN);
  };

  it('a staged rollout (bound 1) never drops a PodDisruptionBudget below its minimum, one Node evicting at a time', async () => {
    // Prepare: a MachineDeployment of 3 opted in with a bound of 1; two Ready web pods per Node under a budget keeping
    // 5 of 6 (one disruption at a time); a tolerating pod per Node; a spare Node outside the group.
    const { md, nodes } = await group(3, { [ROLLOUT_ANNOTATION]: '1' });
    const web = await webUnderBudget(nodes);

    try {
      // Act
      await declare(md, { [ROLLOUT_ANNOTATION]: '1' });
      for (const node of nodes) await converged(node);
      await web.settled();
    } finally {
      await web.stop();
    }
    const counters = await drained(pipeline);

    // Assess: the budget never below its minimum; never more than one Node evicting; every Node converged
    expectBudgetHeld(web.budget);
    expect(mostEvicting(web.nodeWatch.events)).toBe(1);
    await expectWebRolledOut(nodes);
    expect(counters.deadLettered).toBe(0);
  });

  it('a budget allowing no disruption holds its Node and is reported; the others converge; relaxed, it converges', async () => {
    // Prepare: a MachineDeployment of 3 opted in with a bound of 2; a Ready db pod on the first Node under a budget of
    // minAvailable 1 (no disruption allowed); a web pod without a budget on each other Node. Not `maxUnavailable: 0`:
    // for a pod without a controller the disruption controller cannot count the expected pods (InsufficientPods), so a
    // `maxUnavailable` budget over bare pods would refuse even once relaxed.
    const { md, pairs, nodes } = await group(3, { [ROLLOUT_ANNOTATION]: '2' });
    const [held, ...others] = nodes as [string, ...string[]];
    const heldMachine = pairs[0]?.machine.metadata.name as string;
    const db = `${held}-db`;
    const app = uniqueName('db');
    await createReadyPod(podBody(db, held, { app }));
    for (const node of others) await createReadyPod(podBody(`${node}-web`, node, { app: uniqueName('web') }));
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: app }, spec: { minAvailable: 1, selector: { matchLabels: { app } } } } });
    await waitFor(
      async () => {
        const s = (await policy.readNamespacedPodDisruptionBudget({ namespace: ns, name: app })).status;
        return s?.currentHealthy === 1 && s.disruptionsAllowed === 0;
      },
      { timeoutMs: 30_000, description: 'the budget to be computed' },
    );

    // Act
    await declare(md, { [ROLLOUT_ANNOTATION]: '2' });

    // Assess: the other Nodes converge (their pods evicted); the held Node is reported refused in its mark and by an Event
    for (const node of others) await converged(node);
    for (const node of others) expect(statusOf(await core.readNamespacedPod({ namespace: ns, name: `${node}-web` }).catch((e: unknown) => e))).toBe(404);
    const mark = await waitFor(
      async () => {
        const raw = (await core.readNode({ name: held })).metadata?.annotations?.[ROLLOUT_MARK_ANNOTATION];
        const parsed = raw === undefined ? undefined : (JSON.parse(raw) as { refused?: string[] });
        return parsed?.refused?.includes(`${ns}/${db}`) ? parsed : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 250, description: `the mark of ${held} to list ${db} as refused` },
    );
    expect(mark).toMatchObject({ group: `MachineDeployment/${ns}/${md}`, taints: [MAINT], refused: [`${ns}/${db}`] });
    await waitFor(async () => (await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${heldMachine}` })).items.some((e) => e.type === 'Warning' && e.reason === 'EvictionRefused'), {
      timeoutMs: 30_000,
      description: `an EvictionRefused Event on Machine ${heldMachine}`,
    });
    expect(hasMaint(await core.readNode({ name: held }))).toBe(false);
    expect((await core.readNamespacedPod({ namespace: ns, name: db })).metadata?.deletionTimestamp).toBeUndefined();

    // Act: the budget relaxed
    await policy.patchNamespacedPodDisruptionBudget({ namespace: ns, name: app, body: { spec: { minAvailable: 0 } } }, MERGE_PATCH);

    // Assess: the held Node converges, its db pod evicted
    await converged(held);
    expect(statusOf(await core.readNamespacedPod({ namespace: ns, name: db }).catch((e: unknown) => e))).toBe(404);
    expect((await drained(pipeline)).deadLettered).toBe(0);
  });

  it('immediate mode next to Cluster API: the taint on every Node, the taint-eviction controller deletes exactly what the preview counted', async () => {
    // Prepare: a MachineDeployment of 2 without the opt-in; per Node a pod without a toleration (evicted now), one that
    // tolerates the taint for an hour (evicted later) and one that tolerates it (kept)
    const { md, pairs, nodes } = await group(2, {});
    const later: V1Toleration[] = [{ key: 'example.com/maintenance', operator: 'Equal', value: 'yes', effect: 'NoExecute', tolerationSeconds: 3600 }];
    for (const node of nodes) {
      await createReadyPod(podBody(`${node}-now`, node, { app: 'now' }));
      await createReadyPod(podBody(`${node}-later`, node, { app: 'later' }, later));
      await createReadyPod(podBody(`${node}-kept`, node, { app: 'kept' }, TOLERATE));
    }
    const pods = await record<V1Pod>(`/api/v1/namespaces/${ns}/pods`);
    const nodeWatch = await record<V1Node>('/api/v1/nodes');

    // Act
    await declare(md, {});

    // Assess: every Node got the taint without passing through the evicting taint; each Machine's preview counted
    for (const node of nodes) await waitFor(async () => hasMaint(await core.readNode({ name: node })), { timeoutMs: 60_000, intervalMs: 250, description: `${MAINT} on ${node}` });
    const counted = new Map<string, number>();
    for (const [i, pair] of pairs.entries()) {
      const message = await waitFor(
        async () => (await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${pair.machine.metadata.name}` })).items.find((e) => e.reason === 'NoExecutePreview')?.message,
        { timeoutMs: 30_000, description: `a NoExecutePreview Event on Machine ${pair.machine.metadata.name}` },
      );
      expect(message).toContain('would evict 1 pod now, 1 after 3600 s, keeps 1');
      counted.set(nodes[i] as string, Number(/would evict (\d+) pods? now/.exec(message)?.[1]));
    }
    // The marker: a fresh pod without a toleration on the first Node, deleted by the controller after the others
    const marker = `${nodes[0]}-marker`;
    // (not made Ready: the controller may delete it first)
    await core.createNamespacedPod({ namespace: ns, body: podBody(marker, nodes[0] as string, { app: 'marker' }) });
    await waitFor(() => pods.events.some((e) => e.type === 'DELETED' && e.object.metadata?.name === marker), { timeoutMs: 60_000, intervalMs: 100, description: `the taint-eviction controller to delete ${marker}` });
    pods.stop();
    nodeWatch.stop();
    const deleted = pods.events.filter((e) => e.type === 'DELETED').map((e) => e.object.metadata?.name).sort();
    expect(deleted).toEqual([...nodes.map((n) => `${n}-now`), marker].sort());
    for (const node of nodes) {
      expect(pods.events.filter((e) => e.type === 'DELETED' && e.object.spec?.nodeName === node && e.object.metadata?.name !== marker)).toHaveLength(counted.get(node) ?? -1);
      for (const kept of [`${node}-later`, `${node}-kept`]) expect((await core.readNamespacedPod({ namespace: ns, name: kept })).metadata?.deletionTimestamp).toBeUndefined();
    }
    expect(nodeWatch.events.some((e) => nodes.includes(e.object.metadata?.name ?? '') && (e.object.spec?.taints ?? []).some((t) => t.key === ROLLOUT_EVICTING_TAINT.key))).toBe(false);
  });
  it('the pipeline killed (SIGKILL) while a Node is evicting, a fresh one started: nothing lost, the bound and the budget hold', async () => {
    // Prepare: as the first case, a MachineDeployment of 3 opted in with a bound of 1, two Ready web pods per Node under
    // a budget keeping 5 of 6, a tolerating pod per Node, the test standing in for ReplicaSet and kubelet on a spare Node.
    const { md, nodes } = await group(3, { [ROLLOUT_ANNOTATION]: '1' });
    const web = await webUnderBudget(nodes);
    // The pipeline in a child process (as test/e2e/faults.test.ts does), so that it can be killed with SIGKILL: no
    // hand-over, no draining, its in-memory queue gone with it. The in-process pipeline steps aside meanwhile.
    await pipeline.stop();
    const options: PipelineOptions = {
      kubeconfig: cp.kubeconfigPath,
      mode: 'self',
      stateNamespace: ns,
      leaseName: uniqueName('forwarder'),
      machineNamespace: ns,
      visibilityTimeoutSeconds: 5,
      maxReceiveCount: 50,
      retryBaseSeconds: 0,
      retryMaxSeconds: 1,
      forwarderOptions: { renewIntervalMs: 1000, acquireRetryMs: 200, flushIntervalMs: 20 },
      rollout: ROLLOUT,
    };
    const spawn = async (): Promise<ChildProcess> => {
      const c = fork(fileURLToPath(new URL('../support/pipeline-child.ts', import.meta.url)), [], {
        execArgv: ['--no-warnings=ExperimentalWarning'],
        env: { ...process.env, POWERTOOLS_LOG_LEVEL: 'SILENT', PIPELINE_CHILD_OPTIONS: JSON.stringify(options) },
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      });
      child = c;
      await new Promise<void>((resolve, reject) => {
        c.once('message', () => resolve());
        c.once('exit', (code, signal) => reject(new Error(`pipeline child exited (${code ?? signal}) before it was ready`)));
      });
      return c;
    };
    const countersOf = (c: ChildProcess): Promise<PipelineCounters> =>
      new Promise((resolve) => {
        c.once('message', (m) => resolve((m as { counters: PipelineCounters }).counters));
        c.send('counters');
      });
    const kill = async (c: ChildProcess): Promise<void> => {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGKILL');
      await exited;
    };
    let counters: PipelineCounters;
    let killedWhile: string | undefined;

    try {
      const first = await spawn();

      // Act: the taint declared; once a Node of the group carries the evicting taint (from the Node watch), SIGKILL
      await declare(md, { [ROLLOUT_ANNOTATION]: '1' });
      killedWhile = await waitFor(
        () => web.nodeWatch.events.find((e) => nodes.includes(e.object.metadata?.name ?? '') && (e.object.spec?.taints ?? []).some((t) => t.key === ROLLOUT_EVICTING_TAINT.key))?.object.metadata?.name,
        { timeoutMs: 60_000, intervalMs: 50, description: 'a Node of the group to carry the evicting taint' },
      );
      await kill(first);
      expect(first.signalCode).toBe('SIGKILL');
      // A fresh pipeline: a new in-memory queue, so it deletes the Lease and announces every object from the cluster
      const second = await spawn();
      for (const node of nodes) await converged(node);
      await web.settled();
      counters = await waitFor(
        async () => {
          const c = await countersOf(second);
          return c.queueVisible === 0 && c.queueInFlight === 0 ? c : undefined;
        },
        { timeoutMs: 20_000, intervalMs: 300, description: 'the fresh pipeline\'s queue to be empty' },
      );
      await kill(second);
    } finally {
      await web.stop();
      if (child && child.exitCode === null && child.signalCode === null) await kill(child);
      pipeline = await startProductPipeline(kc, ns, { rollout: ROLLOUT });
    }

    // Assess: killed mid-rollout (a Node was evicting); the budget never below its minimum; never more than one Node
    // evicting, across the kill; every Node converged
    expect(nodes).toContain(killedWhile);
    expectBudgetHeld(web.budget);
    expect(mostEvicting(web.nodeWatch.events)).toBe(1);
    await expectWebRolledOut(nodes);
    expect(counters.deadLettered).toBe(0);
    expect(counters.deadLetterQueueDepth).toBe(0);
  });
  it('the Cluster paused while a Node is evicting: nothing of its group changes; unpaused, the rollout completes one Node at a time', async () => {
    // Prepare: a second Cluster with a MachineDeployment of 3 opted in with a bound of 1, a Ready db pod per Node under a
    // budget keeping all 3 (so its first Node stays in progress, refused); beside it, in the first Cluster, a
    // MachineDeployment of 1 without the opt-in whose Node is the marker.
    const custom = kc.makeApiClient(CustomObjectsApi);
    const pausable = await createSelfHostedCluster(kc, ns);
    const { md, nodes } = await group(3, { [ROLLOUT_ANNOTATION]: '1' }, pausable);
    const marker = await group(1, {});
    const markerNode = marker.nodes[0] as string;
    const app = uniqueName('db');
    for (const node of nodes) await createReadyPod(podBody(`${node}-db`, node, { app }));
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: app }, spec: { minAvailable: 3, selector: { matchLabels: { app } } } } });
    await waitFor(
      async () => {
        const s = (await policy.readNamespacedPodDisruptionBudget({ namespace: ns, name: app })).status;
        return s?.currentHealthy === 3 && s.disruptionsAllowed === 0;
      },
      { timeoutMs: 30_000, description: 'the budget to be computed' },
    );
    const nodeWatch = await record<V1Node>('/api/v1/nodes');
    const inGroup = (e: { object: V1Node }): boolean => nodes.includes(e.object.metadata?.name ?? '');
    const isEvicting = (n: V1Node): boolean => (n.spec?.taints ?? []).some((t) => t.key === ROLLOUT_EVICTING_TAINT.key);
    const setPaused = (paused: boolean): Promise<unknown> => custom.patchNamespacedCustomObject({ ...CLUSTERS, namespace: ns, name: pausable, body: { spec: { paused } } }, MERGE_PATCH);
    const removeMaintByHand = async (name: string): Promise<void> => {
      for (let attempt = 1; ; attempt++) {
        const node = await core.readNode({ name });
        try {
          await core.patchNode({ name, body: { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints: (node.spec?.taints ?? []).filter((t) => taintText(t) !== MAINT) } } }, MERGE_PATCH);
          return;
        } catch (e) {
          if (statusOf(e) !== 409 || attempt >= 5) throw e;
        }
      }
    };
    const versions = async (): Promise<Record<string, string | undefined>> => Object.fromEntries(await Promise.all(nodes.map(async (n) => [n, (await core.readNode({ name: n })).metadata?.resourceVersion] as const)));

    try {
      // Act: the taint declared; once a Node of the group is evicting (from the Node watch), the Cluster paused
      await declare(md, { [ROLLOUT_ANNOTATION]: '1' });
      const held = await waitFor(() => nodeWatch.events.find((e) => inGroup(e) && isEvicting(e.object))?.object.metadata?.name, {
        timeoutMs: 60_000,
        intervalMs: 50,
        description: 'a Node of the group to carry the evicting taint',
      });
      await setPaused(true);
      // The first marker: the taint declared on the unpaused group converges, the queue empties; a reconcile of the
      // paused group decided before the pause has landed by then. What the group's Nodes are now is the reference.
      await declare(marker.md, {});
      await converged(markerNode);
      await drained(pipeline);
      const paused = await versions();
      // The budget relaxed while paused (were the pause ignored, the held Node's pod would now go), and the second
      // marker: the taint removed by hand from the marker Node is put back, the queue empties again.
      await policy.patchNamespacedPodDisruptionBudget({ namespace: ns, name: app, body: { spec: { minAvailable: 0 } } }, MERGE_PATCH);
      await removeMaintByHand(markerNode);
      await converged(markerNode);
      const whilePaused = await drained(pipeline);

      // Assess: nothing of the paused group changed; the held Node still evicting, its pod still there
      expect(await versions()).toEqual(paused);
      expect(isEvicting(await core.readNode({ name: held }))).toBe(true);
      for (const node of nodes) expect((await core.readNamespacedPod({ namespace: ns, name: `${node}-db` })).metadata?.deletionTimestamp).toBeUndefined();
      expect(whilePaused.deadLettered).toBe(0);

      // Act: the Cluster unpaused
      await setPaused(false);

      // Assess: every Node of the group converges, its db pod evicted, never more than one Node evicting (Node watch)
      for (const node of nodes) await converged(node);
      for (const node of nodes) expect(statusOf(await core.readNamespacedPod({ namespace: ns, name: `${node}-db` }).catch((e: unknown) => e))).toBe(404);
      expect(mostEvicting(nodeWatch.events, nodes)).toBe(1);
      for (const node of nodes) expect((await core.readNode({ name: node })).spec?.taints?.map(taintText)).toEqual([MAINT]);
      expect((await drained(pipeline)).deadLettered).toBe(0);
    } finally {
      nodeWatch.stop();
      await setPaused(false);
    }
  });
});
