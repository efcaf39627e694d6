/**
 * §2.15 / §5.11 async executions: an upstream `202 Accepted` with a status URL becomes
 * `202 {status: "pending", status_url}` on the proxy's own origin; polling it needs a fresh JWT
 * of the same agent and answers `pending`, `completed` with `result`, or `failed` with `error`.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestKey } from '../../helpers/keys.js';
import { TestClock, type Reply } from '../../helpers/protocol.js';
import { MAX_ASYNC_JOBS_PER_AGENT } from '../../../src/protocol/async-jobs.js';
import { json, TestUpstream } from '../../helpers/upstream.js';

const SERVICE_KEY = 'service-key-async-0123456789';
const JOB_TTL_MS = 2000;

let gw: Gateway;
let clock: TestClock;
let agent: TestKey;
let agentId: string;

beforeAll(async () => {
  clock = new TestClock();
  gw = await startGateway({
    api: ['    retries: 0', '    credentials:', '      apiKeyHeader: {env: GW_KEY}'].join('\n'),
    config: `execution:\n  async_job_ttl: ${JOB_TTL_MS}ms`,
    env: { GW_KEY: SERVICE_KEY },
    clock,
  });
  ({ agent, agentId } = await gw.p.activeAgent(['start_job', 'get_job', 'get_job_result']));
});
afterAll(() => gw.close());
beforeEach(() => gw.upstream.reset());

/** The upstream accepts POST /v1/jobs with 202 and `Location: /v1/jobs/{id}`. */
function acceptWithLocation(id: string, extra: Record<string, string> = {}): void {
  gw.upstream.on('POST /v1/jobs', (_req, res) =>
    json(res, 202, { accepted: true }, { location: `/v1/jobs/${id}`, ...extra }),
  );
}

async function start(key = agent, id = agentId): Promise<Reply> {
  return gw.p.execute(key, id, 'start_job', { size: 3 });
}

/** GET the status URL with a fresh agent JWT (aud: the status URL unless given). */
async function poll(statusUrl: string, key = agent, id = agentId, aud = statusUrl): Promise<Reply> {
  const token = await gw.p.agentToken(key, id, {}, aud);
  return gw.p.request('GET', pathOf(statusUrl), { token });
}

function pathOf(statusUrl: string): string {
  expect(statusUrl.startsWith(`${gw.p.issuer}/capability/status/`)).toBe(true);
  return statusUrl.slice(gw.p.issuer.length);
}

/** Status-URL handler answering one scripted reply per poll (the last one repeats). */
function script(
  path: string,
  replies: ((res: Parameters<Parameters<TestUpstream['on']>[1]>[1]) => void)[],
): void {
  let i = 0;
  gw.upstream.on(`GET ${path}`, (_req, res) => {
    const reply = replies[Math.min(i, replies.length - 1)];
    i += 1;
    reply?.(res);
  });
}

