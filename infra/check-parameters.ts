/**
 * A local osls/serverless plugin (serverless.yml `plugins: - ./infra/check-parameters.ts`): before packaging or
 * deploying, it checks `custom.deployParameters` (the resolved parameters) with infra/deploy-parameters.ts and stops
 * with one message listing every problem, so a stack with, say, an empty EKS cluster name is never packaged.
 */
import { checkDeployParameters, formatParameterProblems, type DeployParameters } from './deploy-parameters.ts';

/** The part of the framework this plugin touches. */
interface Serverless {
  readonly service: { readonly custom?: { readonly deployParameters?: DeployParameters }; readonly provider: { readonly stage?: string } };
  readonly classes: { readonly Error: new (message: string, code?: string) => Error };
}

export default class CheckDeployParameters {
  readonly hooks: Readonly<Record<string, () => void>>;

  constructor(serverless: Serverless, options: { readonly stage?: string }) {
    const check = (): void => {
      const params = serverless.service.custom?.deployParameters;
      if (!params) throw new serverless.classes.Error('custom.deployParameters is missing from serverless.yml (infra/check-parameters.ts checks it)', 'CTP_PARAMETERS_MISSING');
      const problems = checkDeployParameters(params);
      if (problems.length > 0) {
        throw new serverless.classes.Error(formatParameterProblems(options.stage ?? serverless.service.provider.stage ?? 'dev', problems), 'CTP_INVALID_PARAMETERS');
      }
    };
    this.hooks = { 'before:package:initialize': check, 'before:deploy:function:initialize': check };
  }
}
