import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchDocument, NotPublicFetch } from '../../../src/openapi/fetch.js';
import { isPublicAddress, refIsPublicOnly } from '../../../src/openapi/public-address.js';
import { SourceReads, unchangedSources } from '../../../src/openapi/source-reads.js';

describe('isPublicAddress', () => {
  it.each([
    '127.0.0.1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.0.10',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::1',
    '::',
    '::ffff:127.0.0.1',
    '::ffff:10.0.0.1',
    '::ffff:7f00:1',
    '0:0:0:0:0:ffff:a9fe:a9fe',
    '64:ff9b::a00:1',
    'fd00::1',
    'fe80::1',
    'fe80::1%eth0',
    '2002:a00:1::1',
    'ff02::1',
    'not an address',
  ])('%s is not public', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each(['8.8.8.8', '172.32.0.1', '192.169.0.1', '::ffff:8.8.8.8', '2001:4860:4860::8888'])(
    '%s is public',
    (address) => {
      expect(isPublicAddress(address)).toBe(true);
    },
  );
});

describe("refIsPublicOnly: where a remote spec's $ref may reach", () => {
  const root = (address?: string) => ({
    url: 'https://specs.example/api/openapi.yaml',
    ...(address ? { address } : {}),
  });
  it('another origin: public addresses only, wherever the spec came from', () => {
    expect(refIsPublicOnly(root('10.0.0.5'), 'https://other.example/x.yaml')).toBe(true);
    expect(refIsPublicOnly(root('203.0.113.7'), 'https://other.example/x.yaml')).toBe(true);
  });

  it('its own origin: anywhere when the spec came from a private address (the operator’s own server)', () => {
    expect(refIsPublicOnly(root('10.0.0.5'), 'https://specs.example/common.yaml')).toBe(false);
  });

  it('its own origin on a public address: public only (its name could be made to resolve privately)', () => {
    expect(refIsPublicOnly(root('203.0.113.7'), 'https://specs.example/common.yaml')).toBe(true);
    expect(refIsPublicOnly(root(), 'https://specs.example/common.yaml')).toBe(true);
  });
});

describe('fetching from public addresses only', () => {
  let requests = 0;
  const server = createServer((_req, res) => {
    requests++;
    res.writeHead(200, { 'content-type': 'application/yaml' }).end('openapi: 3.1.0\n');
  });
  let port = 0;
  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it.each(['127.0.0.1', 'localhost', '[::ffff:127.0.0.1]'])(
    'refuses http://%s, a name checked when resolved and an address before, without a request',
    async (host) => {
      const before = requests;
      const url = `http://${host}:${port}/doc.yaml`;
      const err = await fetchDocument(url, { allowHttp: true, publicOnly: true }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(NotPublicFetch);
      expect((err as Error).message).toMatch(/not a public address/);
      expect(requests).toBe(before);
      // The same URL without the rule is fetched: the refusal is the rule's.
      expect((await fetchDocument(url, { allowHttp: true })).body.toString()).toBe('openapi: 3.1.0\n');
    },
  );

  it('a reload checks a public-only read again under the same rule', async () => {
    const url = `http://localhost:${port}/doc.yaml`;
    const fetched = await fetchDocument(url, { allowHttp: true });
    const reads = new SourceReads();
    reads.fetched(url, fetched, true);
    const before = requests;
    expect(await unchangedSources(reads.list(), { allowHttp: true })).toBe(false);
    expect(requests).toBe(before);
    const unrestricted = new SourceReads();
    unrestricted.fetched(url, fetched);
    expect(await unchangedSources(unrestricted.list(), { allowHttp: true })).toBe(true);
  });
});