describe('§5.11 async start', () => {
  it('upstream 202 + Location → 202 {status: pending, status_url} on the proxy origin, never the upstream one', async () => {
    // An upstream job id no port number or random status id can contain by chance ('123' could:
    // a proxy on port 44123 failed this test once).
    acceptWithLocation('upstream-job-7f3e');
    const reply = await start();
    expect(reply.status).toBe(202);
    expect(reply.body).toEqual({ status: 'pending', status_url: expect.any(String) });
    const statusUrl: string = reply.body.status_url;
    expect(statusUrl).toMatch(
      new RegExp(`^${gw.p.issuer.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/capability/status/[A-Za-z0-9_-]+$`),
    );
    expect(statusUrl).not.toContain(new URL(gw.upstream.url).host);
    expect(statusUrl).not.toContain('/v1/jobs');
    expect(statusUrl).not.toContain('upstream-job-7f3e');
    const seen = gw.upstream.received('/v1/jobs');
    expect(seen.map((r) => `${r.method} ${r.path}`)).toEqual(['POST /v1/jobs']);
    expect(JSON.parse(seen[0]?.body.toString() ?? '')).toEqual({ size: 3 });
  });

  it('upstream 202 with a JSON body {status_url} (absolute, same origin) → 202 pending; polls go to that URL', async () => {
    gw.upstream.on('POST /v1/jobs', (_req, res) =>
      json(res, 202, { status_url: `${gw.upstream.url}/v1/jobs/456` }),
    );
    const reply = await start();
    expect(reply.status).toBe(202);
    expect(reply.body.status).toBe('pending');
    expect(reply.body.status_url).not.toContain(gw.upstream.url);
    script('/v1/jobs/456', [(res) => json(res, 200, { status: 'completed', result: { rows: 456 } })]);
    const polled = await poll(reply.body.status_url);
    expect(polled.status).toBe(200);
    expect(polled.body).toEqual({ status: 'completed', result: { rows: 456 } });
    expect(gw.upstream.received('/v1/jobs/456')).toHaveLength(1);
  });

  it('upstream 202 with no status URL → 200 {data: its body}: accepted, with nothing to poll', async () => {
    // The upstream took the work (fire and forget) and named no way to follow it. A `pending`
    // with nowhere to poll would never end, and an error would invite a retry of work already
    // accepted; its acceptance is the result (README, Results).
    gw.upstream.on('POST /v1/jobs', (_req, res) => json(res, 202, { accepted: true, job: 'j1' }));
    const reply = await start();
    expect({ status: reply.status, body: reply.body }).toEqual({
      status: 200,
      body: { data: { accepted: true, job: 'j1' } },
    });
  });

  it('the upstream Retry-After is passed on with the 202', async () => {
    acceptWithLocation('ra', { 'retry-after': '7' });
    const reply = await start();
    expect(reply.status).toBe(202);
    expect(reply.headers.get('retry-after')).toBe('7');
  });

  it('a Location on another origin → 502 upstream_error, and that origin is never called', async () => {
    const other = await TestUpstream.start();
    try {
      gw.upstream.on('POST /v1/jobs', (_req, res) =>
        json(res, 202, {}, { location: `${other.url}/v1/jobs/evil` }),
      );
      const reply = await start();
      expect(reply.status).toBe(502);
      expect(reply.body.error).toBe('upstream_error');
      expect(reply.body.status_url).toBeUndefined();
      expect(JSON.stringify(reply.body)).not.toContain(other.url);
      expect(other.requests).toHaveLength(0);
    } finally {
      await other.close();
    }
  });

  it('a status_url in the body on another origin → 502 upstream_error', async () => {
    gw.upstream.on('POST /v1/jobs', (_req, res) =>
      json(res, 202, { status_url: 'https://elsewhere.invalid/jobs/1' }),
    );
    const reply = await start();
    expect(reply.status).toBe(502);
    expect(reply.body.error).toBe('upstream_error');
  });
});

