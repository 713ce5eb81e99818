import { describe, expect, it } from 'vitest';
import { declaredTaintsOf, type EffectiveDeclaration } from '#shared/domain/declarations.ts';
import { ownershipOf, planOwnedTaints, SpecTaintsOwner, startupGateWarning } from '#shared/domain/ownership.ts';
import { propagateMachineTaints, removeNodeTaint } from '#shared/domain/propagation.ts';
import type { MachineFacts } from '#shared/model/views.ts';
import {
  OWN_TRACKING_ANNOTATION as OWN,
  STARTUP_GATE_TAINT_KEY,
  TRACKING_ANNOTATION as UPSTREAM,
  UNINITIALIZED_TAINT_KEY,
  formatTaint,
  type MachineTaint,
  type Taint,
} from '#shared/domain/taint.ts';

const MACHINE = 'taints.capi-taint-propagator.dev/machine';
const CLASS = 'taints.capi-taint-propagator.dev/class';
const GATE = { key: STARTUP_GATE_TAINT_KEY, effect: 'NoSchedule' } as const;

interface NodeState {
  readonly resourceVersion: string;
  readonly taints: readonly Taint[];
  readonly annotations: Readonly<Record<string, string>>;
}

function machine(specTaints: MachineTaint[] | undefined, annotations: Record<string, string> = {}): MachineFacts {
  return { kind: 'Machine', apiVersion: 'cluster.x-k8s.io/v1beta2', namespace: 'ns', name: 'm', uid: 'u', resourceVersion: '1', labels: {}, annotations, specTaints, nodeName: 'n', deleting: false };
}

function declarationOf(m: MachineFacts): EffectiveDeclaration {
  const result = declaredTaintsOf(m, { startupTaint: GATE });
  if (!result.valid) throw new Error(result.issues.map((i) => i.message).join('; '));
  return result.declaration;
}

/**
 * Upstream CAPI's Node step with the gate on, as its rules are (conformance-checked): `spec.taints` into
 * `cluster.x-k8s.io/taints-from-machine`, and its own startup taint removed in the same patch.
 */
