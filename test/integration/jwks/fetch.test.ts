/** The §8.12 guarded fetch over real sockets: TLS with a test CA, redirects, caps, timeouts. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAddressGuard } from '../../../src/protocol/jwks/address-guard.js';
import {
  fetchJwksDocument,
  type JwksFetchOptions,
  type ResolvedAddress,
} from '../../../src/protocol/jwks/fetch.js';
import { jsonRoute, redirectRoute, startJwksServer, type JwksServer } from '../../helpers/jwks-server.js';
import { createTestPki, type TestPki } from '../../helpers/tls-ca.js';

const LOOPBACK: readonly ResolvedAddress[] = [{ address: '127.0.0.1', family: 4 }];

describe('guarded JWKS fetch (§8.12)', () => {
  let pki: TestPki;
  let tls: JwksServer;
  let plain: JwksServer;
  let resolved: string[];
  const jwks = { keys: [{ kty: 'OKP', crv: 'Ed25519', x: 'x', kid: 'a' }] };

  beforeAll(async () => {
    pki = createTestPki();
    tls = await startJwksServer({ key: pki.key, cert: pki.cert });
    plain = await startJwksServer();
    tls.route('/jwks', jsonRoute(jwks, 'max-age=600'));
    plain.route('/jwks', jsonRoute(jwks));
  });
  afterAll(async () => {
    await tls.close();
    await plain.close();
    pki.cleanup();
  });

  function options(overrides: Partial<JwksFetchOptions> = {}): JwksFetchOptions {
    resolved = [];
    return {
      guard: createAddressGuard(['127.0.0.1']),
      allowHttp: false,
      ca: pki.caPem,
      timeoutMs: 2_000,
      maxBytes: 65_536,
      // Every name resolves to loopback, as a rebinding attacker's DNS would make it.
      resolve: (hostname) => {
        resolved.push(hostname);
        return Promise.resolve(LOOPBACK);
      },
      ...overrides,
    };
  }
  const url = (path: string, host = 'localhost'): string => `https://${host}:${tls.port}${path}`;

  it('fetches over TLS trusting the configured CA, resolving the name once', async () => {
    const doc = await fetchJwksDocument(url('/jwks'), options());
    expect(doc.body).toEqual(jwks);
    expect(doc.cacheControl).toBe('max-age=600');
    expect(resolved).toEqual(['localhost']);
  });

  it('without an injected resolver: a localhost name is loopback (RFC 6761), asked of no resolver', async () => {
    const { resolve: _resolve, ...system } = options();
    const doc = await fetchJwksDocument(url('/jwks'), system);
    expect(doc.body).toEqual(jwks);
  });

  it('without an injected resolver: a name that does not resolve is refused', async () => {
    const { resolve: _resolve, ...system } = options({ timeoutMs: 1_000 });
    await expect(fetchJwksDocument('https://no-such-name.invalid/jwks', system)).rejects.toThrow(
      /does not resolve|did not answer/,
    );
  });

  it('refuses a server its CA store does not trust', async () => {
    const { ca: _ca, ...untrusting } = options();
    await expect(fetchJwksDocument(url('/jwks'), untrusting)).rejects.toThrow(/could not be fetched/);
  });

  it('keeps certificate name checks on the URL name, not the pinned address', async () => {
    await expect(fetchJwksDocument(url('/jwks', 'keys.example'), options())).rejects.toThrow(
      /could not be fetched/,
    );
  });

  it('refuses http:// unless the development flag is on', async () => {
    const plainUrl = `http://localhost:${plain.port}/jwks`;
    await expect(fetchJwksDocument(plainUrl, options())).rejects.toThrow(/must use https/);
    expect((await fetchJwksDocument(plainUrl, options({ allowHttp: true }))).body).toEqual(jwks);
  });

  it('refuses a URL carrying credentials, before anything is resolved or fetched', async () => {
    const before = plain.requests.length;
    await expect(
      fetchJwksDocument(`http://user:pw@localhost:${plain.port}/jwks`, options({ allowHttp: true })),
    ).rejects.toThrow(/must not carry credentials/);
    expect(resolved).toEqual([]);
    expect(plain.requests.length).toBe(before);
  });

  // A rebinding DNS answers the check with an allowed address and the connection with another: the
  // connection must go to the address that was checked. A .invalid name never resolves (RFC 6761),
  // so a second resolution fails.
  it('connects to the address it checked, never resolving the name a second time', async () => {
    const doc = await fetchJwksDocument(
      `http://rebind.invalid:${plain.port}/jwks`,
      options({ allowHttp: true }),
    );
    expect(doc.body).toEqual(jwks);
    expect(resolved).toEqual(['rebind.invalid']);
  });

  it('refuses a name resolving to loopback without the allow-list', async () => {
    const before = tls.requests.length;
    await expect(fetchJwksDocument(url('/jwks'), options({ guard: createAddressGuard([]) }))).rejects.toThrow(
      /loopback.*§8\.12/,
    );
    expect(tls.requests.length).toBe(before);
  });

  it('refuses when any resolved address is private', async () => {
    const resolve = (): Promise<readonly ResolvedAddress[]> =>
      Promise.resolve([
        { address: '127.0.0.1', family: 4 },
        { address: '169.254.169.254', family: 4 },
      ]);
    await expect(fetchJwksDocument(url('/jwks'), options({ resolve }))).rejects.toThrow(/169\.254\.169\.254/);
  });

  it('follows a redirect, checking its target, and refuses one to a private address', async () => {
    tls.route('/moved', redirectRoute('/jwks'));
    expect((await fetchJwksDocument(url('/moved'), options())).body).toEqual(jwks);
    expect(resolved).toEqual(['localhost', 'localhost']);
    tls.route('/to-metadata', redirectRoute('https://169.254.169.254/latest/meta-data/'));
    await expect(fetchJwksDocument(url('/to-metadata'), options())).rejects.toThrow(
      /169\.254\.169\.254.*§8\.12/,
    );
    tls.route('/to-http', redirectRoute(`http://localhost:${plain.port}/jwks`));
    await expect(fetchJwksDocument(url('/to-http'), options())).rejects.toThrow(/must use https/);
  });

  it('follows at most 3 redirects', async () => {
    tls.route('/r3', redirectRoute('/r2'));
    tls.route('/r2', redirectRoute('/r1'));
    tls.route('/r1', redirectRoute('/jwks'));
    tls.route('/r4', redirectRoute('/r3'));
    expect((await fetchJwksDocument(url('/r3'), options())).body).toEqual(jwks);
    await expect(fetchJwksDocument(url('/r4'), options())).rejects.toThrow(/more than 3 redirects/);
  });

  it('refuses an oversized document', async () => {
    tls.route('/huge', jsonRoute({ keys: [], pad: 'x'.repeat(70_000) }));
    await expect(fetchJwksDocument(url('/huge'), options())).rejects.toThrow(/larger than 65536 bytes/);
  });

  it('gives up on a slow server at the deadline', async () => {
    tls.route('/slow', () => {
      /* never answers */
    });
    const started = Date.now();
    await expect(fetchJwksDocument(url('/slow'), options({ timeoutMs: 300 }))).rejects.toThrow(
      /did not answer within 300 ms/,
    );
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('does not wait for a slow DNS answer past the deadline', async () => {
    const resolve = (): Promise<readonly ResolvedAddress[]> => new Promise(() => undefined);
    await expect(fetchJwksDocument(url('/jwks'), options({ resolve, timeoutMs: 100 }))).rejects.toThrow(
      /did not answer within 100 ms/,
    );
  });

  it('refuses non-200 answers and non-JSON bodies', async () => {
    await expect(fetchJwksDocument(url('/missing'), options())).rejects.toThrow(/HTTP 404/);
    tls.route('/text', (_req, res) => res.end('not json'));
    await expect(fetchJwksDocument(url('/text'), options())).rejects.toThrow(/not valid JSON/);
  });
});
