/**
 * A local control plane in a child process (control-plane-child.ts): what `npm run control-plane` runs beside the
 * product, started and stopped by a benchmark. The side-by-side scenario uses it so that the local infrastructure
 * provider (a watch-driven controller with informers of its own) runs in its own process and event loop, as Cluster
 * API's providers run apart from SQS and Lambda, instead of delaying the benchmark's watches and, in the deployed
 * form, the queue and the event source mapping the runner serves from the benchmark's process.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { ControlPlane, StartOptions } from '#local/control-plane/control-plane.ts';
import type { WorkloadApiServer } from '#local/control-plane/workload-servers.ts';

/** What the benchmark needs of the control plane (paths are the child's files, removed when it stops). */
export type ControlPlaneFacts = Pick<ControlPlane, 'server' | 'kubeconfigPath' | 'caCertPath' | 'clusterApiVersion'>;

/** A workload API server the child's provider started: its data, without its methods. */
export type WorkloadServerFacts = Pick<WorkloadApiServer, 'name' | 'server' | 'adminKubeconfigPath' | 'caCertPath' | 'auditLogPath'>;

/** Messages the parent sends. */
export type ControlPlaneRequest = 'stop' | { readonly ask: 'workloadServers'; readonly id: number };

type ChildMessage =
  | { readonly log: string }
  | { readonly ready: ControlPlaneFacts }
  | { readonly failed: string }
  | { readonly id: number; readonly workloadServers: readonly WorkloadServerFacts[] };

export interface ControlPlaneProcess extends ControlPlaneFacts {
  readonly pid: number;
  /** The workload API servers the provider has started so far, in order. */
  workloadServers(): Promise<readonly WorkloadServerFacts[]>;
  /** Stops the control plane (the child removes its files) and waits for the child's exit; SIGKILL after `graceMs`. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/** Starts the child and resolves once its control plane is up; rejects (the child gone) if it fails or exits first. */
export async function startControlPlaneProcess(o: Pick<StartOptions, 'extraApiserverArgs' | 'capi'> & { readonly log: (line: string) => void; readonly startTimeoutMs?: number }): Promise<ControlPlaneProcess> {
  const child: ChildProcess = fork(fileURLToPath(new URL('./control-plane-child.ts', import.meta.url)), [], {
    execArgv: ['--no-warnings=ExperimentalWarning'],
    env: { ...process.env, CONTROL_PLANE_OPTIONS: JSON.stringify({ ...(o.extraApiserverArgs ? { extraApiserverArgs: o.extraApiserverArgs } : {}), ...(o.capi ? { capi: o.capi } : {}) }) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const waiting = new Map<number, { resolve: (servers: readonly WorkloadServerFacts[]) => void; reject: (error: Error) => void }>();
  void exited.then((code) => {
    for (const w of waiting.values()) w.reject(new Error(`the control plane process exited (${code})`));
    waiting.clear();
  });
  const ready = new Promise<ControlPlaneFacts>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the control plane did not start within ${(o.startTimeoutMs ?? 600_000) / 1000} s`)), o.startTimeoutMs ?? 600_000);
    child.on('message', (m: ChildMessage) => {
      if ('log' in m) o.log(m.log);
      else if ('ready' in m) {
        clearTimeout(timer);
        resolve(m.ready);
      } else if ('failed' in m) {
        clearTimeout(timer);
        reject(new Error(m.failed));
      } else if ('id' in m) {
        waiting.get(m.id)?.resolve(m.workloadServers);
        waiting.delete(m.id);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the control plane process exited (${code}) before it was up`));
    });
  });
  let stopped: Promise<void> | undefined;
  const stop = (graceMs = 60_000): Promise<void> =>
    (stopped ??= (async () => {
      if (child.exitCode === null && child.signalCode === null) {
        if (child.connected) child.send('stop');
        else child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(timer);
      }
    })());
  const facts = await ready.catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  let nextId = 0;
  return {
    ...facts,
    pid: child.pid as number,
    workloadServers: () =>
      new Promise((resolve, reject) => {
        if (!child.connected) return reject(new Error('the control plane process has stopped'));
        const id = ++nextId;
        waiting.set(id, { resolve, reject });
        child.send({ ask: 'workloadServers', id } satisfies ControlPlaneRequest);
      }),
    stop,
  };
}
