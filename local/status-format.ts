/**
 * Rendering of taint statuses for `npm run status` (table, wide, one Machine in detail, JSON/YAML documents), the
 * demo's summary and `npm start`'s "not in sync" line: one set of words for the verdicts of the shared planner
 * (local/taint-status.ts). Pure, unit tested.
 */
import type { Override } from '#shared/domain/declarations.ts';
import type { EvictionCounts, PodEvictionPreview } from '#shared/domain/eviction-preview.ts';
import { formatTaint, type Taint } from '#shared/domain/taint.ts';
import { PausedBy, SyncState, TaintOwner, type DesiredTaint, type NoExecutePreview, type OwnedTaint, type PreviewedTaint, type RolloutProgress, type TaintStatus } from './taint-status.ts';

/** Short names of the declaration sources, for narrow columns. */
const SOURCE_LABEL: Readonly<Record<string, string>> = {
  'spec.taints': 'spec',
  'taints.capi-taint-propagator.dev/class': 'class annotation',
  'taints.capi-taint-propagator.dev/cluster': 'cluster annotation',
  'taints.capi-taint-propagator.dev/machine': 'machine annotation',
};

/** `gpu=a100:NoSchedule (Always, spec)` */
export function formatDesired(d: DesiredTaint): string {
  return `${formatTaint(d)} (${d.propagation}, ${SOURCE_LABEL[d.source] ?? d.source})`;
}

/** `maintenance=true:NoExecute (Preview, machine annotation)` */
export function formatPreviewed(p: PreviewedTaint): string {
  return `${formatTaint(p)} (Preview, ${SOURCE_LABEL[p.source] ?? p.source})`;
}

/**
 * Why a Node taint is there, in a few words: `tracked (Always from spec)`, `initialization-only`, `foreign`. With an
 * invalid declaration nothing counts as declared, so a tracked taint is said to be kept, not "no longer declared".
 */
export function explainOwner(o: OwnedTaint, state?: SyncState): string {
  const from = o.declaredAs ? ` from ${SOURCE_LABEL[o.declaredAs.source] ?? o.declaredAs.source}` : '';
  switch (o.owner) {
    case TaintOwner.tracked:
      if (o.declaredAs) return `tracked (${o.declaredAs.propagation}${from})`;
      if (state === SyncState.invalidDeclaration) return 'tracked (kept while the declaration is invalid)';
      if (state === SyncState.malformedAnnotation) return 'tracked (kept while the tracking annotation is malformed)';
      return 'tracked (no longer declared: the next write removes it)';
    case TaintOwner.upstream:
      return `upstream CAPI${from}`;
    case TaintOwner.initializationOnly:
      return `initialization-only${from}`;
    case TaintOwner.startupGate:
      return 'startup gate';
    default:
      return 'foreign';
  }
}

/** The words for each verdict, used by `npm run status`, `npm start` and the demo alike. */
export const STATE_LABEL: Readonly<Record<SyncState, string>> = {
  [SyncState.inSync]: 'in sync',
  [SyncState.outOfSync]: 'out of sync',
  [SyncState.waitingForUpstream]: 'waiting for upstream CAPI',
  [SyncState.invalidDeclaration]: 'invalid declaration (left alone)',
  [SyncState.malformedAnnotation]: 'malformed annotation (left alone)',
  [SyncState.noNode]: 'no Node yet',
  [SyncState.nodeMissing]: 'Node missing',
  [SyncState.machineDeleting]: 'Machine deleting (left alone)',
  [SyncState.paused]: 'paused (left alone)',
};

/** The state column of a paused pair names whose pause it is. */
const PAUSED_LABEL: Readonly<Record<PausedBy, string>> = {
  [PausedBy.cluster]: 'paused (Cluster spec.paused)',
  [PausedBy.machine]: 'paused (Machine annotation)',
  [PausedBy.machinePool]: 'paused (MachinePool annotation)',
};

/** The label of a Machine whose cluster's Nodes could not be listed: its state is unknown, not "Node missing". */
export const CLUSTER_UNREACHABLE_LABEL = 'cluster unreachable';

