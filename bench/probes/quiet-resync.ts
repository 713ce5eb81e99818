/**
 * `node bench/probes/quiet-resync.ts [--nodes=2000] [--resyncs=2] [--resync-seconds=35]`
 *
 * Probe of a quiet fleet's cost (issue 52, point 3; docs/cost.md): a local control plane (a bare API server with the
 * Cluster API CRDs, bench/lib/control-plane-process.ts), `--nodes` Nodes (kubelet-like status) and as many Machines in
 * `self` mode, every Node in sync with its Machine (it carries the declared taint and the product's tracking
 * annotation). The forwarder runs in this process as `npm run forwarder` runs it (production composition, a rota of
 * one, SPEC_TAINTS_OWNER=product as the benchmarks' reconcile), publishing into a counting stand-in for SQS, with
 * RESYNC_INTERVAL_SECONDS=`--resync-seconds`. It prints, for the first list (cold start, no checkpoint) and for each
 * round of periodic resyncs (every stream relisted once: its `Relisted` line), the messages sent and the forwarder's
 * log lines and bytes at INFO and above (each line as JSON: message and attributes, without the standard keys the
 * Powertools logger adds, about 200 B a line). Public APIs only, so that the same probe runs on any commit (before and
 * after a change). The stream logs allow one line of a kind per stream per 30 s: keep `--resync-seconds` above 30.
 */
import { parseArgs } from 'node:util';
import type { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { composeWatchForwarder } from '#functions/watch-forwarder/compose.ts';
import { WatchForwarder } from '#functions/watch-forwarder/forward-watch-events.ts';
import { LOCAL_WATCH_MEMBERS, localRota, runWindows } from '#local/forwarder-rota.ts';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import { OWN_TRACKING_ANNOTATION } from '#shared/domain/taint.ts';
import { createForwarderTelemetry } from '#shared/observability/forwarder-telemetry.ts';
import { startControlPlaneProcess } from '../lib/control-plane-process.ts';
import { BENCH_LABEL, RawKube, createNamespace, createPairs, loadKubeConfig, runId } from '../lib/kube.ts';
import { sleep } from '../lib/stats.ts';
import { DECLARED } from '../scenarios/forwarder.ts';

const { values } = parseArgs({ options: { nodes: { type: 'string', default: '2000' }, resyncs: { type: 'string', default: '2' }, 'resync-seconds': { type: 'string', default: '35' } } });
const nodes = Number(values.nodes);
const resyncs = Number(values.resyncs);
const resyncSeconds = Number(values['resync-seconds']);

const cp = await startControlPlaneProcess({ log: (line) => process.stderr.write(`${line}\n`) });
try {
  const kc = loadKubeConfig(cp.kubeconfigPath);
  const raw = await RawKube.from(kc);
  const run = runId('quiet');
  const ns = run;
  await createNamespace(raw, ns, run);
  const setupStarted = Date.now();
  await createPairs(raw, { run, namespace: ns, count: nodes, machineTaints: [DECLARED], nodeTaints: [DECLARED], nodeAnnotations: { [OWN_TRACKING_ANNOTATION]: `${DECLARED.key}:${DECLARED.effect}` }, nodeStatus: true });
  process.stderr.write(`created ${nodes} Nodes and Machines in ${((Date.now() - setupStarted) / 1000).toFixed(1)} s\n`);

  let messages = 0;
  const sqs = {
    async send(command: SendMessageBatchCommand) {
      const entries = command.input.Entries ?? [];
      messages += entries.length;
      return { Successful: entries.map((e, i) => ({ Id: e.Id, MessageId: `m${messages}-${i}`, MD5OfMessageBody: '', SequenceNumber: '1' })), Failed: [] };
    },
  };
  const logs = { lines: 0, bytes: 0 };
  /** `Relisted` lines: a stream logs one once its relist's announcements are queued (one per stream per 30 s at most). */
  let relisted = 0;
  const count = (level: string) => (message: unknown, attrs: unknown = {}) => {
    if (message === 'Relisted') relisted++;
    logs.lines++;
    logs.bytes += Buffer.byteLength(JSON.stringify({ level, message, ...(typeof attrs === 'object' ? attrs : { extra: attrs }) })) + 1;
  };
  const logger = { info: count('INFO'), warn: count('WARN'), error: count('ERROR'), debug: () => undefined };
  const config = loadForwarderConfig({
    QUEUE_URL: 'https://sqs.eu-west-1.amazonaws.com/123456789012/quiet-probe.fifo',
    CLUSTER_MODE: 'self',
    STATE_NAMESPACE: ns,
    LEASE_NAME: `${run}-lease`,
    FORWARDER_ID: `quiet-${process.pid}`,
    MACHINE_NAMESPACE: ns,
    NODE_LABEL_SELECTOR: `${BENCH_LABEL}=${run}`,
    SPEC_TAINTS_OWNER: 'product',
    WATCH_MEMBERS: String(LOCAL_WATCH_MEMBERS),
    RESYNC_INTERVAL_SECONDS: String(resyncSeconds),
  });
  const telemetry = createForwarderTelemetry();
  const forwarder = new WatchForwarder(composeWatchForwarder({ config, managementKubeConfig: kc, sqs, telemetry, logger: logger as never }));
  const stop = new AbortController();
  const running = runWindows(forwarder, { signal: stop.signal, rota: localRota(config), retryMs: 2_000, logger: logger as never });

  /** Waits until `ready`, then until messages and log lines stop moving for 2 s (the last sends); returns what the phase added. */
  const phase = async (ready: () => boolean): Promise<{ messages: number; lines: number; bytes: number }> => {
    const before = { messages, ...logs };
    while (!ready()) await sleep(200);
    let last = -1;
    while (last !== messages + logs.lines) {
      last = messages + logs.lines;
      await sleep(2_000);
    }
    return { messages: messages - before.messages, lines: logs.lines - before.lines, bytes: logs.bytes - before.bytes };
  };
  const streams = ['machines', 'nodes/self'];
  const first = await phase(() => streams.every((s) => forwarder.checkpoint()[s] !== undefined));
  const streamCount = Object.keys(forwarder.checkpoint()).length;
  const rows = [{ phase: 'first list (no checkpoint)', ...first }];
  for (let k = 1; k <= resyncs; k++) {
    rows.push({ phase: `resync ${k} (${streamCount} streams)`, ...(await phase(() => relisted >= k * streamCount)) });
  }
  stop.abort();
  await running;
  console.log(JSON.stringify({ nodes, machines: nodes, resyncSeconds, rows }, null, 2));
} finally {
  await cp.stop();
}
