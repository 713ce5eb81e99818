import { describe, expect, it } from 'vitest';
import { loadForwarderConfig } from '#shared/config/forwarder-config.ts';
import { ConfigError } from '#shared/errors.ts';

describe('Function: loadForwarderConfig() — SPEC_TAINTS_OWNER', () => {
  it('defaults to upstream Cluster API, as the reconcile function does', () => {
    expect(loadForwarderConfig({}).specTaintsOwner).toBe('upstream');
  });

  it('reads product', () => {
    expect(loadForwarderConfig({ SPEC_TAINTS_OWNER: 'product' }).specTaintsOwner).toBe('product');
  });

  it('refuses anything else, naming the variable and the value', () => {
    expect(() => loadForwarderConfig({ SPEC_TAINTS_OWNER: 'capi' })).toThrow(ConfigError);
    expect(() => loadForwarderConfig({ SPEC_TAINTS_OWNER: 'capi' })).toThrow(/SPEC_TAINTS_OWNER.*capi/);
  });
});