/**
 * The state column: `in sync`, `out of sync`, `invalid declaration (left alone)`, …; `cluster unreachable` when its
 * cluster's Nodes could not be listed; a Node of a staged NoExecute rollout adds its phase: `out of sync (rollout: refused)`.
 */
export function formatState(s: Pick<TaintStatus, 'state' | 'pausedBy' | 'rollout'> & { readonly unreachableCluster?: UnreachableCluster }): string {
  if (s.unreachableCluster) return CLUSTER_UNREACHABLE_LABEL;
  if (s.state === SyncState.paused && s.pausedBy) return PAUSED_LABEL[s.pausedBy];
  const label = STATE_LABEL[s.state] ?? s.state;
  return s.rollout ? `${label} (rollout: ${s.rollout.phase})` : label;
}

/** A workload cluster whose Nodes could not be listed (see local/cluster-status.ts). */
export interface UnreachableCluster {
  readonly cluster: string;
  readonly reason: string;
}

/** Each cluster whose Nodes could not be listed, once, sorted (the reason of its first Machine). */
export function unreachableClustersOf(statuses: readonly (Pick<TaintStatus, 'machine'> & { readonly unreachableCluster?: UnreachableCluster })[]): UnreachableCluster[] {
  const byCluster = new Map<string, UnreachableCluster>();
  for (const s of statuses) if (s.unreachableCluster && !byCluster.has(s.unreachableCluster.cluster)) byCluster.set(s.unreachableCluster.cluster, s.unreachableCluster);
  return [...byCluster.values()].sort((a, b) => a.cluster.localeCompare(b.cluster));
}

/** The block naming each unreachable cluster once with its reason; empty when there is none. */
export function formatUnreachableClusters(clusters: readonly UnreachableCluster[]): string[] {
  if (clusters.length === 0) return [];
  const width = Math.max(...clusters.map((c) => c.cluster.length));
  return [
    `${clusters.length} unreachable cluster${clusters.length === 1 ? '' : 's'} (Nodes could not be listed; the state of their Machines is unknown):`,
    ...clusters.map((c) => `  ${c.cluster.padEnd(width)}  ${c.reason}`),
  ];
}

/**
 * The exit status of `npm run status`: 4 when some cluster's Nodes could not be listed (their state is unknown),
 * else 3 when some Node is out of sync or missing, else 0.
 */
export function statusExitCode(statuses: readonly (Pick<TaintStatus, 'state'> & { readonly unreachableCluster?: UnreachableCluster })[]): 0 | 3 | 4 {
  if (statuses.some((s) => s.unreachableCluster)) return 4;
  return statuses.some(needsAttention) ? 3 : 0;
}

/** A Node the next reconcile would write, or that is missing: `npm run status` exits 3 for these. */
export function needsAttention(s: Pick<TaintStatus, 'state'>): boolean {
  return s.state === SyncState.outOfSync || s.state === SyncState.nodeMissing;
}

/** Not in sync, on purpose (invalid declaration, malformed annotation, Machine being deleted, paused): never written. */
export function isLeftAlone(s: Pick<TaintStatus, 'state'>): boolean {
  return s.state === SyncState.invalidDeclaration || s.state === SyncState.malformedAnnotation || s.state === SyncState.machineDeleting || s.state === SyncState.paused;
}

/**
 * A compact table, one block per Machine/Node pair: the state, then one line per Node taint with
 * its owner, then what the Machine declares, and the reason when not in sync.
 */
