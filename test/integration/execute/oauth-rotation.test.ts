/**
 * Service OAuth tokens across refreshes and reloads. A token the proxy has just replaced (after a
 * 401 refresh, or on expiry) stays in the redactor's set until it expires: an answer to a call sent
 * with the old token but read after the refresh must not hand the agent that token, which the
 * upstream still honours. A reload that rotates the client is obeyed at once.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { oauthClientApi, startGateway, type Gateway } from '../../helpers/gateway.js';
import { json } from '../../helpers/upstream.js';

const CLIENT_SECRET = 'svc-client-secret-XYZ-123456';
const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

describe('service OAuth tokens replaced while a call is in flight', () => {
  let gw: Gateway | undefined;
  afterAll(() => gw?.close());

  it('an answer echoing the token it was sent with is redacted even when the token was refreshed meanwhile', async () => {
    gw = await startGateway({
      api: oauthClientApi('svc-client', '{env: GW_CLIENT_SECRET}'),
      env: { GW_CLIENT_SECRET: CLIENT_SECRET },
    });
    const g = gw;
    const agent = await g.p.activeAgent(['upload_file']);
    let issued = 0;
    g.upstream.on('POST /oauth/token', (_req, res) => {
      issued += 1;
      json(res, 200, {
        access_token: `oauth-access-token-${issued}-still-valid`,
        token_type: 'Bearer',
        expires_in: 3600,
      });
    });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let firstArrived!: () => void;
    const arrived = new Promise<void>((r) => (firstArrived = r));
    let n = 0;
    g.upstream.on('POST /v1/uploads', async (req, res) => {
      n += 1;
      if (n === 1) {
        // A slow echo of the request headers (a debug endpoint, a reflected header).
        firstArrived();
        await gate;
        json(res, 200, { seen_authorization: req.headers.authorization });
      } else if (n === 2) {
        // Any 401 makes the proxy drop its cached token and fetch a new one.
        json(res, 401, { error: 'nope' });
      } else {
        json(res, 200, { ok: true });
      }
    });

    const slow = g.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('a') });
    await arrived;
    const refresh = await g.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('b') });
    expect(refresh.status).toBe(200);
    expect(issued).toBe(2);
    release();
    const reply = await slow;
    expect(reply.status).toBe(200);
    // The upstream really received token 1 in that call.
    expect(g.upstream.received('/v1/uploads')[0]?.headers.authorization).toBe(
      'Bearer oauth-access-token-1-still-valid',
    );
    // The agent must not get it back.
    expect(reply.text).not.toContain('oauth-access-token-1-still-valid');
  });

  it("a reload that rotates the client stops sending the old client's token at once", async () => {
    const env = { GW_CLIENT_ID: 'old-client', GW_CLIENT_SECRET: 'old-client-secret-123456' };
    const rotating = await startGateway({
      api: [
        '    credentials:',
        '      oauthClient:',
        '        client_id: {env: GW_CLIENT_ID}',
        '        client_secret: {env: GW_CLIENT_SECRET}',
        '        token_url: {{upstream}}/oauth/token',
      ].join('\n'),
      env,
    });
    try {
      const agent = await rotating.p.activeAgent(['upload_file']);
      const clients: string[] = [];
      rotating.upstream.on('POST /oauth/token', (req, res) => {
        const basic = Buffer.from(String(req.headers.authorization).slice('Basic '.length), 'base64');
        const client = decodeURIComponent(basic.toString('utf8').split(':')[0] ?? '');
        clients.push(client);
        json(res, 200, { access_token: `token-for-${client}`, token_type: 'Bearer', expires_in: 3600 });
      });
      rotating.upstream.on('POST /v1/uploads', (_req, res) => json(res, 200, {}));
      const call = () => rotating.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('a') });

      expect((await call()).status).toBe(200);
      env.GW_CLIENT_ID = 'new-client';
      env.GW_CLIENT_SECRET = 'new-client-secret-654321';
      expect((await rotating.p.proxy.reload()).ok).toBe(true);
      expect((await call()).status).toBe(200);

      expect(clients).toEqual(['old-client', 'new-client']);
      expect(rotating.upstream.received('/v1/uploads').map((r) => r.headers.authorization)).toEqual([
        'Bearer token-for-old-client',
        'Bearer token-for-new-client',
      ]);
    } finally {
      await rotating.close();
    }
  });

  it('a static key a reload replaced is still withheld from answers read after the reload', async () => {
    const OLD_KEY = 'old-static-api-key-0123456789';
    const env = { GW_KEY: OLD_KEY };
    const rotating = await startGateway({ api: '    credentials:\n      apiKeyHeader: {env: GW_KEY}', env });
    try {
      const agent = await rotating.p.activeAgent(['get_item']);
      // An upstream that still echoes the key a job was started with (a status, a debug field).
      rotating.upstream.on('GET /v1/items/job', (req, res) =>
        json(res, 200, { started_with: OLD_KEY, now_with: req.headers['x-api-key'] }),
      );
      env.GW_KEY = 'new-static-api-key-9876543210';
      expect((await rotating.p.proxy.reload()).ok).toBe(true);
      const reply = await rotating.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'job' });
      expect(rotating.upstream.received('/v1/items/job')[0]?.headers['x-api-key']).toBe(
        'new-static-api-key-9876543210',
      );
      expect(reply.text).not.toContain(OLD_KEY);
      expect(reply.text).not.toContain('new-static-api-key-9876543210');
    } finally {
      await rotating.close();
    }
  });
});

describe('the OAuth client secret', () => {
  it('an answer echoing the client secret is redacted, as any service credential (issue 10 class 12)', async () => {
    const oauth = await startGateway({
      api: oauthClientApi('svc-client', '{env: GW_CLIENT_SECRET}'),
      env: { GW_CLIENT_SECRET: CLIENT_SECRET },
    });
    try {
      const agent = await oauth.p.activeAgent(['upload_file']);
      oauth.upstream.on('POST /oauth/token', (_req, res) =>
        json(res, 200, {
          access_token: 'oauth-access-token-abcdef-123',
          token_type: 'Bearer',
          expires_in: 3600,
        }),
      );
      // A misconfigured upstream (a debug endpoint) reflecting the secret of its token endpoint.
      oauth.upstream.on('POST /v1/uploads', (_req, res) =>
        json(res, 200, { debug: `client_secret=${CLIENT_SECRET}` }),
      );
      const reply = await oauth.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('a') });
      expect(reply.status).toBe(200);
      expect(reply.text).toContain('[redacted]');
      expect(reply.text).not.toContain(CLIENT_SECRET);
    } finally {
      await oauth.close();
    }
  });
});
