import { describe, expect, it } from 'vitest';
import { loadClusterAccessConfig } from '#shared/config/cluster-access-config.ts';
import { ConfigError } from '#shared/errors.ts';

const caData = Buffer.from('-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n').toString('base64');
const eksEnv = {
  MANAGEMENT_AUTH: 'eks',
  EKS_CLUSTER_NAME: 'mgmt',
  EKS_ENDPOINT: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com/',
  EKS_CA_DATA: caData,
  AWS_REGION: 'eu-west-1',
};

describe('loadClusterAccessConfig', () => {
  it('defaults to capi mode with a local kubeconfig', () => {
    // Act
    const config = loadClusterAccessConfig({});

    // Assess
    expect(config).toEqual({ clusterMode: 'capi', management: { auth: 'kubeconfig', kubeconfigPath: undefined } });
    expect(Object.isFrozen(config)).toBe(true);
  });

  it.each([
    { env: { CLUSTER_MODE: 'self', KUBECONFIG: 'kubeconfigs/dev.yaml' }, expected: { clusterMode: 'self', management: { auth: 'kubeconfig', kubeconfigPath: 'kubeconfigs/dev.yaml' } } },
    {
      env: eksEnv,
      expected: {
        clusterMode: 'capi',
        management: { auth: 'eks', clusterName: 'mgmt', endpoint: 'https://ABC.gr7.eu-west-1.eks.amazonaws.com', caData, region: 'eu-west-1' },
      },
    },
    {
      env: { MANAGEMENT_AUTH: 'ssm', MANAGEMENT_KUBECONFIG_PARAMETER: '/capi/mgmt', AWS_REGION: 'eu-west-1' },
      expected: { clusterMode: 'capi', management: { auth: 'ssm', parameterName: '/capi/mgmt', region: 'eu-west-1' } },
    },
    {
      env: { MANAGEMENT_AUTH: 'secretsmanager', MANAGEMENT_KUBECONFIG_SECRET_ID: 'capi/mgmt' },
      expected: { clusterMode: 'capi', management: { auth: 'secretsmanager', secretId: 'capi/mgmt', region: undefined } },
    },
    {
      // serverless.yml declares every variable; the ones of other auth modes arrive empty and are ignored.
      env: { MANAGEMENT_AUTH: 'ssm', MANAGEMENT_KUBECONFIG_PARAMETER: '/p', EKS_CLUSTER_NAME: '', EKS_ENDPOINT: '', EKS_CA_DATA: '', MANAGEMENT_KUBECONFIG_SECRET_ID: '' },
      expected: { clusterMode: 'capi', management: { auth: 'ssm', parameterName: '/p', region: undefined } },
    },
    {
      // The stored and EKS modes are what a deployed function uses.
      env: { MANAGEMENT_AUTH: 'ssm', MANAGEMENT_KUBECONFIG_PARAMETER: '/p', AWS_LAMBDA_FUNCTION_NAME: 'fn' },
      expected: { clusterMode: 'capi', management: { auth: 'ssm', parameterName: '/p', region: undefined } },
    },
  ])('reads $env.MANAGEMENT_AUTH access', ({ env, expected }) => {
    expect(loadClusterAccessConfig(env)).toEqual(expected);
  });

  it.each([
    { env: { CLUSTER_MODE: 'both' }, variable: 'CLUSTER_MODE', message: 'must be one of capi, self' },
    { env: { MANAGEMENT_AUTH: 'iam' }, variable: 'MANAGEMENT_AUTH', message: 'must be one of kubeconfig, eks, ssm, secretsmanager' },
    { env: { ...eksEnv, EKS_CLUSTER_NAME: '' }, variable: 'EKS_CLUSTER_NAME', message: 'is required when MANAGEMENT_AUTH=eks' },
    { env: { ...eksEnv, EKS_ENDPOINT: undefined }, variable: 'EKS_ENDPOINT', message: 'is required when MANAGEMENT_AUTH=eks' },
    { env: { ...eksEnv, EKS_ENDPOINT: 'http://insecure:6443' }, variable: 'EKS_ENDPOINT', message: 'must be an https URL' },
    { env: { ...eksEnv, EKS_ENDPOINT: 'not a url' }, variable: 'EKS_ENDPOINT', message: 'must be an https URL' },
    { env: { ...eksEnv, EKS_CA_DATA: 'bm90IGEgY2VydA==' }, variable: 'EKS_CA_DATA', message: 'base64 of a PEM certificate' },
    { env: { ...eksEnv, AWS_REGION: ' ' }, variable: 'AWS_REGION', message: 'is required when MANAGEMENT_AUTH=eks' },
    { env: { MANAGEMENT_AUTH: 'ssm' }, variable: 'MANAGEMENT_KUBECONFIG_PARAMETER', message: 'is required when MANAGEMENT_AUTH=ssm' },
    { env: { MANAGEMENT_AUTH: 'secretsmanager' }, variable: 'MANAGEMENT_KUBECONFIG_SECRET_ID', message: 'is required when MANAGEMENT_AUTH=secretsmanager' },
    // In AWS Lambda (the runtime sets AWS_LAMBDA_FUNCTION_NAME): the bundles leave out client-node's proxy and
    // auth-provider support that a kubeconfig file may use; the default (unset) is refused there as well.
    { env: { MANAGEMENT_AUTH: 'kubeconfig', AWS_LAMBDA_FUNCTION_NAME: 'fn' }, variable: 'MANAGEMENT_AUTH', message: 'kubeconfig is for local runs only; in AWS Lambda use eks, ssm or secretsmanager' },
    { env: { AWS_LAMBDA_FUNCTION_NAME: 'fn' }, variable: 'MANAGEMENT_AUTH', message: 'kubeconfig is for local runs only' },
  ])('rejects $variable: $message', ({ env, variable, message }) => {
    // Act
    let error: unknown;
    try {
      loadClusterAccessConfig(env);
    } catch (err) {
      error = err;
    }

    // Assess
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(variable);
    expect((error as ConfigError).message).toContain(message);
  });
});
