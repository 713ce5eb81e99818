/**
 * Differential conformance against upstream: the same scenario sequence runs on a fresh Node twice, on one control
 * plane of its own — first with Cluster API's own propagation (gate MachineTaintPropagation on, declarations in
 * `spec.taints`, the product not running), then with the product (the same manager restarted with the gate off,
 * declarations in the machine annotation, the product's pipeline as `npm start` runs it). After each step the Node's
 * taints (order aside: upstream's own e2e tests compare with ConsistOf) and the owner's tracking annotation
 * (`cluster.x-k8s.io/taints-from-machine` for CAPI, `taints.capi-taint-propagator.dev/applied` for the product) are
 * recorded and compared. Each step also waits for upstream's expected result (upstream's rules, written out by hand);
 * a side that does not reach it within the step's time is recorded as it is, and the comparison shows the difference.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { CoreV1Api, CustomObjectsApi, KubeConfig, type V1Node, type V1Taint } from '@kubernetes/client-node';
import { startControlPlane, type ControlPlane } from '#local/control-plane/control-plane.ts';
import type { Pipeline } from '#local/pipeline.ts';
import { OWN_TRACKING_ANNOTATION, STARTUP_GATE_TAINT_KEY, TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { createNamespace, MERGE_PATCH, waitFor, type MachineTaint } from '#test/support/control-plane.ts';
import { MACHINE_DEPLOYMENTS, createMachineDeployment, createSelfHostedCluster, describeWithCapi, taintText, waitForMachineNodes, startProductPipeline } from '#test/support/capi.ts';

const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const STEP_TIMEOUT_MS = 20_000;

type Decl = MachineTaint[];
/** What a step does to the Node by hand before the declaration changes (if at all). */
type HandEdit = (node: V1Node) => { taints?: V1Taint[]; annotation?: string };

interface Step {
  readonly name: string;
  readonly hand?: HandEdit;
  /** The declaration after the step (unchanged when absent). */
  readonly declare?: Decl;
  /** Upstream's result: Node taints (sorted `key=value:effect`) and the tracking annotation. */
  readonly want: { readonly taints: string[]; readonly tracking: string };
  /** The step changes nothing on the Node: settled when the owner reported its refusal. */
  readonly refused?: boolean;
}

const A1 = { key: 'a', value: '1', effect: 'NoSchedule' } as const;
const B_INIT = { key: 'b', value: '1', effect: 'PreferNoSchedule', propagation: 'OnInitialization' } as const;

const STEPS: Step[] = [
  { name: 'create', declare: [A1, B_INIT], want: { taints: ['a=1:NoSchedule', 'b=1:PreferNoSchedule'], tracking: 'a:NoSchedule' } },
  { name: 'value change', declare: [{ ...A1, value: '2' }, B_INIT], want: { taints: ['a=2:NoSchedule', 'b=1:PreferNoSchedule'], tracking: 'a:NoSchedule' } },
  { name: 'effect change', declare: [{ key: 'a', value: '2', effect: 'NoExecute' }, B_INIT], want: { taints: ['a=2:NoExecute', 'b=1:PreferNoSchedule'], tracking: 'a:NoExecute' } },
  {
    name: 'Always -> OnInitialization (with a value change)',
    declare: [{ key: 'a', value: '3', effect: 'NoExecute', propagation: 'OnInitialization' }, B_INIT],
    want: { taints: ['a=2:NoExecute', 'b=1:PreferNoSchedule'], tracking: '' },
  },
  { name: 'OnInitialization -> Always', declare: [{ key: 'a', value: '3', effect: 'NoExecute' }, B_INIT], want: { taints: ['a=3:NoExecute', 'b=1:PreferNoSchedule'], tracking: 'a:NoExecute' } },
  {
    name: 'a taint removed by hand',
    hand: (n) => ({ taints: (n.spec?.taints ?? []).filter((t) => t.key !== 'a') }),
    want: { taints: ['a=3:NoExecute', 'b=1:PreferNoSchedule'], tracking: 'a:NoExecute' },
  },
  {
    name: 'adoption of an existing taint',
    hand: (n) => ({ taints: [...(n.spec?.taints ?? []), { key: 'c', value: '9', effect: 'NoSchedule' }] }),
    declare: [{ key: 'a', value: '3', effect: 'NoExecute' }, B_INIT, { key: 'c', value: '1', effect: 'NoSchedule' }],
    want: { taints: ['a=3:NoExecute', 'b=1:PreferNoSchedule', 'c=1:NoSchedule'], tracking: 'a:NoExecute,c:NoSchedule' },
  },
  { name: 'removal from the declaration', declare: [{ key: 'a', value: '3', effect: 'NoExecute' }, B_INIT], want: { taints: ['a=3:NoExecute', 'b=1:PreferNoSchedule'], tracking: 'a:NoExecute' } },
  {
    name: 'a malformed tracking annotation',
    hand: () => ({ annotation: 'a:NoExecute,not-a-taint' }),
    declare: [{ key: 'a', value: '4', effect: 'NoExecute' }, B_INIT],
    want: { taints: ['a=3:NoExecute', 'b=1:PreferNoSchedule'], tracking: 'a:NoExecute,not-a-taint' },
    refused: true,
  },
];

