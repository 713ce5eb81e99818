/**
 * The import arrows of the project (guide: house style). `npm run lint` fails on any violation.
 */
const SDKS = '^node_modules/(@aws-sdk|@smithy|@aws-crypto|@kubernetes/client-node|cloudevents)';
module.exports = {
  forbidden: [
    {
      name: 'domain-is-pure',
      comment: 'shared/domain imports nothing outside shared/domain (except the error catalogue) and no node: builtins.',
      severity: 'error',
      from: { path: '^shared/domain/' },
      to: { pathNot: ['^shared/domain/', '^shared/errors\\.ts$'] },
    },
    {
      name: 'ports-are-interfaces',
      comment: 'shared/ports may import only the domain.',
      severity: 'error',
      from: { path: '^shared/ports/' },
      to: { pathNot: ['^shared/ports/', '^shared/domain/', '^shared/errors\\.ts$', '^shared/observability/metric-names\\.ts$'] },
    },
    {
      name: 'sdks-only-in-adapters',
      comment: 'Only shared/adapters (and composition roots in functions/*/handler.ts, compose.ts, local/, bench/, test/) talk to SDKs.',
      severity: 'error',
      from: { path: '^(shared/(domain|ports|config)|functions/[^/]+/(?!handler\\.ts|compose\\.ts)[^/]+\\.ts$)' },
      to: { path: SDKS },
    },
    {
      name: 'use-cases-do-not-import-adapters',
      comment: 'A use case receives its adapters; only handler.ts / compose.ts wire them.',
      severity: 'error',
      from: { path: '^functions/[^/]+/(?!handler\\.ts|compose\\.ts)[^/]+\\.ts$' },
      to: { path: '^shared/adapters/' },
    },
    {
      name: 'no-cross-function-imports',
      severity: 'error',
      from: { path: '^functions/([^/]+)/' },
      to: { path: '^functions/', pathNot: '^functions/$1/' },
    },
    {
      name: 'shared-does-not-import-functions',
      severity: 'error',
      from: { path: '^shared/' },
      to: { path: '^(functions|local|bench|test)/' },
    },
    {
      name: 'nothing-imports-tests',
      severity: 'error',
      from: { pathNot: '^test/' },
      to: { path: '^test/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], extensions: ['.ts', '.js', '.json'] },
  },
};
