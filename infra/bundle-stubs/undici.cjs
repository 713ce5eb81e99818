'use strict';
/**
 * Replaces `undici`'s index in the Lambda bundles (serverless.yml custom.esbuild.alias) with the parts client-node
 * imports from it: `Agent` (config.js), `fetch` (gen/http/isomorphic-fetch.js) and `ProxyAgent` (config.js, only for
 * a cluster with `proxy-url`, which the Lambda functions' kubeconfigs never have: a stub). The index also loads every
 * other dispatcher, the mock, cache, WebSocket, EventSource and cookie modules (-190 KiB; BENCHMARKS.md, cold start).
 *
 * The same files as the index's: required by relative path because the alias also maps `undici/...`; the unit test
 * checks that this is the copy client-node resolves. The index's `fetch` wraps this one only to append the caller's
 * stack to an error whose stack does not name undici's index file; in a bundle every frame names the bundle, so that
 * wrapper never appends anything there. The index also adds the `request`/`stream`/`pipeline`/`connect`/`upgrade`
 * methods to every dispatcher; fetch and Agent do not call them (ProxyAgent did, which is left out).
 */
const { leftOutClass, PROXY, PROXY_PACKAGES } = require('./left-out.cjs');

module.exports = {
  Agent: require('../../node_modules/undici/lib/dispatcher/agent.js'),
  fetch: require('../../node_modules/undici/lib/web/fetch/index.js').fetch,
  ProxyAgent: leftOutClass('ProxyAgent', PROXY, PROXY_PACKAGES),
};
