/**
 * The product next to the real Cluster API manager (its own control plane, gate MachineTaintPropagation on, then the
 * same manager restarted with the gate off), with the product's pipeline running as `npm start` runs it (defaults:
 * `spec.taints` owned by upstream CAPI, the product's own startup gate and tracking annotation, first enablement
 * recorded by the first reconcile). Every Node version is recorded by a watch, so the assertions see each write.
 *
 * - no write wars: after convergence, 0 Node writes by either side for 60 s, for taints in `spec.taints`, in each
 *   annotation (class, cluster, machine) and in both at once; then a marker edit proves the watch was live;
 * - annotation-declared OnInitialization taints reach new Nodes although CAPI initializes them first, and are not
 *   put back after someone removes them;
 * - the startup gate holds: no Node version without the gate lacks a declared taint;
 * - a migration from an annotation to `spec.taints` in one edit: the taint is on every Node version, and afterwards
 *   CAPI's tracking annotation tracks it and the product's does not;
 * - gate off: the annotation cases again, 0 writes in 60 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, KubeConfig, Watch, type V1Node } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import type { Pipeline } from '#local/pipeline.ts';
import { OWN_TRACKING_ANNOTATION, STARTUP_GATE_TAINT_KEY, TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { createNamespace, MERGE_PATCH, waitFor, type MachineTaint } from '#test/support/control-plane.ts';
import { MACHINE_DEPLOYMENTS, createMachineDeployment, createSelfHostedCluster, describeWithCapi, taintText, waitForMachineNodes, startProductPipeline } from '#test/support/capi.ts';

const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' };
const GATE_TEXT = taintText(GATE);
const CLASS = 'taints.capi-taint-propagator.dev/class';
const CLUSTER = 'taints.capi-taint-propagator.dev/cluster';
const MACHINE = 'taints.capi-taint-propagator.dev/machine';
/** The quiet window after convergence in which no Node may be written. */
const QUIET_MS = 60_000;

/** One coexistence case: a MachineDeployment of one replica and the Node state it must converge to. */
interface Case {
  readonly name: string;
  readonly annotations?: Record<string, string>;
  readonly taints?: MachineTaint[];
  /** Exact Node taints after convergence (`key=value:effect`). */
  readonly want: string[];
  /** The product's tracking annotation after convergence. */
  readonly own: string;
  /** CAPI's tracking annotation after convergence, where CAPI propagates `spec.taints`. */
  readonly upstream?: string;
}

const CASES: Case[] = [
  {
    name: 'spec.taints',
    taints: [{ key: 's1', value: '1', effect: 'NoSchedule' }, { key: 's2', effect: 'PreferNoSchedule', propagation: 'OnInitialization' }],
    want: ['s1=1:NoSchedule', 's2=:PreferNoSchedule'],
    own: '',
    upstream: 's1:NoSchedule',
  },
  { name: 'class annotation', annotations: { [CLASS]: 'c1=1:NoSchedule, c2:PreferNoSchedule@OnInitialization' }, want: ['c1=1:NoSchedule', 'c2=:PreferNoSchedule'], own: 'c1:NoSchedule' },
  { name: 'cluster annotation', annotations: { [CLUSTER]: 'k1=1:NoSchedule' }, want: ['k1=1:NoSchedule'], own: 'k1:NoSchedule' },
  { name: 'machine annotation', annotations: { [MACHINE]: 'm1=1:NoSchedule, m2:PreferNoSchedule@OnInitialization' }, want: ['m1=1:NoSchedule', 'm2=:PreferNoSchedule'], own: 'm1:NoSchedule' },
  {
    // Same key and effect in both: spec.taints wins (upstream owns b1, with its value); the annotation's b2 is ours.
    name: 'both at once',
    taints: [{ key: 'b1', value: '1', effect: 'NoSchedule' }],
    annotations: { [MACHINE]: 'b1=2:NoSchedule, b2=1:NoSchedule' },
    want: ['b1=1:NoSchedule', 'b2=1:NoSchedule'],
    own: 'b2:NoSchedule',
    upstream: 'b1:NoSchedule',
  },
];

