/**
 * Parameters placed exactly as the operation declares (issue 4, §5.11 execution): query styles
 * per OpenAPI `style`/`explode` (form, spaceDelimited, pipeDelimited, deepObject), header and
 * cookie parameters, and path parameters percent-encoded so that no value can change which path
 * is called. Every test asserts on the raw request target and headers the recording upstream
 * received, or that it received nothing.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { writeTempSpec } from '../../helpers/proxy.js';
import { TestUpstream, type RecordedRequest } from '../../helpers/upstream.js';

const SERVICE_KEY = 'svc-params-header-key-0123456789';
const SERVICE_QUERY_KEY = 'svc-params-query-key-abcdef0123';

type Agent = Awaited<ReturnType<TestProtocol['activeAgent']>>;

let gw: Gateway;
let agent: Agent;
beforeAll(async () => {
  gw = await startGateway({
    api: [
      '    credentials:',
      `      apiKeyHeader: ${SERVICE_KEY}`,
      `      apiKeyQuery: ${SERVICE_QUERY_KEY}`,
    ].join('\n'),
  });
  agent = await gw.p.activeAgent(['list_items', 'get_item', 'search_by_key']);
});
afterAll(() => gw.close());
afterEach(() => {
  gw.upstream.requests.length = 0;
});

const exec = (capability: string, args: Record<string, unknown>) =>
  gw.p.execute(agent.agent, agent.agentId, capability, args);

/** The one request the upstream received (fails the test if there were none or several). */
function only(): RecordedRequest {
  expect(gw.upstream.requests).toHaveLength(1);
  return gw.upstream.requests[0] as RecordedRequest;
}

describe('query parameter styles (OpenAPI style/explode, §5.11)', () => {
  it('form, explode (the default for arrays): tags → tags=a&tags=b', async () => {
    const reply = await exec('list_items', { tags: ['a', 'b'] });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.method).toBe('GET');
    expect(r.url).toBe('/v1/items?tags=a&tags=b');
    expect(r.query.getAll('tags')).toEqual(['a', 'b']);
  });

  it('form, explode: false: ids → ids=1,2,3 (one parameter, comma-separated)', async () => {
    const reply = await exec('list_items', { ids: [1, 2, 3] });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items?ids=1,2,3');
    expect(r.query.getAll('ids')).toEqual(['1,2,3']);
  });

  it('spaceDelimited: sort → sort=name%20-price', async () => {
    const reply = await exec('list_items', { sort: ['name', '-price'] });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items?sort=name%20-price');
    expect(r.query.get('sort')).toBe('name -price');
  });

  it('pipeDelimited: fields → fields=id%7Cname%7Cprice', async () => {
    const reply = await exec('list_items', { fields: ['id', 'name', 'price'] });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items?fields=id%7Cname%7Cprice');
    expect(r.query.get('fields')).toBe('id|name|price');
  });

  it('deepObject: filter → filter[color]=red&filter[size]=L (brackets percent-encoded)', async () => {
    const reply = await exec('list_items', { filter: { color: 'red', size: 'L' } });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items?filter%5Bcolor%5D=red&filter%5Bsize%5D=L');
    expect(r.query.get('filter[color]')).toBe('red');
    expect(r.query.get('filter[size]')).toBe('L');
    expect([...r.query.keys()]).toEqual(['filter[color]', 'filter[size]']);
  });

  it('values are percent-encoded, so delimiters inside a value stay data', async () => {
    const reply = await exec('list_items', {
      tags: ['a,b', 'c d'],
      ids: [7],
      sort: ['x y'],
      fields: ['p|q'],
      filter: { color: 'dark]red[' },
    });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe(
      '/v1/items?tags=a%2Cb&tags=c%20d&ids=7&sort=x%20y&fields=p%7Cq&filter%5Bcolor%5D=dark%5Dred%5B',
    );
    expect(r.query.getAll('tags')).toEqual(['a,b', 'c d']);
    expect(r.query.get('fields')).toBe('p|q');
    expect(r.query.get('filter[color]')).toBe('dark]red[');
  });

  it('every style in one call, in the order the operation declares them; absent ones are left out', async () => {
    const reply = await exec('list_items', {
      filter: { color: 'blue' },
      q: 'lamp',
      fields: ['a', 'b'],
      ids: [1, 2],
      tags: ['t'],
    });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items?q=lamp&tags=t&ids=1,2&fields=a%7Cb&filter%5Bcolor%5D=blue');
    expect(r.query.has('sort')).toBe(false);
    expect(r.headers['x-trace-tag']).toBeUndefined();
    expect(r.headers.cookie).toBeUndefined();
  });

  it('no arguments: no query string at all', async () => {
    const reply = await exec('list_items', {});
    expect(reply.status).toBe(200);
    expect(only().url).toBe('/v1/items');
  });
});

