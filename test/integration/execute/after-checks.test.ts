/**
 * What changes while an execute waits between its checks and its upstream call (a race review):
 * a revocation that answered 200, or a reload that blocks the capability, stops it before
 * anything is sent (§5.5, §5.11, issue 12); and one request is judged by one policy throughout,
 * even when a reload lands between its authorization and its per-call step. The waits are real:
 * the service's OAuth token endpoint held open (SQLite), a rate-limit row held by another
 * transaction (PostgreSQL).
 */
import { writeFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { oauthClientApi, startGateway, type Gateway } from '../../helpers/gateway.js';
import {
  callIdOf,
  PageClient,
  perCallPolicy,
  softPasskey,
  startPerCallProxy,
  writeSpecText,
  type PerCallProxy,
} from '../../helpers/per-call.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { TestClock, writePolicy } from '../../helpers/protocol.js';
import { json, type TestUpstream } from '../../helpers/upstream.js';
import { MIN_REFRESH_INTERVAL_MS } from '../../../src/upstream/oauth.js';

const NO_REGISTRATION_LIMIT = 'rate_limits:\n  unknown_host_registration: null\n';

/** Holds the token endpoint's answer until `release`; `asked` resolves when the proxy asks. */
function heldTokenEndpoint(upstream: TestUpstream): { asked: Promise<void>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let asked!: () => void;
  const askedPromise = new Promise<void>((resolve) => (asked = resolve));
  upstream.on('POST /oauth/token', async (_req, res) => {
    asked();
    await gate;
    json(res, 200, { access_token: 'service-token', token_type: 'Bearer', expires_in: 3600 });
  });
  return { asked: askedPromise, release };
}

describe('while an execute waits for the service’s OAuth token (SQLite)', () => {
  let g: Gateway;
  let policyFile: string;
  // A token is refreshed at most once per 30 s (oauth.ts): the test moves past that between tries.
  const clock = new TestClock();
  beforeAll(async () => {
    policyFile = writePolicy(NO_REGISTRATION_LIMIT);
    g = await startGateway({
      clock,
      policyFile,
      api: oauthClientApi('svc', 's3cret-s3cret'),
    });
  });
  afterAll(() => g?.close());

  const upload = { file: Buffer.from('x').toString('base64') };

  it('an agent revoked meanwhile sends nothing: the call answers agent_revoked', async () => {
    const a = await g.p.activeAgent(['upload_file']);
    const token = heldTokenEndpoint(g.upstream);
    const inFlight = g.p.execute(a.agent, a.agentId, 'upload_file', upload);
    await token.asked;
    expect((await g.p.admin('POST', `/admin/agents/${a.agentId}/revoke`)).status).toBe(200);
    token.release();
    const reply = await inFlight;
    expect(reply.status).toBe(403);
    expect(reply.body.error).toBe('agent_revoked');
    expect(g.upstream.received('/v1/uploads')).toHaveLength(0);
  });

  /** The upload endpoint answers 401 once (the service's token expired early), then 200. */
  function expiringOnce(): void {
    let answered401 = false;
    g.upstream.on('POST /v1/uploads', (_req, res) => {
      json(res, answered401 ? 200 : 401, answered401 ? { ok: true } : { error: 'expired' });
      answered401 = true;
    });
  }

  it('a reload that blocks the capability meanwhile sends nothing more; with nothing changed the call goes', async () => {
    const a = await g.p.activeAgent(['upload_file']);
    // Control: a 401, the wait for a new token with nothing written meanwhile, and the retry goes.
    g.upstream.reset();
    expiringOnce();
    const first = heldTokenEndpoint(g.upstream);
    const plain = g.p.execute(a.agent, a.agentId, 'upload_file', upload);
    await first.asked;
    first.release();
    expect((await plain).status).toBe(200);
    expect(g.upstream.received('/v1/uploads')).toHaveLength(2);

    g.upstream.reset();
    clock.advance(MIN_REFRESH_INTERVAL_MS);
    expiringOnce();
    const second = heldTokenEndpoint(g.upstream);
    const inFlight = g.p.execute(a.agent, a.agentId, 'upload_file', upload);
    await second.asked;
    writeFileSync(policyFile, `${NO_REGISTRATION_LIMIT}capabilities:\n  blocked: [upload_file]\n`);
    expect((await g.p.proxy.reload()).ok).toBe(true);
    second.release();
    const reply = await inFlight;
    expect(reply.body.error).toBe('capability_not_granted');
    // The first try (before the reload) got its 401; the retry with the new token is not sent.
    expect(g.upstream.received('/v1/uploads')).toHaveLength(1);
  });
});

describe('while an execute waits on its rate-limit row (PostgreSQL)', () => {
  const LIMITS = `${NO_REGISTRATION_LIMIT}  per_capability:\n    get_item: {per_agent: "1000/1m"}\n`;
  let postgres: TestPostgres;
  let db: string;
  let g: Gateway;
  let policyFile: string;

  beforeAll(async () => {
    postgres = await startPostgres();
    db = await postgres.createDatabase();
    policyFile = writePolicy(`capabilities:\n  per_call: [get_item]\n${LIMITS}`);
    g = await startGateway({ db, policyFile });
  }, 60_000);
  afterAll(async () => {
    await g?.close();
    await postgres?.stop();
  });

  /** Holds the agent's per-capability bucket row: its executes wait in their capability-limit step. */
  async function holdBucket(agentId: string): Promise<() => Promise<void>> {
    const client = new pg.Client({ connectionString: db });
    await client.connect();
    await client.query('BEGIN');
    const { rowCount } = await client.query('SELECT 1 FROM rate_buckets WHERE key = $1 FOR UPDATE', [
      `cap:get_item:agent:${agentId}`,
    ]);
    expect(rowCount).toBe(1);
    return async () => {
      await client.query('COMMIT');
      await client.end();
    };
  }

  it('authorized under a per-call policy, it is not sent straight upstream under one that blocks it', async () => {
    const a = await g.p.activeAgent(['get_item']);
    // A first call makes the bucket row (and waits for a person: per-call).
    expect((await g.p.execute(a.agent, a.agentId, 'get_item', { itemId: '1' })).status).toBe(202);
    g.upstream.reset();
    const release = await holdBucket(a.agentId);
    const inFlight = g.p.execute(a.agent, a.agentId, 'get_item', { itemId: '2' });
    // Past authorize (under per_call) and waiting on the row: the statement is seen waiting.
    const admin = new pg.Client({ connectionString: db });
    await admin.connect();
    for (let waiting = 0; waiting === 0;) {
      const { rows } = await admin.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()",
      );
      waiting = Number(rows[0]?.n ?? 0);
    }
    await admin.end();
    writeFileSync(policyFile, `capabilities:\n  blocked: [get_item]\n${LIMITS}`);
    expect((await g.p.proxy.reload()).ok).toBe(true);
    await release();
    const reply = await inFlight;
    // Judged by the policy it began under: per-call, so a 202 and nothing sent. (It used to go
    // straight upstream: authorized under the first policy, per-call step under the second.)
    expect(reply.status).toBe(202);
    expect(g.upstream.requests).toEqual([]);
  });
});

