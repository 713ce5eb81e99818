/**
 * The import arrows of the project (guide: house style). `npm run lint` fails on any violation.
 */
const SDKS = '^node_modules/(@aws-sdk|@smithy|@aws-crypto|@kubernetes/client-node|cloudevents)';
module.exports = {
  forbidden: [
    {
      name: 'domain-is-pure',
      comment: 'shared/domain (the taint rules) imports nothing outside shared/domain (except the error catalogue): no view, no event, no policy, no node: builtins.',
      severity: 'error',
      from: { path: '^shared/domain/' },
      to: { pathNot: ['^shared/domain/', '^shared/errors\\.ts$'] },
    },
    {
      name: 'pure-layers',
      comment: 'shared/model (object views), shared/contract (events, streams) and shared/policy (forwarder rules) are pure like the domain: they import only the pure folders and the error catalogue, no SDK, no node: builtin, no adapter.',
      severity: 'error',
      from: { path: '^shared/(model|contract|policy)/' },
      to: { pathNot: ['^shared/(domain|model|contract|policy)/', '^shared/errors\\.ts$'] },
    },
    {
      name: 'pure-layers-direction',
      comment: 'domain <- model <- contract <- policy: the taint rules know no view, the views no event, the event contract no forwarder policy.',
      severity: 'error',
      from: { path: '^shared/(model|contract)/' },
      to: { path: '^shared/policy/' },
    },
    {
      name: 'model-knows-no-contract',
      severity: 'error',
      from: { path: '^shared/model/' },
      to: { path: '^shared/contract/' },
    },
    {
      name: 'ports-are-interfaces',
      comment: 'shared/ports may import only the pure folders.',
      severity: 'error',
      from: { path: '^shared/ports/' },
      to: { pathNot: ['^shared/ports/', '^shared/(domain|model|contract|policy)/', '^shared/errors\\.ts$', '^shared/observability/metric-names\\.ts$'] },
    },
    {
      name: 'sdks-only-in-adapters',
      comment: 'Only shared/adapters (and composition roots in functions/*/handler.ts, compose.ts, local/, bench/, test/) talk to SDKs.',
      severity: 'error',
      from: { path: '^(shared/(domain|model|contract|policy|ports|config)|functions/[^/]+/(?!handler\\.ts|compose\\.ts)[^/]+\\.ts$)' },
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
