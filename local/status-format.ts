/**
 * Text rendering of taint statuses for `npm run status` and the demo's summary. Pure, unit tested.
 */
import { formatTaint, type Taint } from '#shared/domain/taint.ts';
import { SyncState, TaintOwner, type DesiredTaint, type OwnedTaint, type TaintStatus } from '#shared/domain/taint-status.ts';

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

/** Why a Node taint is there, in a few words: `tracked: Always from spec`, `initialization-only`, `foreign`. */
export function explainOwner(o: OwnedTaint): string {
  const from = o.declaredAs ? ` from ${SOURCE_LABEL[o.declaredAs.source] ?? o.declaredAs.source}` : '';
  switch (o.owner) {
    case TaintOwner.tracked:
      return o.declaredAs ? `tracked (${o.declaredAs.propagation}${from})` : 'tracked (no longer declared)';
    case TaintOwner.initializationOnly:
      return `initialization-only${from}`;
    case TaintOwner.startupGate:
      return 'startup gate';
    default:
      return 'foreign';
  }
}

/** The state column: `in sync`, `OUT OF SYNC`, `invalid declaration`, … */
export function formatState(s: TaintStatus): string {
  switch (s.state) {
    case SyncState.inSync:
      return 'in sync';
    case SyncState.outOfSync:
      return 'OUT OF SYNC';
    default:
      return s.state.replaceAll('-', ' ');
  }
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
    for (const a of s.actual) lines.push(`    has      ${formatTaint(a.taint).padEnd(taintWidth)}  ${explainOwner(a)}`);
    if (s.actual.length === 0 && s.node !== undefined && s.state !== SyncState.nodeMissing) lines.push('    has      (no taints)');
    lines.push(`    declares ${s.desired.length === 0 ? (s.state === SyncState.invalidDeclaration ? '(invalid)' : '(nothing)') : s.desired.map(formatDesired).join(', ')}`);
    if (s.state !== SyncState.inSync && s.reason) lines.push(`    why      ${s.reason}`);
    if (s.expected) lines.push(`    expected ${formatTaints(s.expected)}`);
  }
  return lines;
}

/** Comma-separated taints, or `(none)`. */
export function formatTaints(taints: readonly Taint[]): string {
  return taints.length === 0 ? '(none)' : taints.map(formatTaint).join(', ');
}

/** One line per state: `3 in sync, 1 invalid declaration`. */
export function summarizeStates(statuses: readonly TaintStatus[]): string {
  const counts = new Map<string, number>();
  for (const s of statuses) counts.set(formatState(s), (counts.get(formatState(s)) ?? 0) + 1);
  return [...counts.entries()].map(([state, n]) => `${n} ${state}`).join(', ');
}

function pairOf(s: TaintStatus): string {
  return `${s.machine} -> ${s.node ?? '(no Node)'}`;
}
