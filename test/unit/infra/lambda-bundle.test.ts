/** serverless.yml's custom.esbuild turned into esbuild options as serverless-esbuild does (infra/lambda-bundle.ts). */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { lambdaBundleOptions, lambdaHandlerFile } from '#infra/lambda-bundle.ts';

const root = resolve(import.meta.dirname, '../../..');
const dir = mkdtempSync(join(tmpdir(), 'lambda-bundle-'));

function serviceWith(esbuild: string): string {
  const service = mkdtempSync(join(dir, 'service-'));
  writeFileSync(join(service, 'serverless.yml'), `service: x\ncustom:\n  esbuild:\n${esbuild}`);
  return service;
}

describe('lambdaBundleOptions', () => {
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads this repository's serverless.yml: the SDK external, ESM builds first, no plugin keys, no stubs", () => {
    const options = lambdaBundleOptions(root);
    expect(options).toMatchObject({ bundle: true, platform: 'node', format: 'esm', mainFields: ['module', 'main'], outExtension: { '.js': '.mjs' } });
    // The ES module bundle defines `require` for the bundled CommonJS packages' built-ins.
    expect(options.banner?.['js']).toMatch(/createRequire.*import\.meta\.url/);
    expect(lambdaHandlerFile(options)).toBe('handler.mjs');
    expect(options.external).toEqual(['@aws-sdk/*']);
    expect(options).not.toHaveProperty('exclude');
    expect(options).not.toHaveProperty('alias');
    expect(options).not.toHaveProperty('define');
  });

  it('makes a relative alias absolute against the service directory (where serverless-esbuild runs esbuild) and keeps a package name', () => {
    const service = serviceWith("    alias:\n      socks: ./stubs/socks.cjs\n      ws: isomorphic-ws\n    define:\n      DEBUG: 'false'\n");
    expect(lambdaBundleOptions(service)).toEqual({ mainFields: ['main', 'module'], external: [], outExtension: { '.js': '.js' }, alias: { socks: join(service, 'stubs/socks.cjs'), ws: 'isomorphic-ws' }, define: { DEBUG: 'false' } });
  });

  it('refuses an alias that does not map names to strings', () => {
    expect(() => lambdaBundleOptions(serviceWith('    alias: [socks]\n'))).toThrow(/custom.esbuild.alias must map names to strings/);
  });

  it("adds exclude to external, drops serverless-esbuild keys, and defaults mainFields to esbuild's node default", () => {
    const options = lambdaBundleOptions(serviceWith("    bundle: true\n    packager: npm\n    external: ['pg-native']\n    exclude: ['@aws-sdk/*']\n"));
    expect(options).toEqual({ bundle: true, mainFields: ['main', 'module'], external: ['pg-native', '@aws-sdk/*'], outExtension: { '.js': '.js' } });
    expect(lambdaHandlerFile(options)).toBe('handler.js');
  });

  it('refuses an esbuild option it does not pass on, naming it', () => {
    expect(() => lambdaBundleOptions(serviceWith('    bundle: true\n    conditions: [import]\n'))).toThrow(/sets conditions/);
  });
});
