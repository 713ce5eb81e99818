/**
 * A local osls/serverless plugin (serverless.yml `plugins: - ./infra/check-parameters.ts`): before packaging or
 * deploying, it checks `custom.deployParameters` (the resolved parameters) with infra/deploy-parameters.ts and stops
 * with one message listing every problem, so a stack with, say, an empty EKS cluster name is never packaged.
 */
import { checkDeployParameters, checkFunctionNames, formatParameterProblems, type DeployParameters } from './deploy-parameters.ts';

/** The part of the framework this plugin touches. */
interface Serverless {
  readonly service: {
    readonly custom?: { readonly deployParameters?: DeployParameters };
    readonly provider: { readonly stage?: string };
    readonly functions?: Readonly<Record<string, { readonly name?: string }>>;
  };
  readonly classes: { readonly Error: new (message: string, code?: string) => Error };
}

export default class CheckDeployParameters {
  readonly hooks: Readonly<Record<string, () => void>>;

  constructor(serverless: Serverless, options: { readonly stage?: string }) {
    const check = (): void => {
      const params = serverless.service.custom?.deployParameters;
      if (!params) throw new serverless.classes.Error('custom.deployParameters is missing from serverless.yml (infra/check-parameters.ts checks it)', 'CTP_PARAMETERS_MISSING');
      const stage = options.stage ?? serverless.service.provider.stage ?? 'dev';
      const names = Object.values(serverless.service.functions ?? {}).flatMap((f) => (f.name ? [f.name] : []));
      const problems = [...checkFunctionNames(stage, names), ...checkDeployParameters(params)];
      if (problems.length > 0) {
        throw new serverless.classes.Error(formatParameterProblems(stage, problems), 'CTP_INVALID_PARAMETERS');
      }
    };
    this.hooks = { 'before:package:initialize': check, 'before:deploy:function:initialize': check };
  }
}
