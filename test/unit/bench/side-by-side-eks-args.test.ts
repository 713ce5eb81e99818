import { describe, expect, it } from 'vitest';
import { eksPackageArgs } from '../../../bench/scenarios/side-by-side.ts';

describe('Function: eksPackageArgs()', () => {
  it("packages serverless.yml's default EKS auth for the local control plane: the SSM stage and its parameters go, the bench's other parameters stay", () => {
    // Act
    const args = eksPackageArgs(
      ['--stage', 'example-ssm', '--param=queueRedriveRoleArn=arn:aws:iam::111122223333:role/ops-dlq-redrive', '--param=watchWindowSeconds=270', '--param=reconcileProvisionedConcurrency=10'],
      { clusterName: 'local-management', server: 'https://127.0.0.1:6443', caData: 'Q0E=' },
    );

    // Assess
    expect(args).toEqual([
      '--param=managementAuth=eks',
      '--param=eksClusterName=local-management',
      '--param=eksEndpoint=https://127.0.0.1:6443',
      '--param=eksCaData=Q0E=',
      '--param=watchWindowSeconds=270',
      '--param=reconcileProvisionedConcurrency=10',
    ]);
  });
});