/**
 * Every version of every Node the API server reports, in order, from a watch started before the Nodes exist. A watch
 * that ends (client-node's request timeout ends one about every 10 s) is resumed from the last resourceVersion seen,
 * so no version is missed; a resume the API server refuses (410 Gone: versions were missed) fails the test.
 */
class NodeHistory {
  readonly versions = new Map<string, V1Node[]>();
  /** All MODIFIED events, in order: `[node name, resourceVersion]`. */
  readonly writes: { node: string; resourceVersion: string }[] = [];
  /** Watches that ended and were resumed. */
  resumed = 0;
  private abort: AbortController | undefined;
  private stopped = false;
  private resourceVersion: string | undefined;
  private failure: unknown;

  async start(kc: KubeConfig): Promise<void> {
    this.resourceVersion = (await kc.makeApiClient(CoreV1Api).listNode()).metadata?.resourceVersion;
    await this.watch(kc);
  }

  private async watch(kc: KubeConfig): Promise<void> {
    this.abort = await new Watch(kc).watch(
      '/api/v1/nodes',
      { resourceVersion: this.resourceVersion, allowWatchBookmarks: true },
      (type: string, node: V1Node) => {
        this.resourceVersion = node.metadata?.resourceVersion ?? this.resourceVersion;
        if (type === 'BOOKMARK' || type === 'DELETED') return;
        const name = node.metadata?.name ?? '';
        this.versions.set(name, [...(this.versions.get(name) ?? []), node]);
        if (type === 'MODIFIED') this.writes.push({ node: name, resourceVersion: node.metadata?.resourceVersion ?? '' });
      },
      () => {
        if (this.stopped) return;
        this.resumed += 1;
        void this.watch(kc).catch((e: unknown) => (this.failure = e));
      },
    );
  }

  /** Throws when the watch failed (a 410 would mean versions were missed). */
  check(): void {
    if (this.failure) throw new Error(`the Node watch failed: ${String(this.failure)}`);
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
  }

  latest(node: string): V1Node | undefined {
    return this.versions.get(node)?.at(-1);
  }
}

const taintsOf = (n: V1Node | undefined): string[] => (n?.spec?.taints ?? []).map(taintText).sort();

