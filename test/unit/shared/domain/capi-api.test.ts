import { describe, expect, it } from 'vitest';
import { capiApiVersionString, chooseCapiApiVersion } from '#shared/domain/capi-api.ts';

const BOTH = ['machines', 'machines/status', 'clusters', 'clusters/status', 'machinedeployments'];

describe('Function: chooseCapiApiVersion()', () => {
  it('prefers v1beta2 when both are served (CAPI v1.11 and later)', () => {
    expect(chooseCapiApiVersion({ v1beta2: { served: true, resources: BOTH }, v1beta1: { served: true, resources: BOTH } })).toEqual({ supported: true, version: 'v1beta2' });
  });

  it('falls back to v1beta1 when v1beta2 is not served (CAPI v1.10 and older)', () => {
    expect(chooseCapiApiVersion({ v1beta2: { served: false }, v1beta1: { served: true, resources: BOTH } })).toEqual({ supported: true, version: 'v1beta1' });
  });

  it('decides on v1beta2 without asking about v1beta1', () => {
    expect(chooseCapiApiVersion({ v1beta2: { served: true, resources: BOTH } })).toEqual({ supported: true, version: 'v1beta2' });
  });

  it('skips a version served without the Machine CRD and says so when nothing else fits', () => {
    const choice = chooseCapiApiVersion({ v1beta2: { served: true, resources: ['clusters'] }, v1beta1: { served: false } }, ['v1beta2']);
    expect(choice).toEqual({
      supported: false,
      problem: 'cluster.x-k8s.io/v1beta2 is served without machines (a Cluster API CRD is missing); the product needs machines and clusters in cluster.x-k8s.io/v1beta2 or cluster.x-k8s.io/v1beta1',
    });
    expect(chooseCapiApiVersion({ v1beta2: { served: true, resources: ['clusters'] }, v1beta1: { served: true, resources: BOTH } })).toEqual({ supported: true, version: 'v1beta1' });
  });

  it('names a missing group: Cluster API is not installed', () => {
    const choice = chooseCapiApiVersion({ v1beta2: { served: false }, v1beta1: { served: false } }, undefined);
    expect(choice.supported).toBe(false);
    expect(!choice.supported && choice.problem).toBe('the management cluster serves no cluster.x-k8s.io API (Cluster API is not installed); the product needs cluster.x-k8s.io/v1beta2 or cluster.x-k8s.io/v1beta1');
  });

  it('names the versions served when they are all too old (v1alpha3/v1alpha4)', () => {
    const choice = chooseCapiApiVersion({ v1beta2: { served: false }, v1beta1: { served: false } }, ['v1alpha4', 'v1alpha3']);
    expect(!choice.supported && choice.problem).toBe(
      'the management cluster serves cluster.x-k8s.io only as v1alpha4, v1alpha3; the product needs cluster.x-k8s.io/v1beta2 or cluster.x-k8s.io/v1beta1 (Cluster API v1.0 or later)',
    );
  });

  it('writes the apiVersion of objects read in a version', () => {
    expect(capiApiVersionString('v1beta1')).toBe('cluster.x-k8s.io/v1beta1');
  });
});
