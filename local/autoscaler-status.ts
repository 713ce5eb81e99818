/**
 * Scale from zero in `npm run status` (docs/autoscaler.md): for every cluster-autoscaler node group (a
 * MachineDeployment, a MachineSet no MachineDeployment owns, or a MachinePool with both size annotations) and every
 * resource that still carries the product's record, the taints the autoscaler will assume for a new Node (its own
 * reading: from 1.36.0 `spec.template.spec.taints` and the taints annotation, before it the annotation alone), the
 * taints a new Node gets, whether they match, what the product does about the annotation, and the OnInitialization
 * taints the autoscaler counts anyway.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { KubernetesCapiDiscovery } from '#shared/adapters/kubernetes/capi-discovery.ts';
import { kubeList } from '#shared/adapters/kubernetes/kube-http.ts';
import { toScalableResourceFacts } from '#shared/model/views.ts';
import { statusOf } from '#shared/adapters/kubernetes/api-errors.ts';
import {
  AUTOSCALER_OWNED_ANNOTATION,
  AUTOSCALER_TAINTS_ANNOTATION,
  SCALABLE_KINDS,
  isNodeGroup,
  planAutoscalerTaints,
  type AutoscalerState,
  type ScalableKind,
} from '#shared/domain/autoscaler.ts';
import { CAPI_GROUP } from '#shared/domain/capi-api.ts';
import { formatTaint, type Taint, type TaintId } from '#shared/domain/taint.ts';
import { isRecord, labelKeyIssues, QUALIFIED_NAME } from '#shared/domain/validation.ts';

export interface AutoscalerStatus {
  readonly kind: ScalableKind;
  readonly namespace: string;
  readonly name: string;
  /** What the product does about the annotation (`foreign`: someone else's value, left alone). */
  readonly state: AutoscalerState;
  /** The taints the autoscaler assumes for a new Node (release 1.36.0 on: the field, then the annotation over it). */
  readonly assumed: readonly Taint[];
  /** The same for releases before 1.36.0, which read the annotation alone. */
  readonly assumedBefore136: readonly Taint[];
  /** The taints a new Node gets; undefined when the declaration is invalid. */
  readonly newNode?: readonly Taint[];
  /** True when both readings hold the same taints as a new Node. */
  readonly matches: boolean;
  /** OnInitialization taints the autoscaler counts in its template anyway (docs/autoscaler.md); absent when none. */
  readonly countedStartupTaints?: readonly Taint[];
  /** The taints annotation as read. */
  readonly annotation?: string;
  /** What the product would write there. */
  readonly desired?: string;
}

const PLURALS: Readonly<Record<ScalableKind, string>> = { MachineDeployment: 'machinedeployments', MachineSet: 'machinesets', MachinePool: 'machinepools' };

/** Reads every scalable resource of the namespace (all when absent) and returns the node groups' status, sorted. */
export async function readAutoscalerStatuses(o: { readonly kubeConfig: KubeConfig; readonly namespace?: string; readonly startupTaint?: TaintId }): Promise<AutoscalerStatus[]> {
  const version = await new KubernetesCapiDiscovery(o.kubeConfig).version();
  const out: AutoscalerStatus[] = [];
  for (const kind of SCALABLE_KINDS) {
    const path = o.namespace ? `/apis/${CAPI_GROUP}/${version}/namespaces/${encodeURIComponent(o.namespace)}/${PLURALS[kind]}` : `/apis/${CAPI_GROUP}/${version}/${PLURALS[kind]}`;
    let items: unknown[];
    try {
      items = await kubeList(o.kubeConfig, path, {}, 500);
    } catch (error) {
      if (statusOf(error) === 404) continue; // the kind is not served (MachinePools on an old Cluster API)
      throw error;
    }
    for (const item of items) {
      const r = toScalableResourceFacts(kind, item);
      if (!r) continue;
      if (!isNodeGroup(r) && r.annotations[AUTOSCALER_OWNED_ANNOTATION] === undefined) continue;
      if (r.kind === 'MachineSet' && r.ownedByMachineDeployment) continue;
      const plan = planAutoscalerTaints(r, o.startupTaint ? { startupTaint: o.startupTaint } : {});
      const annotation = r.annotations[AUTOSCALER_TAINTS_ANNOTATION];
      const assumed = autoscalerAssumedTaints(r.specTaints, annotation);
      const assumedBefore136 = autoscalerAssumedTaints(undefined, annotation);
      out.push({
        kind,
        namespace: r.namespace,
        name: r.name,
        state: plan.state,
        assumed,
        assumedBefore136,
        ...(plan.nodeTaints ? { newNode: plan.nodeTaints } : {}),
        matches: plan.nodeTaints !== undefined && sameTaints(assumed, plan.nodeTaints) && sameTaints(assumedBefore136, plan.nodeTaints),
        ...(plan.countedStartupTaints ? { countedStartupTaints: plan.countedStartupTaints } : {}),
        ...(annotation !== undefined ? { annotation } : {}),
        ...(plan.desired !== undefined ? { desired: plan.desired } : {}),
      });
    }
  }
  return out.sort((a, b) => `${a.namespace}/${a.kind}/${a.name}`.localeCompare(`${b.namespace}/${b.kind}/${b.name}`));
}

