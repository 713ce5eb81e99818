/**
 * Whether `npm start` may run against the cluster KUBECONFIG names, and what it tells the user first. A cluster on this
 * machine (server on a loopback address) is used as is; any other needs an explicit opt-in, because the run writes
 * there: Node taints, Events, and state that a later real deployment reads. Pure: the caller reads the kubeconfig
 * (without contacting the server) and prints the lines.
 */

/** The cluster KUBECONFIG selects, as read from the file. */
export interface ClusterTarget {
  /** The KUBECONFIG value (one or more files). */
  readonly kubeconfig: string;
  readonly context: string | undefined;
  readonly server: string | undefined;
}

/** The opt-ins: `--allow-remote`, or ALLOW_REMOTE_CONTEXT naming the current context exactly. */
export interface RemoteOptIn {
  readonly allowRemoteFlag: boolean;
  readonly allowRemoteContext: string | undefined;
}

/** What the run will create or use in the state namespace. */
export interface StateObjects {
  readonly stateNamespace: string;
  readonly leaseName: string;
  readonly stateConfigMap: string;
}

export type StartDecision =
  /** A cluster on this machine: go, after the header lines. */
  | { readonly kind: 'local'; readonly lines: readonly string[] }
  /** Another cluster with an opt-in: go, after saying what will be written. */
  | { readonly kind: 'remote-allowed'; readonly lines: readonly string[] }
  /** Another cluster without an opt-in: say why and how, exit non-zero, contact nothing. */
  | { readonly kind: 'refused'; readonly lines: readonly string[] };

/**
 * True when the server URL's host is a loopback address (127.0.0.0/8, ::1, localhost): a cluster on this machine.
 * @example isLoopbackServer('https://127.0.0.1:6443') // true
 */
export function isLoopbackServer(server: string | undefined): boolean {
  if (!server) return false;
  let host: string;
  try {
    host = new URL(server).hostname.toLowerCase();
  } catch {
    return false;
  }
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return host === 'localhost' || host.endsWith('.localhost') || host === '::1' || /^127(\.\d{1,3}){3}$/.test(host);
}

/**
 * Decides whether `npm start` runs against `target`, and the lines to print first (to stdout when it runs, to stderr
 * when refused).
 * @example decideStart(target, { allowRemoteFlag: false, allowRemoteContext: undefined }, objects, false).kind // 'refused' for a remote server
 */
export function decideStart(target: ClusterTarget, optIn: RemoteOptIn, objects: StateObjects, dryRun: boolean): StartDecision {
  const header = [
    `KUBECONFIG=${target.kubeconfig}`,
    `  context  ${target.context ?? '(none: the kubeconfig has no current-context)'}`,
    `  server   ${target.server ?? '(none)'}`,
  ];
  if (isLoopbackServer(target.server)) return { kind: 'local', lines: [...header, '  (a cluster on this machine)'] };

  const writes = [
    'On that cluster npm start would:',
    `  - create namespace ${objects.stateNamespace} if missing;`,
    `  - create and hold Lease ${objects.stateNamespace}/${objects.leaseName} (the forwarder rota's members and watch checkpoint),`,
    '    deleting one left by an earlier run first (the queue is in memory, so the forwarder starts from a full list);',
    `  - create ConfigMap ${objects.stateNamespace}/${objects.stateConfigMap} with enabledAt = the first reconcile's time, unless it`,
    '    exists. enabledAt is "first enablement": a deployment later using the same namespace treats every Node created',
    '    before it as already initialized and never gives it OnInitialization taints. Delete the ConfigMap after a trial run;',
    dryRun
      ? '  - (dry run) write no Node: each planned taint write is logged instead; Warning Events (invalid declarations) are still recorded.'
      : '  - patch Node taints as Machines declare them and record Events on the Machines.',
  ];
  const contextOptIn = optIn.allowRemoteContext !== undefined && target.context !== undefined && optIn.allowRemoteContext === target.context;
  if (optIn.allowRemoteFlag || contextOptIn) {
    const how = optIn.allowRemoteFlag ? '--allow-remote' : `ALLOW_REMOTE_CONTEXT=${optIn.allowRemoteContext}`;
    return { kind: 'remote-allowed', lines: [...header, `  NOT on this machine; allowed by ${how}${dryRun ? ', dry run' : ''}`, ...writes] };
  }
  const mismatch =
    optIn.allowRemoteContext !== undefined
      ? [`ALLOW_REMOTE_CONTEXT=${optIn.allowRemoteContext} does not name this context (${target.context ?? 'none'}), so it does not apply.`]
      : [];
  return {
    kind: 'refused',
    lines: [
      ...header,
      '  NOT on this machine: refusing to start without an explicit opt-in.',
      ...writes,
      ...mismatch,
      'To run against it anyway:      npm start -- --allow-remote      (or ALLOW_REMOTE_CONTEXT=<this context name>)',
      'To write no Node while trying: npm start -- --allow-remote --dry-run',
      'For a local control plane instead: unset KUBECONFIG and run npm start.',
    ],
  };
}
