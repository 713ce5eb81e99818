/**
 * Helpers of the e2e tests: a pipeline per test, isolated by namespace, Node label, Lease and state
 * namespace, with short queue timings so that retries happen within seconds.
 */
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import type https from 'node:https';
import { startPipeline, type Pipeline, type PipelineOptions, type SqsCaller } from '#local/pipeline.ts';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AwsCallRecorder, CODE_FIXTURE, callKey, readCalls, writeCalls, type RecordedCall } from '#test/support/aws-calls.ts';
import { OWN_TRACKING_ANNOTATION, UNINITIALIZED_TAINT_KEY } from '#shared/domain/taint.ts';
import { MACHINES, MERGE_PATCH, createNamespace, uniqueName, waitFor, type MachineTaint } from '#test/support/control-plane.ts';

/** The label every Node of one test carries; the test's pipeline watches only those. */
export const E2E_LABEL = 'e2e.capi-taint-propagator.dev/run';

/** A test's own world: Machine namespace, Node label value, pipeline. */
export interface World {
  readonly kc: KubeConfig;
  readonly ns: string;
  readonly run: string;
  readonly pipeline: Pipeline;
}

/** The AWS calls of every pipeline this process started (per function and the event source), for the least-privilege test. */
const awsCallRecorders: AwsCallRecorder[] = [];

/** Gives each SQS client of a pipeline a recorder that names the queues as the deployed functions see them. */
function recordSqsCalls(client: SQSClient, caller: SqsCaller, queues: { readonly queueUrl: string; readonly deadLetterQueueUrl: string }): void {
  const recorder =
    caller === 'reconcile-event-source'
      ? new AwsCallRecorder('reconcile-node-taints', { [queues.queueUrl]: '{eventSource}' }, 'lambda-event-source')
      : new AwsCallRecorder(caller, { [queues.queueUrl]: '{queue:QUEUE_URL}', [queues.deadLetterQueueUrl]: '{queue:DEAD_LETTER_QUEUE_URL}' });
  awsCallRecorders.push(recorder);
  client.middlewareStack.add(recorder.middleware('sqs'), { step: 'initialize', name: 'awsCallRecorder' });
}

/**
 * Writes the AWS calls this file's pipelines made to `<AWS_CALL_RECORDINGS_OUT or the OS temp dir>/
 * capi-taint-propagator-aws-calls/<name>.jsonl` (pass that directory in AWS_CALL_RECORDINGS to the least-privilege
 * test) and returns those the code fixture (test/fixtures/aws-calls/code.jsonl) does not list.
 */
export async function writeAwsCalls(name: string): Promise<{ file: string; calls: RecordedCall[]; unlisted: RecordedCall[] }> {
  const calls = awsCallRecorders.flatMap((r) => r.calls());
  const file = join(process.env['AWS_CALL_RECORDINGS_OUT'] ?? join(tmpdir(), 'capi-taint-propagator-aws-calls'), `${name}.jsonl`);
  await writeCalls(file, calls);
  const listed = new Set((await readCalls(CODE_FIXTURE)).map((c) => callKey({ ...c, context: undefined })));
  return { file, calls, unlisted: calls.filter((c) => !listed.has(callKey({ ...c, context: undefined }))) };
}

/** Starts a pipeline that sees only this test's Machines and Nodes. */
export async function startWorld(kc: KubeConfig, overrides: Partial<PipelineOptions> = {}): Promise<World> {
  const ns = await createNamespace(kc, 'e2e');
  return startPipelineOf({ kc, ns, run: uniqueName('run') }, overrides);
}

/**
 * Starts another pipeline of a world (same namespace, label and Lease), with a queue of its own: as `npm start` run
 * again after the previous one stopped or died. Stop the world's pipeline first.
 */
export function restartWorld(w: World, overrides: Partial<PipelineOptions> = {}): Promise<World> {
  return startPipelineOf(w, overrides);
}