export function formatStatusTable(statuses: readonly TaintStatus[]): string[] {
  if (statuses.length === 0) return ['No Machines found.'];
  const lines: string[] = [];
  const pairWidth = Math.max(...statuses.map((s) => pairOf(s).length), 'MACHINE -> NODE'.length);
  lines.push(`${'MACHINE -> NODE'.padEnd(pairWidth)}  STATE`);
  for (const s of statuses) {
    lines.push(`${pairOf(s).padEnd(pairWidth)}  ${formatState(s)}`);
    const taintWidth = Math.max(0, ...s.actual.map((a) => formatTaint(a.taint).length));
    for (const a of s.actual) lines.push(`    has      ${formatTaint(a.taint).padEnd(taintWidth)}  ${explainOwner(a, s.state)}`);
    if (s.actual.length === 0 && s.node !== undefined && s.state !== SyncState.nodeMissing) lines.push('    has      (no taints)');
    lines.push(`    declares ${s.desired.length === 0 ? (s.state === SyncState.invalidDeclaration ? '(invalid)' : '(nothing)') : s.desired.map(formatDesired).join(', ')}`);
    if (s.previewed && s.previewed.length > 0) lines.push(`    previews ${s.previewed.map(formatPreviewed).join(', ')}`);
    if (s.state !== SyncState.inSync && s.reason) lines.push(`    why      ${s.reason}`);
    if (s.expected) lines.push(`    expected ${formatTaints(s.expected)}`);
    if (s.rollout) lines.push(`    rollout  ${formatRollout(s.rollout)}`);
  }
  return lines;
}

/**
 * A staged NoExecute rollout's progress on a Node, for people.
 * @example formatRollout({ phase: 'refused', group: 'MachineDeployment/default/md-0', taints: ['maint:NoExecute'], refused: ['default/web-1'] })
 * // 'maint:NoExecute in MachineDeployment/default/md-0: waiting, a PodDisruptionBudget refuses evicting default/web-1'
 */
export function formatRollout(r: RolloutProgress): string {
  const head = `${r.taints.join(', ')} in ${r.group}`;
  switch (r.phase) {
    case 'claimed':
      return `${head}: waiting for a place in the group`;
    case 'evicting':
      return `${head}: evicting its pods through the Eviction API`;
    case 'refused':
      return `${head}: waiting, a PodDisruptionBudget refuses evicting ${(r.refused ?? []).join(', ')}`;
    case 'stuck':
      return `${head}: pods that will not go (still terminating past the bound): ${(r.stuck ?? []).join(', ')}`;
  }
}

/** Comma-separated taints, or `(none)`. */
export function formatTaints(taints: readonly Taint[]): string {
  return taints.length === 0 ? '(none)' : taints.map(formatTaint).join(', ');
}

/** One line per state: `3 in sync, 1 invalid declaration`. */
export function summarizeStates(statuses: readonly (TaintStatus & { readonly unreachableCluster?: UnreachableCluster })[]): string {
  const counts = new Map<string, number>();
  for (const s of statuses) counts.set(formatState(s), (counts.get(formatState(s)) ?? 0) + 1);
  return [...counts.entries()].map(([state, n]) => `${n} ${state}`).join(', ');
}

function pairOf(s: TaintStatus): string {
  return `${s.machinePool ? 'MachinePool ' : ''}${s.machine} -> ${s.node ?? '(no Node)'}`;
}

