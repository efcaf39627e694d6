/**
 * Why a relayed stream broke off (sse-relay.ts streamFailure). Regression: a stream silent for
 * longer than the call's `timeout` was cut by undici's body timeout and reported as
 * `upstream_unavailable`; the client sets none on streams now, and a timeout that still ends one
 * is the upstream's slowness.
 */
import { describe, expect, it } from 'vitest';
import { streamFailure } from '../../../src/http/sse-relay.js';

describe('streamFailure', () => {
  it('a body timeout → upstream_timeout (504)', () => {
    const err = Object.assign(new Error('Body Timeout Error'), { code: 'UND_ERR_BODY_TIMEOUT' });
    const failure = streamFailure(err);
    expect(failure.code).toBe('upstream_timeout');
    expect(failure.status).toBe(504);
  });

  it('anything else (a reset, a parse error) → upstream_unavailable', () => {
    const reset = Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' });
    expect(streamFailure(reset).code).toBe('upstream_unavailable');
    expect(streamFailure(new Error('event stream line too long')).code).toBe('upstream_unavailable');
  });
});