async function startPipelineOf(w: Pick<World, 'kc' | 'ns' | 'run'>, overrides: Partial<PipelineOptions>): Promise<World> {
  const { kc, ns, run } = w;
  const pipeline = await startPipeline({
    kubeconfig: kc,
    mode: 'self',
    stateNamespace: ns,
    leaseName: `forwarder-${run}`,
    machineNamespace: ns,
    nodeLabelSelector: `${E2E_LABEL}=${run}`,
    visibilityTimeoutSeconds: 5,
    maxReceiveCount: 50,
    retryBaseSeconds: 0,
    retryMaxSeconds: 1,
    firstEnabledAt: new Date('2000-01-01T00:00:00Z'),
    // A bare API server: no CAPI controller propagates spec.taints or removes its startup taint, the product does.
    specTaintsOwner: 'product',
    startupTaint: { key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' },
    forwarderOptions: { renewIntervalMs: 1000, acquireRetryMs: 200, flushIntervalMs: 20 },
    onSqsClient: recordSqsCalls,
    ...overrides,
  });
  await pipeline.waitForForwarder(20_000);
  return { kc, ns, run, pipeline };
}

/** Creates a Node of this world, joining with the startup gate and the given foreign taints. */
export async function joinNode(w: World, prefix: string, foreign: readonly { key: string; value?: string; effect: string }[] = []): Promise<string> {
  const name = uniqueName(prefix);
  await w.kc.makeApiClient(CoreV1Api).createNode({
    body: {
      metadata: { name, labels: { [E2E_LABEL]: w.run } },
      spec: { taints: [{ key: UNINITIALIZED_TAINT_KEY, effect: 'NoSchedule' }, ...foreign] },
    },
  });
  return name;
}

/** `key=value:effect` (value empty when absent), the multiset form used in assertions. */
export function taintString(t: { key: string; value?: string; effect: string }): string {
  return `${t.key}=${t.value ?? ''}:${t.effect}`;
}

/** The Node's taints (sorted, as a multiset) and its tracking annotation. */
export async function nodeState(kc: KubeConfig, name: string): Promise<{ taints: string[]; tracking: string | undefined }> {
  const node = await kc.makeApiClient(CoreV1Api).readNode({ name });
  return { taints: (node.spec?.taints ?? []).map(taintString).sort(), tracking: node.metadata?.annotations?.[OWN_TRACKING_ANNOTATION] };
}

/**
 * Waits until the Node carries exactly `taints` (as a multiset) and the tracking annotation
 * `tracking`. With `foreignKey`, the Node must also carry exactly one taint with that key (another
 * writer's, whose value keeps changing), left out of the comparison. Fails with the last state seen.
 */
export async function expectNode(
  kc: KubeConfig,
  name: string,
  want: { taints: readonly string[]; tracking: string },
  opts: { timeoutMs?: number; foreignKey?: string } = {},
): Promise<void> {
  let last: unknown;
  try {
    await waitFor(
      async () => {
        const state = await nodeState(kc, name);
        last = state;
        const key = opts.foreignKey;
        const theirs = key === undefined ? [] : state.taints.filter((t) => t.startsWith(`${key}=`));
        const ours = key === undefined ? state.taints : state.taints.filter((t) => !t.startsWith(`${key}=`));
        if (key !== undefined && theirs.length !== 1) return false;
        return JSON.stringify(ours) === JSON.stringify([...want.taints].sort()) && state.tracking === want.tracking;
      },
      { timeoutMs: opts.timeoutMs ?? 30_000, intervalMs: 100, description: `Node ${name} to converge` },
    );
  } catch (e) {
    throw new Error(`Node ${name} did not converge to ${JSON.stringify(want)}; last seen ${JSON.stringify(last)}`, { cause: e });
  }
}

/** Sets a Machine's `spec.taints` (atomic list: replaced whole; `null` removes the field). */
export async function setSpecTaints(kc: KubeConfig, ns: string, name: string, taints: readonly MachineTaint[] | null): Promise<void> {
  const value = taints === null ? null : taints.map((t) => ({ ...t, propagation: t.propagation ?? 'Always' }));
  await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name, body: { spec: { taints: value } } }, MERGE_PATCH);
}