/** The annotation form of a declaration. */
const asAnnotation = (d: Decl): string => d.map((t) => `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}${t.propagation === 'OnInitialization' ? '@OnInitialization' : ''}`).join(', ');

interface Observed {
  readonly taints: string[];
  readonly tracking: string | undefined;
  readonly settled: boolean;
}

interface Side {
  readonly name: string;
  readonly trackingAnnotation: string;
  /** Creates the MachineDeployment with the first declaration; returns its name and Node. */
  create(d: Decl): Promise<{ md: string; node: string }>;
  declare(md: string, d: Decl): Promise<void>;
  /** Waits for the owner's report that it refused to write the Node (a malformed tracking annotation). */
  refusal(node: string): Promise<void>;
}

describeWithCapi('Differential conformance: Cluster API propagation vs the product, same scenarios, fresh Nodes', () => {
  let cp: ControlPlane;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let ns: string;
  let cluster: string;
  let pipeline: Pipeline | undefined;
  const results = new Map<string, Observed[]>();

  const patchMd = async (md: string, body: unknown): Promise<void> => {
    await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...MACHINE_DEPLOYMENTS, namespace: ns, name: md, body }, MERGE_PATCH);
  };
  const observe = async (node: string, annotation: string): Promise<{ taints: string[]; tracking: string | undefined }> => {
    const n = await core.readNode({ name: node });
    return { taints: (n.spec?.taints ?? []).map(taintText).sort(), tracking: n.metadata?.annotations?.[annotation] };
  };
  const wanted = (s: Step): { taints: string[]; tracking: string } => ({ taints: s.want.taints.map((t) => taintText(parse(t))).sort(), tracking: s.want.tracking });
  const parse = (t: string): { key: string; value?: string; effect: string } => {
    const [kv = '', effect = ''] = t.split(':');
    const [key = '', value] = kv.split('=');
    return { key, ...(value ? { value } : {}), effect };
  };

  async function run(side: Side): Promise<Observed[]> {
    const observed: Observed[] = [];
    const first = STEPS[0] as Step;
    const { md, node } = await side.create(first.declare as Decl);
    for (const [i, step] of STEPS.entries()) {
      if (i > 0) {
        if (step.hand) {
          const n = await core.readNode({ name: node });
          const edit = step.hand(n);
          await core.patchNode(
            {
              name: node,
              body: {
                metadata: { resourceVersion: n.metadata?.resourceVersion, ...(edit.annotation !== undefined ? { annotations: { [side.trackingAnnotation]: edit.annotation } } : {}) },
                ...(edit.taints ? { spec: { taints: edit.taints } } : {}),
              },
            },
            MERGE_PATCH,
          );
        }
        if (step.declare) await side.declare(md, step.declare);
      }
      let settled = true;
      try {
        if (step.refused) await side.refusal(node);
        else await waitFor(async () => JSON.stringify(await observe(node, side.trackingAnnotation)) === JSON.stringify(wanted(step)), { timeoutMs: STEP_TIMEOUT_MS, intervalMs: 100, description: `${side.name}: ${step.name}` });
      } catch {
        settled = false;
      }
      observed.push({ ...(await observe(node, side.trackingAnnotation)), settled });
    }
    return observed;
  }

  beforeAll(async () => {
    cp = await startControlPlane({ build: false, log: () => undefined, capi: { featureGates: { MachineTaintPropagation: true } } });
    kc = new KubeConfig();
    kc.loadFromFile(cp.kubeconfigPath);
    core = kc.makeApiClient(CoreV1Api);
    ns = await createNamespace(kc, 'differential');
    cluster = await createSelfHostedCluster(kc, ns);
  }, 180_000);

  afterAll(async () => {
    await pipeline?.stop();
    await cp?.stop();
  });

  it('Cluster API (gate on, spec.taints, the product off): every step as upstream', async () => {
    const log = (cp.capi?.manager.logPath ?? '') as string;
    const upstream: Side = {
      name: 'Cluster API',
      trackingAnnotation: TRACKING_ANNOTATION,
      async create(d) {
        const md = await createMachineDeployment(kc, ns, { cluster, replicas: 1, taints: d });
        const [pair] = await waitForMachineNodes(kc, ns, md, 1);
        return { md, node: pair?.node.metadata?.name ?? '' };
      },
      declare: (md, d) => patchMd(md, { spec: { template: { spec: { taints: d.map((t) => ({ ...t, propagation: t.propagation ?? 'Always' })) } } } }),
      // The manager logs every failed attempt: "failed to propagate Machine taints to Node <node>: invalid taint format".
      async refusal(node) {
        const pattern = new RegExp(`failed to propagate Machine taints to Node \\\\?"?${node}\\\\?"?.*invalid taint format`);
        await waitFor(() => pattern.test(readFileSync(log, 'utf8')), { timeoutMs: STEP_TIMEOUT_MS, intervalMs: 200, description: 'the manager refusing the malformed annotation' });
      },
    };
    results.set(upstream.name, await run(upstream));
    expect((results.get(upstream.name) ?? []).map((o) => o.settled)).toEqual(STEPS.map(() => true));
  });

  it('the product (the manager restarted with the gate off, machine annotation): the same result after every step', async () => {
    await cp.capi?.restartManager({ featureGates: { MachineTaintPropagation: false } });
    pipeline = await startProductPipeline(kc, ns);
    const product: Side = {
      name: 'product',
      trackingAnnotation: OWN_TRACKING_ANNOTATION,
      async create(d) {
        const md = await createMachineDeployment(kc, ns, { cluster, replicas: 1, startupTaints: [{ key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' }], annotations: { [MACHINE]: asAnnotation(d) } });
        const [pair] = await waitForMachineNodes(kc, ns, md, 1);
        return { md, node: pair?.node.metadata?.name ?? '' };
      },
      declare: (md, d) => patchMd(md, { spec: { template: { metadata: { annotations: { [MACHINE]: asAnnotation(d) } } } } }),
      // The product records a Warning Event on the Machine of the refused Node.
      async refusal(node) {
        await waitFor(
          async () => (await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${node}` })).items.some((e) => e.reason === 'MalformedTrackingAnnotation'),
          { timeoutMs: STEP_TIMEOUT_MS, intervalMs: 200, description: 'the product refusing the malformed annotation' },
        );
      },
    };
    results.set(product.name, await run(product));

    const upstream = results.get('Cluster API') ?? [];
    const ours = results.get(product.name) ?? [];
    const table = STEPS.map((s, i) => {
      const u = upstream[i];
      const p = ours[i];
      const same = JSON.stringify([u?.taints, u?.tracking]) === JSON.stringify([p?.taints, p?.tracking]);
      return { step: s.name, same, upstream: `${u?.taints.join(',')} | ${u?.tracking}`, product: `${p?.taints.join(',')} | ${p?.tracking}` };
    });
    const mismatches = table.filter((r) => !r.same);
    console.info(`differential: ${STEPS.length} steps, ${mismatches.length} mismatches\n${table.map((r) => `  ${r.same ? 'same' : 'DIFF'}  ${r.step}: upstream ${r.upstream}; product ${r.product}`).join('\n')}`);
    expect(mismatches).toEqual([]);
    expect(ours.map((o) => o.settled)).toEqual(STEPS.map(() => true));
  });
});
