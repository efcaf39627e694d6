/**
 * Secrets never reach the agent in any form an upstream may echo them in (issue 4: "never appear
 * in … responses"): percent- and form-encoded (a query credential travels so, and a URL echoed in
 * a body shows it), JSON-escaped (a header repeated inside a JSON string, with PHP's `\/` and
 * Python's `\uXXXX` spellings), and inside relayed event streams (§5.11), ids included.
 */
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';

// Characters that every encoding treats differently: space, '/', '+', '&', '=', '"', '\', 'é'.
const QUERY_KEY = 'query key/with+plus&amp=1234';
const HEADER_KEY = 'hdr-key/9876"quoted"\\back-é';
const STATIC = 'static/secret-value+4321';

const FORMS = (secret: string): string[] => [
  secret,
  encodeURIComponent(secret),
  new URLSearchParams({ s: secret }).toString().slice(2),
  JSON.stringify(secret).slice(1, -1),
  JSON.stringify(secret).slice(1, -1).replaceAll('/', '\\/'),
  JSON.stringify(JSON.stringify(secret).slice(1, -1)).slice(1, -1),
];

function expectNoSecretForm(text: string, where: string): void {
  for (const secret of [QUERY_KEY, HEADER_KEY, STATIC]) {
    for (const form of FORMS(secret)) expect(text, `${where} contains ${form}`).not.toContain(form);
  }
}

describe('secrets are redacted in every form an upstream may echo them in', () => {
  let gw: Gateway;
  let agent: Awaited<ReturnType<Gateway['p']['activeAgent']>>;
  beforeAll(async () => {
    gw = await startGateway({
      api: [
        '    retries: 0',
        '    credentials:',
        `      apiKeyHeader: ${JSON.stringify(HEADER_KEY)}`,
        `      apiKeyQuery: ${JSON.stringify(QUERY_KEY)}`,
        '    headers:',
        `      X-Static: ${JSON.stringify(STATIC)}`,
      ].join('\n'),
    });
    agent = await gw.p.activeAgent(['search_by_key', 'get_item', 'stream_events']);
  });
  afterAll(() => gw.close());
  beforeEach(() => gw.upstream.reset());

  it('a query credential is sent percent-encoded and redacted when the upstream echoes its URL', async () => {
    gw.upstream.on('GET /v1/search', (req, res) => {
      res.writeHead(422, { 'content-type': 'text/plain' });
      res.end(`bad request to ${req.url} (form: ${new URLSearchParams({ k: QUERY_KEY }).toString()})`);
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'search_by_key', { term: 'q' });
    expect(reply.status).toBe(422);
    // The upstream really received the secret (decoded), so its absence below means something.
    expect(gw.upstream.received('/v1/search')[0]?.query.get('api_key')).toBe(QUERY_KEY);
    expect(reply.body.upstream_body).toBe(
      'bad request to /v1/search?term=q&api_key=[redacted] (form: k=[redacted])',
    );
    expectNoSecretForm(JSON.stringify(reply.body), 'error reply');
  });

  it('headers repeated inside JSON (standard, PHP and Python escaping) are redacted in data', async () => {
    gw.upstream.on('GET /v1/items/echo', (req, res) => {
      const phpStyle = JSON.stringify({ key: req.headers['x-api-key'] }).replaceAll('/', '\\/');
      const pythonStyle = JSON.stringify({ key: req.headers['x-api-key'] }).replace(
        /[^\x20-\x7e]/g,
        (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
      );
      res.writeHead(200, { 'content-type': 'application/json' });
      // Each spelling as the upstream's own encoder would write it, plus JSON nested in a string.
      res.end(
        `{"headers":${JSON.stringify(req.headers)},"php":${phpStyle},"python":${pythonStyle},` +
          `"static_php":"${STATIC.replaceAll('/', '\\/')}",` +
          `"nested":${JSON.stringify(JSON.stringify(req.headers))}}`,
      );
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'echo' });
    expect(reply.status).toBe(200);
    const data = reply.body.data as Record<string, unknown> & { headers: Record<string, string> };
    expect(data.headers['x-api-key']).toBe('[redacted]');
    expect(data.headers['x-static']).toBe('[redacted]');
    expect(data.static_php).toBe('[redacted]');
    expect(data.php).toEqual({ key: '[redacted]' });
    expect(data.python).toEqual({ key: '[redacted]' });
    expect(JSON.parse(data.nested as string)).toMatchObject({ 'x-api-key': '[redacted]' });
    expect(gw.upstream.received('/v1/items/echo')[0]?.headers['x-api-key']).toBe(HEADER_KEY);
    expectNoSecretForm(JSON.stringify(reply.body), 'data reply');
  });

  it('relayed event streams are redacted too: data, error, id and the final done', async () => {
    gw.upstream.on('GET /v1/events', (req, res: ServerResponse) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`id: ${STATIC}\ndata: you sent ${String(req.headers['x-static'])}\n\n`);
      res.write(
        `event: error\ndata: ${JSON.stringify({ error: 'oops', key: req.headers['x-api-key'] })}\n\n`,
      );
      res.end(`event: done\ndata: ${encodeURIComponent(QUERY_KEY)}\n\n`);
    });
    const token = await gw.p.agentToken(agent.agent, agent.agentId, {}, gw.p.executeLocation);
    const res = await fetch(`${gw.p.proxy.url}/capability/execute`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ capability: 'stream_events', arguments: {} }),
    });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toContain('event: data\nid: [redacted]\ndata: you sent [redacted]\n');
    expect(text).toContain('"key":"[redacted]"');
    expect(text).toContain('event: done\ndata: [redacted]');
    expectNoSecretForm(text, 'event stream');
  });
});

describe('text in another charset is decoded before it is redacted', () => {
  it('an ISO-8859-1 answer reaches the agent as the right characters, its echoed key redacted', async () => {
    const gw = await startGateway({ api: `    credentials:\n      apiKeyHeader: ${JSON.stringify(STATIC)}` });
    try {
      gw.upstream.on('GET /v1/items/latin', (req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain; charset=ISO-8859-1' });
        res.end(Buffer.from(`Café für ${String(req.headers['x-api-key'])}`, 'latin1'));
      });
      const { agent, agentId } = await gw.p.activeAgent(['get_item']);
      const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'latin' });
      expect(reply.status).toBe(200);
      expect(reply.body).toEqual({ data: 'Café für [redacted]' });
    } finally {
      await gw.close();
    }
  });
});