describeWithCapi('Next to the real Cluster API manager: one owner per taint, no write wars', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let ns: string;
  let cluster: string;
  let pipeline: Pipeline;
  const history = new NodeHistory();
  /** Case name → its MachineDeployment and Node. */
  const nodes = new Map<string, { md: string; node: string }>();
  const writesPerMinute: Record<string, number> = {};

  const patchTemplate = async (md: string, body: unknown): Promise<void> => {
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body }, MERGE_PATCH);
  };

  /** Waits until each case's Node has exactly its taints and tracking annotations (the last version the watch saw). */
  const converged = async (cases: readonly Case[]): Promise<void> => {
    await waitFor(
      () =>
        (history.check(), true) &&
        cases.every((c) => {
          const n = history.latest(nodes.get(c.name)?.node ?? '');
          const a = n?.metadata?.annotations ?? {};
          return (
            JSON.stringify(taintsOf(n)) === JSON.stringify([...c.want].sort()) &&
            a[OWN_TRACKING_ANNOTATION] === c.own &&
            (c.upstream === undefined || a[TRACKING_ANNOTATION] === c.upstream)
          );
        }),
      {
        timeoutMs: 60_000,
        intervalMs: 100,
        description: `Nodes converged: ${cases.map((c) => `${c.name}: ${JSON.stringify(taintsOf(history.latest(nodes.get(c.name)?.node ?? '')))} ${JSON.stringify(history.latest(nodes.get(c.name)?.node ?? '')?.metadata?.annotations ?? {})}`).join('; ')}`,
      },
    );
  };

  /**
   * Counts the writes of the given Nodes during the quiet window, then proves the watch was live with a marker edit
   * (on `markerCase`'s MachineDeployment) whose result must arrive.
   */
  const quietWindow = async (cases: readonly Case[], label: string, marker: () => Promise<void>, markerArrived: () => boolean): Promise<Record<string, number>> => {
    const from = history.writes.length;
    await new Promise((r) => setTimeout(r, QUIET_MS));
    history.check();
    const during = history.writes.slice(from);
    await marker();
    await waitFor(markerArrived, { timeoutMs: 30_000, intervalMs: 100, description: `the marker edit after the ${label} window` });
    const perCase: Record<string, number> = {};
    for (const c of cases) perCase[c.name] = during.filter((w) => w.node === nodes.get(c.name)?.node).length;
    for (const [name, n] of Object.entries(perCase)) writesPerMinute[`${label}: ${name}`] = n / (QUIET_MS / 60_000);
    return perCase;
  };

  beforeAll(async () => {
    cp = await startControlPlane({ build: false, log: () => undefined, capi: { featureGates: { MachineTaintPropagation: true } } });
    kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    ns = await createNamespace(kc, 'coexist');
    cluster = await createSelfHostedCluster(kc, ns);
    await history.start(kc);
    // As npm start runs it: spec.taints owned by upstream, the product's gate, enablement recorded by the first reconcile.
    pipeline = await startProductPipeline(kc, ns);
  }, 180_000);

  afterAll(async () => {
    history.stop();
    await pipeline?.stop();
    await cp?.stop();
    console.info(`coexistence: Node writes per minute after convergence: ${JSON.stringify(writesPerMinute)}; Node watch resumed ${history.resumed} times`);
  });

  describe('gate on', () => {
    it('converges every case: each taint by its one owner, the product gate held until they are all there', async () => {
      for (const c of CASES) {
        const md = await createMachineDeployment(kc, ns, { cluster, replicas: 1, startupTaints: [GATE], ...(c.annotations ? { annotations: c.annotations } : {}), ...(c.taints ? { taints: c.taints } : {}) });
        nodes.set(c.name, { md, node: '' });
      }
      for (const c of CASES) {
        const entry = nodes.get(c.name) as { md: string; node: string };
        const [pair] = await waitForMachineNodes(kc, ns, entry.md, 1);
        entry.node = pair?.node.metadata?.name ?? '';
      }
      await converged(CASES);

      // The gate holds: every version without the gate carries every declared taint (OnInitialization ones included,
      // although Cluster API initialized each Node before the product saw it).
      for (const c of CASES) {
        const versions = history.versions.get(nodes.get(c.name)?.node ?? '') ?? [];
        expect(taintsOf(versions[0]), `${c.name}: registered with the gate`).toContain(GATE_TEXT);
        const ungated = versions.filter((v) => !taintsOf(v).includes(GATE_TEXT));
        expect(ungated.length, c.name).toBeGreaterThan(0);
        for (const v of ungated) expect(taintsOf(v), `${c.name} at resourceVersion ${v.metadata?.resourceVersion}`).toEqual(expect.arrayContaining(c.want));
      }
    });

    it('writes no Node for 60 s after convergence, then a marker edit arrives; an OnInitialization taint removed by hand stays removed', async () => {
      const machineCase = nodes.get('machine annotation') as { md: string; node: string };
      const perCase = await quietWindow(
        CASES,
        'gate on',
        async () => {
          // Someone removes the OnInitialization taint m2 by hand, then the declaration's m1 changes value.
          const core = kc.makeApiClient(CoreV1Api);
          const node = await core.readNode({ name: machineCase.node });
          const kept = (node.spec?.taints ?? []).filter((t) => t.key !== 'm2');
          await core.patchNode({ name: machineCase.node, body: { metadata: { resourceVersion: node.metadata?.resourceVersion }, spec: { taints: kept } } }, MERGE_PATCH);
          await patchTemplate(machineCase.md, { spec: { template: { metadata: { annotations: { [MACHINE]: 'm1=2:NoSchedule, m2:PreferNoSchedule@OnInitialization' } } } } });
        },
        () => JSON.stringify(taintsOf(history.latest(machineCase.node))) === JSON.stringify(['m1=2:NoSchedule']),
      );
      expect(perCase).toEqual(Object.fromEntries(CASES.map((c) => [c.name, 0])));
    }, QUIET_MS + 60_000);

    it('migrates a taint from an annotation to spec.taints in one edit: present on every Node version, then tracked by Cluster API only', async () => {
      const migrate: Case = { name: 'migration', annotations: { [MACHINE]: 'x=1:NoSchedule' }, want: ['x=1:NoSchedule'], own: 'x:NoSchedule' };
      const md = await createMachineDeployment(kc, ns, { cluster, replicas: 1, startupTaints: [GATE], annotations: migrate.annotations });
      const [pair] = await waitForMachineNodes(kc, ns, md, 1);
      const node = pair?.node.metadata?.name ?? '';
      nodes.set(migrate.name, { md, node });
      await converged([migrate]);
      const from = history.versions.get(node)?.length ?? 0;

      await patchTemplate(md, { spec: { template: { metadata: { annotations: { [MACHINE]: null } }, spec: { taints: [{ key: 'x', value: '1', effect: 'NoSchedule', propagation: 'Always' }] } } } });

      await converged([{ ...migrate, own: '', upstream: 'x:NoSchedule' }]);
      const after = (history.versions.get(node) ?? []).slice(from);
      expect(after.length).toBeGreaterThan(0);
      for (const v of after) expect(taintsOf(v), `at resourceVersion ${v.metadata?.resourceVersion}`).toEqual(['x=1:NoSchedule']);
    });
  });

  describe('gate off (the same manager restarted)', () => {
    const annotationCases = (): Case[] => [
      ...CASES.filter((c) => !c.taints && c.name !== 'machine annotation'),
      // The machine case after the marker edit above.
      { name: 'machine annotation', want: ['m1=2:NoSchedule'], own: 'm1:NoSchedule' },
    ];

    it('converges a new annotation-declared MachineDeployment and writes no Node for 60 s after convergence', async () => {
      const manager = await cp.capi?.restartManager({ featureGates: { MachineTaintPropagation: false } });
      expect(manager?.featureGates).toMatchObject({ MachineTaintPropagation: false });
      const fresh: Case = { name: 'new, gate off', annotations: { [MACHINE]: 'g1=1:NoExecute, g2:PreferNoSchedule@OnInitialization' }, want: ['g1=1:NoExecute', 'g2=:PreferNoSchedule'], own: 'g1:NoExecute' };
      const md = await createMachineDeployment(kc, ns, { cluster, replicas: 1, startupTaints: [GATE], annotations: fresh.annotations });
      const [pair] = await waitForMachineNodes(kc, ns, md, 1);
      nodes.set(fresh.name, { md, node: pair?.node.metadata?.name ?? '' });
      const cases = [...annotationCases(), fresh];
      await converged(cases);

      const perCase = await quietWindow(
        cases,
        'gate off',
        () => patchTemplate(md, { spec: { template: { metadata: { annotations: { [MACHINE]: 'g1=2:NoExecute, g2:PreferNoSchedule@OnInitialization' } } } } }),
        () => taintsOf(history.latest(nodes.get(fresh.name)?.node ?? '')).includes('g1=2:NoExecute'),
      );
      expect(perCase).toEqual(Object.fromEntries(cases.map((c) => [c.name, 0])));
    }, QUIET_MS + 120_000);
  });
});
