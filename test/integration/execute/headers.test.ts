/**
 * What the proxy sends upstream besides the arguments (issue 4, §5.11): the operator's static
 * headers (config `headers`, CLI `--upstream-header`), a request id, a W3C traceparent (the agent's
 * trace id under the proxy's span id, or a new trace),
 * optional identity headers, and pinned arguments; and what it never sends: anything from the
 * agent's own request (its JWT, cookies, DPoP proof, forwarding and custom headers, hop-by-hop
 * headers per RFC 9110 §7.6.1).
 */
import { request as httpRequest } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { resolveSettings } from '../../../src/config/settings.js';
import { GATEWAY_SPEC, startGateway, type Gateway } from '../../helpers/gateway.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { ROOT, writeTempSpec } from '../../helpers/proxy.js';
import { json, TestUpstream, type RecordedRequest } from '../../helpers/upstream.js';

const HEADER_SECRET = 'static-header-secret-0123456789';
const CLI_KEY = 'cli-static-api-key-abcdefghij';
const TRACEPARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type Agent = Awaited<ReturnType<TestProtocol['activeAgent']>>;

/** POST /capability/execute over a raw socket, so any header (e.g. `Connection: X-Foo`) can be sent. */
function rawExecute(
  p: TestProtocol,
  token: string,
  body: unknown,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: any }> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${p.proxy.url}/capability/execute`,
      {
        method: 'POST',
        headers: {
          ...headers,
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': String(Buffer.byteLength(payload)),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: text ? JSON.parse(text) : undefined,
          });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe('static headers from the config (`headers`)', () => {
  let gw: Gateway;
  let agent: Agent;
  beforeAll(async () => {
    gw = await startGateway({
      api: [
        '    credentials:',
        '      apiKeyHeader: service-api-key-0123456789',
        '    headers:',
        '      X-Tenant: acme',
        '      X-Secret: {env: GW_HEADER_SECRET}',
        '      X-Trace-Tag: operator-tag',
      ].join('\n'),
      env: { GW_HEADER_SECRET: HEADER_SECRET },
    });
    agent = await gw.p.activeAgent(['get_item', 'ping', 'list_items']);
  });
  afterAll(() => gw.close());
  afterEach(() => {
    gw.upstream.requests.length = 0;
  });

  it('are sent with every request of the API, secured or not', async () => {
    expect((await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'a' })).status).toBe(200);
    expect((await gw.p.execute(agent.agent, agent.agentId, 'ping')).status).toBe(200);
    expect(gw.upstream.requests).toHaveLength(2);
    for (const r of gw.upstream.requests) {
      expect(r.headers['x-tenant']).toBe('acme');
      expect(r.headers['x-secret']).toBe(HEADER_SECRET);
    }
    expect(gw.upstream.requests[0]?.headers['x-api-key']).toBe('service-api-key-0123456789');
  });

  it('an agent header parameter cannot override a static header: it is no input (400), the static value is sent', async () => {
    const refused = await gw.p.execute(agent.agent, agent.agentId, 'list_items', {
      'X-Trace-Tag': 'agent-tag',
    });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toBe('invalid_request');
    expect(gw.upstream.requests).toHaveLength(0);
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'list_items', { q: 'x' });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/items');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers['x-trace-tag']).toBe('operator-tag');
  });

  it('a static header value echoed in an error body is scrubbed', async () => {
    gw.upstream.on('GET /v1/items/echo', (req, res) => json(res, 400, { secret: req.headers['x-secret'] }));
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'echo' });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('upstream_error');
    expect(reply.body.upstream_body).toEqual({ secret: '[redacted]' });
  });

  it('a static header with CR/LF stops start-up', async () => {
    const started = startGateway({
      api: '    headers:\n      X-Secret: {env: GW_BAD_HEADER}',
      env: { GW_BAD_HEADER: 'ok\r\nX-Injected: yes' },
    });
    await expect(started).rejects.toThrow(
      /apis\[0\]\.headers\.X-Secret: the value contains control characters/,
    );
  });

  it('a static header with an invalid name is refused by the config schema', async () => {
    await expect(startGateway({ api: '    headers:\n      "Bad Header": x' })).rejects.toThrow(/headers/);
  });
});

describe('an agent argument cannot replace a credential header', () => {
  it('a header parameter named like the apiKey scheme is not an input (§5.2.1); supplying it is 400', async () => {
    const spec = writeTempSpec({
      openapi: '3.0.3',
      info: { title: 'Collide', version: '1' },
      security: [{ key: [] }],
      paths: {
        '/things': {
          get: {
            operationId: 'listThings',
            parameters: [
              { name: 'X-Api-Key', in: 'header', schema: { type: 'string' } },
              { name: 'q', in: 'query', schema: { type: 'string' } },
            ],
            responses: {
              '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } },
            },
          },
        },
      },
      components: { securitySchemes: { key: { type: 'apiKey', in: 'header', name: 'X-Api-Key' } } },
    });
    const upstream = await TestUpstream.start();
    const config = writeTempSpec(
      { apis: [{ spec, upstream: upstream.url, credentials: { key: 'service-key-collide-0123' } }] },
      'proxy.json',
    );
    const p = await startProtocol({ overrides: { config } });
    try {
      const { agent, agentId } = await p.activeAgent(['list_things']);
      const bad = await p.execute(agent, agentId, 'list_things', { 'X-Api-Key': 'agent-key' });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toBe('invalid_request');
      expect(upstream.requests).toHaveLength(0);
      const ok = await p.execute(agent, agentId, 'list_things', { q: 'x' });
      expect(ok.status).toBe(200);
      expect(upstream.requests).toHaveLength(1);
      expect(upstream.requests[0]?.headers['x-api-key']).toBe('service-key-collide-0123');
    } finally {
      await p.close();
      await upstream.close();
    }
  });
});

describe('CLI --upstream-header (settings `upstreamHeaders`)', () => {
  let upstream: TestUpstream;
  let p: TestProtocol;
  beforeAll(async () => {
    upstream = await TestUpstream.start();
    p = await startProtocol({
      overrides: {
        specs: [GATEWAY_SPEC],
        upstreams: [`${upstream.url}/v1`],
        upstreamHeaders: ['X-Tenant: acme', `X-Api-Key: ${CLI_KEY}`],
      },
    });
  });
  afterAll(async () => {
    await p.close();
    await upstream.close();
  });

  it('static headers given on the command line reach the upstream', async () => {
    const { agent, agentId } = await p.activeAgent(['get_item', 'ping']);
    expect((await p.execute(agent, agentId, 'get_item', { itemId: 'c1' })).status).toBe(200);
    expect((await p.execute(agent, agentId, 'ping')).status).toBe(200);
    expect(upstream.requests).toHaveLength(2);
    for (const r of upstream.requests) {
      expect(r.headers['x-tenant']).toBe('acme');
      expect(r.headers['x-api-key']).toBe(CLI_KEY);
    }
  });

  it('and are scrubbed from error bodies like configured secrets', async () => {
    upstream.on('GET /v1/items/echo', (req, res) => json(res, 401, { key: req.headers['x-api-key'] }));
    const { agent, agentId } = await p.activeAgent(['get_item']);
    const reply = await p.execute(agent, agentId, 'get_item', { itemId: 'echo' });
    expect(reply.status).toBe(401);
    expect(reply.body.upstream_body).toEqual({ key: '[redacted]' });
  });

  it('a malformed or CR/LF header flag is refused', () => {
    const settings = (upstreamHeaders: string[]): unknown =>
      resolveSettings({ specs: [GATEWAY_SPEC], upstreamHeaders, db: ':memory:' }, ROOT, {});
    expect(() => settings(['X-Ok: fine\r\nX-Injected: yes'])).toThrow(/control characters/);
    expect(() => settings(['no colon here'])).toThrow(/--upstream-header: expected "Name: value"/);
    expect(() => settings(['Bad Name: x'])).toThrow(/--upstream-header/);
    expect(() => resolveSettings({ upstreamHeaders: ['X-A: b'], config: undefined }, ROOT, {})).toThrow(
      /--upstream-header and --upstream-timeout apply to --spec APIs/,
    );
  });
});

describe('nothing from the agent request reaches the upstream (RFC 9110 §7.6.1)', () => {
  let gw: Gateway;
  let agent: Agent;
  beforeAll(async () => {
    gw = await startGateway({ api: '    credentials:\n      apiKeyHeader: service-api-key-0123456789' });
    agent = await gw.p.activeAgent(['ping', 'get_item', 'create_item']);
  });
  afterAll(() => gw.close());
  afterEach(() => {
    gw.upstream.requests.length = 0;
  });

  const AGENT_HEADERS = {
    cookie: 'agent_session=agent-cookie-value',
    dpop: 'eyJhbGciOiJFUzI1NiJ9.agent-dpop-proof.sig',
    'x-forwarded-for': '203.0.113.7',
    'x-forwarded-host': 'agent.example',
    forwarded: 'for=203.0.113.7',
    'x-real-ip': '203.0.113.7',
    'proxy-authorization': 'Basic YWdlbnQ6cHJveHk=',
    'x-custom': 'agent-custom-value',
    'x-api-key': 'agent-supplied-api-key',
    connection: 'X-Foo, keep-alive',
    'x-foo': 'hop-by-hop-value',
    te: 'trailers',
    'x-request-id': 'agent-chosen-request-id',
  };

  it('not its Authorization (the agent JWT), Cookie, DPoP, forwarding, custom or hop-by-hop headers', async () => {
    const tokens: string[] = [];
    for (const [capability, args] of [
      ['ping', {}],
      ['get_item', { itemId: 'h1' }],
      ['create_item', { name: 'n', price: 1 }],
    ] as const) {
      const token = await gw.p.agentToken(agent.agent, agent.agentId, {}, gw.p.executeLocation);
      tokens.push(token);
      const reply = await rawExecute(gw.p, token, { capability, arguments: args }, AGENT_HEADERS);
      expect(reply.status, capability).toBe(200);
    }
    expect(gw.upstream.requests).toHaveLength(3);
    const [ping, item, created] = gw.upstream.requests as [RecordedRequest, RecordedRequest, RecordedRequest];
    // ping has no security: exactly the proxy's own headers, nothing else.
    expect(Object.keys(ping.headers).sort()).toEqual([
      'accept',
      'connection',
      'host',
      'traceparent',
      'x-request-id',
    ]);
    expect(ping.headers.connection).toBe('keep-alive');
    expect(ping.headers.host).toBe(new URL(gw.upstream.url).host);
    expect(Object.keys(item.headers).sort()).toEqual([
      'accept',
      'connection',
      'host',
      'traceparent',
      'x-api-key',
      'x-request-id',
    ]);
    expect(item.headers['x-api-key']).toBe('service-api-key-0123456789');
    expect(Object.keys(created.headers).sort()).toEqual([
      'accept',
      'connection',
      'content-length',
      'content-type',
      'host',
      'traceparent',
      'x-request-id',
    ]);
    for (const r of gw.upstream.requests) {
      expect(r.headers.authorization).toBeUndefined();
      expect(r.headers['x-request-id']).not.toBe('agent-chosen-request-id');
      const all = JSON.stringify(r.headers) + r.url + r.body.toString('utf8');
      for (const token of tokens) expect(all).not.toContain(token);
      for (const value of Object.values(AGENT_HEADERS)) {
        if (value !== 'trailers' && value !== 'X-Foo, keep-alive') expect(all).not.toContain(value);
      }
    }
  });

  it('upstream response headers (Set-Cookie, internal ones) are not relayed to the agent', async () => {
    gw.upstream.on('GET /v1/public/ping', (_req, res) => {
      json(
        res,
        200,
        { ok: true },
        { 'set-cookie': 'upstream_session=abc', 'x-internal-host': 'db-7.internal' },
      );
    });
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'ping');
    expect(reply.status).toBe(200);
    expect(reply.headers.get('set-cookie')).toBeNull();
    expect(reply.headers.get('x-internal-host')).toBeNull();
  });

  it('x-request-id: one id per execution, sent upstream, returned to the agent and in the activity record', async () => {
    const first = await gw.p.execute(agent.agent, agent.agentId, 'ping');
    const second = await gw.p.execute(agent.agent, agent.agentId, 'ping');
    const ids = gw.upstream.requests.map((r) => r.headers['x-request-id']);
    expect(ids).toHaveLength(2);
    expect(first.headers.get('x-request-id')).toMatch(UUID);
    expect(ids[0]).toBe(first.headers.get('x-request-id'));
    expect(ids[1]).toBe(second.headers.get('x-request-id'));
    expect(ids[0]).not.toBe(ids[1]);
    await gw.p.proxy.flushActivity();
    const activity = await gw.p.admin('GET', `/admin/activity?agent_id=${agent.agentId}&capability=ping`);
    const recorded = activity.body.activity.map(
      (a: { detail?: { request_id?: string } }) => a.detail?.request_id,
    );
    expect(recorded).toContain(ids[0]);
    expect(recorded).toContain(ids[1]);
  });

  it('the request id also reaches the upstream and the agent when the upstream fails', async () => {
    gw.upstream.on('GET /v1/items/bad', (_req, res) => json(res, 404, { error: 'nope' }));
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'bad' });
    expect(reply.status).toBe(404);
    expect(reply.body.error).toBe('upstream_error');
    expect(gw.upstream.requests[0]?.headers['x-request-id']).toBe(reply.headers.get('x-request-id'));
  });

  it('a valid W3C traceparent goes on with its trace id and flags under a new span id', async () => {
    const reply = await gw.p.execute(
      agent.agent,
      agent.agentId,
      'ping',
      {},
      { headers: { traceparent: TRACEPARENT } },
    );
    expect(reply.status).toBe(200);
    const sent = String(gw.upstream.requests[0]?.headers.traceparent);
    const [version, traceId, spanId, flags] = sent.split('-');
    expect(version).toBe('00');
    expect(traceId).toBe('0af7651916cd43dd8448eb211c80319c');
    expect(spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(spanId).not.toBe('b7ad6b7169203331');
    expect(flags).toBe('01');
  });

  it('an invalid traceparent is not passed on: the upstream gets a new trace', async () => {
    const invalid = [
      'garbage',
      '00-0AF7651916CD43DD8448EB211C80319C-B7AD6B7169203331-01', // upper case
      'ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', // forbidden version
      '00-00000000000000000000000000000000-b7ad6b7169203331-01', // zero trace id
      `${TRACEPARENT}\tX-Injected: yes`,
    ];
    for (const traceparent of invalid) {
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'ping', {}, { headers: { traceparent } });
      expect(reply.status, traceparent).toBe(200);
    }
    expect(gw.upstream.requests).toHaveLength(invalid.length);
    const traceIds = new Set<string>();
    for (const r of gw.upstream.requests) {
      const sent = String(r.headers.traceparent);
      expect(sent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
      expect(sent).not.toContain('0af7651916cd43dd8448eb211c80319c');
      traceIds.add(sent.slice(3, 35));
    }
    expect(traceIds.size).toBe(invalid.length);
  });

  it('no identity headers unless the operator enables them', async () => {
    await gw.p.execute(agent.agent, agent.agentId, 'ping');
    const h = gw.upstream.requests[0]?.headers ?? {};
    expect(h['x-agent-id']).toBeUndefined();
    expect(h['x-agent-host-id']).toBeUndefined();
    expect(h['x-agent-user-id']).toBeUndefined();
  });
});

describe('identity headers (`identity_headers`)', () => {
  it('true: X-Agent-Id, X-Agent-Host-Id and X-Agent-User-Id name who acts', async () => {
    const gw = await startGateway({ api: '    identity_headers: true' });
    try {
      const { agent, agentId, hostId } = await gw.p.activeAgent(['ping'], { userId: 'alice' });
      expect((await gw.p.execute(agent, agentId, 'ping')).status).toBe(200);
      const h = gw.upstream.requests[0]?.headers ?? {};
      expect(h['x-agent-id']).toBe(agentId);
      expect(h['x-agent-host-id']).toBe(hostId);
      expect(h['x-agent-user-id']).toBe('alice');
    } finally {
      await gw.close();
    }
  });

  it('custom names, only those configured; an agent header parameter cannot spoof them', async () => {
    const gw = await startGateway({ api: '    identity_headers: {agent: X-Trace-Tag, user: X-Acting-User}' });
    try {
      const { agent, agentId } = await gw.p.activeAgent(['list_items'], { userId: 'bob' });
      const spoofed = await gw.p.execute(agent, agentId, 'list_items', { 'X-Trace-Tag': 'spoofed-agent' });
      expect(spoofed.status).toBe(400);
      expect(gw.upstream.requests).toHaveLength(0);
      const reply = await gw.p.execute(agent, agentId, 'list_items', { q: 'x' });
      expect(reply.status).toBe(200);
      const h = gw.upstream.requests[0]?.headers ?? {};
      expect(h['x-trace-tag']).toBe(agentId);
      expect(h['x-acting-user']).toBe('bob');
      expect(h['x-agent-id']).toBeUndefined();
      expect(h['x-agent-host-id']).toBeUndefined();
      expect(h['x-agent-user-id']).toBeUndefined();
    } finally {
      await gw.close();
    }
  });
});

describe('pinned parameters (`operations.{name}.pin`)', () => {
  let gw: Gateway;
  let agent: Agent;
  beforeAll(async () => {
    gw = await startGateway({
      api: [
        '    operations:',
        '      search_by_key:',
        '        pin:',
        '          owner: {from: user_id}',
        '      list_items:',
        '        pin:',
        '          q: pinned-query',
      ].join('\n'),
    });
    agent = await gw.p.activeAgent(['search_by_key', 'list_items'], { userId: 'carol' });
  });
  afterAll(() => gw.close());
  afterEach(() => {
    gw.upstream.requests.length = 0;
  });

  it('are removed from the advertised input schema (§5.2.1)', async () => {
    // A fresh agent JWT per request (a replayed jti is refused, §4.5).
    const token = (): Promise<string> => gw.p.agentToken(agent.agent, agent.agentId);
    const search = await gw.p.request('GET', '/capability/describe?name=search_by_key', {
      token: await token(),
    });
    expect(search.status).toBe(200);
    expect(Object.keys(search.body.input.properties)).toEqual(['term']);
    expect(search.body.input.required).toEqual(['term']);
    const list = await gw.p.request('GET', '/capability/describe?name=list_items', { token: await token() });
    expect(list.status).toBe(200);
    expect(list.body.input.properties.q).toBeUndefined();
    expect(list.body.input.properties.tags).toBeDefined();
  });

  it("the grant's user id is always sent for a {from: user_id} pin", async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'search_by_key', { term: 'books' });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/search');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.query.get('owner')).toBe('carol');
    expect(seen[0]?.query.get('term')).toBe('books');
  });

  it('a fixed value is always sent', async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'list_items', {});
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/items');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.query.getAll('q')).toEqual(['pinned-query']);
  });

  it('an agent supplying a pinned argument gets 400 invalid_request and the upstream nothing', async () => {
    const owner = await gw.p.execute(agent.agent, agent.agentId, 'search_by_key', {
      term: 'b',
      owner: 'mallory',
    });
    expect(owner.status).toBe(400);
    expect(owner.body.error).toBe('invalid_request');
    const q = await gw.p.execute(agent.agent, agent.agentId, 'list_items', { q: 'mine' });
    expect(q.status).toBe(400);
    expect(q.body.error).toBe('invalid_request');
    expect(gw.upstream.requests).toHaveLength(0);
  });

  it('`operations` naming an unknown capability stops start-up', async () => {
    await expect(
      startGateway({ api: '    operations:\n      no_such_capability:\n        pin:\n          owner: x' }),
    ).rejects.toThrow(/no_such_capability/);
    await expect(
      startGateway({ api: '    operations:\n      no_such_capability:\n        timeout: 5s' }),
    ).rejects.toThrow(/operations\.no_such_capability names no capability of this API/);
  });

  it('a pin naming an argument the capability does not have stops start-up', async () => {
    await expect(
      startGateway({ api: '    operations:\n      search_by_key:\n        pin:\n          nobody: x' }),
    ).rejects.toThrow(/capability search_by_key has no input argument nobody to pin/);
  });
});
