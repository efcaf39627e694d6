import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { UserError } from '../../../src/errors.js';
import { fetchDocument } from '../../../src/openapi/fetch.js';

// A self-signed certificate for 127.0.0.1 (valid until 2126), for the https test server only.
const TEST_CERT = `-----BEGIN CERTIFICATE-----
MIIBjzCCATagAwIBAgIUCloQfEiT1NPdKDozX/0afhw0Zd0wCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJMTI3LjAuMC4xMCAXDTI2MTEyMjE1MjcwN1oYDzIxMjYxMDI5
MTUyNzA3WjAUMRIwEAYDVQQDDAkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAAQegQwAhLeKlsS4wyUVlqXe0RfQ3D6qP6c2z1PcurUDAQp9XIcal7tW
/VuqNIhyVFAPJG27nuo5DATridJQrRqfo2QwYjAdBgNVHQ4EFgQUO+JFGPWGtpBG
QG/VI8rbfX88y6cwHwYDVR0jBBgwFoAUO+JFGPWGtpBGQG/VI8rbfX88y6cwDwYD
VR0TAQH/BAUwAwEB/zAPBgNVHREECDAGhwR/AAABMAoGCCqGSM49BAMCA0cAMEQC
IEhHyZ8alSPB+CyigQRIRoWwpm2zm66q/y/t09Qz6WQTAiByw/DZEBn9Ai5oWrxj
i4mZTODPesNN/aitm0pv6C7X3A==
-----END CERTIFICATE-----
`;
const TEST_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQguOvOat0iZ+MyNKtU
jrmAmkt54YfqW+4rptSvgSbLekWhRANCAAQegQwAhLeKlsS4wyUVlqXe0RfQ3D6q
P6c2z1PcurUDAQp9XIcal7tW/VuqNIhyVFAPJG27nuo5DATridJQrRqf
-----END PRIVATE KEY-----
`;

const DOC = '{"openapi":"3.1.0","info":{"title":"t","version":"1"},"paths":{}}';
const SECRET_BODY = 'SECRET-BODY-DO-NOT-ECHO';

let httpBase = '';
let httpsBase = '';
let stallingTcpPort = 0;
/** Requests the http server has received, to prove that rejected URLs are never requested. */
let httpRequests = 0;
/** Resolves when the server sees the client drop the chunked oversized response. */
let chunkedAborted: Promise<void> = Promise.resolve();

const httpServer = http.createServer((req, res) => {
  httpRequests++;
  const path = req.url ?? '/';
  // /chain/n redirects n times before reaching /doc.
  const chain = /^\/chain\/(\d+)$/.exec(path);
  if (chain) {
    const left = Number(chain[1]);
    redirect(res, 302, left <= 1 ? '/doc' : `/chain/${left - 1}`);
    return;
  }
  switch (path) {
    case '/doc':
      res.writeHead(200, { 'content-type': 'application/json' }).end(DOC);
      return;
    case '/dir/relative':
      redirect(res, 302, '../doc');
      return;
    case '/absolute':
      redirect(res, 301, `${httpBase}/doc`);
      return;
    case '/to-ftp':
      redirect(res, 307, 'ftp://127.0.0.1/spec.yaml');
      return;
    case '/to-file':
      redirect(res, 308, 'file:///etc/passwd');
      return;
    case '/missing':
      res.writeHead(404, { 'content-type': 'text/plain' }).end(SECRET_BODY);
      return;
    case '/big-declared':
      // Announces more than the cap, then never sends it: only a check of the header can end this.
      res.writeHead(200, { 'content-length': '2048' }).flushHeaders();
      return;
    case '/huge-declared':
      res.writeHead(200, { 'content-length': String(11 * 1024 * 1024) }).flushHeaders();
      return;
    case '/big-chunked':
      // No Content-Length and no end: only counting the streamed bytes can end this.
      chunkedAborted = new Promise((resolve) => res.on('close', resolve));
      res.writeHead(200, { 'content-type': 'application/json' });
      for (let i = 0; i < 3; i++) res.write('x'.repeat(512));
      return;
    case '/stall':
      res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders();
      return;
    case '/drip': {
      // A byte every 20 ms: never silent for the read timeout, never done.
      res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders();
      const drip = setInterval(() => res.write(' '), 20);
      res.on('close', () => clearInterval(drip));
      return;
    }
    default:
      res.writeHead(404).end();
  }
});

const httpsServer = https.createServer({ cert: TEST_CERT, key: TEST_KEY }, (req, res) => {
  if (req.url === '/downgrade') redirect(res, 302, `${httpBase}/doc`);
  else res.writeHead(200, { 'content-type': 'application/yaml' }).end('openapi: 3.1.0\n');
});

/** Accepts connections and never answers, so a TLS handshake against it never completes. */
const stallingSockets = new Set<net.Socket>();
const stallingTcpServer = net.createServer((socket) => stallingSockets.add(socket));

function redirect(res: http.ServerResponse, status: number, location: string): void {
  res.writeHead(status, { location }).end();
}

async function listen(server: net.Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

async function close(server: net.Server): Promise<void> {
  await new Promise<void>((resolve) => {
    server.close(() => {
      resolve();
    });
  });
}

/** Awaits a rejection and checks that it is a UserError. */
async function userError(promise: Promise<unknown>): Promise<UserError> {
  const err: unknown = await promise.then(
    () => new Error('expected the fetch to fail'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(UserError);
  return err as UserError;
}

/**
 * fetchDocument verifies certificates against the system store; the test server's certificate is
 * self-signed, so it is added as a trusted CA for the requests fetchDocument makes.
 */
function trustTestCertificate(): void {
  const realRequest = https.request;
  vi.spyOn(https, 'request').mockImplementation(((
    url: URL,
    options: https.RequestOptions,
    callback?: (res: http.IncomingMessage) => void,
  ) => realRequest(url, { ...options, ca: TEST_CERT }, callback)) as typeof https.request);
}

beforeAll(async () => {
  httpBase = `http://127.0.0.1:${await listen(httpServer)}`;
  httpsBase = `https://127.0.0.1:${await listen(httpsServer)}`;
  stallingTcpPort = await listen(stallingTcpServer);
});