describe('header and cookie parameters (§5.11)', () => {
  it('header parameter X-Trace-Tag is sent as a header, not in the query', async () => {
    const reply = await exec('list_items', { 'X-Trace-Tag': 'run-42' });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items');
    expect(r.headers['x-trace-tag']).toBe('run-42');
    // The service's credential is still there, and it is the only credential.
    expect(r.headers['x-api-key']).toBe(SERVICE_KEY);
  });

  it('cookie parameter pref is sent in the Cookie header', async () => {
    const reply = await exec('list_items', { pref: 'dark' });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items');
    expect(r.headers.cookie).toBe('pref=dark');
  });

  it('a cookie value cannot end the cookie or add another one: `;`, `=` and spaces are encoded', async () => {
    const reply = await exec('list_items', { pref: 'x; session=evil' });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.headers.cookie).toBe('pref=x%3B%20session%3Devil');
    expect(r.headers.cookie?.split(';')).toHaveLength(1);
  });

  it.each([
    ['CR LF', 'tag\r\nX-Injected: yes'],
    ['a bare LF', 'tag\nX-Injected: yes'],
    ['a bare CR', 'tag\rX-Injected: yes'],
    ['NUL', 'tag\u0000x'],
    ['a character outside Latin-1', 'tag-\u20ac'],
  ])('header injection: X-Trace-Tag with %s → 400 invalid_request, nothing sent', async (_label, value) => {
    const reply = await exec('list_items', { 'X-Trace-Tag': value });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(JSON.stringify(reply.body)).toContain('X-Trace-Tag');
    expect(gw.upstream.requests).toHaveLength(0);
  });
});

describe('query injection stays one parameter (§5.11)', () => {
  it("q: 'a&admin=true' is one q value; no admin parameter appears", async () => {
    const reply = await exec('list_items', { q: 'a&admin=true' });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items?q=a%26admin%3Dtrue');
    expect(r.query.has('admin')).toBe(false);
    expect([...r.query.entries()]).toEqual([['q', 'a&admin=true']]);
  });

  it("q: 'x#y' does not cut the request at a fragment", async () => {
    const reply = await exec('list_items', { q: 'x#y' });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items?q=x%23y');
    expect(r.query.get('q')).toBe('x#y');
  });

  it("q: '+%20?' keeps `+`, `%` and `?` as data", async () => {
    const reply = await exec('list_items', { q: 'a+b%20c?d' });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe('/v1/items?q=a%2Bb%2520c%3Fd');
    expect(r.query.get('q')).toBe('a+b%20c?d');
  });

  it("search_by_key: agent values naming api_key stay data; the one api_key is the service's", async () => {
    const reply = await exec('search_by_key', { term: 'books&api_key=agent-key', owner: 'api_key' });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.url).toBe(
      `/v1/search?term=books%26api_key%3Dagent-key&owner=api_key&api_key=${SERVICE_QUERY_KEY}`,
    );
    expect(r.query.getAll('api_key')).toEqual([SERVICE_QUERY_KEY]);
    expect(r.query.get('term')).toBe('books&api_key=agent-key');
  });
});