/** Sets (string) or removes (null) Machine annotations. */
export async function setAnnotations(kc: KubeConfig, ns: string, name: string, annotations: Record<string, string | null>): Promise<void> {
  await kc.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject({ ...MACHINES, namespace: ns, name, body: { metadata: { annotations } } }, MERGE_PATCH);
}

/**
 * Another actor writing the same Nodes until stopped: blind merge patches of labels and annotations
 * and, every few rounds, its own taint through a read-modify-write guarded by the resourceVersion
 * (retrying its own conflicts). `taintOf(node)` is the actor's current taint on that Node.
 */
export const HAMMER_TAINT_KEY = 'other.example.com/hammer';

export function startForeignWriter(kc: KubeConfig, nodes: readonly string[], taintKey = HAMMER_TAINT_KEY) {
  const core = kc.makeApiClient(CoreV1Api);
  const current = new Map<string, string>();
  let stopped = false;
  let writes = 0;
  let ownConflicts = 0;
  const loops = nodes.map(async (name) => {
    for (let round = 1; !stopped; round++) {
      try {
        if (round % 4 === 1) {
          const node = await core.readNode({ name });
          const value = `r${round}`;
          node.spec = {
            ...node.spec,
            taints: [...(node.spec?.taints ?? []).filter((t) => t.key !== taintKey), { key: taintKey, value, effect: 'PreferNoSchedule' }],
          };
          await core.replaceNode({ name, body: node });
          current.set(name, taintString({ key: taintKey, value, effect: 'PreferNoSchedule' }));
        } else {
          await core.patchNode(
            { name, body: { metadata: { labels: { 'other.example.com/round': String(round) }, annotations: { 'other.example.com/heartbeat': `${Date.now()}` } } } },
            MERGE_PATCH,
          );
        }
        writes++;
      } catch (e) {
        if ((e as { code?: number }).code === 409) ownConflicts++;
        else throw e;
      }
    }
  });
  return {
    /** One blind write of its heartbeat to `node` now (a new resourceVersion, no taint touched). */
    async nudge(node: string): Promise<void> {
      await core.patchNode({ name: node, body: { metadata: { annotations: { 'other.example.com/heartbeat': `${Date.now()}` } } } }, MERGE_PATCH);
      writes++;
    },
    taintOf: (node: string): readonly string[] => {
      const t = current.get(node);
      return t ? [t] : [];
    },
    /** How many writes it has made so far. */
    written: (): number => writes,
    async stop(): Promise<{ writes: number; ownConflicts: number }> {
      stopped = true;
      await Promise.all(loops);
      return { writes, ownConflicts };
    },
  };
}

/**
 * A copy of `kc` for a pipeline whose every PATCH of a Node first awaits `beforePatch(node, contentType)`: the hook
 * runs after the product planned its write and before the request leaves (kube-http applies the credentials with the
 * method, path and headers already set), so a real write made there is one the real API server sees in between. The
 * API server's answer to the product is its own; nothing is faked.
 */
export function interleavedKubeConfig(kc: KubeConfig, beforePatch: (node: string, contentType: string) => Promise<void>): KubeConfig {
  const copy = new KubeConfig();
  copy.loadFromString(kc.exportConfig());
  const apply = copy.applyToHTTPSOptions.bind(copy);
  copy.applyToHTTPSOptions = async (opts: https.RequestOptions): Promise<void> => {
    const node = opts.method === 'PATCH' ? /^\/api\/v1\/nodes\/([^/?]+)(?:\?|$)/.exec(opts.path ?? '')?.[1] : undefined;
    if (node !== undefined) await beforePatch(decodeURIComponent(node), String((opts.headers as Record<string, unknown> | undefined)?.['Content-Type'] ?? ''));
    await apply(opts);
  };
  return copy;
}
