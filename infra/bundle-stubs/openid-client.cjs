'use strict';
/**
 * Replaces `openid-client` in the Lambda bundles (serverless.yml custom.esbuild.alias). client-node's oidc
 * auth-provider calls it only to refresh an expired `id-token` (discovery, then refreshTokenGrant); the Lambda
 * functions' kubeconfigs have no auth-provider (untrusted-kubeconfig.ts refuses it; the EKS user is the product's own).
 */
const { leftOutFunction } = require('./left-out.cjs');

const FEATURE = "The oidc auth-provider's token refresh";
const PACKAGES = 'openid-client';

module.exports = {
  discovery: leftOutFunction('discovery', FEATURE, PACKAGES),
  refreshTokenGrant: leftOutFunction('refreshTokenGrant', FEATURE, PACKAGES),
  customFetch: Symbol('openid-client customFetch (left out of the Lambda bundle)'),
};