describe('path parameters cannot change which path is called (§5.11, RFC 3986 §5.2.4)', () => {
  /** Reached: exactly /v1/items/<one segment>, which decodes back to the value as given. */
  const reached: [string, string][] = [
    ['%2e%2e', '/v1/items/%252e%252e'],
    ['%2E%2E', '/v1/items/%252E%252E'],
    ['.%2e', '/v1/items/.%252e'],
    ['%2e', '/v1/items/%252e'],
    ['..%2fadmin', '/v1/items/..%252fadmin'],
    ['...', '/v1/items/...'],
    ['a/b', '/v1/items/a%2Fb'],
    ['x?y=1', '/v1/items/x%3Fy%3D1'],
    ['x#frag', '/v1/items/x%23frag'],
    ['\\', '/v1/items/%5C'],
    ['caf\u00e9/\u2603', '/v1/items/caf%C3%A9%2F%E2%98%83'],
    ['\uff0e\uff0e', '/v1/items/%EF%BC%8E%EF%BC%8E'],
    [' ..', '/v1/items/%20..'],
    ['a;b=c', '/v1/items/a%3Bb%3Dc'],
  ];

  it.each(reached)('%j reaches exactly one encoded segment under /v1/items/', async (value, target) => {
    const reply = await exec('get_item', { itemId: value });
    expect(reply.status).toBe(200);
    const r = only();
    expect(r.method).toBe('GET');
    expect(r.url).toBe(target);
    expect(r.path.startsWith('/v1/items/')).toBe(true);
    const segments = r.path.split('/').slice(1);
    expect(segments).toHaveLength(3);
    const last = segments[2] as string;
    // No dot segment, raw or percent-encoded, that a server could resolve.
    expect(last).not.toMatch(/^(?:\.|%2e){1,2}$/i);
    expect(decodeURIComponent(last)).toBe(value);
    // The URL the echoing upstream saw is the one the agent gets back.
    expect(reply.body.data.url).toBe(target);
  });

  const refused: [string, string][] = [
    ['..', 'the parent segment'],
    ['.', 'the current segment'],
    ['', 'an empty segment'],
    // One segment as sent (..%2Fadmin), but a step up for a server that decodes %2F first.
    ['../admin', 'a parent segment between encoded slashes'],
    ['..\\admin', 'a parent segment before an encoded backslash'],
    ['x/./y', 'a current segment between encoded slashes'],
  ];

  it.each(refused)('%j (%s) → 400 invalid_request and the upstream receives nothing', async (value) => {
    const reply = await exec('get_item', { itemId: value });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(JSON.stringify(reply.body)).toContain('itemId');
    expect(gw.upstream.requests).toHaveLength(0);
  });

  it('a lone UTF-16 surrogate cannot be encoded: 400 invalid_request, nothing sent', async () => {
    // JSON.stringify escapes it as \ud800, which the proxy parses back into a lone surrogate.
    const reply = await exec('get_item', { itemId: 'a\ud800b' });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
    expect(gw.upstream.requests).toHaveLength(0);
  });

  it('a non-string path argument is refused by the input schema (no coercion), nothing sent', async () => {
    for (const value of [['..', 'admin'], { p: '..' }, 7]) {
      const reply = await exec('get_item', { itemId: value });
      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('invalid_request');
    }
    expect(gw.upstream.requests).toHaveLength(0);
  });
});

