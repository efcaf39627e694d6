/**
 * The service key echoed in a 16- or 32-bit encoding (issue 10's echo classes): a binary body is
 * searched for the key in UTF-16 and UTF-32 as well as UTF-8, and a text body in UTF-32 (which
 * TextDecoder does not know) is decoded as such, so the key is withheld or redacted rather than
 * reaching the agent with a NUL between its characters.
 */
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';

const KEY = 'sk-live-9f8e7d6c5b4a3210zyxw';

let gw: Gateway;
let agent: Awaited<ReturnType<Gateway['p']['activeAgent']>>;
beforeAll(async () => {
  gw = await startGateway({
    api: ['    retries: 0', '    credentials:', `      apiKeyHeader: ${JSON.stringify(KEY)}`].join('\n'),
  });
  agent = await gw.p.activeAgent(['get_item', 'get_file']);
});
afterAll(() => gw.close());
beforeEach(() => gw.upstream.reset());

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: Buffer): void {
  res.writeHead(status, { 'content-length': String(body.length), ...headers });
  res.end(body);
}

function utf32le(text: string): Buffer {
  const out = Buffer.alloc(text.length * 4);
  for (let i = 0; i < text.length; i++) out.writeUInt32LE(text.charCodeAt(i), i * 4);
  return out;
}

/** What an agent recovers from a reply by decoding any base64 it got and dropping NULs. */
function recovered(reply: { text: string; body: { data?: { base64?: unknown } } | undefined }): string {
  const b64 = reply.body?.data?.base64;
  const raw = typeof b64 === 'string' ? Buffer.from(b64, 'base64').toString('latin1') : reply.text;
  return raw.split(String.fromCharCode(0)).join('').split('\\u0000').join('');
}

describe('a key echoed in UTF-16 / UTF-32', () => {
  it('a binary (application/octet-stream) body holding the key in UTF-16LE is withheld', async () => {
    gw.upstream.on('GET /v1/files/dump', (req, res) =>
      send(
        res,
        200,
        { 'content-type': 'application/octet-stream' },
        Buffer.from(`{"x-api-key":"${String(req.headers['x-api-key'])}"}`, 'utf16le'),
      ),
    );
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_file', { name: 'dump' });
    expect(gw.upstream.requests[0]?.headers['x-api-key']).toBe(KEY);
    expect(recovered(reply)).not.toContain(KEY);
  });

  it('a 4xx error body in text/plain; charset=utf-32 echoing the key is redacted', async () => {
    gw.upstream.on('GET /v1/items/i1', (req, res) =>
      send(
        res,
        400,
        { 'content-type': 'text/plain; charset=utf-32' },
        utf32le(`bad key ${String(req.headers['x-api-key'])}`),
      ),
    );
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'i1' });
    expect(reply.status).toBe(400);
    expect(recovered(reply)).not.toContain(KEY);
  });
});

/**
 * Every way an agent could read a reply's text back as bytes: as it is, its UTF-16 units in
 * either byte order, with NULs dropped.
 */
function readings(reply: { text: string }): string[] {
  const body = JSON.parse(reply.text) as { data?: unknown; upstream_body?: unknown };
  const text = JSON.stringify(body.data ?? body.upstream_body ?? null);
  const units = Buffer.from(text, 'utf16le');
  return [text, units.toString('latin1'), Buffer.from(units).swap16().toString('latin1')].map((t) =>
    t.split(String.fromCharCode(0)).join('').split('\\u0000').join(''),
  );
}

describe('a key in bytes whose declared charset does not match them', () => {
  const cases: [string, number, string, (key: string) => Buffer][] = [
    [
      'ASCII declared UTF-16LE (reads as CJK)',
      400,
      'text/plain; charset=utf-16le',
      (k) => Buffer.from(`bad key ${k}!`),
    ],
    [
      'ASCII declared UTF-16BE (reads as CJK)',
      200,
      'text/plain; charset=utf-16be',
      (k) => Buffer.from(`echo ${k}.`),
    ],
    [
      'UTF-16LE in an octet-stream error body',
      401,
      'application/octet-stream',
      (k) => Buffer.from(`key=${k}`, 'utf16le'),
    ],
    [
      'UTF-16LE declared text/plain, no charset',
      200,
      'text/plain',
      (k) => Buffer.from(`key=${k}`, 'utf16le'),
    ],
  ];
  for (const [what, status, type, body] of cases) {
    it(`${what}, answered ${status}: withheld`, async () => {
      gw.upstream.on('GET /v1/items/mis', (req, res) =>
        send(res, status, { 'content-type': type }, body(String(req.headers['x-api-key']))),
      );
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'mis' });
      expect(gw.upstream.requests[0]?.headers['x-api-key']).toBe(KEY);
      for (const reading of readings(reply)) expect(reading).not.toContain(KEY);
      if (status === 200) expect(reply.body).toMatchObject({ error: 'upstream_error', upstream_status: 200 });
      else
        expect(reply.body).toMatchObject({
          upstream_status: status,
          upstream_body: null,
          upstream_body_withheld: true,
        });
    });
  }

  it('UTF-16LE declared as such is read and redacted, not withheld', async () => {
    gw.upstream.on('GET /v1/items/wide', (req, res) =>
      send(
        res,
        400,
        { 'content-type': 'text/plain; charset=utf-16le' },
        Buffer.from(`bad key ${String(req.headers['x-api-key'])}`, 'utf16le'),
      ),
    );
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'wide' });
    expect(reply.body.upstream_body).toBe('bad key [redacted]');
  });

  it('a UTF-16 error body cut at the read cap through the key shows none of the key', async () => {
    // 20 KiB of bytes read are 10 KiB of characters: all within the 16 KiB echoed, so the cut
    // is not hidden by the echo's own cap, and the key's first part ended the text.
    gw.upstream.on('GET /v1/items/cut', (req, res) => {
      const text = 'A'.repeat(10240 - 20) + String(req.headers['x-api-key']) + 'B'.repeat(20000);
      send(res, 400, { 'content-type': 'text/plain; charset=utf-16le' }, Buffer.from(text, 'utf16le'));
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'cut' });
    expect(reply.status).toBe(400);
    const shown = String(reply.body.upstream_body);
    expect(shown.startsWith('AAAA')).toBe(true);
    for (let n = 4; n <= KEY.length; n++) expect(shown.endsWith(KEY.slice(0, n))).toBe(false);
  });
});
