/**
 * What reaches the router over a raw socket: framings that could smuggle a request are refused,
 * only origin-form targets are routed, pipelined requests are answered in order, and nothing
 * carries CORS headers.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';
import { rawExchange, statuses } from '../../helpers/raw-http.js';

let p: TestProtocol;
beforeAll(async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'aap-edge-')), 'proxy.yaml');
  writeFileSync(file, `apis:\n  - spec: ${JSON.stringify(PETSTORE)}\nmock_upstream: true\n`);
  p = await startProtocol({ overrides: { config: file } });
});
afterAll(async () => {
  await p?.close();
});

const H = 'host: 127.0.0.1\r\n';

describe('the HTTP edge, on raw sockets', () => {
  it('smuggling framings are refused, absolute-form and * targets refused, OPTIONS/HEAD on POST routes are 405 without CORS', async () => {
    const cases: Record<string, string> = {
      clte: `POST /capability/execute HTTP/1.1\r\n${H}content-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n`,
      dupcl: `POST /capability/execute HTTP/1.1\r\n${H}content-length: 4\r\ncontent-length: 5\r\n\r\n{}{}`,
      samecl: `POST /capability/execute HTTP/1.1\r\n${H}content-length: 2\r\ncontent-length: 2\r\n\r\n{}`,
      obsfold: `GET /healthz HTTP/1.1\r\n${H}x-a: b\r\n c\r\n\r\n`,
      absform: `POST http://evil/capability/execute HTTP/1.1\r\n${H}content-length: 2\r\n\r\n{}`,
      backslash: `POST /\\evil/capability/execute HTTP/1.1\r\n${H}content-length: 2\r\n\r\n{}`,
      dotdot: `POST /x/%2e%2e/capability/execute HTTP/1.1\r\n${H}content-length: 2\r\n\r\n{}`,
      options: `OPTIONS /capability/execute HTTP/1.1\r\n${H}origin: http://evil\r\naccess-control-request-method: POST\r\n\r\n`,
      star: `OPTIONS * HTTP/1.1\r\n${H}\r\n`,
      weird: `FOO /healthz HTTP/1.1\r\n${H}\r\n`,
      badhdr: `GET /healthz HTTP/1.1\r\n${H}x-a: b\x01c\r\n\r\n`,
      nohost: `GET /healthz HTTP/1.1\r\n\r\n`,
      chunkext: `POST /capability/execute HTTP/1.1\r\n${H}transfer-encoding: chunked\r\n\r\n2;a=b\r\n{}\r\n0\r\n\r\n`,
      tecl2: `POST /capability/execute HTTP/1.1\r\n${H}transfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n`,
      te_identity: `POST /capability/execute HTTP/1.1\r\n${H}transfer-encoding: identity\r\ncontent-length: 2\r\n\r\n{}`,
      pipelined: `GET /healthz HTTP/1.1\r\n${H}\r\nGET /nope HTTP/1.1\r\n${H}\r\nGET /.well-known/agent-configuration HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      http10: `GET /healthz HTTP/1.0\r\n\r\n`,
      head_post: `HEAD /capability/execute HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      semicolon: `GET /healthz;x HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      // Dot segments, which the URL parser would resolve (to /capability/execute, /healthz …).
      dotdot_upper: `GET /public/%2E%2E/healthz HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      dotdot_mixed: `GET /public/.%2e/healthz HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      dotdot_plain: `GET /public/../healthz HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      dotdot_last: `GET /healthz/x/.. HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      dotdot_query: `GET /x/..?a=b HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      dot_encoded: `GET /%2e/healthz HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      dot_plain: `GET /./healthz HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      // Dots that are not a whole segment are ordinary characters: no such endpoint.
      dots_in_name: `GET /healthz/.../x..y/.z HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
      dots_query: `GET /healthz?next=/../admin HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
    };
    const expected: Record<string, number[]> = {
      clte: [400],
      dupcl: [400],
      samecl: [400],
      obsfold: [400],
      absform: [400],
      backslash: [400],
      options: [405],
      star: [400],
      weird: [400],
      badhdr: [400],
      nohost: [400],
      te_identity: [400],
      pipelined: [200, 404, 200],
      http10: [200],
      head_post: [405],
      semicolon: [404],
      dotdot: [400],
      dotdot_upper: [400],
      dotdot_mixed: [400],
      dotdot_plain: [400],
      dotdot_last: [400],
      dotdot_query: [400],
      dot_encoded: [400],
      dot_plain: [400],
      dots_in_name: [404],
      dots_query: [200],
    };
    for (const [name, want] of Object.entries(expected)) {
      const out = await rawExchange(p.proxy.url, cases[name]!, 800);
      expect(statuses(out), name).toEqual(want);
      // No CORS: nothing is readable cross-origin.
      expect(out.toLowerCase(), name).not.toContain('access-control-');
    }
  });
});

describe('dot segments in the request path', () => {
  // Observed before: the URL parser resolved `/public/%2e%2e/admin/agents` to `/admin/agents` and
  // served it, and `/x/../healthz`, `/%2e/healthz` too: a front proxy that forwards only `/public/*`,
  // or blocks `/admin` by prefix, matches the raw path and was gone round.
  it('/public/%2e%2e/admin/agents is refused 400 invalid_request, not routed to /admin/agents', async () => {
    const out = await rawExchange(
      p.proxy.url,
      `GET /public/%2e%2e/admin/agents HTTP/1.1\r\n${H}connection: close\r\n\r\n`,
    );
    expect(statuses(out)).toEqual([400]);
    const body = JSON.parse(out.slice(out.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
    expect(body).toEqual({ error: 'invalid_request', message: expect.stringContaining('segments') });
  });
});

describe('request targets that are not origin-form', () => {
  // Observed before: WHATWG URL read `/\\host/x` as `//host/x`, dropped the host and routed `/x`
  // (`/\\x/metrics`, `/\\x/admin/agents`), a path a front proxy matching the raw target never saw.
  it('/\\evil.example/healthz is refused like //evil.example/healthz', async () => {
    const slash = await rawExchange(
      p.proxy.url,
      'GET //evil.example/healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n',
    );
    expect(statuses(slash)).toEqual([400]);
    const backslash = await rawExchange(
      p.proxy.url,
      'GET /\\evil.example/healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n',
    );
    expect(statuses(backslash)).toEqual([400]);
  });
});
