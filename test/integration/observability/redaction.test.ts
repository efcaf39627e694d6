/**
 * Issue 12: redaction is structural. A full flow (register with a host JWT, approve with the
 * admin token, execute with agent JWTs, introspect with the introspection token, an upstream
 * with a service credential and a secret static header, failures on the way) is logged at debug
 * level, and no line holds any JWT, the admin or introspection token, or a service secret.
 */
import { describe, expect, it } from 'vitest';
import { startGateway } from '../../helpers/gateway.js';
import { generateTestKey } from '../../helpers/keys.js';
import { ADMIN_TOKEN, INTROSPECTION_TOKEN } from '../../helpers/protocol.js';

const SERVICE_KEY = 'svc-api-key-5d1e8b2c7a94f03e';
const HEADER_SECRET = 'static-header-secret-93b1c7';

describe('no secret reaches the log', () => {
  it('a full flow logs no JWT, operator token or service credential', async () => {
    const lines: string[] = [];
    const gw = await startGateway({
      api: [
        '    retries: 0',
        '    credentials:',
        `      apiKeyHeader: ${SERVICE_KEY}`,
        '    headers:',
        '      X-Secret: {env: OBS_HEADER_SECRET}',
      ].join('\n'),
      config: 'log_level: debug',
      env: { OBS_HEADER_SECRET: HEADER_SECRET },
      logSink: (line) => lines.push(line),
    });
    const p = gw.p;
    const jwts: string[] = [];
    try {
      // The upstream echoes its credential in an error body: the proxy must not log it either.
      gw.upstream.on('GET /v1/items/leak', (req, res) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: `bad key ${String(req.headers['x-api-key'])}` }));
      });
      const { key: host } = await p.linkedHost('alice');
      const agentKey = await generateTestKey();
      const hostJwt = await p.hostToken(host, { agent_public_key: agentKey.publicJwk });
      jwts.push(hostJwt);
      const reg = await p.request('POST', '/agent/register', {
        token: hostJwt,
        body: { name: 'logged agent', capabilities: ['ping', 'get_item'] },
      });
      expect(reg.status).toBe(200);
      const agentId = (reg.body as { agent_id: string }).agent_id;
      const approval = (await p.pendingApproval(agentId)) as { id: string };
      expect((await p.admin('POST', `/admin/approvals/${approval.id}/approve`, {})).status).toBe(200);

      const execute = async (body: unknown, aud = p.executeLocation): Promise<number> => {
        const jwt = await p.agentToken(agentKey, agentId, {}, aud);
        jwts.push(jwt);
        return (await p.request('POST', '/capability/execute', { token: jwt, body })).status;
      };
      expect(await execute({ capability: 'ping' })).toBe(200);
      expect(await execute({ capability: 'get_item', arguments: { itemId: 'leak' } })).toBe(502);
      expect(await execute({ capability: 'ping' }, 'https://elsewhere.example')).toBe(401);

      const introspected = await p.agentToken(agentKey, agentId, {}, p.executeLocation);
      jwts.push(introspected);
      const intro = await p.request('POST', '/agent/introspect', {
        token: INTROSPECTION_TOKEN,
        body: { token: introspected },
      });
      expect(intro.status).toBe(200);
      expect((await p.request('GET', '/admin/approvals', { token: `${ADMIN_TOKEN}x` })).status).toBe(401);
      expect((await p.request('GET', '/agent/status', { token: 'eyJhbGciOiJub25lIn0.e30.' })).status).toBe(
        401,
      );
      // What the upstream got proves the secrets were really in play.
      expect(gw.upstream.requests.some((r) => r.headers['x-api-key'] === SERVICE_KEY)).toBe(true);
      expect(gw.upstream.requests.some((r) => r.headers['x-secret'] === HEADER_SECRET)).toBe(true);
    } finally {
      await gw.close();
    }

    expect(lines.length).toBeGreaterThan(10);
    // The refusals on the way were logged too (warn lines), not only the requests.
    expect(lines.some((l) => l.includes('"level":"warn"'))).toBe(true);
    const secrets = [ADMIN_TOKEN, INTROSPECTION_TOKEN, SERVICE_KEY, HEADER_SECRET, ...jwts];
    for (const line of lines) {
      // Any JWT (or a part of one) starts with the base64url of `{"`.
      expect(line).not.toContain('eyJ');
      for (const secret of secrets) {
        expect(line).not.toContain(secret);
        // Every dot-separated part of a JWT (its signature alone would be a leak too).
        for (const part of secret.split('.')) if (part.length >= 16) expect(line).not.toContain(part);
      }
    }
  });
});
