/**
 * Runs upstream-derived conformance vectors through the product's own domain functions (the ones
 * the reconcile function calls), never through a copy. Kinds the product does not model are
 * reported as skipped, as `conformance/README.md` lists them.
 */
import { propagateMachineTaints, removeNodeTaint } from '#shared/domain/propagation.ts';
import { planNodeTaints } from '#shared/domain/taint-plan.ts';
import { TRACKING_ANNOTATION, TaintEffect, UNINITIALIZED_TAINT_KEY, type MachineTaint, type Taint, type TaintId } from '#shared/domain/taint.ts';
import { validateMachineTaints } from '#shared/domain/validation.ts';

export type CaseResult =
  | { readonly name: string; readonly status: 'passed' }
  | { readonly name: string; readonly status: 'skipped'; readonly why: string }
  | { readonly name: string; readonly status: 'failed'; readonly difference: string };

type Vector = Record<string, unknown> & { kind?: unknown; name?: unknown };
interface NodeIn { taints?: Taint[]; annotations?: Record<string, string> }
interface Expected { taints?: Taint[]; annotations?: Record<string, string>; changed?: boolean; error?: string; modified?: boolean }

/** Evaluates every case; never throws for a bad case (it is reported as failed). */
export function runVectors(vectors: readonly Vector[]): CaseResult[] {
  return vectors.map((v, i) => {
    const name = typeof v.name === 'string' ? v.name : `case #${i}`;
    try {
      return runCase(v, name);
    } catch (error) {
      return { name, status: 'failed', difference: `threw ${error instanceof Error ? error.message : String(error)}` };
    }
  });
}

function runCase(v: Vector, name: string): CaseResult {
  const skip = (why: string): CaseResult => ({ name, status: 'skipped', why });
  if (v.featureGateEnabled === false) return skip('the product has no feature gate');
  switch (v.kind) {
    case 'propagation': {
      const node = v.node as NodeIn;
      const expected = v.expected as Expected;
      const input = { taints: node.taints ?? [], annotations: node.annotations ?? {} };
      const result = propagateMachineTaints(input, v.machineTaints as MachineTaint[]);
      if (!result.ok) return compare(name, { taints: input.taints, annotations: input.annotations, changed: false, error: result.error.message }, expected);
      return compare(name, { ...result.state, changed: result.changed }, expected);
    }
    case 'nodeTaintStep': {
      if (v.nodeOutdated !== null && v.nodeOutdated !== undefined) return skip('the outdated-revision taint belongs to CAPI rollouts');
      const node = v.node as NodeIn;
      const expected = v.expected as Expected;
      const taints = node.taints ?? [];
      const annotations = node.annotations ?? {};
      const plan = planNodeTaints({
        node: { resourceVersion: '1', taints, annotations },
        taints: v.machineTaints as MachineTaint[],
        // The vectors are upstream's rules: upstream's annotation and upstream's startup taint.
        annotation: TRACKING_ANNOTATION,
        startupTaint: { key: UNINITIALIZED_TAINT_KEY, effect: TaintEffect.NoSchedule },
      });
      if (plan.kind === 'rejected') return compare(name, { taints, annotations, changed: false, error: plan.error.message }, expected);
      const state = plan.kind === 'patch' ? plan.after : plan.state;
      return compare(name, { taints: state.taints, annotations: state.annotations, changed: plan.kind === 'patch' }, expected);
    }
    case 'helper.removeNodeTaint': {
      const node = v.node as NodeIn;
      const expected = v.expected as Expected;
      const result = removeNodeTaint(node.taints ?? [], v.dropTaint as TaintId);
      const diffs = [...diffField('taints', result.taints, expected.taints), ...diffField('modified', result.changed, expected.modified)];
      return diffs.length === 0 ? { name, status: 'passed' } : { name, status: 'failed', difference: diffs.join('; ') };
    }
    case 'validation': {
      if (v.object === 'MachinePool') return skip("MachinePool rules are the product's own");
      const raw = Array.isArray(v.taints) ? v.taints : v.taint === null || v.taint === undefined ? undefined : [v.taint];
      const worker = (v.object === 'Machine' && v.controlPlaneMachine !== true) || v.object === 'MachineSet' || v.object === 'MachineDeployment';
      const result = validateMachineTaints(raw, { worker });
      if (result.valid === v.valid) return { name, status: 'passed' };
      const why = result.valid ? 'accepted' : `rejected (${result.issues.map((i) => `${i.field}: ${i.message}`).join('; ')})`;
      return { name, status: 'failed', difference: `valid: expected ${String(v.valid)}, product ${why}` };
    }
    case 'topologyMerge':
      return skip("CAPI's topology controller merges ClusterClass and Cluster taints");
    case 'helper.outdatedRevision':
      return skip('the outdated-revision taint belongs to CAPI rollouts');
    default:
      return { name, status: 'failed', difference: `unknown kind ${JSON.stringify(v.kind)}` };
  }
}

function compare(name: string, actual: { taints: readonly Taint[]; annotations: Readonly<Record<string, string>>; changed: boolean; error?: string }, expected: Expected): CaseResult {
  const diffs = [
    ...diffField('taints', actual.taints, expected.taints ?? []),
    ...diffField('annotations', sortKeys(actual.annotations), sortKeys(expected.annotations ?? {})),
    ...diffField('changed', actual.changed, expected.changed),
    ...diffField('error', actual.error, expected.error),
  ];
  return diffs.length === 0 ? { name, status: 'passed' } : { name, status: 'failed', difference: diffs.join('; ') };
}

function diffField(field: string, actual: unknown, expected: unknown): string[] {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  return a === e ? [] : [`${field}: expected ${e}, got ${a}`];
}

function sortKeys(o: Readonly<Record<string, string>>): Record<string, string> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Counts results into the summary numbers. */
export function summarize(results: readonly CaseResult[]): { passed: number; failed: number; skipped: number } {
  return {
    passed: results.filter((r) => r.status === 'passed').length,
    failed: results.filter((r) => r.status === 'failed').length,
    skipped: results.filter((r) => r.status === 'skipped').length,
  };
}
