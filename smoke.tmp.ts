import { LambdaRunner } from '#local/lambda/runner.ts';
const r = await LambdaRunner.start({ serviceDir: '/tmp/capi-taint-propagator-sls/1e66c384d0c7d70de2f81d38/service', startTriggers: false });
try {
  const rec = await r.invoke('watchForwarder', { source: 'aws.events' });
  console.log(JSON.stringify(rec.result), rec.coldStart, rec.initMs, rec.durationMs);
  const rec2 = await r.invoke('watchForwarder', { source: 'aws.events' });
  console.log(JSON.stringify(rec2.result).slice(0,300), rec2.coldStart, rec2.durationMs);
  console.log(r.fn('watchForwarder').containers().map((c) => [c.id, c.frozen, c.peakRssMiB]));
  console.log(r.callLog.records());
  console.log(r.fn('watchForwarder').stats());
} finally { await r.stop(); }