describe('§5.11 polling the status URL', () => {
  it('pending (upstream 202) → pending (upstream {status: running}) → completed with result', async () => {
    acceptWithLocation('123');
    const { body } = await start();
    const statusUrl: string = body.status_url;
    script('/v1/jobs/123', [
      (res) => json(res, 202, { progress: 10 }),
      (res) => json(res, 200, { status: 'running', progress: 50 }),
      (res) => json(res, 200, { status: 'completed', result: { total: 42, items: ['a'] } }),
    ]);
    const first = await poll(statusUrl);
    expect(first.status).toBe(200);
    expect(first.body).toEqual({ status: 'pending', status_url: statusUrl });
    const second = await poll(statusUrl);
    expect(second.status).toBe(200);
    expect(second.body).toEqual({ status: 'pending', status_url: statusUrl });
    const third = await poll(statusUrl);
    expect(third.status).toBe(200);
    // §5.11: completed carries status and result only (no data, status_url or error).
    expect(third.body).toEqual({ status: 'completed', result: { total: 42, items: ['a'] } });
    expect(gw.upstream.received('/v1/jobs/123')).toHaveLength(3);
  });

  it('the upstream status URL gets the service credentials, and nothing of the agent request', async () => {
    acceptWithLocation('cred');
    const { body } = await start();
    script('/v1/jobs/cred', [(res) => json(res, 200, { done: true })]);
    const polled = await poll(body.status_url);
    expect(polled.status).toBe(200);
    // A plain 2xx body without a status word is the completed result.
    expect(polled.body).toEqual({ status: 'completed', result: { done: true } });
    const seen = gw.upstream.received('/v1/jobs/cred');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.method).toBe('GET');
    expect(seen[0]?.headers['x-api-key']).toBe(SERVICE_KEY);
    expect(seen[0]?.headers.authorization).toBeUndefined();
    expect(JSON.stringify(polled.body)).not.toContain(SERVICE_KEY);
  });

  it('a poll JWT with aud = the execute location is accepted too', async () => {
    acceptWithLocation('aud');
    const { body } = await start();
    script('/v1/jobs/aud', [(res) => json(res, 202, {})]);
    const polled = await poll(body.status_url, agent, agentId, gw.p.executeLocation);
    expect(polled.status).toBe(200);
    expect(polled.body.status).toBe('pending');
  });

  it('a poll JWT for another audience → 401 invalid_jwt, the upstream not called', async () => {
    acceptWithLocation('wrongaud');
    const { body } = await start();
    const polled = await poll(
      body.status_url,
      agent,
      agentId,
      'https://elsewhere.example/capability/execute',
    );
    expect(polled.status).toBe(401);
    expect(polled.body.error).toBe('invalid_jwt');
    expect(gw.upstream.received('/v1/jobs/wrongaud')).toHaveLength(0);
  });

  it('upstream {status: failed} → {status: failed, error} per §5.13', async () => {
    acceptWithLocation('fail');
    const { body } = await start();
    script('/v1/jobs/fail', [(res) => json(res, 200, { status: 'failed', error: { message: 'disk full' } })]);
    const polled = await poll(body.status_url);
    expect(polled.status).toBe(200);
    expect(Object.keys(polled.body).sort()).toEqual(['error', 'status']);
    expect(polled.body.status).toBe('failed');
    expect(polled.body.error).toMatchObject({ error: 'upstream_error', message: 'disk full' });
  });

  it('an upstream error status on the status URL → failed with the upstream status', async () => {
    acceptWithLocation('boom');
    const { body } = await start();
    script('/v1/jobs/boom', [(res) => json(res, 500, { trace: 'x' })]);
    const polled = await poll(body.status_url);
    expect(polled.status).toBe(200);
    expect(polled.body.status).toBe('failed');
    expect(polled.body.error).toMatchObject({ error: 'upstream_error', upstream_status: 500 });
  });

  it('another active agent → 403 unauthorized, and the upstream status URL is not called', async () => {
    acceptWithLocation('mine');
    const { body } = await start();
    script('/v1/jobs/mine', [(res) => json(res, 200, { status: 'completed', result: 'secret result' })]);
    const other = await gw.p.activeAgent(['start_job', 'get_job']);
    const polled = await poll(body.status_url, other.agent, other.agentId);
    expect(polled.status).toBe(403);
    expect(polled.body.error).toBe('unauthorized');
    expect(JSON.stringify(polled.body)).not.toContain('secret result');
    expect(gw.upstream.received('/v1/jobs/mine')).toHaveLength(0);
  });

  it("§4.3: a poll JWT whose capabilities claim leaves out the job's capability → 403, the upstream not called", async () => {
    // The claim names the status capability (get_job) but not start_job, whose result the poll
    // asks for.
    acceptWithLocation('scoped');
    const { body } = await start();
    script('/v1/jobs/scoped', [(res) => json(res, 200, { status: 'completed', result: 'scoped result' })]);
    const path = pathOf(body.status_url);
    const narrow = await gw.p.agentToken(agent, agentId, { capabilities: ['get_job'] }, body.status_url);
    const refused = await gw.p.request('GET', path, { token: narrow });
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ error: 'capability_not_granted' });
    expect(refused.body.message).toContain('start_job');
    expect(gw.upstream.received('/v1/jobs/scoped')).toHaveLength(0);

    // Naming both (the job's capability, and the GET the status URL is a call of) is enough.
    const both = await gw.p.agentToken(
      agent,
      agentId,
      { capabilities: ['start_job', 'get_job'] },
      body.status_url,
    );
    const polled = await gw.p.request('GET', path, { token: both });
    expect(polled.body).toEqual({ status: 'completed', result: 'scoped result' });
  });

  it('no JWT → 401, the upstream not called', async () => {
    acceptWithLocation('anon');
    const { body } = await start();
    const polled = await gw.p.request('GET', pathOf(body.status_url));
    expect(polled.status).toBe(401);
    expect(polled.body.error).toBe('authentication_required');
    expect(gw.upstream.received('/v1/jobs/anon')).toHaveLength(0);
  });

  it('a replayed poll JWT → 401 invalid_jwt (§5.11: a fresh JWT per poll)', async () => {
    acceptWithLocation('replay');
    const { body } = await start();
    script('/v1/jobs/replay', [(res) => json(res, 202, {})]);
    const token = await gw.p.agentToken(agent, agentId, {}, body.status_url);
    const first = await gw.p.request('GET', pathOf(body.status_url), { token });
    expect(first.status).toBe(200);
    const again = await gw.p.request('GET', pathOf(body.status_url), { token });
    expect(again.status).toBe(401);
    expect(again.body.error).toBe('invalid_jwt');
    expect(gw.upstream.received('/v1/jobs/replay')).toHaveLength(1);
  });

  it('an unknown job id → 404 execution_not_found', async () => {
    const url = `${gw.p.issuer}/capability/status/job_doesnotexist`;
    const polled = await poll(url);
    expect(polled.status).toBe(404);
    expect(polled.body.error).toBe('execution_not_found');
    expect(gw.upstream.requests).toHaveLength(0);
  });

  it('a revoked agent cannot poll its own job: 403 agent_revoked, the upstream not called', async () => {
    const own = await gw.p.activeAgent(['start_job', 'get_job']);
    acceptWithLocation('revoked');
    const { body } = await start(own.agent, own.agentId);
    const revoked = await gw.p.admin('POST', `/admin/agents/${own.agentId}/revoke`, {});
    expect(revoked.status).toBe(200);
    const polled = await poll(body.status_url, own.agent, own.agentId);
    expect(polled.status).toBe(403);
    expect(polled.body.error).toBe('agent_revoked');
    expect(gw.upstream.received('/v1/jobs/revoked')).toHaveLength(0);
  });

  it(`an expired job (async_job_ttl ${JOB_TTL_MS} ms passed) → 404 execution_not_found`, async () => {
    acceptWithLocation('old');
    const { body } = await start();
    script('/v1/jobs/old', [(res) => json(res, 202, {})]);
    clock.advance(JOB_TTL_MS - 500);
    expect((await poll(body.status_url)).status).toBe(200);
    clock.advance(600);
    const polled = await poll(body.status_url);
    expect(polled.status).toBe(404);
    expect(polled.body.error).toBe('execution_not_found');
    expect(gw.upstream.received('/v1/jobs/old')).toHaveLength(1);
  });
});

