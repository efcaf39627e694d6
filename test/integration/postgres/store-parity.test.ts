/**
 * The same calls against a proxy on SQLite and one on PostgreSQL give the same answers (README
 * "Storage and durability"). Each case was a difference found in review: PostgreSQL answered 503
 * or 500, or refused a JWT as a replay, where SQLite served the request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeConfig } from '../../helpers/browser.js';
import { generateTestKey, signJwt } from '../../helpers/keys.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';
import { startProtocol, type Reply, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE, tempDbFile } from '../../helpers/proxy.js';

let postgres: TestPostgres;
const stores: Record<'sqlite' | 'postgres', TestProtocol> = {} as Record<'sqlite' | 'postgres', TestProtocol>;

beforeAll(async () => {
  postgres = await startPostgres();
  // JWKS URLs accepted (never fetched here: the claim is refused before any fetch).
  const config = writeConfig('jwks:\n  allowed_cidrs: [127.0.0.1]\n');
  const common = { config, specs: [PETSTORE], mockUpstream: true };
  stores.sqlite = await startProtocol({ overrides: { ...common, db: tempDbFile() } });
  stores.postgres = await startProtocol({ overrides: { ...common, db: await postgres.createDatabase() } });
}, 60_000);
afterAll(async () => {
  await stores.sqlite?.close();
  await stores.postgres?.close();
  await postgres?.stop();
});

/** `answer` run on each store: the answers by store. */
async function onBoth<T>(answer: (p: TestProtocol) => Promise<T>): Promise<Record<string, T>> {
  return { sqlite: await answer(stores.sqlite), postgres: await answer(stores.postgres) };
}

/** Status and error code of each reply, counted. */
function tally(replies: readonly Reply[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of replies) {
    const key = `${r.status} ${(r.body as { error?: string } | undefined)?.error ?? ''}`.trim();
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

describe('SQLite and PostgreSQL answer alike', () => {
  it('a JWT whose exp has a fraction of a second is served (RFC 7519 NumericDate)', async () => {
    // Observed before on PostgreSQL: 503 for both (the replay horizon was no integer for bigint).
    const answers = await onBoth(async (p) => {
      const a = await p.activeAgent(['list_pets']);
      const now = Math.floor(p.clock.now() / 1000);
      const times = { iat: now, exp: now + 59.5001 };
      const token = await p.agentToken(a.agent, a.agentId, times, p.executeLocation);
      const executed = await p.request('POST', '/capability/execute', {
        token,
        body: { capability: 'list_pets', arguments: {} },
      });
      const status = await p.request('GET', `/agent/status?agent_id=${a.agentId}`, {
        token: await p.hostToken(a.host, times),
      });
      return [executed.status, status.status];
    });
    expect(answers).toEqual({ sqlite: [200, 200], postgres: [200, 200] });
  });

  it('a JWT whose exp has a fraction of a second is still used once only (§4.6)', async () => {
    // The horizon is rounded up, never down: the jti is kept for all the JWT is acceptable.
    const answers = await onBoth(async (p) => {
      const a = await p.activeAgent(['list_pets']);
      const now = Math.floor(p.clock.now() / 1000);
      const token = await p.agentToken(
        a.agent,
        a.agentId,
        { iat: now, exp: now + 59.9999 },
        p.executeLocation,
      );
      const call = (): Promise<Reply> =>
        p.request('POST', '/capability/execute', { token, body: { capability: 'list_pets', arguments: {} } });
      const first = await call();
      const again = await call();
      // Just before exp + skew, the JWT is still acceptable by its times: only replay memory refuses it.
      p.clock.advance((59 + 30) * 1000);
      const late = await call();
      return [first.status, again.status, String(again.body.message), late.status, String(late.body.message)];
    });
    const used = 'This JWT (jti) was already used; sign a new one per request.';
    const once = [200, 401, used, 401, used];
    expect(answers).toEqual({ sqlite: once, postgres: once });
  });

  it('eight registrations of one agent key at once: one 200, the rest 409 agent_exists, no 500', async () => {
    // Observed before on PostgreSQL: 500s (a unique violation the transaction's look had missed).
    const answers = await onBoth(async (p) => {
      const replies: Reply[] = [];
      for (let round = 0; round < 4; round++) {
        const { key } = await p.linkedHost('alice');
        const agent = await generateTestKey();
        replies.push(...(await Promise.all(Array.from({ length: 8 }, () => p.register(key, {}, agent)))));
      }
      return tally(replies);
    });
    expect(answers).toEqual({
      sqlite: { '200': 4, '409 agent_exists': 28 },
      postgres: { '200': 4, '409 agent_exists': 28 },
    });
  });

  it('eight requests for one capability at once: one 200, the rest 409 already_granted, no 500', async () => {
    const answers = await onBoth(async (p) => {
      const replies: Reply[] = [];
      for (let round = 0; round < 3; round++) {
        const a = await p.activeAgent(['list_pets']);
        const tokens = await Promise.all(Array.from({ length: 8 }, () => p.agentToken(a.agent, a.agentId)));
        replies.push(
          ...(await Promise.all(
            tokens.map((token, i) =>
              p.request('POST', '/agent/request-capability', {
                token,
                body: { capabilities: [{ name: 'get_pet', constraints: { petId: { max: i + 1 } } }] },
              }),
            ),
          )),
        );
      }
      return tally(replies);
    });
    expect(answers.postgres).not.toHaveProperty('500 internal_error');
    expect(answers.sqlite).toEqual({ '200': 3, '409 already_granted': 21 });
    expect(answers.postgres).toEqual(answers.sqlite);
  });

  it('a JWKS URL is bounded in UTF-8 bytes: 1,500 CJK characters are refused before any fetch', async () => {
    // Observed before: SQLite 200, PostgreSQL 500 (too large for the unique index of JWKS URLs).
    const answers = await onBoth(async (p) => {
      const url = `https://127.0.0.1:9/${'漢'.repeat(1500)}`;
      const host = await generateTestKey();
      const agent = await generateTestKey();
      const token = await signJwt(
        host,
        'host+jwt',
        { iss: host.thumbprint, aud: p.issuer, host_jwks_url: url, agent_public_key: agent.publicJwk },
        { nowMs: p.clock.now(), header: { kid: 'h1' } },
      );
      const reply = await p.request('POST', '/agent/register', { token, body: { name: 'x' } });
      return [reply.status, String(reply.body.error)];
    });
    expect(answers).toEqual({ sqlite: [400, 'invalid_request'], postgres: [400, 'invalid_request'] });
  });

  it('a jti with a lone surrogate is refused as malformed, so no two are one on PostgreSQL', async () => {
    // Observed before: SQLite 200, 200; PostgreSQL 200, then 401 as a replay (both stored as U+FFFD).
    const answers = await onBoth(async (p) => {
      const a = await p.activeAgent(['list_pets']);
      const statuses: (number | string)[] = [];
      for (const jti of ['j\ud800', 'j\ud801']) {
        const reply = await p.request('GET', `/agent/status?agent_id=${a.agentId}`, {
          token: await p.hostToken(a.host, { jti }),
        });
        statuses.push(reply.status, reply.body.message);
      }
      return statuses;
    });
    const refused = [401, 'The JWT "jti" must be well-formed Unicode text.'];
    expect(answers).toEqual({ sqlite: [...refused, ...refused], postgres: [...refused, ...refused] });
  });
});
