import { describe, expect, it } from 'vitest';
import { ProtocolError } from '../../../src/errors.js';
import {
  bodyText,
  decodeData,
  MAX_UPSTREAM_ERROR_BODY,
  UPSTREAM_ERROR_READ_BYTES,
  upstreamError,
} from '../../../src/upstream/results.js';

// §5.11: a success body becomes the result's `data`; a failure becomes `upstream_error` with the
// upstream's status and a size-capped, scrubbed body.

const keep = (text: string): string => text;

function errorOf(fn: () => unknown): ProtocolError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProtocolError);
    return err as ProtocolError;
  }
  throw new Error('expected a ProtocolError');
}

describe('decodeData', () => {
  it('parses JSON, with or without parameters on the media type', () => {
    expect(decodeData('application/json', Buffer.from('{"a":[1,2]}'))).toEqual({ a: [1, 2] });
    expect(decodeData('Application/JSON; charset=utf-8', Buffer.from('[true]'))).toEqual([true]);
    expect(decodeData('application/json', Buffer.from('"just a string"'))).toBe('just a string');
  });

  it('parses +json types and */* as JSON', () => {
    expect(decodeData('application/problem+json', Buffer.from('{"title":"t"}'))).toEqual({ title: 't' });
    expect(decodeData('application/vnd.api+json', Buffer.from('{"data":null}'))).toEqual({ data: null });
    expect(decodeData('*/*', Buffer.from('{"x":1}'))).toEqual({ x: 1 });
  });

  it('decodes text in the charset the Content-Type names (legacy APIs send ISO-8859-1)', () => {
    const latin1 = Buffer.from([0x63, 0x61, 0x66, 0xe9]); // "café" in ISO-8859-1
    expect(decodeData('text/plain; charset=ISO-8859-1', latin1)).toBe('café');
    expect(decodeData('text/plain;charset="latin1"', latin1)).toBe('café');
    expect(decodeData('application/json; charset=iso-8859-1', Buffer.from([0x22, 0xe9, 0x22]))).toBe('é');
    // UTF-8 by default, and for a charset the runtime does not know.
    expect(decodeData('text/plain', Buffer.from('café'))).toBe('café');
    expect(decodeData('text/plain; charset=no-such-charset', Buffer.from('café'))).toBe('café');
    // Decoded per charset, the same bytes read differently: the charset really is applied.
    expect(bodyText('text/plain; charset=utf-8', latin1)).toBe('caf\uFFFD');
  });

  it('decodes UTF-32, which TextDecoder does not know: big-endian unless a BOM or the name says not', () => {
    const codePoints = [0x6b, 0xe9, 0x79, 0x20, 0x1f511];
    const text = String.fromCodePoint(...codePoints);
    const le = Buffer.alloc(codePoints.length * 4);
    codePoints.forEach((c, i) => le.writeUInt32LE(c, i * 4));
    const be = Buffer.from(le).swap32();
    expect(bodyText('text/plain; charset=utf-32le', le)).toBe(text);
    expect(bodyText('text/plain; charset=UTF-32BE', be)).toBe(text);
    expect(bodyText('text/plain; charset=utf-32', be)).toBe(text);
    const bomLe = Buffer.concat([Buffer.from([0xff, 0xfe, 0, 0]), le]);
    expect(bodyText('text/plain; charset=utf-32', bomLe)).toBe(text);
    // A code point past U+10FFFF and a trailing partial unit are replaced, never thrown on.
    expect(bodyText('text/plain; charset=utf-32le', Buffer.from([0, 0, 0x11, 0, 0x41, 0]))).toBe(
      '\uFFFD\uFFFD',
    );
  });

  it('parses JSON that starts with a UTF-8 byte-order mark', () => {
    const withBom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"ok":true}')]);
    expect(decodeData('application/json', withBom)).toEqual({ ok: true });
  });

  it('gives null for an empty body whatever the type', () => {
    expect(decodeData('application/json', Buffer.alloc(0))).toBeNull();
    expect(decodeData('text/plain', Buffer.alloc(0))).toBeNull();
    expect(decodeData('application/octet-stream', Buffer.alloc(0))).toBeNull();
  });

  it('parses a body without a content type as JSON when it is JSON', () => {
    expect(decodeData('', Buffer.from('{"n":1}'))).toEqual({ n: 1 });
  });

  it('passes a body without a content type that is not JSON as text', () => {
    expect(decodeData('', Buffer.from('plain words'))).toBe('plain words');
  });

  it('rejects invalid JSON declared as JSON with upstream_error (502)', () => {
    const err = errorOf(() => decodeData('application/json', Buffer.from('{"broken":')));
    expect(err.code).toBe('upstream_error');
    expect(err.status).toBe(502);
    expect(err.fields).toEqual({ upstream_status: 200 });
  });

  it('keeps text, XML and form bodies as strings (UTF-8), even when they look like JSON', () => {
    expect(decodeData('text/plain; charset=utf-8', Buffer.from('héllo'))).toBe('héllo');
    expect(decodeData('text/csv', Buffer.from('{"a":1}'))).toBe('{"a":1}');
    expect(decodeData('application/xml', Buffer.from('<a>1</a>'))).toBe('<a>1</a>');
    expect(decodeData('application/atom+xml', Buffer.from('<feed/>'))).toBe('<feed/>');
    expect(decodeData('application/x-www-form-urlencoded', Buffer.from('a=1&b=2'))).toBe('a=1&b=2');
    expect(decodeData('application/x-yaml+yaml', Buffer.from('a: 1'))).toBe('a: 1');
  });

  it('wraps binary bodies in a base64 envelope with the full content type', () => {
    const bytes = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0xff]);
    expect(decodeData('image/png', bytes)).toEqual({
      content_type: 'image/png',
      base64: bytes.toString('base64'),
    });
    expect(decodeData('application/octet-stream; name="x.bin"', bytes)).toEqual({
      content_type: 'application/octet-stream; name="x.bin"',
      base64: 'iVBORwD/',
    });
  });
});

