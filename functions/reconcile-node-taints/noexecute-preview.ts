/**
 * The `NoExecutePreview` Event (issue 51, docs/noexecute-preview.md "Or watch the Event"): the pods the taint-eviction
 * controller would delete, counted on the Machine before a NoExecute taint is added or when a `@Preview` names one.
 */
import type { ClusterRef } from '#shared/contract/cloud-event.ts';
import {
  countEvictions,
  describeEvictionCounts,
  noExecuteChangeOf,
  previewNoExecuteEvictions,
  type EvictionCounts,
} from '#shared/domain/eviction-preview.ts';
import { formatTaint, type Taint } from '#shared/domain/taint.ts';
import type { NodeWithTaints } from '#shared/model/views.ts';
import type { ClusterConnections } from '#shared/ports/cluster-connections.ts';

/** Reason of the Event that previews a NoExecute taint's evictions. */
export const NOEXECUTE_PREVIEW = 'NoExecutePreview';

/** What the preview saw, for the result; absent when no NoExecute taint was about to be added or previewed. */
export interface NoExecutePreviewResult {
  readonly taints: readonly string[];
  readonly counts?: EvictionCounts;
  /** The pods could not be read (the reconcile goes on: the preview informs, it never holds a write). */
  readonly error?: unknown;
}

/**
 * Records the Event for the NoExecute taints the planned write (`after`: the Node's taints after it) or `previews`
 * would add. Returns undefined, with no pod read, when there is none.
 */
export async function previewNoExecute(
  clusters: Pick<ClusterConnections, 'podsOf'>,
  cluster: ClusterRef,
  node: NodeWithTaints,
  after: readonly Taint[],
  previews: readonly Taint[],
  record: (type: 'Normal' | 'Warning', reason: string, message: string) => Promise<unknown>,
): Promise<NoExecutePreviewResult | undefined> {
  const change = noExecuteChangeOf(node.taints, after, previews);
  if (change.applied.length + change.previewed.length === 0) return undefined;
  const taints = [...change.applied.map(formatTaint), ...change.previewed.map((t) => `${formatTaint(t)}@Preview`)];
  const what = `${taints.join(', ')}${change.applied.length === 0 ? ' (preview only, not applied)' : ''}`;
  try {
    const pods = await (await clusters.podsOf(cluster)).listPodsOnNode(node.name);
    const counts = countEvictions(previewNoExecuteEvictions({ taintsToAdd: [...change.applied, ...change.previewed], nodeTaints: node.taints, pods }));
    await record('Normal', NOEXECUTE_PREVIEW, `Node ${node.name}: ${what} ${describeEvictionCounts(counts)}`);
    return { taints, counts };
  } catch (error) {
    await record('Warning', NOEXECUTE_PREVIEW, `Node ${node.name}: ${what}: its pods could not be read, so the evictions are not previewed`);
    return { taints, error };
  }
}