describe('§5.11 async: 303 See Other to the result', () => {
  it('is followed once, as a call of a GET operation the agent holds, and answers completed with the result', async () => {
    acceptWithLocation('303');
    script('/v1/jobs/303', [
      (res) => {
        res.writeHead(303, { location: '/v1/jobs/303/result' });
        res.end();
      },
    ]);
    gw.upstream.on('GET /v1/jobs/303/result', (_req, res) => json(res, 200, { size: 3, ok: true }));
    const started = await start();
    const polled = await poll(started.body.status_url);
    expect(polled.status).toBe(200);
    expect(polled.body).toEqual({ status: 'completed', result: { size: 3, ok: true } });
    const result = gw.upstream.received('/v1/jobs/303/result');
    expect(result).toHaveLength(1);
    expect(result[0]?.headers['x-api-key']).toBe(SERVICE_KEY);
  });

  it('to another origin is not followed: failed, and that origin is never called', async () => {
    const other = await TestUpstream.start();
    try {
      acceptWithLocation('303x');
      script('/v1/jobs/303x', [
        (res) => {
          res.writeHead(303, { location: `${other.url}/v1/results/1` });
          res.end();
        },
      ]);
      const started = await start();
      const polled = await poll(started.body.status_url);
      expect(polled.status).toBe(200);
      expect(polled.body.status).toBe('failed');
      expect(polled.body.error.error).toBe('upstream_error');
      expect(other.requests).toHaveLength(0);
    } finally {
      await other.close();
    }
  });
});

/**
 * Issue 10, class 4: a URL of the upstream's choosing is never fetched with the service
 * credential unless it is a call of a GET operation of the same API that the polling agent may
 * make itself (its grant for that capability, and the grant's constraints).
 */
