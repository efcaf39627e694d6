/**
 * Requests Node's HTTP parser refuses (a malformed head, Content-Length with Transfer-Encoding,
 * two Content-Lengths, obs-fold, a control byte in a header, a head over max_header_bytes) get a
 * §5.13 JSON error with a request id like every other (README "Errors", "Endpoints"), then the
 * connection closes. Observed before: Node's bare 400 / 431, no body, no X-Request-Id.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';
import { rawExchange } from '../../helpers/raw-http.js';

let p: TestProtocol;
beforeAll(async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'aap-edge-')), 'proxy.yaml');
  writeFileSync(
    file,
    `server:\n  max_header_bytes: 2048\napis:\n  - spec: ${JSON.stringify(PETSTORE)}\nmock_upstream: true\n`,
  );
  p = await startProtocol({ overrides: { config: file } });
});
afterAll(async () => {
  await p?.close();
});

const H = 'host: 127.0.0.1\r\n';

function parse(text: string): { status: number; headers: Record<string, string>; body: string } {
  const end = text.indexOf('\r\n\r\n');
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers = Object.fromEntries(
    lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
  );
  return { status: Number(statusLine?.split(' ')[1]), headers, body: text.slice(end + 4) };
}

const CASES: Record<string, string> = {
  'Content-Length with Transfer-Encoding': `POST /capability/execute HTTP/1.1\r\n${H}content-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`,
  'two Content-Length values': `POST /capability/execute HTTP/1.1\r\n${H}content-length: 4\r\ncontent-length: 5\r\n\r\n{}{}`,
  'obs-fold': `GET /healthz HTTP/1.1\r\n${H}x-a: b\r\n c\r\n\r\n`,
  'a control byte in a header value': `GET /healthz HTTP/1.1\r\n${H}x-a: b\x01c\r\n\r\n`,
  'a head over max_header_bytes': `GET /healthz HTTP/1.1\r\n${H}x-junk: ${'a'.repeat(4096)}\r\n\r\n`,
};

describe('errors refused by the HTTP parser are still §5.13 JSON with a request id', () => {
  for (const [name, bytes] of Object.entries(CASES)) {
    it(name, async () => {
      const r = parse(await rawExchange(p.proxy.url, bytes, 1000));
      expect(r.status === 400 || r.status === 431).toBe(true);
      expect(r.headers['x-request-id'], 'X-Request-Id').toBeDefined();
      expect(r.headers['content-type'] ?? '').toMatch(/^application\/json/);
      const body = JSON.parse(r.body || 'null') as { error?: string; message?: string } | null;
      expect(body).toMatchObject({ error: expect.any(String), message: expect.any(String) });
    });
  }
});