/** One row per Machine, kubectl style: NAMESPACE, MACHINE, NODE, STATE, DECLARED (count), NODE TAINTS (count). */
export function formatStatusRows(statuses: readonly (TaintStatus & { readonly unreachableCluster?: UnreachableCluster })[], wide = false): string[] {
  if (statuses.length === 0) return ['No Machines found.'];
  const header = ['NAMESPACE', 'MACHINE', 'NODE', 'STATE', 'DECLARED', 'NODE TAINTS', ...(wide ? ['DECLARES', 'NODE HAS', 'WHY'] : [])];
  const rows = statuses.map((s) => {
    const [namespace = '', name = ''] = splitName(s.machine);
    // A MachinePool's Node is listed under its pool, kubectl's kind/name form.
    const row = [namespace, s.machinePool ? `machinepool/${name}` : name, s.node ?? '<none>', formatState(s), String(s.desired.length), String(s.actual.length)];
    if (!wide) return row;
    return [
      ...row,
      s.desired.length + (s.previewed?.length ?? 0) === 0 ? '<none>' : [...s.desired.map((d) => `${formatTaint(d)}@${d.propagation}`), ...(s.previewed ?? []).map((p) => `${formatTaint(p)}@Preview`)].join(','),
      s.actual.length === 0 ? '<none>' : s.actual.map((a) => `${formatTaint(a.taint)}(${OWNER_SHORT[a.owner] ?? a.owner})`).join(','),
      s.unreachableCluster ? `cluster ${s.unreachableCluster.cluster} unreachable (see below)` : s.state === SyncState.inSync ? '' : (s.reason ?? ''),
    ];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const render = (cells: readonly string[]): string => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('   ').trimEnd();
  return [render(header), ...rows.map(render)];
}

/**
 * One Machine in detail: the block of formatStatusTable, then the declarations a higher source overrode or cancelled,
 * then its NoExecute preview with every pod.
 */
export function formatStatusDetail(status: TaintStatus, overrides: readonly Override[]): string[] {
  const lines = formatStatusTable([status]);
  for (const o of overrides) {
    const verb = o.cancelled ? 'cancelled ' : 'overridden';
    lines.push(`    ${verb} ${o.id} from ${SOURCE_LABEL[o.source] ?? o.source} by ${SOURCE_LABEL[o.by] ?? o.by}`);
  }
  const preview = formatNoExecutePreview([status], true);
  return preview.length === 0 ? lines : [...lines, '', ...preview];
}

/** A node group's NoExecute preview: its Nodes with an addition, and their counts summed (`counts` absent when some Node's pods could not be read). */
export interface NoExecuteGroupPreview {
  /** `MachineDeployment ns/name`, `MachineSet ns/name`, `MachinePool ns/name`, or `Machine ns/name` for a lone Machine. */
  readonly nodeGroup: string;
  readonly taints: readonly string[];
  readonly nodes: number;
  readonly counts?: EvictionCounts;
}

/** Adds counts (a node group's sum). */
export function addEvictionCounts(a: EvictionCounts, b: EvictionCounts): EvictionCounts {
  return { now: a.now + b.now, later: a.later + b.later, laterSeconds: [...new Set([...a.laterSeconds, ...b.laterSeconds])].sort((x, y) => x - y), kept: a.kept + b.kept };
}

/** The Nodes with a NoExecute preview, grouped by node group (groups sorted, Nodes in the statuses' order). */
export function noExecuteGroupsOf(statuses: readonly TaintStatus[]): { group: NoExecuteGroupPreview; members: (TaintStatus & { noExecutePreview: NoExecutePreview })[] }[] {
  const byGroup = new Map<string, (TaintStatus & { noExecutePreview: NoExecutePreview })[]>();
  for (const s of statuses) {
    if (s.noExecutePreview === undefined) continue;
    const key = s.nodeGroup ?? `${s.machinePool ? 'MachinePool' : 'Machine'} ${s.machine}`;
    byGroup.set(key, [...(byGroup.get(key) ?? []), s as TaintStatus & { noExecutePreview: NoExecutePreview }]);
  }
  return [...byGroup.entries()]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([nodeGroup, members]) => {
      const taints = [...new Set(members.flatMap((m) => m.noExecutePreview.taints.map(formatAddition)))];
      const all = members.map((m) => m.noExecutePreview.counts);
      const counts = all.every((c): c is EvictionCounts => c !== undefined) ? all.reduce(addEvictionCounts, { now: 0, later: 0, laterSeconds: [], kept: 0 }) : undefined;
      return { group: { nodeGroup, taints, nodes: members.length, ...(counts ? { counts } : {}) }, members };
    });
}

/** `maintenance=true:NoExecute` for an applied addition, `maintenance=true:NoExecute@Preview` for a previewed one. */
function formatAddition(a: NoExecutePreview['taints'][number]): string {
  return `${formatTaint(a.taint)}${a.previewOnly ? '@Preview' : ''}`;
}

/**
 * The NoExecute preview under the table: per node group a summed row, then one row per Node, with how many pods the
 * taint-eviction controller would delete at once, later (after their tolerationSeconds) and keep; `withPods` adds each
 * pod under its Node. Empty when no Node has a NoExecute taint about to be added or previewed.
 */
export function formatNoExecutePreview(statuses: readonly TaintStatus[], withPods = false): string[] {
  const groups = noExecuteGroupsOf(statuses);
  if (groups.length === 0) return [];
  const header = ['NODE GROUP / NODE', 'NOEXECUTE TAINTS', 'EVICT NOW', 'LATER', 'KEPT'];
  const rows: { cells: string[]; pods?: readonly PodEvictionPreview[] }[] = [];
  const errors: string[] = [];
  for (const { group, members } of groups) {
    rows.push({ cells: [`${group.nodeGroup} (${group.nodes} Node${group.nodes === 1 ? '' : 's'})`, group.taints.join(','), ...countCells(group.counts)] });
    for (const m of members) {
      const p = m.noExecutePreview;
      rows.push({ cells: [`  ${m.node ?? '<none>'}`, p.taints.map(formatAddition).join(','), ...countCells(p.counts)], ...(withPods && p.pods ? { pods: p.pods } : {}) });
      if (p.podsError) errors.push(`  ${m.node ?? '<none>'}: pods not read: ${p.podsError}`);
    }
  }
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r.cells[i] ?? '').length)));
  const render = (cells: readonly string[]): string => cells.map((c, i) => (i >= 2 ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join('   ').trimEnd();
  const lines = ['NoExecute preview (what the taint-eviction controller would do once these taints are on the Node; @Preview: never applied):', render(header)];
  for (const r of rows) {
    lines.push(render(r.cells));
    for (const pod of r.pods ?? []) lines.push(`      ${formatWhen(pod).padEnd(10)} ${pod.namespace}/${pod.name}${pod.ownerKind ? ` (${pod.ownerKind})` : ''}${pod.podState === 'active' ? '' : ` [${pod.podState}]`}`);
  }
  return errors.length === 0 ? lines : [...lines, ...errors];
}

function countCells(c: EvictionCounts | undefined): [string, string, string] {
  if (c === undefined) return ['?', '?', '?'];
  const spread = c.laterSeconds.length === 0 ? '' : c.laterSeconds.length === 1 ? ` (${c.laterSeconds[0]} s)` : ` (${c.laterSeconds[0]}-${c.laterSeconds[c.laterSeconds.length - 1]} s)`;
  return [String(c.now), `${c.later}${spread}`, String(c.kept)];
}

/** `now`, `after 300s`, `kept`, for one pod. */
function formatWhen(pod: PodEvictionPreview): string {
  if (pod.evict === 'never') return 'kept';
  if (pod.evict === 'now' || pod.evict.afterSeconds <= 0) return 'now';
  return `${pod.keepsPendingEviction ? '<=' : 'after '}${pod.keepsPendingEviction && typeof pod.current === 'object' ? pod.current.afterSeconds : pod.evict.afterSeconds}s`;
}

/**
 * The `-o json|yaml` document: one Machine's status, or a list (kubectl's shape: kind + items); a list carries the
 * NoExecute preview summed per node group (`noExecutePreviewGroups`) when some Node has one.
 */
export function toStatusDocument(views: readonly { status: TaintStatus & { readonly unreachableCluster?: UnreachableCluster }; overrides: readonly Override[] }[], single: boolean): unknown {
  const items = views.map((v) => ({ ...v.status, stateLabel: formatState(v.status), overrides: v.overrides }));
  const unreachable = unreachableClustersOf(views.map((v) => v.status));
  if (single && items.length === 1) return { kind: 'TaintStatus', ...items[0] };
  const groups = noExecuteGroupsOf(views.map((v) => v.status)).map((g) => g.group);
  return { kind: 'TaintStatusList', items, unreachableClusters: unreachable, ...(groups.length > 0 ? { noExecutePreviewGroups: groups } : {}) };
}

const OWNER_SHORT: Readonly<Record<string, string>> = {
  [TaintOwner.tracked]: 'tracked',
  [TaintOwner.upstream]: 'upstream',
  [TaintOwner.initializationOnly]: 'init-only',
  [TaintOwner.startupGate]: 'startup-gate',
  [TaintOwner.foreign]: 'foreign',
};

function splitName(machine: string): [string, string] {
  const slash = machine.indexOf('/');
  return slash < 0 ? ['', machine] : [machine.slice(0, slash), machine.slice(slash + 1)];
}