/**
 * The table of `npm run status`: one line per node group (the assumption of releases before 1.36.0 added in
 * parentheses when it differs), then one warning line per group whose OnInitialization taints the autoscaler counts.
 */
export function formatAutoscalerRows(rows: readonly AutoscalerStatus[]): string[] {
  if (rows.length === 0) return [];
  const list = (t: readonly Taint[] | undefined): string => (t === undefined ? '(invalid declaration)' : t.length === 0 ? '<none>' : t.map(formatTaint).join(','));
  const assumes = (r: AutoscalerStatus): string => (sameTaints(r.assumed, r.assumedBefore136) ? list(r.assumed) : `${list(r.assumed)} (before 1.36: ${list(r.assumedBefore136)})`);
  const table = [
    ['NODE GROUP', 'AUTOSCALER ASSUMES', 'NEW NODES GET', 'MATCH', 'ANNOTATION'],
    ...rows.map((r) => [`${r.kind}/${r.namespace}/${r.name}`, assumes(r), list(r.newNode), r.matches ? 'yes' : 'no', r.state === 'foreign' ? `foreign (would write ${JSON.stringify(r.desired ?? '')})` : r.state]),
  ];
  const widths = table[0]?.map((_, i) => Math.max(...table.map((row) => (row[i] ?? '').length))) ?? [];
  const warnings = rows.flatMap((r) =>
    r.countedStartupTaints ? [`WARNING ${r.kind}/${r.namespace}/${r.name}: the autoscaler counts OnInitialization ${list(r.countedStartupTaints)} for scale from zero (docs/autoscaler.md, startup taints)`] : [],
  );
  return ['Cluster autoscaler (scale from zero, docs/autoscaler.md):', ...table.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ')), ...warnings];
}

/**
 * The taints the autoscaler assumes for a new Node of the resource, by its rules (docs/autoscaler.md):
 * `spec.template.spec.taints` in order, then each entry of the annotation replacing the first taint with the same key
 * and effect, else appended; entries it cannot parse are skipped (it only logs them). That is release 1.36.0 on;
 * before it the autoscaler reads the annotation alone: pass `undefined` as `specTaints`. For reports, not for writes.
 */
export function autoscalerAssumedTaints(specTaints: unknown, annotation: string | undefined): Taint[] {
  const taints: Taint[] = (Array.isArray(specTaints) ? specTaints : []).filter(isRecord).map(({ key, value, effect }) => ({
    key: typeof key === 'string' ? key : '',
    ...(typeof value === 'string' && value !== '' ? { value } : {}),
    effect: typeof effect === 'string' ? effect : '',
  }));
  for (const entry of annotation === undefined ? [] : annotation.split(',')) {
    const t = parseAutoscalerTaint(entry);
    if (!t) continue;
    const i = taints.findIndex((x) => x.key === t.key && x.effect === t.effect);
    if (i === -1) taints.push(t);
    else taints[i] = t;
  }
  return taints;
}

/** One entry as the autoscaler's `parseTaint` reads it (no trimming, any effect text); undefined when it refuses it. */
function parseAutoscalerTaint(entry: string): Taint | undefined {
  const [head = '', effect = '', ...more] = entry.split(':');
  // One part: the whole entry is the key (so `k=v` is refused as a key); two: `key[=value]` and the effect; more: refused.
  const [key = '', value = '', ...extra] = entry.includes(':') ? head.split('=') : [head];
  if (more.length > 0 || extra.length > 0) return undefined;
  if (value !== '' && (value.length > 63 || !QUALIFIED_NAME.test(value))) return undefined;
  if (labelKeyIssues(key, 'key').length > 0) return undefined;
  return { key, ...(value !== '' ? { value } : {}), effect };
}

/** True when two taint lists hold the same taints (key, effect, value), in any order. */
export function sameTaints(a: readonly Taint[], b: readonly Taint[]): boolean {
  const canon = (l: readonly Taint[]) => l.map((t) => `${t.key}\u0000${t.effect}\u0000${t.value ?? ''}`).sort().join('\u0001');
  return a.length === b.length && canon(a) === canon(b);
}
