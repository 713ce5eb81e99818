import { describe, expect, it } from 'vitest';
import { CollectionNotServedError, escapedText, ResourceVersionGoneError, safeExcerpt, streamStatusError, toProductError } from '#shared/adapters/kubernetes/api-errors.ts';
import { KubeApiError } from '#shared/adapters/kubernetes/kube-http.ts';
import { AccessDeniedError, CallTimeoutError, TransientError } from '#shared/errors.ts';

describe('Functions: streamStatusError() and toProductError() (the one table)', () => {
  it.each([
    { status: 401, type: AccessDeniedError },
    { status: 403, type: AccessDeniedError },
    { status: 404, type: CollectionNotServedError },
    { status: 410, type: ResourceVersionGoneError },
    { status: 429, type: TransientError },
    { status: 500, type: TransientError },
    { status: 418, type: TransientError },
  ])('maps $status to $type.name', ({ status, type }) => {
    expect(streamStatusError(status, '', 'listing /api/v1/nodes', undefined)).toBeInstanceOf(type);
  });

  it('is the table of the streams and of the one-off calls alike (a deadline first, for the calls)', () => {
    // Act
    const stream = streamStatusError(403, '{"kind":"Status","reason":"Forbidden","message":"nodes is forbidden"}', 'watching /api/v1/nodes', '5');
    const call = toProductError('Reading Node n1', new KubeApiError(403, '{"kind":"Status","reason":"Forbidden","message":"nodes is forbidden"}'));
    const gone = streamStatusError(410, 'not a Status', 'watching /api/v1/nodes', '5');
    const late = toProductError('Reading Node n1', new DOMException('late', 'TimeoutError'));

    // Assess
    expect(stream.message).toBe('watching /api/v1/nodes was refused: HTTP 403: Forbidden nodes is forbidden');
    expect(call.message).toBe('Reading Node n1 was refused: HTTP 403: Forbidden nodes is forbidden');
    expect(gone).toBeInstanceOf(ResourceVersionGoneError);
    expect((gone as ResourceVersionGoneError).resourceVersion).toBe('5');
    expect(late).toBeInstanceOf(CallTimeoutError);
  });

  it("quotes a Status's message escaped and capped, never the rest of the body", () => {
    // Act
    const error = streamStatusError(500, JSON.stringify({ reason: 'X', message: `\u001b]0;owned\u0007${'m'.repeat(400)}`, details: 'PLANTED' }), 'listing /api/v1/nodes', undefined);

    // Assess
    expect(error.message).toBe(`listing /api/v1/nodes failed: HTTP 500: X \\u001b]0;owned\\u0007${'m'.repeat(288)}… (+112 more characters)`);
    expect(error.message).not.toContain('PLANTED');
  });
});

describe('Function: escapedText() and safeExcerpt()', () => {
  it('escapes everything outside printable ASCII and says how much was left out', () => {
    expect(escapedText('ab\ncd', 3)).toBe('ab\\u000a… (+2 more characters)');
    expect(escapedText('é\u202e', 10)).toBe('\\u00e9\\u202e');
    expect(safeExcerpt('{"a":\n', 80)).toBe('"{\\"a\\":\\u000a"');
    expect(safeExcerpt('x'.repeat(100), 80)).toBe(`"${'x'.repeat(80)}" (+20 more characters)`);
  });
});