describe('issue 10 class 4: upstream-chosen status URLs', () => {
  /** Every request the upstream received other than the POST that started the job. */
  function followed(): string[] {
    return gw.upstream.requests.filter((r) => r.method !== 'POST').map((r) => `${r.method} ${r.url}`);
  }

  const refused: [string, string][] = [
    ['a path outside the base path', '/admin/secret-dump'],
    ['a path under the base path that is no operation', '/v1/admin/secret-dump'],
    ['dot-segment traversal out of the base path', '/v1/jobs/../../admin/secret-dump'],
    ['dot-segment traversal to another path under it', '/v1/jobs/../admin/secret-dump'],
    ['percent-encoded dot segments', '/v1/jobs/%2e%2e/%2E%2E/admin/secret-dump'],
    ['an encoded slash inside a path value', '/v1/jobs/..%2F..%2Fadmin%2Fsecret-dump'],
    ['a double-encoded traversal', '/v1/jobs/%252e%252e%252fadmin'],
    ['an encoded backslash', '/v1/jobs/..%5C..%5Cadmin'],
    ['a Tomcat path parameter', '/v1/jobs/..;/admin/secret-dump'],
    ['a path value that is a dot segment in disguise', '/v1/jobs/..;'],
    ['an undeclared query parameter', '/v1/jobs/1?api_key=agent-key'],
    ['a declared query parameter given twice', '/v1/jobs/1?verbose=true&verbose=false'],
    ['a protocol-relative URL to another host', '//evil.example/v1/jobs/1'],
    ['userinfo smuggling another host', 'http://127.0.0.1@evil.example/v1/jobs/1'],
    ['a non-GET operation of the API (POST /jobs)', '/v1/jobs'],
    ['a control character in a path value', '/v1/jobs/a%0d%0aX-Injected:%20yes'],
  ];

  it.each(refused)(
    'a 202 whose Location is %s → 502 upstream_error, no job, and nothing fetched with the credential',
    async (_what, location) => {
      gw.upstream.on('POST /v1/jobs', (_req, res) => json(res, 202, {}, { location }));
      const reply = await start();
      expect(reply.status).toBe(502);
      expect(reply.body.error).toBe('upstream_error');
      expect(reply.body.status_url).toBeUndefined();
      expect(followed()).toEqual([]);
    },
  );

  it('a status_url body field pointing to /admin/secret-dump is refused the same way', async () => {
    gw.upstream.on('POST /v1/jobs', (_req, res) =>
      json(res, 202, { status_url: `${gw.upstream.url}/admin/secret-dump` }),
    );
    const reply = await start();
    expect(reply.status).toBe(502);
    expect(followed()).toEqual([]);
  });

  it('a Location naming an operation the agent holds no grant for (get_item) → polls 403 capability_not_granted, never fetched', async () => {
    gw.upstream.on('POST /v1/jobs', (_req, res) => json(res, 202, {}, { location: '/v1/items/42' }));
    gw.upstream.on('GET /v1/items/42', (_req, res) => json(res, 200, { secret: 'item 42' }));
    const reply = await start();
    expect(reply.status).toBe(202);
    const polled = await poll(reply.body.status_url);
    expect(polled.status).toBe(403);
    expect(polled.body.error).toBe('capability_not_granted');
    expect(polled.body.message).toContain('get_item');
    expect(JSON.stringify(polled.body)).not.toContain('item 42');
    expect(followed()).toEqual([]);
  });

  it('an agent holding start_job but not get_job cannot have its status URL fetched: 403, nothing sent', async () => {
    const limited = await gw.p.activeAgent(['start_job']);
    acceptWithLocation('nogrant');
    script('/v1/jobs/nogrant', [(res) => json(res, 200, { status: 'completed', result: 'leaked' })]);
    const reply = await start(limited.agent, limited.agentId);
    expect(reply.status).toBe(202);
    const polled = await poll(reply.body.status_url, limited.agent, limited.agentId);
    expect(polled.status).toBe(403);
    expect(polled.body.error).toBe('capability_not_granted');
    expect(followed()).toEqual([]);
  });

  it("a status URL outside the agent's get_job constraints → 403 constraint_violated, nothing sent", async () => {
    const scoped = await gw.p.activeAgent([
      'start_job',
      { name: 'get_job', constraints: { jobId: { in: ['mine'] } } },
    ]);
    acceptWithLocation('someone-elses');
    const reply = await start(scoped.agent, scoped.agentId);
    expect(reply.status).toBe(202);
    const polled = await poll(reply.body.status_url, scoped.agent, scoped.agentId);
    expect(polled.status).toBe(403);
    expect(polled.body.error).toBe('constraint_violated');
    expect(followed()).toEqual([]);
    // The same agent's own job, inside the constraint, is followed.
    acceptWithLocation('mine');
    script('/v1/jobs/mine', [(res) => json(res, 202, {})]);
    const own = await start(scoped.agent, scoped.agentId);
    expect((await poll(own.body.status_url, scoped.agent, scoped.agentId)).body.status).toBe('pending');
    expect(followed()).toEqual(['GET /v1/jobs/mine']);
  });

  it('the status URL is sent as the mapped call builds it: a declared query value is re-encoded, the credential added once', async () => {
    gw.upstream.on('POST /v1/jobs', (_req, res) =>
      json(res, 202, {}, { location: '/v1/jobs/j%20%C3%A9?verbose=true' }),
    );
    const reply = await start();
    expect(reply.status).toBe(202);
    script('/v1/jobs/j%20%C3%A9', [(res) => json(res, 202, {})]);
    expect((await poll(reply.body.status_url)).body.status).toBe('pending');
    const seen = gw.upstream.received('/v1/jobs/j');
    expect(seen.map((r) => r.url)).toEqual(['/v1/jobs/j%20%C3%A9?verbose=true']);
    expect(seen[0]?.headers['x-api-key']).toBe(SERVICE_KEY);
  });

  it('a 303 to /admin/secret-dump is not followed: failed, nothing fetched there', async () => {
    acceptWithLocation('303admin');
    script('/v1/jobs/303admin', [
      (res) => {
        res.writeHead(303, { location: '/admin/secret-dump' });
        res.end();
      },
    ]);
    const started = await start();
    const polled = await poll(started.body.status_url);
    expect(polled.status).toBe(200);
    expect(polled.body.status).toBe('failed');
    expect(polled.body.error.error).toBe('upstream_error');
    expect(followed()).toEqual(['GET /v1/jobs/303admin']);
  });

  it('a 303 with ../ traversal out of the API is not followed', async () => {
    acceptWithLocation('303dots');
    script('/v1/jobs/303dots', [
      (res) => {
        res.writeHead(303, { location: '../../admin/secret-dump' });
        res.end();
      },
    ]);
    const started = await start();
    const polled = await poll(started.body.status_url);
    expect(polled.body.status).toBe('failed');
    expect(followed()).toEqual(['GET /v1/jobs/303dots']);
  });

  it('a 303 to an operation the agent holds no grant for (get_item) → 403 capability_not_granted, not fetched', async () => {
    acceptWithLocation('303item');
    script('/v1/jobs/303item', [
      (res) => {
        res.writeHead(303, { location: '/v1/items/7' });
        res.end();
      },
    ]);
    const started = await start();
    const polled = await poll(started.body.status_url);
    expect(polled.status).toBe(403);
    expect(polled.body.error).toBe('capability_not_granted');
    expect(followed()).toEqual(['GET /v1/jobs/303item']);
  });

  it('a job stored without a status capability (before this check existed) is never followed', async () => {
    const id = 'job_legacy_without_status_capability';
    const now = clock.now();
    await gw.p.proxy.protocol.store.insertAsyncJob({
      id,
      agentId,
      capability: 'start_job',
      upstreamUrl: `${gw.upstream.url}/admin/secret-dump`,
      statusCapability: null,
      createdAt: now,
      expiresAt: now + JOB_TTL_MS,
    });
    const polled = await poll(`${gw.p.issuer}/capability/status/${id}`);
    expect(polled.status).toBe(502);
    expect(polled.body.error).toBe('upstream_error');
    expect(gw.upstream.requests).toHaveLength(0);
  });

  it('a job whose stored URL no longer maps to its stored capability is not followed', async () => {
    const id = 'job_tampered_status_url';
    const now = clock.now();
    await gw.p.proxy.protocol.store.insertAsyncJob({
      id,
      agentId,
      capability: 'start_job',
      upstreamUrl: `${gw.upstream.url}/v1/admin/secret-dump`,
      statusCapability: 'get_job',
      createdAt: now,
      expiresAt: now + JOB_TTL_MS,
    });
    const polled = await poll(`${gw.p.issuer}/capability/status/${id}`);
    expect(polled.status).toBe(502);
    expect(gw.upstream.requests).toHaveLength(0);
  });

  it('a Retry-After that is not delay-seconds or an HTTP date is not passed on (it could echo anything)', async () => {
    acceptWithLocation('ra-bad', { 'retry-after': SERVICE_KEY });
    const reply = await start();
    expect(reply.status).toBe(202);
    expect(reply.headers.get('retry-after')).toBeNull();
    acceptWithLocation('ra-date', { 'retry-after': 'Wed, 21 Oct 2015 07:28:00 GMT' });
    expect((await start()).headers.get('retry-after')).toBe('Wed, 21 Oct 2015 07:28:00 GMT');
  });

  // Found in review: nothing bounded how many jobs one agent held (each up to 4 KiB for the TTL,
  // one per request within its rate limit), and a revoked agent's stayed until the TTL.
  it(`an agent keeps at most ${MAX_ASYNC_JOBS_PER_AGENT} jobs: a new one forgets the oldest, whose status URL is not found`, async () => {
    const own = await gw.p.activeAgent(['start_job', 'get_job']);
    const store = gw.p.proxy.protocol.store;
    const now = clock.now();
    for (let i = 0; i < MAX_ASYNC_JOBS_PER_AGENT; i++) {
      await store.insertAsyncJob({
        id: `job_cap_${String(i).padStart(4, '0')}`,
        agentId: own.agentId,
        capability: 'start_job',
        upstreamUrl: `${gw.upstream.url}/v1/jobs/cap-${i}`,
        statusCapability: 'get_job',
        createdAt: now - MAX_ASYNC_JOBS_PER_AGENT + i,
        expiresAt: now + JOB_TTL_MS,
      });
    }
    acceptWithLocation('cap-new');
    const started = await start(own.agent, own.agentId);
    expect(started.status).toBe(202);
    const oldest = await poll(`${gw.p.issuer}/capability/status/job_cap_0000`, own.agent, own.agentId);
    expect(oldest.status).toBe(404);
    expect(oldest.body.error).toBe('execution_not_found');
    expect(await store.asyncJob('job_cap_0001')).toBeDefined();
    expect(
      await store.asyncJob(new URL(started.body.status_url as string).pathname.split('/').at(-1)!),
    ).toBeDefined();
  });

  // Found in review: a poll calls the upstream with the service's credentials as a call of the
  // mapped GET capability, yet left no §11 record and no use of that grant.
  it('each poll is recorded as a call of the mapped capability (§11), refused or not, with its job', async () => {
    const polls = async (who: { agentId: string }): Promise<unknown[][]> => {
      await gw.p.proxy.flushActivity();
      const reply = await gw.p.admin('GET', `/admin/activity?agent_id=${who.agentId}`);
      const records = reply.body.activity as {
        type: string;
        capability: string;
        outcome: string;
        detail: { status_of?: unknown };
      }[];
      return records
        .filter((r) => r.type === 'execute' && r.capability === 'get_job')
        .map((r) => [r.outcome, r.detail.status_of]);
    };
    const jobOf = (reply: Reply): string =>
      new URL(reply.body.status_url as string).pathname.split('/').at(-1)!;
    script('/v1/jobs/audited', [
      (res) => json(res, 200, { status: 'running' }),
      (res) => json(res, 200, { status: 'completed', result: { n: 1 } }),
    ]);

    const holder = await gw.p.activeAgent(['start_job', 'get_job']);
    acceptWithLocation('audited');
    const started = await start(holder.agent, holder.agentId);
    for (let i = 0; i < 2; i++) {
      expect((await poll(started.body.status_url, holder.agent, holder.agentId)).status).toBe(200);
    }
    const of = { job: jobOf(started), capability: 'start_job' };
    expect(await polls(holder)).toEqual([
      ['success', of],
      ['success', of],
    ]);

    // An agent without get_job: its poll is refused before anything is sent, and recorded so.
    const other = await gw.p.activeAgent(['start_job']);
    const mine = await start(other.agent, other.agentId);
    expect((await poll(mine.body.status_url, other.agent, other.agentId)).status).toBe(403);
    expect(await polls(other)).toEqual([
      ['capability_not_granted', { job: jobOf(mine), capability: 'start_job' }],
    ]);
  });
});
