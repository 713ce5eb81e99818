/**
 * `npm run bench [-- --quick | --smoke] [--only=throughput,forwarder] [--throughput-n=1000] [--forwarder-objects=1000,5000,20000] [--fleet100-clusters=100] [--fleet100-nodes=200] [--fleet100-shards=4[,8…]] [--side-by-side-sizes=100,500] [--kubeconfig=<path>] [--etcd=<url>] [--no-write] [--hostile-seconds=120] [--hostile-set=six|three] [--hostile-machine-edit-seconds=15] [--noexecute-ready-seconds=0]`
 * `npm run bench -- --deployed [--only=e2e-latency|fleet|side-by-side] [--deployed-seconds=1500] [--deployed-rate=2] [--deployed-defaults] [--deployed-auth=eks|ssm] [--package-param=<name>=<value>…]`:
 * scenarios 3 and 8 through the packaged functions under local/lambda/'s runner (bench/scenarios/deployed.ts), real
 * time, and scenario 10 with the product's side in that form (bench/scenarios/side-by-side.ts, `form: 'deployed'`; its
 * figures under `<key>Deployed`, next to the local form's). `--deployed-defaults`: the rota's windows as shipped.
 * `--deployed-auth`: how scenario 10's deployed functions reach the management cluster: `eks` (default, serverless.yml's
 * default, through the EKS stand-in local/lambda/eks-authenticator.ts) or `ssm` (the kubeconfig in SSM, `example-ssm`).
 * Scenarios 3 and 8 read the kubeconfig from SSM either way.
 * `--package-param`: a stage parameter for `serverless package` (repeatable), e.g. `reconcileProvisionedConcurrency=10`;
 * such a variant's figures go to bench/out/results.full.deployed.variant.partial.json only, not into results.json.
 *
 * `--only=hostile` runs the opt-in scenario of six hostile workload clusters (bench/scenarios/hostile.ts; its attack
 * lasts `--hostile-seconds`, default 120); a run without `--only` leaves it out. `--hostile-set=three` runs issue 48's
 * three servers that answer at once instead of issue 27's six; `--hostile-machine-edit-seconds=N` gives each hostile
 * cluster a Machine linked to a Node of it, edited every N s (0: back to back).
 * A hostile run with either option is written to bench/out/ only (its figures are not the default run's).
 * Runs the benchmark scenarios against a real API server: the local control plane started here (default), or the
 * one of `--kubeconfig` (admin rights needed; the benchmarks create and delete labelled Nodes and namespaces).
 * Writes `bench/results.json` and, for a full run of every scenario, the generated tables of docs/benchmarks.md
 * (between its `results` markers; the analysis around them is written by hand).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

// The reconcile handler and the forwarder log every record through Powertools; on this machine that would measure
// the terminal. Silence them before any product module is loaded (product modules are imported dynamically below).
process.env['POWERTOOLS_LOG_LEVEL'] ??= 'SILENT';
process.env['POWERTOOLS_METRICS_DISABLED'] ??= 'true';
process.env['POWERTOOLS_DEV'] ??= 'false';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    smoke: { type: 'boolean', default: false },
    only: { type: 'string' },
    kubeconfig: { type: 'string' },
    etcd: { type: 'string' },
    'throughput-n': { type: 'string' },
    'forwarder-objects': { type: 'string' },
    'fleet100-clusters': { type: 'string' },
    'fleet100-nodes': { type: 'string' },
    'fleet100-shards': { type: 'string' },
    'side-by-side-sizes': { type: 'string' },
    'no-write': { type: 'boolean', default: false },
    'hostile-seconds': { type: 'string' },
    'hostile-set': { type: 'string' },
    'hostile-machine-edit-seconds': { type: 'string' },
    'noexecute-ready-seconds': { type: 'string' },
    deployed: { type: 'boolean', default: false },
    'deployed-defaults': { type: 'boolean', default: false },
    'deployed-seconds': { type: 'string' },
    'deployed-rate': { type: 'string' },
    'package-param': { type: 'string', multiple: true },
    'deployed-auth': { type: 'string' },
  },
});

const { runBench, SCENARIOS, OPT_IN_SCENARIOS } = await import('./lib/bench.ts');
const { parseSideBySideSizes } = await import('./scenarios/side-by-side.ts');
function positive(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${flag} must be a positive number, got ${JSON.stringify(text)}`);
  return n;
}
function nonNegative(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${flag} must be a number >= 0, got ${JSON.stringify(text)}`);
  return n;
}
function hostileSet(text: string): 'six' | 'three' {
  if (text !== 'six' && text !== 'three') throw new Error(`--hostile-set must be six or three, got ${JSON.stringify(text)}`);
  return text;
}
function deployedAuth(text: string): 'eks' | 'ssm' {
  if (text !== 'eks' && text !== 'ssm') throw new Error(`--deployed-auth must be eks or ssm, got ${JSON.stringify(text)}`);
  return text;
}
type ScenarioName = (typeof SCENARIOS)[number] | (typeof OPT_IN_SCENARIOS)[number];

const profile = values.smoke ? 'smoke' : values.quick ? 'quick' : 'full';
const only = (values.only ?? '')
  .split(',')
  .map((s) => s.trim())
  .filter((s) => s !== '');
for (const name of only) {
  if (![...SCENARIOS, ...OPT_IN_SCENARIOS].includes(name as ScenarioName)) {
    process.stderr.write(`unknown scenario ${name}; known: ${[...SCENARIOS, ...OPT_IN_SCENARIOS].join(', ')}\n`);
    process.exit(2);
  }
}

let stop: (() => Promise<void>) | undefined;
let kubeconfigPath = values.kubeconfig;
let etcdEndpoint = values.etcd;
// Scenario 10 (with Cluster API) and `noexecute` (with kube-controller-manager) start control planes of their own: alone, they need no other.
const ownControlPlaneOnly = only.length > 0 && only.every((name) => name === 'side-by-side' || name === 'noexecute');
if (!kubeconfigPath && !ownControlPlaneOnly) {
  const { startControlPlane } = await import('#local/control-plane/control-plane.ts');
  const cp = await startControlPlane({ log: (line) => process.stderr.write(`${line}\n`) });
  kubeconfigPath = cp.kubeconfigPath;
  etcdEndpoint = cp.etcdEndpoint;
  stop = () => cp.stop();
}

try {
  const throughputN = values['throughput-n']?.split(',').map(Number).filter((n) => Number.isInteger(n) && n > 0);
  const forwarderObjects = values['forwarder-objects']?.split(',').map(Number);
  const sideBySideN = values['side-by-side-sizes'] === undefined ? undefined : parseSideBySideSizes(values['side-by-side-sizes']);
  const fleet100Clusters = values['fleet100-clusters'] === undefined ? undefined : Number(values['fleet100-clusters']);
  if (fleet100Clusters !== undefined && !(Number.isInteger(fleet100Clusters) && fleet100Clusters > 0)) throw new Error(`--fleet100-clusters must be a positive integer (the whole fleet, split over the shards), got ${values['fleet100-clusters']}`);
  const fleet100NodesPerCluster = values['fleet100-nodes'] === undefined ? undefined : Number(values['fleet100-nodes']);
  if (fleet100NodesPerCluster !== undefined && !(Number.isInteger(fleet100NodesPerCluster) && fleet100NodesPerCluster > 0)) throw new Error(`--fleet100-nodes must be a positive integer (Nodes per cluster), got ${values['fleet100-nodes']}`);
  const fleet100Shards = values['fleet100-shards'] === undefined ? undefined : values['fleet100-shards'].split(',').map(Number);
  if (fleet100Shards !== undefined && !fleet100Shards.every((n) => Number.isInteger(n) && n > 0)) throw new Error(`--fleet100-shards must be positive integers, comma-separated (the product's shard counts, each measured on the same fleet; 1: one forwarder over the whole fleet), got ${values['fleet100-shards']}`);
  if (forwarderObjects !== undefined && !forwarderObjects.every((n) => Number.isInteger(n) && n > 0)) throw new Error(`--forwarder-objects must be positive integers (comma-separated), got ${values['forwarder-objects']}`);
  const results = await runBench({
    profile,
    kubeconfigPath: kubeconfigPath ?? '',
    only: only as ScenarioName[],
    ...(etcdEndpoint ? { etcdEndpoint } : {}),
    ...(values['hostile-seconds'] !== undefined ? { hostileSeconds: Number(values['hostile-seconds']) } : {}),
    ...(values['hostile-set'] !== undefined ? { hostileSet: hostileSet(values['hostile-set']) } : {}),
    ...(values['hostile-machine-edit-seconds'] !== undefined ? { hostileMachineEditSeconds: nonNegative(values['hostile-machine-edit-seconds'], '--hostile-machine-edit-seconds') } : {}),
    sizes: {
      ...(throughputN && throughputN.length > 0 ? { throughputN } : {}),
      ...(forwarderObjects !== undefined ? { forwarderObjects } : {}),
      ...(sideBySideN !== undefined ? { sideBySideN } : {}),
      ...(values['deployed-seconds'] !== undefined ? { deployedSeconds: positive(values['deployed-seconds'], '--deployed-seconds') } : {}),
      ...(values['deployed-rate'] !== undefined ? { deployedRate: positive(values['deployed-rate'], '--deployed-rate') } : {}),
      ...(fleet100Clusters !== undefined ? { fleet100Clusters } : {}),
      ...(fleet100NodesPerCluster !== undefined ? { fleet100NodesPerCluster } : {}),
      ...(fleet100Shards !== undefined ? { fleet100Shards } : {}),
      ...(values['noexecute-ready-seconds'] !== undefined ? { noExecuteReplacementReadySeconds: nonNegative(values['noexecute-ready-seconds'], '--noexecute-ready-seconds') } : {}),
    },
    ...(values.deployed ? { deployed: values['deployed-defaults'] ? ('shipped' as const) : ('short-windows' as const) } : {}),
    ...(values['package-param'] ? { packageParams: values['package-param'] } : {}),
    ...(values['deployed-auth'] !== undefined ? { deployedAuth: deployedAuth(values['deployed-auth']) } : {}),
  });
  const json = `${JSON.stringify(results, null, 2)}\n`;
  if (!values['no-write'] && profile !== 'smoke') {
    // Sizes other than the profile's: never merged into results.json (the fleet100 flags are, see below).
    const ownSizes = values['noexecute-ready-seconds'] !== undefined || values['hostile-set'] !== undefined || values['hostile-machine-edit-seconds'] !== undefined || values['throughput-n'] !== undefined || values['forwarder-objects'] !== undefined || values['side-by-side-sizes'] !== undefined;
    const partial = values.deployed || only.length > 0 || ownSizes || values['fleet100-clusters'] !== undefined || values['fleet100-nodes'] !== undefined || values['fleet100-shards'] !== undefined;
    const file = profile === 'full' && !partial ? 'results.json' : `out/results.${profile}${values.deployed ? '.deployed' : ''}${values['package-param'] ? '.variant' : ''}${partial ? '.partial' : ''}.json`;
    mkdirSync(new URL('./out/', import.meta.url), { recursive: true });
    writeFileSync(new URL(`./${file}`, import.meta.url), json);
    process.stderr.write(`[bench] wrote bench/${file}\n`);
    // A variant of the packaged stack (`--package-param`) is written to its own file only: results.json keeps the shipped parameters' figures.
    if (profile === 'full' && partial && !ownSizes && values['package-param'] === undefined) {
      // A scenario re-run at the full sizes (`--only=…`): its figures go into results.json, next to the others.
      const { readFileSync } = await import('node:fs');
      const { mergeResults } = await import('./lib/bench.ts');
      const target = new URL('./results.json', import.meta.url);
      const merged = mergeResults(JSON.parse(readFileSync(target, 'utf8')) as typeof results, results, only as ScenarioName[]);
      writeFileSync(target, `${JSON.stringify(merged, null, 2)}\n`);
      process.stderr.write(`[bench] merged the figures of ${only.join(', ')} into bench/results.json\n`);
    }
    if (profile === 'full' && !partial) {
      const { writeBenchmarksMarkdown } = await import('./lib/report.ts');
      writeBenchmarksMarkdown(new URL('../docs/benchmarks.md', import.meta.url), results);
      process.stderr.write('[bench] updated the generated tables of docs/benchmarks.md\n');
    }
  }
  for (const t of results.targets) {
    process.stdout.write(`${t.met === undefined ? (t.measured === undefined ? '  -   ' : 'SMALL ') : t.met ? ' MET  ' : 'MISSED'} ${t.figure} = ${t.measured ?? 'n/a'}  (target ${t.target})\n`);
  }
  const failed = Object.keys(results.failures);
  if (failed.length > 0) {
    process.stderr.write(`[bench] scenarios that failed: ${failed.join(', ')}\n`);
    process.exitCode = 1;
  }
} finally {
  await stop?.();
}
