/**
 * Where the admin and agent CLIs send a credential over plain http (src/cli/plain-http.ts): this
 * machine only. Regression: `admin hosts list --url http://proxy.example.com:8080` sent
 * `Authorization: Bearer <admin token>` in clear text without a word.
 */
import { describe, expect, it } from 'vitest';
import { parseBaseUrl } from '../../../src/cli/admin-api.js';
import { onThisMachine, plainHttpWarning } from '../../../src/cli/plain-http.js';
import { UserError } from '../../../src/errors.js';

/** The hostname as the CLIs see it: after parseBaseUrl and WHATWG normalization. */
const hostOf = (url: string): string => new URL(parseBaseUrl(url, '--url')).hostname;

describe('this machine', () => {
  it('is localhost, 127.0.0.0/8 and [::1], however they are spelt', () => {
    for (const url of [
      'http://localhost:8080',
      'http://LOCALHOST:8080',
      'http://127.0.0.1:8080',
      'http://127.1.2.3',
      'http://127.1:8080',
      'http://0x7f.0.0.1',
      'http://[::1]:8080',
      'http://[0:0:0:0:0:0:0:1]:8080',
    ])
      expect(onThisMachine(hostOf(url)), url).toBe(true);
  });

  it('is not another address or a name that only looks local', () => {
    for (const url of [
      'http://proxy.example.com:8080',
      'http://10.0.0.7',
      'http://0.0.0.0:8080',
      'http://128.0.0.1',
      'http://127.0.0.1.nip.io',
      'http://localhost.example.com',
      'http://[::2]',
      'http://[::ffff:10.0.0.1]',
    ])
      expect(onThisMachine(hostOf(url)), url).toBe(false);
  });
});

describe('plainHttpWarning', () => {
  it('refuses plain http to another host, naming the source, the URL and --insecure-http', () => {
    expect(() =>
      plainHttpWarning('http://proxy.example.com:8080', '--url', 'the admin token', false),
    ).toThrow(
      new UserError(
        '--url: http://proxy.example.com:8080 is plain http to a host other than this machine, which would send the admin token in clear text; use https://, or pass --insecure-http to allow it',
      ),
    );
  });

  it('with --insecure-http, allows it and returns one warning line', () => {
    expect(plainHttpWarning('http://10.0.0.7:8080', '--url', 'the admin token', true)).toBe(
      'warning: --insecure-http: sending the admin token to http://10.0.0.7:8080 over plain http, readable on the way\n',
    );
  });

  it('has nothing to say about https, or http on this machine, flag or not', () => {
    for (const insecure of [false, true]) {
      expect(plainHttpWarning('https://proxy.example.com', '--url', 'x', insecure)).toBeUndefined();
      expect(plainHttpWarning('http://127.0.0.1:8080', '--url', 'x', insecure)).toBeUndefined();
      expect(plainHttpWarning('http://[::1]:8080', '--url', 'x', insecure)).toBeUndefined();
    }
  });
});
