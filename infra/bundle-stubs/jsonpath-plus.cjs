'use strict';
/**
 * Replaces `jsonpath-plus` in the Lambda bundles (serverless.yml custom.esbuild.alias). client-node's gcp and azure
 * auth-providers use it only to read a token out of their `cmd-path` command's output; the Lambda functions'
 * kubeconfigs have no auth-provider (untrusted-kubeconfig.ts refuses it; the EKS user is the product's own).
 */
const { leftOutFunction } = require('./left-out.cjs');

module.exports = {
  JSONPath: leftOutFunction('JSONPath', "The gcp and azure auth-providers' cmd-path", 'jsonpath-plus'),
};
