import { describe, expect, it } from 'vitest';
import { parseControlPlaneArgs } from '#local/control-plane/args.ts';
import { featureGatesArg, parseFeatureGates } from '#local/control-plane/capi-manager.ts';

describe('parseFeatureGates', () => {
  it('reads Name=true/false pairs, ignoring blanks', () => {
    expect(parseFeatureGates('MachineTaintPropagation=true, ClusterTopology=false,')).toEqual({ MachineTaintPropagation: true, ClusterTopology: false });
  });
  it('quotes the entry that is not Name=bool', () => {
    expect(() => parseFeatureGates('MachineTaintPropagation=yes')).toThrow('feature gate "MachineTaintPropagation=yes" is not Name=true or Name=false');
    expect(() => parseFeatureGates('=true')).toThrow('"=true"');
  });
});

describe('featureGatesArg', () => {
  it('turns ClusterTopology on by default and leaves the rest to the manager', () => {
    expect(featureGatesArg({})).toBe('ClusterTopology=true');
  });
  it('lets the caller override the default and add gates, sorted', () => {
    expect(featureGatesArg({ MachineTaintPropagation: true, ClusterTopology: false })).toBe('ClusterTopology=false,MachineTaintPropagation=true');
  });
});

describe('parseControlPlaneArgs', () => {
  it('defaults to Cluster API on with no extra gates', () => {
    expect(parseControlPlaneArgs([])).toEqual({ featureGates: {} });
  });
  it('reads --capi-feature-gates (repeatable) and --capi-namespace', () => {
    expect(parseControlPlaneArgs(['--capi-feature-gates=MachineTaintPropagation=true', '--capi-feature-gates=ClusterTopology=false', '--capi-namespace=team-a'])).toEqual({
      featureGates: { MachineTaintPropagation: true, ClusterTopology: false },
      namespace: 'team-a',
    });
  });
  it('reads --workload-clusters as a count from 0 to 50, and refuses anything else', () => {
    expect(parseControlPlaneArgs(['--workload-clusters=3'])).toEqual({ featureGates: {}, workloadClusters: 3 });
    expect(parseControlPlaneArgs(['--workload-clusters=0'])).toEqual({ featureGates: {} });
    for (const bad of ['x', '-1', '51', '2.5', '']) expect(() => parseControlPlaneArgs([`--workload-clusters=${bad}`])).toThrow(`--workload-clusters: "${bad}" is not a count`);
    expect(() => parseControlPlaneArgs(['--no-capi', '--workload-clusters=2'])).toThrow('--no-capi cannot be combined');
  });
  it('--no-capi gives a bare control plane and refuses Cluster API settings next to it', () => {
    expect(parseControlPlaneArgs(['--no-capi'])).toBe(false);
    expect(() => parseControlPlaneArgs(['--no-capi', '--capi-namespace=a'])).toThrow('--no-capi cannot be combined');
  });
  it('refuses unknown arguments unless the caller collects them', () => {
    expect(() => parseControlPlaneArgs(['--capi'])).toThrow('unknown argument "--capi"');
    const rest: string[] = [];
    expect(parseControlPlaneArgs(['--capi', '--no-capi', '--self'], rest)).toBe(false);
    expect(rest).toEqual(['--capi', '--self']);
  });
  it('refuses a namespace that is not a DNS label', () => {
    expect(() => parseControlPlaneArgs(['--capi-namespace=Team_A'])).toThrow('"Team_A" is not a namespace name');
  });
});
