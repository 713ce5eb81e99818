/**
 * Vitest global setup of the `e2e-capi` project: starts ONE control plane per run WITH the upstream Cluster API core
 * manager (gate `MachineTaintPropagation` on, `ClusterTopology` on) and the local infrastructure provider, and
 * provides its coordinates as `inject('capiControlPlane')`.
 *
 * - `CI=true`: a control plane or manager that cannot run here is a hard failure with the reason, never a skip.
 * - Elsewhere (no Go and no binaries): `available: false` plus one line saying why; `describeWithCapi` skips.
 * This control plane is separate from the bare one of the `integration` and `e2e` projects, whose tests write bare
 * Machines: a manager watching every namespace would adopt them (add its finalizer, look for their infrastructure).
 */
import type { TestProject } from 'vitest/node';
import { ControlPlaneUnavailableError, startControlPlane } from '#local/control-plane/control-plane.ts';

/** Gates of the tier's manager. */
export const CAPI_TIER_FEATURE_GATES = Object.freeze({ MachineTaintPropagation: true });

/** What the tests receive. */
export type ProvidedCapiControlPlane =
  | {
      readonly available: true;
      readonly kubeconfigPath: string;
      readonly server: string;
      readonly caCertPath: string;
      readonly caKeyPath: string;
      readonly dir: string;
      readonly clusterApiVersion: string;
      /** Effective gates of the manager. */
      readonly featureGates: Readonly<Record<string, boolean>>;
      readonly managerLogPath: string;
    }
  | { readonly available: false; readonly reason: string };

declare module 'vitest' {
  export interface ProvidedContext {
    capiControlPlane: ProvidedCapiControlPlane;
  }
}

const log = (line: string): void => {
  if (!line.startsWith('[local-provider]') || line.includes('retrying') || line.includes('failed')) process.stderr.write(`${line}\n`);
};

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  try {
    const cp = await startControlPlane({ log, build: true, capi: { featureGates: CAPI_TIER_FEATURE_GATES } });
    const capi = cp.capi;
    if (!capi) throw new Error('the control plane started without Cluster API');
    project.provide('capiControlPlane', {
      available: true,
      kubeconfigPath: cp.kubeconfigPath,
      server: cp.server,
      caCertPath: cp.caCertPath,
      caKeyPath: cp.caKeyPath,
      dir: cp.dir,
      clusterApiVersion: cp.clusterApiVersion,
      featureGates: capi.manager.featureGates,
      managerLogPath: capi.manager.logPath,
    });
    return () => cp.stop();
  } catch (e) {
    if (!(e instanceof ControlPlaneUnavailableError)) throw e;
    if (/^(true|1|yes)$/i.test(process.env['CI']?.trim() ?? '')) {
      throw new Error(`CI=true and the control plane with Cluster API for the e2e-capi tests is unavailable: ${e.reason}`, { cause: e });
    }
    log(`[control-plane] SKIPPING the Cluster API tests: ${e.reason}`);
    project.provide('capiControlPlane', { available: false, reason: e.reason });
    return async () => undefined;
  }
}
