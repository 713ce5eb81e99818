/** The offline packaging helper lives in local/lambda/serverless-package.ts (the benchmarks use it too). */
export * from '#local/lambda/serverless-package.ts';
