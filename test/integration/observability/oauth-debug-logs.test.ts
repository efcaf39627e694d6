/**
 * At `debug`, an OAuth client-credentials API whose token endpoint and API misbehave
 * (echo the client's Basic credentials, the token, a 401 that forces a refresh) leaves no client
 * secret, Basic pair, access token or agent JWT in any log line.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { json } from '../../helpers/upstream.js';

const CLIENT_ID = 'audit-client';
const CLIENT_SECRET = 'audit-client-secret-QWERTY-987';
const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

let gw: Gateway | undefined;
afterEach(async () => {
  await gw?.close();
  gw = undefined;
});

describe('OAuth service credentials at debug level', () => {
  it('no log line carries the client secret, the Basic pair, an access token or a JWT', async () => {
    const lines: string[] = [];
    gw = await startGateway({
      api: [
        '    credentials:',
        '      oauthClient:',
        `        client_id: ${CLIENT_ID}`,
        '        client_secret: {env: AUDIT_CLIENT_SECRET}',
        '        token_url: {{upstream}}/oauth/token',
      ].join('\n'),
      config: 'log_level: debug',
      env: { AUDIT_CLIENT_SECRET: CLIENT_SECRET },
      logSink: (l) => lines.push(l),
    });
    const agent = await gw.p.activeAgent(['upload_file']);
    let issued = 0;
    let mode: 'ok' | 'echo401' | 'fail' = 'echo401';
    gw.upstream.on('POST /oauth/token', (req, res) => {
      if (mode === 'fail') {
        json(res, 500, { error: 'server_error', auth: req.headers.authorization, secret: CLIENT_SECRET });
        return;
      }
      issued += 1;
      json(res, 200, { access_token: `audit-access-token-${issued}-abcdef`, expires_in: 3600 });
    });
    gw.upstream.on('POST /v1/uploads', (req, res) => {
      if (mode !== 'ok') json(res, 401, { got: req.headers.authorization });
      else json(res, 200, { ok: true });
    });
    const r1 = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('x') });
    expect(r1.status).toBeGreaterThanOrEqual(400);
    mode = 'fail';
    // A fresh token is needed after the 401 refreshes: force the endpoint to fail.
    const r2 = await gw.p.execute(agent.agent, agent.agentId, 'upload_file', { file: b64('x') });
    expect(r2.status).toBeGreaterThanOrEqual(400);
    expect(lines.length).toBeGreaterThan(0);
    const bad = lines.filter(
      (l) =>
        l.includes(CLIENT_SECRET) ||
        l.includes(b64(`${CLIENT_ID}:${CLIENT_SECRET}`)) ||
        l.includes('audit-access-token') ||
        l.includes('eyJ'),
    );
    expect(bad).toEqual([]);
  });
});
