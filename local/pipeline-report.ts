/**
 * What `npm start` prints while the pipeline runs: a few lines of totals, printed only when something
 * changed, and the activity feed. Pure formatting, unit tested.
 */
import { ReconcileOutcome } from '#shared/domain/outcome.ts';
import { SyncState, type TaintStatus } from './taint-status.ts';
import { formatState, isLeftAlone, needsAttention } from './status-format.ts';

/** Totals of one pipeline run. */
export interface PipelineCounters {
  /** The forwarder holds the Lease (it is watching). */
  readonly forwarderActive: boolean;
  readonly eventsSeen: number;
  readonly eventsForwarded: number;
  readonly eventsFiltered: number;
  /** Of those filtered: foreign writes of Node taints (and Cluster API's tracking annotation) the product does not own. */
  readonly foreignTaintChangesFiltered: number;
  /** Of those filtered: Machine changes of Cluster API's own `spec.taints` that cannot change the product's decision. */
  readonly foreignDeclarationChangesFiltered: number;
  readonly sendFailures: number;
  readonly relists: number;
  readonly watchRestarts: number;
  /** Reconciles by outcome (every outcome present, 0 when none). */
  readonly reconciles: Readonly<Record<ReconcileOutcome, number>>;
  /** Node writes (outcome `patched`). */
  readonly writes: number;
  /** 409 Conflicts retried through the queue. */
  readonly conflicts: number;
  readonly transientErrors: number;
  /** Records re-issued as fresh messages after failing for transient reasons until just before the redrive. */
  readonly reissued: number;
  /** Records the reconcile function sent to the dead-letter queue (malformed, never retryable). */
  readonly deadLettered: number;
  /** Messages in the dead-letter queue (including redrives after maxReceiveCount). */
  readonly deadLetterQueueDepth: number;
  readonly queueVisible: number;
  readonly queueInFlight: number;
  readonly invocations: number;
}

/** Counters of a pipeline that has done nothing yet. */
export function emptyCounters(): PipelineCounters {
  const reconciles = Object.fromEntries(Object.values(ReconcileOutcome).map((o) => [o, 0])) as Record<ReconcileOutcome, number>;
  return {
    forwarderActive: false,
    eventsSeen: 0,
    eventsForwarded: 0,
    eventsFiltered: 0,
    foreignTaintChangesFiltered: 0,
    foreignDeclarationChangesFiltered: 0,
    sendFailures: 0,
    relists: 0,
    watchRestarts: 0,
    reconciles,
    writes: 0,
    conflicts: 0,
    transientErrors: 0,
    reissued: 0,
    deadLettered: 0,
    deadLetterQueueDepth: 0,
    queueVisible: 0,
    queueInFlight: 0,
    invocations: 0,
  };
}

/** One Node that is not in sync, for the report. */
export interface OutOfSyncNode {
  readonly node: string;
  /** Short reason, e.g. `out-of-sync`, `invalid-declaration`. */
  readonly state: string;
}

/** How many Machines there are, and which of them are still waiting for a Node (no `status.nodeRef` yet). */
export interface MachineCensus {
  readonly machines: number;
  /** `namespace/name` of the Machines without a Node yet. */
  readonly waitingForNode: readonly string[];
}

/** The state shown for Machines whose cluster's Nodes could not be listed (their Nodes may well exist). */
export const NODE_LIST_FAILED = 'Node list failed';

/**
 * The Nodes to list as not in sync, with the words of `npm run status`: out of sync, Node missing, waiting for
 * upstream, and the pairs left alone on purpose (but not a Machine being deleted). A Machine whose cluster's Node
 * list failed is shown as `Node list failed`, never as `node-missing`.
 * @example outOfSyncNodes([{ machine: 'ns/m1', node: 'n1', state: 'node-missing', nodeListError: 'HTTP 503' }]) // [{ node: 'n1', state: 'Node list failed' }]
 */
export function outOfSyncNodes(statuses: readonly (Pick<TaintStatus, 'machine' | 'node' | 'state' | 'pausedBy'> & { readonly nodeListError?: string })[]): OutOfSyncNode[] {
  return statuses
    .filter((s) => s.nodeListError !== undefined || needsAttention(s) || s.state === SyncState.waitingForUpstream || (isLeftAlone(s) && s.state !== SyncState.machineDeleting))
    .map((s) => ({ node: s.node ?? s.machine, state: s.nodeListError !== undefined ? NODE_LIST_FAILED : formatState(s) }));
}