afterEach(() => {
  vi.restoreAllMocks();
  // Drop connections left hanging by the stalling routes.
  httpServer.closeAllConnections();
});

afterAll(async () => {
  httpServer.closeAllConnections();
  httpsServer.closeAllConnections();
  for (const socket of stallingSockets) socket.destroy();
  await Promise.all([close(httpServer), close(httpsServer), close(stallingTcpServer)]);
});

describe('fetchDocument', () => {
  it('fetches a document over http when allowed, with final URL and content type', async () => {
    const result = await fetchDocument(`${httpBase}/doc`, { allowHttp: true });
    expect(result.body.toString('utf8')).toBe(DOC);
    expect(result.url).toBe(`${httpBase}/doc`);
    expect(result.contentType).toBe('application/json');
  });

  it('fetches a document over https, verifying the certificate', async () => {
    trustTestCertificate();
    const result = await fetchDocument(`${httpsBase}/spec.yaml`);
    expect(result.body.toString('utf8')).toBe('openapi: 3.1.0\n');
    expect(result.url).toBe(`${httpsBase}/spec.yaml`);
    expect(result.contentType).toBe('application/yaml');
  });

  it('rejects an untrusted certificate with its error code', async () => {
    const err = await userError(fetchDocument(`${httpsBase}/spec.yaml`));
    expect(err.message).toContain(`${httpsBase}/spec.yaml`);
    expect(err.message).toContain('SELF_SIGNED');
  });

  it('rejects http URLs unless allowHttp, without sending a request', async () => {
    const before = httpRequests;
    for (const limits of [undefined, { allowHttp: false }]) {
      const err = await userError(fetchDocument(`${httpBase}/doc`, limits));
      expect(err.message).toContain(`${httpBase}/doc is http`);
      expect(err.message).toContain('--allow-http-specs');
    }
    expect(httpRequests).toBe(before);
  });

  it.each(['file:///etc/passwd', 'ftp://127.0.0.1/spec.yaml', 'data:application/json,{}'])(
    'rejects the non-http scheme of %s',
    async (url) => {
      const err = await userError(fetchDocument(url, { allowHttp: true }));
      expect(err.message).toContain(url);
      expect(err.message).toContain(`unsupported scheme "${new URL(url).protocol}"`);
      expect(err.message).toContain('pass its path instead');
    },
  );

  it('rejects a string that is not a URL', async () => {
    const err = await userError(fetchDocument('not a url'));
    expect(err.message).toBe('"not a url" is not a valid URL.');
  });

  it('rejects URLs with credentials, without echoing them', async () => {
    const before = httpRequests;
    for (const url of [
      `https://user:hunter2@127.0.0.1/spec.yaml`,
      `${httpBase.replace('//', '//hunter2@')}/doc`,
    ]) {
      const err = await userError(fetchDocument(url, { allowHttp: true }));
      expect(err.message).toContain('contains credentials');
      expect(err.message).toContain('…@127.0.0.1');
      expect(err.message).not.toContain('hunter2');
    }
    expect(httpRequests).toBe(before);
  });

  it('fetches with the token in a URL’s query, and never quotes it in a message', async () => {
    const err = await userError(
      fetchDocument(`${httpBase}/missing?private_token=Tok-Secret-9&ref=main`, { allowHttp: true }),
    );
    expect(err.message).toContain(
      `${httpBase}/missing?private_token=…&ref=… failed: the server answered HTTP 404`,
    );
    expect(err.message).not.toContain('Tok-Secret-9');
  });

  it('follows a relative redirect', async () => {
    const result = await fetchDocument(`${httpBase}/dir/relative`, { allowHttp: true });
    expect(result.url).toBe(`${httpBase}/doc`);
    expect(result.body.toString('utf8')).toBe(DOC);
  });

  it('follows an absolute redirect', async () => {
    const result = await fetchDocument(`${httpBase}/absolute`, { allowHttp: true });
    expect(result.url).toBe(`${httpBase}/doc`);
    expect(result.body.toString('utf8')).toBe(DOC);
  });

  it('follows exactly maxRedirects redirects', async () => {
    const result = await fetchDocument(`${httpBase}/chain/3`, { allowHttp: true });
    expect(result.url).toBe(`${httpBase}/doc`);
    const two = await fetchDocument(`${httpBase}/chain/2`, { allowHttp: true, maxRedirects: 2 });
    expect(two.url).toBe(`${httpBase}/doc`);
  });

  it('rejects a redirect chain longer than maxRedirects', async () => {
    const before = httpRequests;
    const err = await userError(fetchDocument(`${httpBase}/chain/4`, { allowHttp: true }));
    expect(err.message).toContain(`Fetching ${httpBase}/chain/4 failed: more than 3 redirects`);
    expect(err.message).toContain(`from ${httpBase}/chain/1`);
    expect(httpRequests - before).toBe(4);
  });

  it.each([
    ['/to-ftp', 'ftp://127.0.0.1/spec.yaml'],
    ['/to-file', 'file:///etc/passwd'],
  ])('rejects a redirect (%s) to a non-http scheme', async (path, target) => {
    const err = await userError(fetchDocument(`${httpBase}${path}`, { allowHttp: true }));
    expect(err.message).toContain(`${httpBase}${path} redirected to ${target}`);
    expect(err.message).toContain('unsupported scheme');
  });

  it('rejects a redirect from https down to http unless allowHttp, without following it', async () => {
    trustTestCertificate();
    const before = httpRequests;
    const err = await userError(fetchDocument(`${httpsBase}/downgrade`));
    expect(err.message).toContain(`${httpsBase}/downgrade redirected to ${httpBase}/doc, which is http`);
    expect(err.message).toContain('--allow-http-specs');
    expect(httpRequests).toBe(before);

    const allowed = await fetchDocument(`${httpsBase}/downgrade`, { allowHttp: true });
    expect(allowed.url).toBe(`${httpBase}/doc`);
  });

  it('rejects a non-2xx status without quoting the body', async () => {
    const err = await userError(fetchDocument(`${httpBase}/missing`, { allowHttp: true }));
    expect(err.message).toBe(`Fetching ${httpBase}/missing failed: the server answered HTTP 404.`);
    expect(err.message).not.toContain(SECRET_BODY);
  });

  it('rejects a Content-Length over the cap before reading the body', async () => {
    const err = await userError(
      fetchDocument(`${httpBase}/big-declared`, { allowHttp: true, maxBytes: 1024 }),
    );
    expect(err.message).toBe(
      `Fetching ${httpBase}/big-declared failed: the document exceeds the 1 KiB limit.`,
    );
  });

  it('aborts a chunked body as soon as it exceeds the cap', async () => {
    const err = await userError(
      fetchDocument(`${httpBase}/big-chunked`, { allowHttp: true, maxBytes: 1024 }),
    );
    expect(err.message).toBe(
      `Fetching ${httpBase}/big-chunked failed: the document exceeds the 1 KiB limit.`,
    );
    // The server never ends the body: the client must have hung up.
    await chunkedAborted;
  });

  it('formats the cap readably, 10 MiB by default', async () => {
    const err = await userError(
      fetchDocument(`${httpBase}/big-declared`, { allowHttp: true, maxBytes: 1536 }),
    );
    expect(err.message).toContain('exceeds the 1.5 KiB limit');
    const huge = await userError(fetchDocument(`${httpBase}/huge-declared`, { allowHttp: true }));
    expect(huge.message).toContain('exceeds the 10 MiB limit');
  });

  it('gives up with a read timeout when the server stalls after the headers', async () => {
    const started = Date.now();
    const err = await userError(fetchDocument(`${httpBase}/stall`, { allowHttp: true, readTimeoutMs: 200 }));
    expect(err.message).toBe(`Fetching ${httpBase}/stall failed: read timeout, no data for 200 ms.`);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('gives up at its deadline when the server drips a byte at a time (never silent, never done)', async () => {
    const started = Date.now();
    const err = await userError(
      fetchDocument(`${httpBase}/drip`, { allowHttp: true, readTimeoutMs: 200, deadlineMs: 400 }),
    );
    expect(err.message).toBe(`Fetching ${httpBase}/drip failed: the fetch took longer than 400 ms.`);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('gives up with a connect timeout when the TLS handshake never completes', async () => {
    const url = `https://127.0.0.1:${stallingTcpPort}/spec.yaml`;
    const err = await userError(fetchDocument(url, { connectTimeoutMs: 200 }));
    expect(err.message).toBe(`Fetching ${url} failed: connect timeout after 200 ms.`);
  });

  it('names the cause of a connection error', async () => {
    const closed = http.createServer();
    const port = await listen(closed);
    await close(closed);
    const url = `http://127.0.0.1:${port}/doc`;
    const err = await userError(fetchDocument(url, { allowHttp: true }));
    expect(err.message).toBe(`Fetching ${url} failed: ECONNREFUSED.`);
    expect(err.message).not.toContain('    at ');
  });
});
