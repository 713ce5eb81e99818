/**
 * The benchmarks' control plane in a child process (bench/lib/control-plane-process.ts): its API server answers with
 * the kubeconfig the child reports, and stopping it (or losing its parent) stops its API server and removes its files.
 */
import { existsSync } from 'node:fs';
import { expect, it } from 'vitest';
import { CoreV1Api } from '@kubernetes/client-node';
import { startControlPlaneProcess } from '../../../bench/lib/control-plane-process.ts';
import { isAlive } from '#local/control-plane/assets.ts';
import { describeWithControlPlane, kubeConfigFromFile, uniqueName } from '#test/support/control-plane.ts';

describeWithControlPlane('benchmarks: a control plane in a process of its own', () => {
  it('serves with the kubeconfig it reports, and stop() ends the process and removes its files', { timeout: 180_000 }, async () => {
    // Prepare
    const lines: string[] = [];
    const cp = await startControlPlaneProcess({ log: (line) => lines.push(line), extraApiserverArgs: ['--watch-cache=false'] });

    try {
      // Act
      const api = kubeConfigFromFile(cp.kubeconfigPath).makeApiClient(CoreV1Api);
      const name = uniqueName('cpp');
      await api.createNamespace({ body: { metadata: { name } } });
      const read = await api.readNamespace({ name });

      // Assess
      expect(read.metadata?.name).toBe(name);
      expect(cp.server).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      expect(existsSync(cp.caCertPath)).toBe(true);
      expect(cp.clusterApiVersion).toMatch(/^v1\.\d+\.\d+$/);
      expect(await cp.workloadServers()).toEqual([]);
      expect(lines.length).toBeGreaterThan(0);
    } finally {
      await cp.stop();
    }
    expect(isAlive(cp.pid)).toBe(false);
    expect(existsSync(cp.kubeconfigPath)).toBe(false);
    await expect(cp.workloadServers()).rejects.toThrow(/stopped/);
  });
});
