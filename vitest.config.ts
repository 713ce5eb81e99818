import { defineConfig } from 'vitest/config';

// Five tiers, one runner. Integration and e2e share one bare control plane per run (global setup); e2e-capi gets its
// own control plane with the Cluster API manager and the local provider (a manager would adopt the bare Machines); so
// does `deployed` (the packaged zips run by local/lambda/, test/deployed/).
export default defineConfig({
  test: {
    // `npm test` turns coverage on; the gate is on the pure domain (house style: near-total coverage there).
    coverage: {
      provider: 'v8',
      include: ['shared/{domain,model,contract,policy}/**/*.ts'],
      reporter: ['text-summary'],
      thresholds: { statements: 99, branches: 95, functions: 98, lines: 99 },
    },
    env: { POWERTOOLS_LOG_LEVEL: 'SILENT', POWERTOOLS_METRICS_DISABLED: 'true', POWERTOOLS_DEV: 'false' },
    projects: [
      {
        extends: true,
        test: { name: 'unit', include: ['test/unit/**/*.test.ts'], testTimeout: 20_000 },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/support/control-plane-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/support/control-plane-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 120_000,
          fileParallelism: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'e2e-capi',
          include: ['test/e2e-capi/**/*.test.ts'],
          globalSetup: ['test/support/capi-control-plane-setup.ts'],
          testTimeout: 180_000,
          // beforeAll of examples-and-gates starts a second control plane with the manager.
          hookTimeout: 180_000,
          fileParallelism: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'deployed',
          include: ['test/deployed/**/*.test.ts'],
          // A control plane of its own with the Cluster API manager: the deployed forwarder watches every namespace.
          globalSetup: ['test/support/capi-control-plane-setup.ts'],
          testTimeout: 300_000,
          hookTimeout: 300_000,
          fileParallelism: false,
        },
      },
    ],
  },
});
