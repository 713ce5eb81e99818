import { describe, expect, it } from 'vitest';
import { describeStreamFailure } from '#shared/adapters/kubernetes/watch-session.ts';
import { AccessDeniedError, ClusterCredentialsError, TransientError } from '#shared/errors.ts';

const SECRET = 'PLANTED-token-5d1e';

describe('Function: describeStreamFailure()', () => {
  const cases: ReadonlyArray<{ name: string; error: unknown; want: string }> = [
    // the product's own errors: messages built from codes, Status reason/message and deadlines
    { name: 'a transient failure', error: new TransientError('listing /api/v1/nodes', 'HTTP 503: ServiceUnavailable'), want: 'listing /api/v1/nodes failed: HTTP 503: ServiceUnavailable' },
    { name: 'a refused credential', error: new AccessDeniedError('watching /api/v1/nodes', 'HTTP 401: Unauthorized'), want: 'watching /api/v1/nodes was refused: HTTP 401: Unauthorized' },
    { name: 'unusable credentials', error: new ClusterCredentialsError('fleet/wc1', 'Secret fleet/wc1-kubeconfig not found'), want: 'No usable credentials for cluster fleet/wc1: Secret fleet/wc1-kubeconfig not found' },
    // system errors: their code and message
    { name: 'a refused connection', error: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' }), want: 'connect ECONNREFUSED 127.0.0.1:6443' },
    { name: 'a TLS failure', error: Object.assign(new Error('self-signed certificate'), { code: 'DEPTH_ZERO_SELF_SIGNED_CERT' }), want: 'DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate' },
    // anything else: its class only
    { name: 'a parser error quoting a body', error: new SyntaxError(`Unexpected token '<', "<html>${SECRET}" is not valid JSON`), want: 'SyntaxError (details withheld: the message may quote a response)' },
    { name: 'an error with a code that is not a system code', error: Object.assign(new Error(`body ${SECRET}`), { code: 42 }), want: 'Error (details withheld: the message may quote a response)' },
    { name: 'a thrown string', error: SECRET, want: 'unknown error' },
  ];

  it.each(cases)('$name', ({ error, want }) => {
    // Act
    const described = describeStreamFailure(error);

    // Assess
    expect(described).toBe(want);
    expect(described).not.toContain(SECRET);
  });
});
