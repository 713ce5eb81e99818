import { describe, expect, it } from 'vitest';
import { decideStart, isLoopbackServer, type ClusterTarget } from '#local/cluster-target.ts';
import { loadLocalConfig } from '#local/local-config.ts';
import { ConfigError } from '#shared/errors.ts';

const objects = { stateNamespace: 'capi-taint-propagator', leaseName: 'capi-taint-propagator-forwarder', stateConfigMap: 'capi-taint-propagator-state' };
const remote: ClusterTarget = { kubeconfig: '/home/me/.kube/prod', context: 'prod-admin', server: 'https://api.prod.example.com:6443' };
const noOptIn = { allowRemoteFlag: false, allowRemoteContext: undefined };

describe('Function: isLoopbackServer()', () => {
  it.each([
    ['https://127.0.0.1:6443', true],
    ['https://127.4.5.6', true],
    ['https://localhost:6443', true],
    ['https://kind.localhost:6443', true],
    ['https://[::1]:6443', true],
    ['https://10.0.0.5:6443', false],
    ['https://0.0.0.0:6443', false],
    ['https://127.0.0.1.example.com', false],
    ['https://api.prod.example.com:6443', false],
    ['not a url', false],
    [undefined, false],
  ])('%s → %s', (server, loopback) => {
    expect(isLoopbackServer(server)).toBe(loopback);
  });
});

describe('Function: decideStart()', () => {
  it('runs against a cluster on this machine after naming its context and server', () => {
    // Act
    const d = decideStart({ kubeconfig: 'kind.kubeconfig', context: 'kind-dev', server: 'https://127.0.0.1:40123' }, noOptIn, objects, false);

    // Assess
    expect(d).toEqual({ kind: 'local', lines: ['KUBECONFIG=kind.kubeconfig', '  context  kind-dev', '  server   https://127.0.0.1:40123', '  (a cluster on this machine)'] });
  });

  it('refuses another cluster without an opt-in, saying what it would create, what enabledAt means and the flags', () => {
    // Act
    const d = decideStart(remote, noOptIn, objects, false);

    // Assess
    expect(d.kind).toBe('refused');
    const text = d.lines.join('\n');
    expect(d.lines.slice(0, 4)).toEqual(['KUBECONFIG=/home/me/.kube/prod', '  context  prod-admin', '  server   https://api.prod.example.com:6443', '  NOT on this machine: refusing to start without an explicit opt-in.']);
    expect(text).toContain('create namespace capi-taint-propagator if missing');
    expect(text).toContain('Lease capi-taint-propagator/capi-taint-propagator-forwarder');
    expect(text).toContain('ConfigMap capi-taint-propagator/capi-taint-propagator-state with enabledAt');
    expect(text).toContain('treats every Node created\n    before it as already initialized and never gives it OnInitialization taints');
    expect(text).toContain('patch Node taints');
    expect(text).toContain('npm start -- --allow-remote      (or ALLOW_REMOTE_CONTEXT=<this context name>)');
    expect(text).toContain('npm start -- --allow-remote --dry-run');
  });

  it.each([
    { name: 'the flag', optIn: { allowRemoteFlag: true, allowRemoteContext: undefined }, by: '--allow-remote' },
    { name: 'ALLOW_REMOTE_CONTEXT naming this context', optIn: { allowRemoteFlag: false, allowRemoteContext: 'prod-admin' }, by: 'ALLOW_REMOTE_CONTEXT=prod-admin' },
  ])('runs against another cluster when allowed by $name, still saying what it writes', ({ optIn, by }) => {
    const d = decideStart(remote, optIn, objects, false);
    expect(d.kind).toBe('remote-allowed');
    expect(d.lines[3]).toBe(`  NOT on this machine; allowed by ${by}`);
    expect(d.lines.join('\n')).toContain('enabledAt');
  });

  it('does not let ALLOW_REMOTE_CONTEXT for another context open this one', () => {
    const d = decideStart(remote, { allowRemoteFlag: false, allowRemoteContext: 'staging' }, objects, false);
    expect(d.kind).toBe('refused');
    expect(d.lines).toContain('ALLOW_REMOTE_CONTEXT=staging does not name this context (prod-admin), so it does not apply.');
  });

  it('says that a dry run writes no Node but still creates the state objects', () => {
    const d = decideStart(remote, { allowRemoteFlag: true, allowRemoteContext: undefined }, objects, true);
    expect(d.lines[3]).toBe('  NOT on this machine; allowed by --allow-remote, dry run');
    const text = d.lines.join('\n');
    expect(text).toContain('(dry run) write no Node');
    expect(text).toContain('create and hold Lease');
    expect(text).not.toContain('patch Node taints');
  });

  it('treats a kubeconfig without a current context or server as not local', () => {
    const d = decideStart({ kubeconfig: '/k', context: undefined, server: undefined }, noOptIn, objects, false);
    expect(d.kind).toBe('refused');
    expect(d.lines.slice(1, 3)).toEqual(['  context  (none: the kubeconfig has no current-context)', '  server   (none)']);
  });
});

describe('Function: loadLocalConfig() — start flags', () => {
  it('reads --allow-remote, --dry-run, --help and ALLOW_REMOTE_CONTEXT', () => {
    expect(loadLocalConfig({}, [])).toMatchObject({ allowRemote: false, dryRun: false, help: false, allowRemoteContext: undefined });
    expect(loadLocalConfig({ ALLOW_REMOTE_CONTEXT: 'prod' }, ['--allow-remote', '--dry-run', '-h'])).toMatchObject({ allowRemote: true, dryRun: true, help: true, allowRemoteContext: 'prod' });
  });

  it('quotes an unknown option', () => {
    expect(() => loadLocalConfig({}, ['--allow-remotes'])).toThrow(ConfigError);
    expect(() => loadLocalConfig({}, ['--allow-remotes'])).toThrow(/--allow-remotes/);
  });
});