describe('a parameter name the agent chooses cannot override a service credential (§5.11)', () => {
  const QUERY_KEY = 'svc-query-key-override-0123456789';
  const SESSION = 'svc-session-cookie-override-98765';
  let upstream: TestUpstream;
  let p: TestProtocol;
  let a: Agent;

  beforeAll(async () => {
    // An exploded form object in the query and in a cookie: its keys become parameter / cookie
    // names, so an agent can name them after the service's apiKey query parameter and cookie.
    const objectSchema = { type: 'object', additionalProperties: { type: 'string' } };
    const spec = writeTempSpec({
      openapi: '3.0.3',
      info: { title: 'Override', version: '1' },
      security: [{ apiKeyQuery: [], sessionCookie: [] }],
      paths: {
        '/lookup': {
          get: {
            operationId: 'lookup',
            parameters: [
              { name: 'opts', in: 'query', style: 'form', explode: true, schema: objectSchema },
              { name: 'prefs', in: 'cookie', style: 'form', explode: true, schema: objectSchema },
            ],
            responses: {
              '200': { description: 'ok', content: { 'application/json': { schema: { type: 'object' } } } },
            },
          },
        },
      },
      components: {
        securitySchemes: {
          apiKeyQuery: { type: 'apiKey', in: 'query', name: 'api_key' },
          sessionCookie: { type: 'apiKey', in: 'cookie', name: 'session' },
        },
      },
    });
    upstream = await TestUpstream.start();
    const config = writeTempSpec(
      {
        apis: [
          {
            spec,
            upstream: `${upstream.url}/v1`,
            credentials: { apiKeyQuery: QUERY_KEY, sessionCookie: SESSION },
          },
        ],
      },
      'proxy.json',
    );
    p = await startProtocol({
      policy: 'rate_limits:\n  unknown_host_registration: null\n',
      overrides: { config },
    });
    a = await p.activeAgent(['lookup']);
  });
  afterAll(async () => {
    await p.close();
    await upstream.close();
  });
  afterEach(() => {
    upstream.requests.length = 0;
  });

  const lookup = (args: Record<string, unknown>) => p.execute(a.agent, a.agentId, 'lookup', args);
  const one = (): RecordedRequest => {
    expect(upstream.requests).toHaveLength(1);
    return upstream.requests[0] as RecordedRequest;
  };

  it('without agent keys: the service key in the query and the session cookie', async () => {
    const reply = await lookup({ opts: { page: '2' }, prefs: { theme: 'dark' } });
    expect(reply.status).toBe(200);
    const r = one();
    expect(r.url).toBe(`/v1/lookup?page=2&api_key=${QUERY_KEY}`);
    expect(r.headers.cookie).toBe(`session=${SESSION}; theme=dark`);
  });

  it('opts: {api_key: …} is dropped: the upstream sees exactly one api_key, the service’s', async () => {
    const reply = await lookup({ opts: { api_key: 'agent-chosen-key', page: '1' } });
    expect(reply.status).toBe(200);
    const r = one();
    expect(r.query.getAll('api_key')).toEqual([QUERY_KEY]);
    expect(r.query.get('page')).toBe('1');
    expect(r.url).toBe(`/v1/lookup?page=1&api_key=${QUERY_KEY}`);
    expect(r.url).not.toContain('agent-chosen-key');
  });

  it('issue 10 class 12: every spelling a server may read as api_key (case, %-encoding once or twice, +, whitespace, brackets) is dropped', async () => {
    const spellings = [
      'API_KEY',
      'Api_Key',
      'api%5Fkey',
      'api%255Fkey',
      'api_key ',
      ' api_key',
      'api_key\t',
      'api_key[]',
      'api_key[0]',
    ];
    const reply = await lookup({
      opts: { ...Object.fromEntries(spellings.map((k) => [k, 'agent-key'])), page: '3' },
    });
    expect(reply.status).toBe(200);
    const r = one();
    expect(r.url).toBe(`/v1/lookup?page=3&api_key=${QUERY_KEY}`);
    expect(r.url).not.toContain('agent-key');
  });

  it('issue 10 class 12: cookie names that spell session another way (case, %-encoding, brackets) are dropped', async () => {
    const reply = await lookup({ prefs: { SESSION: 'a', 'session%20': 'b', 'Session[]': 'c', theme: 'x' } });
    expect(reply.status).toBe(200);
    const r = one();
    expect(r.headers.cookie).toBe(`session=${SESSION}; theme=x`);
  });

  it('a name that only resembles api_key (apikey, api_key2) is the agent’s own and passes', async () => {
    const reply = await lookup({ opts: { apikey: 'a', api_key2: 'b' } });
    expect(reply.status).toBe(200);
    expect(one().url).toBe(`/v1/lookup?apikey=a&api_key2=b&api_key=${QUERY_KEY}`);
  });

  it('prefs: {session: …} is dropped: the upstream sees exactly one session cookie, the service’s', async () => {
    const reply = await lookup({ prefs: { session: 'agent-session', theme: 'light' } });
    expect(reply.status).toBe(200);
    const r = one();
    expect(r.headers.cookie).toBe(`session=${SESSION}; theme=light`);
    const sessions = (r.headers.cookie ?? '')
      .split('; ')
      .filter((c) => c.startsWith('session='))
      .map((c) => c.slice('session='.length));
    expect(sessions).toEqual([SESSION]);
    expect(r.headers.cookie).not.toContain('agent-session');
  });

  it('a cookie key cannot smuggle a second cookie: `;` and `=` in it are encoded', async () => {
    const reply = await lookup({ prefs: { 'x; session': 'evil' } });
    expect(reply.status).toBe(200);
    const r = one();
    expect(r.headers.cookie).toBe(`session=${SESSION}; x%3B%20session=evil`);
  });
});
