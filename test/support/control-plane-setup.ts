/**
 * Vitest global setup of the `integration` and `e2e` projects: starts ONE real control plane (etcd + kube-apiserver +
 * Cluster API CRDs) per test run and provides its coordinates to the tests as `inject('controlPlane')`.
 *
 * - Binaries are found or built (Go) by local/control-plane/assets.ts; building may take minutes the first time.
 * - `CI=true`: a control plane that cannot run is a hard failure with the reason.
 * - Elsewhere (a developer machine without Go or binaries): `available: false` plus one line saying why and how to
 *   get them; `describeWithControlPlane` then skips the suites.
 * - A control plane that fails to start (as opposed to being unavailable) always fails the run.
 * When both projects run in one process they share the same control plane (reference counted).
 */
import type { TestProject } from 'vitest/node';
import { ControlPlaneUnavailableError, startControlPlane } from '#local/control-plane/control-plane.ts';
import type { ControlPlane } from '#local/control-plane/control-plane.ts';

/** What the tests receive: where the control plane is, or why there is none. */
export type ProvidedControlPlane =
  | {
      readonly available: true;
      /** Admin kubeconfig (group system:masters). */
      readonly kubeconfigPath: string;
      readonly server: string;
      readonly caCertPath: string;
      readonly caKeyPath: string;
      readonly etcdEndpoint: string;
      /** The control plane's temporary folder (removed at the end of the run). */
      readonly dir: string;
    }
  | { readonly available: false; readonly reason: string };

declare module 'vitest' {
  export interface ProvidedContext {
    controlPlane: ProvidedControlPlane;
  }
}

interface Shared {
  refs: number;
  started: Promise<{ provided: ProvidedControlPlane; cp: ControlPlane | undefined }>;
}

const SHARED_KEY = Symbol.for('capi-taint-propagator.control-plane-setup');
const registry = globalThis as unknown as Record<symbol, Shared | undefined>;

const log = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

function isCi(): boolean {
  return /^(true|1|yes)$/i.test(process.env['CI']?.trim() ?? '');
}

async function start(): Promise<{ provided: ProvidedControlPlane; cp: ControlPlane | undefined }> {
  try {
    const cp = await startControlPlane({ log, build: true });
    const { kubeconfigPath, server, caCertPath, caKeyPath, etcdEndpoint, dir } = cp;
    return { cp, provided: { available: true, kubeconfigPath, server, caCertPath, caKeyPath, etcdEndpoint, dir } };
  } catch (e) {
    if (e instanceof ControlPlaneUnavailableError) {
      if (isCi()) throw new Error(`CI=true and the Kubernetes control plane for the integration/e2e tests is unavailable: ${e.reason}`, { cause: e });
      log(`[control-plane] SKIPPING tests that need Kubernetes: ${e.reason}`);
      return { cp: undefined, provided: { available: false, reason: e.reason } };
    }
    throw e;
  }
}

/** Starts (or joins) the run's control plane and provides it; returns the teardown. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let shared = registry[SHARED_KEY];
  if (!shared) {
    shared = { refs: 0, started: start() };
    registry[SHARED_KEY] = shared;
  }
  shared.refs++;
  const mine = shared;
  const { provided, cp } = await mine.started;
  project.provide('controlPlane', provided);
  return async () => {
    mine.refs--;
    if (mine.refs > 0) return;
    registry[SHARED_KEY] = undefined;
    await cp?.stop();
  };
}
