'use strict';
/**
 * Replaces `socks`, `socks-proxy-agent` and `hpagent` in the Lambda bundles (serverless.yml custom.esbuild.alias).
 * client-node's KubeConfig uses them only for a cluster with `proxy-url` (createAgent, createDispatcher and its SOCKS
 * connector); the Lambda functions' kubeconfigs never have one (untrusted-kubeconfig.ts refuses it).
 */
const { leftOutClass, PROXY, PROXY_PACKAGES } = require('./left-out.cjs');

module.exports = {
  SocksClient: leftOutClass('SocksClient', PROXY, PROXY_PACKAGES, ['createConnection']),
  SocksProxyAgent: leftOutClass('SocksProxyAgent', PROXY, PROXY_PACKAGES),
  HttpProxyAgent: leftOutClass('HttpProxyAgent', PROXY, PROXY_PACKAGES),
  HttpsProxyAgent: leftOutClass('HttpsProxyAgent', PROXY, PROXY_PACKAGES),
};
