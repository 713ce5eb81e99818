/**
 * The command line of `npm run status`, kubectl style: `[machine] [--kubeconfig f] [--context c] [-n ns] [-o json|yaml|wide]`.
 * Pure (node:util parseArgs); status.ts reads the kubeconfig it names.
 */
import { parseArgs } from 'node:util';
import { oneOf, optionalString, type Env } from '#shared/config/env.ts';
import { ConfigError } from '#shared/errors.ts';

export const OutputFormat = { Table: 'table', Wide: 'wide', Json: 'json', Yaml: 'yaml' } as const;
export type OutputFormat = (typeof OutputFormat)[keyof typeof OutputFormat];

export interface StatusArgs {
  readonly help: boolean;
  /** One Machine by name (in `namespace`, else the context's namespace, else `default`); undefined: every Machine. */
  readonly machine: string | undefined;
  /** `--kubeconfig`; undefined: KUBECONFIG, else ~/.kube/config. */
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  /** `-n`; for a list, undefined means all namespaces (MACHINE_NAMESPACE is the default). */
  readonly namespace: string | undefined;
  readonly output: OutputFormat;
  readonly mode: 'self' | 'capi';
  /** `--pods`: the table lists, under each Node of the NoExecute preview, its pods and when each would go. */
  readonly pods: boolean;
}

export const STATUS_USAGE = `Usage: npm run status -- [MACHINE] [options]

For every Machine (or one, by name): what it declares, what its Node has, who owns each Node taint, and whether the
Node is in sync (the next reconcile would write nothing). Reads only. For every NoExecute taint about to be added
to a Node (or previewed with @Preview), the pods Kubernetes would evict, at once or after their tolerationSeconds,
per Node and per node group (docs/noexecute-preview.md).

Options:
  --kubeconfig <file>        kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config)
  --context <name>           kubeconfig context to use (default: its current-context)
  -n, --namespace <ns>       Machines of this namespace (default: all namespaces; one MACHINE: the context's namespace,
                             else "default"); env MACHINE_NAMESPACE
  -o, --output <format>      table (default), wide, json or yaml
  --capi | --self | --mode=capi|self
                             Nodes in workload clusters via <cluster>-kubeconfig Secrets, or in the same cluster
                             (default self; env CLUSTER_MODE)
  --pods                     under the NoExecute preview, list each Node's pods and when each would be evicted
                             (the preview's counts are always shown; -o json|yaml always carries the pods)
  -h, --help                 this text

Exit status: 0 every Node in sync or deliberately left alone, 3 some Node out of sync or missing,
4 some workload cluster's Nodes could not be listed (named once each, with the reason), 1 the management
cluster could not be read (or the Machine does not exist), 2 bad arguments or no kubeconfig.

Examples:
  npm run status
  npm run status -- worker-1 -n default -o yaml
  npm run status -- --context prod-admin -o wide
  npm run status -- --pods`;

/**
 * Parses the arguments; throws ConfigError quoting what was wrong.
 * @example parseStatusArgs(['gpu-0', '-n', 'pools', '-o', 'json'], {}).machine // 'gpu-0'
 */
export function parseStatusArgs(argv: readonly string[], env: Env): StatusArgs {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      strict: true,
      allowPositionals: true,
      options: {
        kubeconfig: { type: 'string' },
        context: { type: 'string' },
        namespace: { type: 'string', short: 'n' },
        output: { type: 'string', short: 'o' },
        capi: { type: 'boolean' },
        self: { type: 'boolean' },
        mode: { type: 'string' },
        pods: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (e) {
    throw new ConfigError('arguments', `${e instanceof Error ? e.message : String(e)} (see npm run status -- --help)`);
  }
  const o = parsed.values;
  if (parsed.positionals.length > 1) throw new ConfigError('arguments', `one MACHINE at most, got ${parsed.positionals.map((p) => JSON.stringify(p)).join(' ')}`);
  const output = o.output ?? OutputFormat.Table;
  if (!(Object.values(OutputFormat) as string[]).includes(output)) throw new ConfigError('--output', `must be one of table, wide, json, yaml, got ${JSON.stringify(output)}`);
  let mode = oneOf(env, 'CLUSTER_MODE', ['capi', 'self'] as const, 'self');
  if (o.mode !== undefined) {
    if (o.mode !== 'capi' && o.mode !== 'self') throw new ConfigError('--mode', `must be capi or self, got ${JSON.stringify(o.mode)}`);
    mode = o.mode;
  }
  if (o.capi) mode = 'capi';
  if (o.self) mode = 'self';
  for (const [flag, value] of [['--kubeconfig', o.kubeconfig], ['--context', o.context], ['--namespace', o.namespace]] as const) {
    if (value !== undefined && value.trim() === '') throw new ConfigError(flag, 'must not be empty');
  }
  return {
    help: o.help === true,
    machine: parsed.positionals[0],
    kubeconfig: o.kubeconfig,
    context: o.context,
    namespace: o.namespace ?? optionalString(env, 'MACHINE_NAMESPACE'),
    output: output as OutputFormat,
    mode,
    pods: o.pods === true,
  };
}