describe('upstreamError', () => {
  it('turns a redirect into 502 upstream_error with the upstream status', () => {
    const err = upstreamError(302, 'text/plain', Buffer.from('moved'), false, keep);
    expect(err.code).toBe('upstream_error');
    expect(err.status).toBe(502);
    expect(err.toBody()).toMatchObject({
      error: 'upstream_error',
      upstream_status: 302,
      upstream_body: 'moved',
    });
  });

  it('keeps the status of a 4xx so the agent can tell what it did wrong', () => {
    for (const status of [400, 404, 409, 422, 429]) {
      const err = upstreamError(status, 'application/json', Buffer.from('{}'), false, keep);
      expect(err.code).toBe('upstream_error');
      expect(err.status).toBe(status);
      expect(err.fields.upstream_status).toBe(status);
    }
  });

  it('turns a 5xx into 502', () => {
    for (const status of [500, 502, 503, 504]) {
      const err = upstreamError(status, 'text/plain', Buffer.from('down'), false, keep);
      expect(err.status).toBe(502);
      expect(err.fields.upstream_status).toBe(status);
    }
  });

  it('parses a JSON error body, also when no content type was given', () => {
    const body = Buffer.from('{"message":"name is required","field":"name"}');
    expect(upstreamError(400, 'application/problem+json', body, false, keep).fields.upstream_body).toEqual({
      message: 'name is required',
      field: 'name',
    });
    expect(upstreamError(400, '', body, false, keep).fields.upstream_body).toEqual({
      message: 'name is required',
      field: 'name',
    });
  });

  it('keeps a text body as text, and a JSON-typed body that does not parse as text', () => {
    expect(upstreamError(400, 'text/plain', Buffer.from('{"a":1}'), false, keep).fields.upstream_body).toBe(
      '{"a":1}',
    );
    expect(
      upstreamError(400, 'application/json', Buffer.from('not json'), false, keep).fields.upstream_body,
    ).toBe('not json');
  });

  it('gives a null body for an empty answer', () => {
    expect(upstreamError(404, 'application/json', Buffer.alloc(0), false, keep).fields).toEqual({
      upstream_status: 404,
      upstream_body: null,
    });
  });

  it('truncates a body over MAX_UPSTREAM_ERROR_BODY bytes and says so', () => {
    const body = Buffer.from('e'.repeat(MAX_UPSTREAM_ERROR_BODY + 1));
    const err = upstreamError(500, 'text/plain', body, false, keep);
    expect(err.fields.upstream_body).toBe('e'.repeat(MAX_UPSTREAM_ERROR_BODY));
    expect(err.fields.upstream_body_truncated).toBe(true);
  });

  it('does not mark a body of exactly MAX_UPSTREAM_ERROR_BODY bytes as truncated', () => {
    const err = upstreamError(
      500,
      'text/plain',
      Buffer.from('e'.repeat(MAX_UPSTREAM_ERROR_BODY)),
      false,
      keep,
    );
    expect((err.fields.upstream_body as string).length).toBe(MAX_UPSTREAM_ERROR_BODY);
    expect(err.fields).not.toHaveProperty('upstream_body_truncated');
  });

  it('keeps a truncated JSON body as text (a cut JSON document does not parse)', () => {
    const json = JSON.stringify({ items: 'i'.repeat(MAX_UPSTREAM_ERROR_BODY) });
    const err = upstreamError(400, 'application/json', Buffer.from(json), false, keep);
    expect(err.fields.upstream_body).toBe(json.slice(0, MAX_UPSTREAM_ERROR_BODY));
    expect(err.fields.upstream_body_truncated).toBe(true);
  });

  it('scrubs the body before parsing it, so a secret never reaches the parsed object', () => {
    const secret = 'sk_live_0123456789';
    const scrub = (text: string): string => text.split(secret).join('[redacted]');
    const err = upstreamError(
      401,
      'application/json',
      Buffer.from(JSON.stringify({ error: 'bad key', echoed: secret })),
      false,
      scrub,
    );
    expect(err.fields.upstream_body).toEqual({ error: 'bad key', echoed: '[redacted]' });
    expect(JSON.stringify(err.toBody())).not.toContain(secret);
  });

  it('never reveals part of a secret that straddles the truncation point', () => {
    const secret = 'sk_live_0123456789';
    const scrub = (text: string): string => text.split(secret).join('[redacted]');
    // The secret starts 6 bytes before the cap: truncating first would leave "sk_liv" unscrubbed.
    // The executor reads UPSTREAM_ERROR_READ_BYTES of an error body, so the whole secret is there.
    const head = 'p'.repeat(MAX_UPSTREAM_ERROR_BODY - 6);
    const body = Buffer.from(`${head}${secret}`.padEnd(UPSTREAM_ERROR_READ_BYTES, 'q'));
    const err = upstreamError(500, 'text/plain', body, true, scrub);
    const text = err.fields.upstream_body as string;
    expect(err.fields.upstream_body_truncated).toBe(true);
    expect(text.includes('sk_liv')).toBe(false);
    expect(text.length).toBe(MAX_UPSTREAM_ERROR_BODY);
    expect(text.startsWith(`${head}[redac`)).toBe(true);
  });

  it('marks a body cut at its read cap truncated, however short it is once decoded', () => {
    // A gzip body read up to the cap can decode to fewer bytes than were read (stored blocks).
    const err = upstreamError(400, 'text/plain', Buffer.from('short'), true, keep);
    expect(err.fields.upstream_body).toBe('short');
    expect(err.fields.upstream_body_truncated).toBe(true);
  });

  it('stays marked truncated when scrubbing shrinks a cut body below the cap', () => {
    const secret = 's'.repeat(4000);
    const scrub = (text: string): string => text.split(secret).join('[redacted]');
    const body = Buffer.from(`{"echo":"${secret}"`.padEnd(MAX_UPSTREAM_ERROR_BODY + 1, ' '));
    const err = upstreamError(400, 'application/json', body, false, scrub);
    expect(err.fields.upstream_body_truncated).toBe(true);
    expect(typeof err.fields.upstream_body).toBe('string');
  });
});