describe('while an approved per-call execution waits for the service’s OAuth token', () => {
  const ALICE = 'alice@example.com';
  const SPEC = `openapi: 3.0.3
info: {title: Reports, version: "1"}
components:
  securitySchemes:
    oauthClient:
      type: oauth2
      flows: {clientCredentials: {tokenUrl: "https://token.invalid/token", scopes: {}}}
security: [{oauthClient: []}]
paths:
  /reports/{id}:
    get:
      operationId: getReport
      parameters: [{name: id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok, content: {application/json: {schema: {type: object}}}}}
`;
  let s: PerCallProxy;
  beforeAll(async () => {
    s = await startPerCallProxy({
      policy: perCallPolicy('get_report'),
      users: [ALICE],
      spec: writeSpecText(SPEC),
      api: oauthClientApi('svc', 's3cret-s3cret'),
    });
  });
  afterAll(() => s?.close());

  it('an agent revoked meanwhile: the approved call sends nothing', async () => {
    const a = await s.p.activeAgent(['get_report'], { userId: ALICE });
    const pending = await s.p.execute(a.agent, a.agentId, 'get_report', { id: 'r1' });
    expect(pending.status).toBe(202);
    const token = heldTokenEndpoint(s.upstream);
    const alice = await PageClient.signIn(s.p.issuer, ALICE);
    const approving = alice.approve(
      callIdOf(pending.body.status_url as string),
      await softPasskey(s.p, ALICE),
    );
    await token.asked;
    expect((await s.p.admin('POST', `/admin/agents/${a.agentId}/revoke`)).status).toBe(200);
    token.release();
    await approving;
    expect(s.upstream.received('/reports')).toHaveLength(0);
  });
});

describe('while an execute waits to retry after a 503 (SQLite)', () => {
  let g: Gateway;
  beforeAll(async () => {
    g = await startGateway({ api: '    retries: 2\n    retry_backoff: 50ms' });
  });
  afterAll(() => g?.close());

  it('an agent revoked during the backoff sends no retry', async () => {
    const a = await g.p.activeAgent(['get_item']);
    g.upstream.on('GET /v1/items/7', async (_req, res) => {
      // The revocation commits (and answers 200) before the 503 reaches the proxy.
      expect((await g.p.admin('POST', `/admin/agents/${a.agentId}/revoke`)).status).toBe(200);
      json(res, 503, { error: 'busy' });
    });
    const reply = await g.p.execute(a.agent, a.agentId, 'get_item', { itemId: '7' });
    expect(reply.body.error).toBe('agent_revoked');
    expect(g.upstream.received('/v1/items/7')).toHaveLength(1);
  });

  it('with nothing written meanwhile, the retries go', async () => {
    const a = await g.p.activeAgent(['get_item']);
    g.upstream.reset();
    g.upstream.on('GET /v1/items/8', (_req, res) => json(res, 503, { error: 'busy' }));
    const reply = await g.p.execute(a.agent, a.agentId, 'get_item', { itemId: '8' });
    expect(reply.body.upstream_status).toBe(503);
    expect(g.upstream.received('/v1/items/8')).toHaveLength(3);
  });
});
