/**
 * §2.15 / §5.11 async executions: an upstream `202 Accepted` with a status URL becomes
 * `202 {status: "pending", status_url}` on the proxy's own origin; polling it needs a fresh JWT
 * of the same agent and answers `pending`, `completed` with `result`, or `failed` with `error`.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestKey } from '../../helpers/keys.js';
import { TestClock, type Reply } from '../../helpers/protocol.js';
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
  ({ agent, agentId } = await gw.p.activeAgent(['start_job']));
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
    acceptWithLocation('123');
    const reply = await start();
    expect(reply.status).toBe(202);
    expect(reply.body).toEqual({ status: 'pending', status_url: expect.any(String) });
    const statusUrl: string = reply.body.status_url;
    expect(statusUrl).toMatch(
      new RegExp(`^${gw.p.issuer.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}/capability/status/[A-Za-z0-9_-]+$`),
    );
    expect(statusUrl).not.toContain(new URL(gw.upstream.url).host);
    expect(statusUrl).not.toContain('/v1/jobs');
    expect(statusUrl).not.toContain('123');
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
    const other = await gw.p.activeAgent(['start_job']);
    const polled = await poll(body.status_url, other.agent, other.agentId);
    expect(polled.status).toBe(403);
    expect(polled.body.error).toBe('unauthorized');
    expect(JSON.stringify(polled.body)).not.toContain('secret result');
    expect(gw.upstream.received('/v1/jobs/mine')).toHaveLength(0);
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
    const own = await gw.p.activeAgent(['start_job']);
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
  it('is followed once on the API origin and answers completed with the result', async () => {
    acceptWithLocation('303');
    script('/v1/jobs/303', [
      (res) => {
        res.writeHead(303, { location: '/v1/results/303' });
        res.end();
      },
    ]);
    gw.upstream.on('GET /v1/results/303', (_req, res) => json(res, 200, { size: 3, ok: true }));
    const started = await start();
    const polled = await poll(started.body.status_url);
    expect(polled.status).toBe(200);
    expect(polled.body).toEqual({ status: 'completed', result: { size: 3, ok: true } });
    const result = gw.upstream.received('/v1/results/303');
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
