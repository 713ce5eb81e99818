/**
 * Records the AWS calls a unit test file makes through aws-sdk-client-mock mocks, and checks them against the file's
 * golden recording (test/fixtures/aws-calls/recorded/<name>.jsonl) once the file's tests have run. The
 * least-privilege test evaluates the golden recordings against the packaged template (test/support/aws-calls.ts).
 *
 * A call the code starts making fails the file (it is not in the golden recording); so does a call it stops making,
 * when every test of the file ran (a run filtered with -t checks only the first). `UPDATE_AWS_CALLS=1` rewrites the
 * golden recording instead.
 */
import { afterAll, afterEach, expect } from 'vitest';
import { AwsCallRecorder, compareWithGolden, type RecordedCall } from './aws-calls.ts';

export interface MockedClientCalls {
  /** The function(s) whose code makes these calls (an adapter both functions use records for both). */
  readonly functions: readonly string[];
  /** IAM service prefix or client name (`sqs`, `SSMClient`...). */
  readonly service: string;
  readonly mock: { calls(): readonly { args: readonly unknown[] }[] };
  /** Concrete identifier in the test → its placeholder form (e.g. the queue URL given as QUEUE_URL → `{queue:QUEUE_URL}`). */
  readonly bindings: Readonly<Record<string, string>>;
}

interface TaskLike {
  readonly type?: string;
  readonly mode?: string;
  readonly result?: { readonly state?: string };
  readonly tasks?: readonly TaskLike[];
}

function everyTestRan(suite: TaskLike): boolean {
  const tests: TaskLike[] = [];
  const visit = (t: TaskLike): void => {
    if (t.tasks) t.tasks.forEach(visit);
    else tests.push(t);
  };
  visit(suite);
  return tests.every((t) => t.mode !== 'skip' && t.mode !== 'todo' && (t.result?.state === 'pass' || t.result?.state === 'fail'));
}

/** Call at the top level of a test file, after the mocks are made; records after each test, compares after all. */
export function recordMockedAwsCalls(golden: string, sources: readonly MockedClientCalls[]): void {
  const recorders = sources.map((s) => ({ s, recorders: s.functions.map((f) => new AwsCallRecorder(f, s.bindings)) }));
  afterEach(() => {
    for (const { s, recorders: rs } of recorders) for (const r of rs) r.recordMock(s.service, s.mock);
  });
  afterAll(async ({}, suite) => {
    const calls: RecordedCall[] = recorders.flatMap(({ recorders: rs }) => rs.flatMap((r) => r.calls()));
    const { missing, extra } = await compareWithGolden(golden, calls);
    expect(extra, `calls not in test/fixtures/aws-calls/recorded/${golden}.jsonl (UPDATE_AWS_CALLS=1 rewrites it; then list them in code.jsonl)`).toEqual([]);
    if (everyTestRan(suite as unknown as TaskLike)) expect(missing, `calls in test/fixtures/aws-calls/recorded/${golden}.jsonl that no test made`).toEqual([]);
  });
}
