/**
 * CPU time by kind of process on this machine, sampled from /proc, to see where a benchmark's cores go (e.g. the
 * deployed side-by-side scenario's join bursts: API servers, etcd, Cluster API, the runner, the Lambda containers).
 *
 *   node bench/tools/cpu-by-process.ts sample <out.jsonl> [--interval-ms=500]
 *     Every interval, one line: {"t": <epoch s>, "cpu": {<kind>: <CPU seconds so far>}}. A process's user + system
 *     time is kept after it exits (a container killed at the end of its life still counts). Stop it with SIGTERM.
 *   node bench/tools/cpu-by-process.ts report <in.jsonl> <from epoch s> <to epoch s> [<step s>]
 *     CPU seconds per kind over the window (and per step within it), with the cores that makes.
 *
 * Kinds: `kube-apiserver:management` and `kube-apiserver:workload` (told apart by the workload API servers'
 * `--etcd-prefix=/workload/<name>`), `etcd`, `cluster-api` (the manager's binary), `reconcile-container` and
 * `forwarder-container` (processes of the Lambda runner, told apart by their task root), `local-provider` (the
 * side-by-side scenario's control plane process, bench/lib/control-plane-child.ts: the local infrastructure provider),
 * `bench` (the benchmark process: its watches, the runner and fauxqs; in other scenarios also the provider), and
 * `other:<command>`.
 */
import { appendFileSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

function kindOf(pid: string): string | undefined {
  let argv: string[];
  try {
    argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
  } catch {
    return undefined;
  }
  const cmd = argv.join(' ');
  const exe = basename(argv[0] ?? '');
  // The workload API servers of the local control plane keep their objects under `/workload/<name>` in the shared etcd.
  if (exe === 'kube-apiserver') return argv.some((a) => a.startsWith('--etcd-prefix=/workload/')) ? 'kube-apiserver:workload' : 'kube-apiserver:management';
  if (exe === 'etcd') return 'etcd';
  if (/bootstrap-[0-9a-f]+\.mjs|runtime-bootstrap/.test(cmd)) {
    let cwd = '';
    try {
      cwd = readlinkSync(`/proc/${pid}/cwd`);
    } catch {
      // gone
    }
    return /reconcile/i.test(cwd) ? 'reconcile-container' : /forwarder/i.test(cwd) ? 'forwarder-container' : 'container';
  }
  if (/cluster-api|capi|infrastructure/.test(cmd) && exe !== 'node') return 'cluster-api';
  if (cmd.includes('control-plane-child')) return 'local-provider'; // the side-by-side's control plane process: the local provider
  if (cmd.includes('bench/run.ts')) return 'bench';
  return `other:${exe.slice(0, 30)}`;
}

function sample(out: string, intervalMs: number): void {
  writeFileSync(out, '');
  const kinds = new Map<string, string | undefined>();
  const seconds = new Map<string, number>();
  const tick = (): void => {
    for (const pid of readdirSync('/proc')) {
      if (!/^\d+$/.test(pid)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      } catch {
        continue;
      }
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // Fields after the command: state is [0], utime [11], stime [12], starttime [19] (proc(5), counted from 3).
      const key = `${pid}:${fields[19]}`;
      if (!kinds.has(key)) kinds.set(key, kindOf(pid));
      if (kinds.get(key) === undefined) continue;
      seconds.set(key, (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND);
    }
    const cpu: Record<string, number> = {};
    for (const [key, s] of seconds) {
      const kind = kinds.get(key) ?? 'other';
      cpu[kind] = Math.round(((cpu[kind] ?? 0) + s) * 100) / 100;
    }
    appendFileSync(out, `${JSON.stringify({ t: Date.now() / 1000, cpu })}\n`);
  };
  tick();
  const timer = setInterval(tick, intervalMs);
  process.on('SIGTERM', () => {
    clearInterval(timer);
    process.exit(0);
  });
}

function report(file: string, from: number, to: number, step: number | undefined): void {
  const rows = readFileSync(file, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as { t: number; cpu: Record<string, number> });
  const at = (t: number): Record<string, number> => (rows.filter((r) => r.t <= t).at(-1) ?? rows[0])?.cpu ?? {};
  const line = (a: number, b: number): string => {
    const start = at(a);
    const end = at(b);
    const used = Object.entries(end).map(([k, v]) => [k, v - (start[k] ?? 0)] as const).filter(([, v]) => v >= 0.05).sort((x, y) => y[1] - x[1]);
    const total = used.reduce((sum, [, v]) => sum + v, 0);
    return `${(a - from).toFixed(0)}–${(b - from).toFixed(0)} s: ${total.toFixed(1)} CPU s (${(total / (b - a)).toFixed(2)} cores): ${used.map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', ')}`;
  };
  console.log(line(from, to));
  if (step) for (let a = from; a < to; a += step) console.log(`  ${line(a, Math.min(to, a + step))}`);
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'sample' && args[0]) {
  const interval = Number(/--interval-ms=(\d+)/.exec(args.join(' '))?.[1] ?? 500);
  sample(args[0], interval);
} else if (mode === 'report' && args[0] && args[1] && args[2]) {
  report(args[0], Number(args[1]), Number(args[2]), args[3] === undefined ? undefined : Number(args[3]));
} else {
  console.error('usage: cpu-by-process.ts sample <out.jsonl> [--interval-ms=500] | report <in.jsonl> <from epoch s> <to epoch s> [<step s>]');
  process.exit(2);
}
