/**
 * Command-line flags shared by `npm run control-plane`, `npm start` and `npm run demo` for the Cluster API side of the
 * local control plane. Pure.
 */
import { parseFeatureGates } from './capi-manager.ts';
import type { CapiOptions } from './control-plane.ts';

/** The flags this module understands. */
export const CONTROL_PLANE_FLAGS = ['--no-capi', '--capi-feature-gates=<Name=true,...>', '--capi-namespace=<namespace>', '--workload-clusters=<count>'] as const;

/**
 * Reads `--no-capi`, `--capi-feature-gates=…` and `--capi-namespace=…` from `argv`; with `rest` the other arguments are
 * handed back instead of refused. Default: Cluster API on, the manager's default gates plus ClusterTopology.
 * @example parseControlPlaneArgs(['--capi-feature-gates=MachineTaintPropagation=true']) // { featureGates: { MachineTaintPropagation: true } }
 */
export function parseControlPlaneArgs(argv: readonly string[], rest?: string[]): CapiOptions | false {
  let off = false;
  let featureGates: Record<string, boolean> = {};
  let namespace: string | undefined;
  let workloadClusters = 0;
  for (const arg of argv) {
    if (arg === '--no-capi') off = true;
    else if (arg.startsWith('--capi-feature-gates=')) featureGates = { ...featureGates, ...parseFeatureGates(arg.slice('--capi-feature-gates='.length)) };
    else if (arg.startsWith('--capi-namespace=')) {
      namespace = arg.slice('--capi-namespace='.length);
      if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(namespace)) throw new Error(`--capi-namespace: ${JSON.stringify(namespace)} is not a namespace name`);
    } else if (arg.startsWith('--workload-clusters=')) {
      const value = arg.slice('--workload-clusters='.length);
      workloadClusters = Number(value);
      if (!/^\d+$/.test(value) || workloadClusters > 50) throw new Error(`--workload-clusters: ${JSON.stringify(value)} is not a count from 0 to 50`);
    } else if (rest) rest.push(arg);
    else throw new Error(`unknown argument ${JSON.stringify(arg)} (known: ${CONTROL_PLANE_FLAGS.join(', ')})`);
  }
  if (off && (Object.keys(featureGates).length > 0 || namespace || workloadClusters > 0)) throw new Error('--no-capi cannot be combined with --capi-feature-gates, --capi-namespace or --workload-clusters');
  return off ? false : { featureGates, ...(namespace ? { namespace } : {}), ...(workloadClusters > 0 ? { workloadClusters } : {}) };
}
