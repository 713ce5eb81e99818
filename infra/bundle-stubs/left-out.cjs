'use strict';
/**
 * The error every stub of the Lambda bundles throws (serverless.yml custom.esbuild.alias; README.md, Limits): the
 * Lambda functions' kubeconfigs never use these features (stored and workload kubeconfigs refuse them, the EKS one is
 * built without them, and MANAGEMENT_AUTH=kubeconfig is refused in Lambda), so reaching a stub is a bug or a
 * configuration this version does not support, named here instead of a TypeError deep in client-node.
 */
class LeftOutOfBundleError extends Error {
  constructor(feature, packages) {
    super(`${feature} is not supported by the Lambda functions (their bundle leaves out ${packages}; README.md, Limits)`);
    this.name = 'LeftOutOfBundleError';
    this.feature = feature;
  }
}

/** A class whose construction, and each of its `statics` methods, throw LeftOutOfBundleError(feature). */
function leftOutClass(name, feature, packages, statics = []) {
  const C = {
    [name]: class {
      constructor() {
        throw new LeftOutOfBundleError(feature, packages);
      }
    },
  }[name];
  for (const method of statics) C[method] = leftOutFunction(method, feature, packages);
  return C;
}

/** A function that throws LeftOutOfBundleError(feature). */
function leftOutFunction(name, feature, packages) {
  return {
    [name]() {
      throw new LeftOutOfBundleError(feature, packages);
    },
  }[name];
}

const PROXY = 'A kubeconfig proxy-url (HTTP, HTTPS or SOCKS proxy)';
const PROXY_PACKAGES = "socks, socks-proxy-agent, hpagent and undici's ProxyAgent";

module.exports = { LeftOutOfBundleError, leftOutClass, leftOutFunction, PROXY, PROXY_PACKAGES };
