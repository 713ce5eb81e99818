/**
 * Fault runs of the whole local pipeline (with `npm start`'s queue and retry settings) against the real
 * control plane. The pipeline reaches the API server through a fault-injecting proxy; the test edits
 * Machines directly. Each run asserts the exact final taint sets, that no foreign taint was lost and that
 * nothing was dead-lettered, and logs how long convergence took after the fault ended.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { PipelineCounters, PipelineOptions } from '#local/pipeline.ts';
import { adminKubeConfig, createMachine, createNamespace, describeWithControlPlane, requireControlPlane, setMachineNodeRef, uniqueName, waitFor } from '#test/support/control-plane.ts';
import { FaultProxy } from '#test/support/fault-proxy.ts';
import { E2E_LABEL, expectNode, joinNode, setSpecTaints, startWorld, writeAwsCalls, type World } from './support.ts';

const FOREIGN = { key: 'foreign.example.com/keep', value: 'x', effect: 'NoExecute' };
const FOREIGN_S = 'foreign.example.com/keep=x:NoExecute';
/** `npm start`'s defaults (local/local-config.ts): the retry and redrive settings under test. */
const NPM_START: Partial<PipelineOptions> = { visibilityTimeoutSeconds: 30, maxReceiveCount: 5, retryBaseSeconds: 1, retryMaxSeconds: 30 };
/**
 * The kill test's lease: short, so the restarted pipeline takes over soon, yet long enough that a renewal (a read and
 * a write, bounded by 0.6 of the lease, 1/3 each) fits while every chunk takes 500 ms each way: a call is 1 to 1.5 s
 * then, against 1.7 s per call with 5 s. With 5 s, failing runs in CI sent 7 of the burst's 8 events and then nothing
 * for 16 s, as a forwarder does after giving up a Lease it could not renew (not confirmed: those runs kept no log).
 */
const KILL_LEASE_SECONDS = 10;
/** The bound of the issue: every Node converges within 60 s of the API server's return. */
const CONVERGENCE_MS = 60_000;