/**
 * Renders the status block: events, reconciles by outcome (non-zero only), writes, conflicts,
 * dead letters, queue depth and the Nodes out of sync. Returns the lines, without a timestamp, so
 * that equal blocks mean "nothing changed". With a `census`, the Nodes line tells "no Machine",
 * "waiting for a Node" and "in sync" apart.
 * @example formatReport(emptyCounters(), [])[0] // 'events    forwarded 0, filtered 0 (seen 0)'
 */
export function formatReport(c: PipelineCounters, outOfSync: readonly OutOfSyncNode[] | undefined, census?: MachineCensus): string[] {
  const outcomes = Object.entries(c.reconciles)
    .filter(([, n]) => n > 0)
    .map(([o, n]) => `${o} ${n}`);
  const total = Object.values(c.reconciles).reduce((a, b) => a + b, 0);
  const events = `events    forwarded ${c.eventsForwarded}, filtered ${c.eventsFiltered} (seen ${c.eventsSeen})`;
  const extras = [
    c.sendFailures > 0 ? `send failures ${c.sendFailures}` : '',
    c.relists > 0 ? `relists ${c.relists}` : '',
    c.watchRestarts > 0 ? `watch restarts ${c.watchRestarts}` : '',
    c.forwarderActive ? '' : 'forwarder waiting for the Lease',
  ].filter((s) => s !== '');
  const lines = [
    extras.length > 0 ? `${events}; ${extras.join(', ')}` : events,
    `reconciles ${total}${outcomes.length > 0 ? `: ${outcomes.join(', ')}` : ''}`,
    `writes    ${c.writes}, conflicts retried ${c.conflicts}${c.transientErrors > 0 ? `, transient errors retried ${c.transientErrors}` : ''}${c.reissued > 0 ? `, re-issued ${c.reissued}` : ''}, dead-lettered ${c.deadLettered} (DLQ depth ${c.deadLetterQueueDepth})`,
    `queue     ${c.queueVisible} waiting, ${c.queueInFlight} in flight`,
  ];
  if (outOfSync !== undefined && census !== undefined) {
    lines.push(nodesLine(outOfSync, census));
  } else if (outOfSync !== undefined) {
    lines.push(
      outOfSync.length === 0
        ? 'Nodes     all in sync'
        : `Nodes     ${outOfSync.length} not in sync: ${outOfSync
            .slice(0, 8)
            .map((n) => `${n.node} (${n.state})`)
            .join(', ')}${outOfSync.length > 8 ? `, +${outOfSync.length - 8} more` : ''}`,
    );
  }
  return lines;
}

function nodesLine(outOfSync: readonly OutOfSyncNode[], census: MachineCensus): string {
  if (census.machines === 0) return 'Nodes     no Machine yet';
  const list = (names: readonly string[]): string => `${names.slice(0, 8).join(', ')}${names.length > 8 ? `, +${names.length - 8} more` : ''}`;
  const inSync = census.machines - census.waitingForNode.length - outOfSync.length;
  const parts = [
    inSync === census.machines ? `all ${inSync} in sync` : `${inSync} in sync`,
    census.waitingForNode.length > 0 ? `${census.waitingForNode.length} waiting for a Node: ${list(census.waitingForNode)}` : '',
    outOfSync.length > 0 ? `${outOfSync.length} not in sync: ${list(outOfSync.map((n) => `${n.node} (${n.state})`))}` : '',
  ].filter((p) => p !== '');
  return `Nodes     ${parts.join('; ')}`;
}

/**
 * A filter for the activity feed: lets an Event through unless the same object (kind and name) already reported
 * the same reason and message (a Node that keeps changing re-triggers an invalid declaration's
 * Warning on every reconcile). Returns true when the activity should be printed.
 * @example const show = createActivityFilter(); show(a); show(a) // true, then false
 */
export function createActivityFilter(): (activity: { readonly kind: string; readonly object: string; readonly reason: string; readonly message: string }) => boolean {
  const last = new Map<string, string>();
  return (a) => {
    const key = `${a.kind}\u0000${a.object}\u0000${a.reason}`;
    if (last.get(key) === a.message) return false;
    last.set(key, a.message);
    return true;
  };
}