function capi(node: NodeState, m: MachineFacts): NodeState | undefined {
  const spec = (m.specTaints ?? []) as MachineTaint[];
  const ungated = removeNodeTaint(node.taints, { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' });
  const result = propagateMachineTaints({ taints: ungated.taints, annotations: node.annotations }, spec);
  if (!result.ok) throw result.error;
  return result.changed || ungated.changed ? { ...node, ...result.state } : undefined;
}

/** The product's step: its plan applied, or undefined when it would not write. */
function product(node: NodeState, m: MachineFacts): NodeState | undefined {
  const { plan } = planOwnedTaints(node, declarationOf(m), { startupTaint: GATE });
  if (plan.kind === 'rejected') throw plan.error;
  return plan.kind === 'patch' ? { ...node, taints: plan.after.taints, annotations: plan.after.annotations } : undefined;
}

/** Runs both writers in turn, `first` first, until neither writes; returns the end state, the writes and every state seen. */
function converge(start: NodeState, m: MachineFacts, first: 'capi' | 'product' = 'capi'): { node: NodeState; writes: number; seen: NodeState[] } {
  const order = first === 'capi' ? [capi, product] : [product, capi];
  let node = start;
  let writes = 0;
  const seen = [start];
  for (let round = 0; round < 10; round++) {
    let wrote = false;
    for (const step of order) {
      const next = step(node, m);
      if (next) {
        node = next;
        writes++;
        wrote = true;
        seen.push(node);
      }
    }
    if (!wrote) return { node, writes, seen };
  }
  throw new Error(`no convergence after 10 rounds: ${JSON.stringify(node)}`);
}

const ids = (n: NodeState) => n.taints.map(formatTaint).sort();
const gpu: MachineTaint = { key: 'gpu', value: 'a100', effect: 'NoSchedule', propagation: 'Always' };
const fresh: NodeState = { resourceVersion: '1', taints: [{ key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' }, GATE], annotations: {} };

describe('Function: ownershipOf()', () => {
  it('gives spec.taints to upstream and the annotations to the product, and counts what CAPI tracks as upstream', () => {
    // Prepare
    const declaration = declarationOf(machine([gpu], { [MACHINE]: 'pool=edge:NoSchedule' }));

    // Act
    const split = ownershipOf(declaration, { annotations: { [UPSTREAM]: 'gpu:NoSchedule,old:NoExecute' } });

    // Assess
    expect(split.productTaints.map(formatTaint)).toEqual(['pool=edge:NoSchedule']);
    expect(split.upstreamTaints.map(formatTaint)).toEqual(['gpu=a100:NoSchedule']);
    expect([...split.upstreamIds].sort()).toEqual(['gpu:NoSchedule', 'old:NoExecute']);
    expect(split.awaitingUpstream).toBe(false);
  });

  it('waits for upstream while spec.taints declares something and CAPI has not initialized the Node', () => {
    // Act
    const split = ownershipOf(declarationOf(machine([gpu])), { annotations: {} });

    // Assess
    expect(split.awaitingUpstream).toBe(true);
  });

  it('gives the product every source when it owns spec.taints', () => {
    // Act
    const split = ownershipOf(declarationOf(machine([gpu], { [CLASS]: 'pool=edge:NoSchedule' })), { annotations: { [UPSTREAM]: 'gpu:NoSchedule' } }, SpecTaintsOwner.product);

    // Assess
    expect(split.productTaints.map(formatTaint)).toEqual(['gpu=a100:NoSchedule', 'pool=edge:NoSchedule']);
    expect(split.upstreamIds.size).toBe(0);
    expect(split.awaitingUpstream).toBe(false);
  });
});

describe('Coexistence with upstream CAPI (its rules simulated): no write war, every taint lands', () => {
  const cases: ReadonlyArray<{ name: string; machine: MachineFacts; first: 'capi' | 'product'; want: string[] }> = [
    { name: 'taints only in spec.taints', machine: machine([gpu]), first: 'capi', want: ['gpu=a100:NoSchedule'] },
    { name: 'taints only in the machine annotation', machine: machine(undefined, { [MACHINE]: 'pool=edge:NoSchedule' }), first: 'capi', want: ['pool=edge:NoSchedule'] },
    { name: 'taints only in the class annotation, product first', machine: machine(undefined, { [CLASS]: 'pool=edge:NoSchedule' }), first: 'product', want: ['pool=edge:NoSchedule'] },
    {
      name: 'both sources, the same key and effect in both (spec.taints wins)',
      machine: machine([gpu], { [MACHINE]: 'gpu=h100:NoSchedule,pool=edge:NoSchedule' }),
      first: 'product',
      want: ['gpu=a100:NoSchedule', 'pool=edge:NoSchedule'],
    },
    {
      name: 'an annotation-declared OnInitialization taint, CAPI initializing the Node first',
      machine: machine([gpu], { [MACHINE]: 'warming:PreferNoSchedule@OnInitialization' }),
      first: 'capi',
      want: ['gpu=a100:NoSchedule', 'warming:PreferNoSchedule'],
    },
  ];

  it.each(cases)('$name: converges, then neither side writes', ({ machine: m, first, want }) => {
    // Act
    const end = converge(fresh, m, first);

    // Assess
    expect(ids(end.node)).toEqual(want);
    expect(end.writes).toBeLessThanOrEqual(3);
    expect(capi(end.node, m)).toBeUndefined();
    expect(product(end.node, m)).toBeUndefined();
  });

  it('holds the startup gate until CAPI has applied spec.taints, then lifts it', () => {
    // Prepare
    const m = machine([gpu], { [MACHINE]: 'pool=edge:NoSchedule' });

    // Act
    const productFirst = product(fresh, m);

    // Assess
    expect(productFirst).toBeDefined();
    expect(ids(productFirst as NodeState)).toContain(`${STARTUP_GATE_TAINT_KEY}:NoSchedule`);
    const end = converge(productFirst as NodeState, m, 'capi');
    expect(ids(end.node)).toEqual(['gpu=a100:NoSchedule', 'pool=edge:NoSchedule']);
    // Every state in which the gate is gone already carries every declared taint.
    for (const state of end.seen.filter((s) => !ids(s).includes(`${STARTUP_GATE_TAINT_KEY}:NoSchedule`))) {
      expect(ids(state)).toEqual(expect.arrayContaining(['gpu=a100:NoSchedule', 'pool=edge:NoSchedule']));
    }
  });

  it('migrates a taint from the annotation to spec.taints without the Node ever losing it', () => {
    // Prepare: step 0, the taint declared through the annotation and converged.
    const before = machine(undefined, { [MACHINE]: 'gpu=a100:NoSchedule' });
    const during = machine([gpu], { [MACHINE]: 'gpu=a100:NoSchedule' });
    const after = machine([gpu]);
    const start = converge(fresh, before).node;

    // Act: step 1, add it to spec.taints; step 2, remove the annotation.
    const step1 = converge(start, during, 'product');
    const step2 = converge(step1.node, after, 'product');

    // Assess
    for (const state of [...step1.seen, ...step2.seen]) expect(ids(state)).toContain('gpu=a100:NoSchedule');
    expect(step2.node.annotations[OWN]).toBe('');
    expect(step2.node.annotations[UPSTREAM]).toBe('gpu:NoSchedule');
    expect(ids(step2.node)).toEqual(['gpu=a100:NoSchedule']);
  });
});

describe('Function: startupGateWarning()', () => {
  it("warns about CAPI's own startup taint and is silent for the product's gate or none", () => {
    // Act & Assess
    expect(startupGateWarning({ key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' })).toMatch(/removed by Cluster API itself/);
    expect(startupGateWarning(GATE)).toBeUndefined();
    expect(startupGateWarning(undefined)).toBeUndefined();
  });
});