interface Pair {
  readonly machine: string;
  readonly node: string;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Creates `n` Machines (`a=<value>:NoSchedule`, Always) with Nodes that carry a foreign taint. */
async function createPairs(kc: KubeConfig, w: Pick<World, 'ns' | 'run'>, n: number, prefix: string): Promise<Pair[]> {
  const pairs: Pair[] = [];
  for (let i = 0; i < n; i++) {
    const node = await joinNode({ kc, ns: w.ns, run: w.run } as World, `${prefix}${i}`, [FOREIGN]);
    const machine = uniqueName(`${prefix}${i}`);
    await createMachine(kc, w.ns, machine, { specTaints: [{ key: 'a', value: '0', effect: 'NoSchedule' }] });
    await setMachineNodeRef(kc, w.ns, machine, node);
    pairs.push({ machine, node });
  }
  return pairs;
}

async function edit(kc: KubeConfig, ns: string, pairs: readonly Pair[], value: string): Promise<void> {
  for (const p of pairs) await setSpecTaints(kc, ns, p.machine, [{ key: 'a', value, effect: 'NoSchedule' }]);
}

/**
 * Waits until every Node carries exactly the foreign taint and `a=<value>`; returns how long that took. A failure
 * names the pipeline's counters too (`counters`), so that a slow retry and a lost change can be told apart.
 */
async function converge(kc: KubeConfig, expected: ReadonlyMap<string, string>, timeoutMs: number, counters?: () => Promise<PipelineCounters> | PipelineCounters): Promise<number> {
  const started = Date.now();
  try {
    await Promise.all(
      [...expected].map(([node, value]) => expectNode(kc, node, { taints: [FOREIGN_S, `a=${value}:NoSchedule`], tracking: 'a:NoSchedule' }, { timeoutMs })),
    );
  } catch (err) {
    if (!counters) throw err;
    throw new Error(`${(err as Error).message}; pipeline counters ${JSON.stringify(await counters())}`, { cause: err });
  }
  return Date.now() - started;
}

describeWithControlPlane('e2e: no change is lost through faults', () => {
  let kc: KubeConfig;
  let world: World | undefined;
  let proxy: FaultProxy | undefined;
  let child: ChildProcess | undefined;

  beforeAll(() => {
    requireControlPlane();
    kc = adminKubeConfig();
  });

  afterEach(async () => {
    await world?.pipeline.stop();
    world = undefined;
    await proxy?.close();
    proxy = undefined;
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    child = undefined;
  });

  // The AWS calls of the in-process pipelines (outages and a flaky network: backoff and re-sends included) are all
  // listed in the code fixture that the least-privilege test evaluates; the file is its input with AWS_CALL_RECORDINGS.
  afterAll(async () => {
    const { calls, unlisted } = await writeAwsCalls('e2e-faults');
    expect(unlisted).toEqual([]);
    expect(calls.map((c) => `${c.function} ${c.action}`)).toEqual(expect.arrayContaining(['watch-forwarder sqs:SendMessage', 'reconcile-node-taints sqs:ReceiveMessage']));
  });

  it('converges every Node within 60 s of the end of a 20 s outage, with edits before and during it, and dead-letters nothing', async () => {
    // Prepare
    proxy = await FaultProxy.start(requireControlPlane().server);
    world = await startWorld(kc, { ...NPM_START, kubeconfig: proxy.kubeConfig(kc) });
    const pairs = await createPairs(kc, world, 6, 'outage');
    await converge(kc, new Map(pairs.map((p) => [p.node, '0'])), 30_000);
    const before = pairs.slice(0, 3);
    const during = pairs.slice(3);

    // Act: edits just before the outage, which starts once the forwarder has queued them and while their
    // reconciles are under way (every chunk to and from the API server takes 400 ms); more edits during it.
    const forwarded = world.pipeline.counters().eventsForwarded;
    proxy.flaky({ resetEvery: Number.MAX_SAFE_INTEGER, delayMs: 400 });
    await edit(kc, world.ns, before, 'before');
    const pipeline = world.pipeline;
    await waitFor(() => pipeline.counters().eventsForwarded >= forwarded + before.length, { timeoutMs: 10_000, intervalMs: 10, description: 'the edits to be queued' });
    proxy.outage();
    proxy.steady();
    await edit(kc, world.ns, during, 'during');
    await sleep(10_000);
    await edit(kc, world.ns, before.slice(0, 1), 'during');
    await sleep(10_000);
    proxy.restore();
    const expected = new Map([...before.slice(1).map((p) => [p.node, 'before'] as const), ...[...before.slice(0, 1), ...during].map((p) => [p.node, 'during'] as const)]);
    const tookMs = await converge(kc, expected, CONVERGENCE_MS, () => pipeline.counters());

    // Assess
    process.stderr.write(`outage: every Node converged ${(tookMs / 1000).toFixed(1)} s after the API server returned (counters ${JSON.stringify(world.pipeline.counters())})\n`);
    const counters = world.pipeline.counters();
    // The hints in flight failed for transient reasons throughout the outage and were re-issued before the redrive.
    expect(counters.transientErrors).toBeGreaterThan(0);
    expect(counters.reissued).toBeGreaterThan(0);
    expect(counters.deadLettered).toBe(0);
    expect(counters.deadLetterQueueDepth).toBe(0);
  });

  it('converges every Node through a flaky network (delayed chunks, reset connections) and dead-letters nothing', async () => {
    // Prepare
    proxy = await FaultProxy.start(requireControlPlane().server);
    world = await startWorld(kc, { ...NPM_START, kubeconfig: proxy.kubeConfig(kc) });
    const pairs = await createPairs(kc, world, 6, 'flaky');
    await converge(kc, new Map(pairs.map((p) => [p.node, '0'])), 30_000);

    // Act: every 7th chunk from the API server resets its connection, every chunk waits 150 ms. Two rounds of edits
    // while the network is flaky; it stays flaky until the faults have hit the pipeline after the last edit (a
    // transient failure, a watch restart or a reset connection since then), and the Nodes must then converge within
    // the bound.
    // (While the faults go on, a record's retries back off towards 30 s, so convergence under them has no bound.)
    proxy.flaky({ resetEvery: 7, delayMs: 150 });
    const resetsBefore = proxy.resets;
    const pipeline = world.pipeline;
    const faultsOf = (): number => pipeline.counters().transientErrors + pipeline.counters().watchRestarts;
    const faultsBefore = faultsOf();
    await edit(kc, world.ns, pairs, 'flaky1');
    await sleep(4_000);
    await edit(kc, world.ns, pairs, 'flaky2');
    const faultsAtLastEdit = faultsOf();
    const resetsAtLastEdit = proxy.resets;
    // A reset the client retried on a fresh socket counts too: a failing watch backs off (at most one request a second
    // after its first seconds), so after the last edit the pipeline may make too few requests for a visible fault.
    await waitFor(() => faultsOf() > faultsAtLastEdit || (proxy as FaultProxy).resets > resetsAtLastEdit, { timeoutMs: 60_000, intervalMs: 50, description: 'a fault to hit the pipeline after the last edit' });
    proxy.steady();
    const tookMs = await converge(kc, new Map(pairs.map((p) => [p.node, 'flaky2'])), CONVERGENCE_MS, () => pipeline.counters());

    // Assess
    const resets = proxy.resets - resetsBefore;
    process.stderr.write(`flaky network: every Node converged ${(tookMs / 1000).toFixed(1)} s after the network steadied (${resets} connections reset)\n`);
    expect(resets).toBeGreaterThan(0);
    const counters = pipeline.counters();
    expect(faultsOf()).toBeGreaterThan(faultsBefore);
    expect(counters.deadLettered).toBe(0);
    expect(counters.deadLetterQueueDepth).toBe(0);
  });

  it('loses no edit when the pipeline process is killed (SIGKILL) in the middle of a burst and restarted', async () => {
    // Prepare: the pipeline in a child process (in-memory queue, as `npm start`) reaching the API server
    // through the proxy, Nodes in sync.
    const ns = await createNamespace(kc, 'kill');
    const run = uniqueName('run');
    proxy = await FaultProxy.start(requireControlPlane().server);
    const dir = mkdtempSync(join(tmpdir(), 'faults-'));
    const kubeconfigPath = join(dir, 'kubeconfig');
    writeFileSync(kubeconfigPath, proxy.kubeConfig(kc).exportConfig(), { mode: 0o600 });
    const spawn = (): { child: ChildProcess; ready: Promise<void> } => {
      const c = fork(fileURLToPath(new URL('../support/pipeline-child.ts', import.meta.url)), [], {
        execArgv: ['--no-warnings=ExperimentalWarning'],
        env: {
          ...process.env,
          POWERTOOLS_LOG_LEVEL: 'SILENT',
          FAULT_KUBECONFIG: kubeconfigPath,
          FAULT_NAMESPACE: ns,
          FAULT_RUN: run,
          FAULT_LABEL_SELECTOR: `${E2E_LABEL}=${run}`,
          FAULT_LEASE_SECONDS: String(KILL_LEASE_SECONDS),
        },
        stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      });
      const ready = new Promise<void>((resolve, reject) => {
        c.once('message', () => resolve());
        c.once('exit', (code, signal) => reject(new Error(`pipeline child exited (${code ?? signal}) before it was ready`)));
      });
      return { child: c, ready };
    };
    const countersOf = (c: ChildProcess): Promise<PipelineCounters> =>
      new Promise((resolve) => {
        c.once('message', (m) => resolve((m as { counters: PipelineCounters }).counters));
        c.send('counters');
      });
    const pairs = await createPairs(kc, { ns, run }, 12, 'kill');
    const first = spawn();
    child = first.child;
    await first.ready;
    await converge(kc, new Map(pairs.map((p) => [p.node, '0'])), 30_000);

    try {
      // Act: a burst of edits while every chunk to and from the API server takes 500 ms, so that the
      // forwarder has queued them (and, every second, stored its progress) while most reconciles are
      // still under way; then the process dies, and the rest of the burst happens while it is down.
      const { eventsForwarded } = await countersOf(first.child);
      proxy.flaky({ resetEvery: Number.MAX_SAFE_INTEGER, delayMs: 500 });
      await edit(kc, ns, pairs.slice(0, 8), 'burst');
      let seen: PipelineCounters | undefined;
      await waitFor(
        async () => {
          seen = await countersOf(first.child);
          return seen.eventsForwarded >= eventsForwarded + 8;
        },
        { timeoutMs: 20_000, intervalMs: 100, description: 'the burst to be queued' },
      ).catch((err: unknown) => {
        throw new Error(`${(err as Error).message}; pipeline counters ${JSON.stringify(seen)} (${eventsForwarded} forwarded before the burst)`, { cause: err });
      });
      // A batch reconciles its Nodes at once, so the kill comes soon after the burst was queued: past at least one
      // store of the forwarder's progress (every second), with most writes still under way (each takes two round trips
      // of 1 s through the proxy, and a batch's first record goes before the rest of its cluster's).
      await sleep(1_500);
      const applied = (await countersOf(first.child)).writes;
      first.child.kill('SIGKILL');
      await new Promise((r) => first.child.once('exit', r));
      proxy.steady();
      await edit(kc, ns, pairs.slice(8), 'burst');
      const restartedAt = Date.now();
      const second = spawn();
      child = second.child;
      await second.ready;
      const tookMs = await converge(kc, new Map(pairs.map((p) => [p.node, 'burst'])), CONVERGENCE_MS, () => countersOf(second.child));

      // Assess
      process.stderr.write(
        `kill -9 (${applied - 12} of 8 edits applied before the kill): every Node converged ${((Date.now() - restartedAt) / 1000).toFixed(1)} s after the restart ` +
          `(${(tookMs / 1000).toFixed(1)} s after the new forwarder took the Lease; lease duration ${KILL_LEASE_SECONDS} s)\n`,
      );
      expect(applied - 12).toBeLessThan(8);
      expect(first.child.signalCode).toBe('SIGKILL');
      const counters = await countersOf(second.child);
      expect(counters.deadLettered).toBe(0);
      expect(counters.deadLetterQueueDepth).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
