/**
 * Open passkey sign-in challenges are bounded per client (CHALLENGE_BOUNDS.perOwner, the newest
 * kept) and in all. The client is its network, an IPv6 client's /64: one that holds many
 * addresses (RFC 8981) gets one client's share, not one per address, of the total every visitor
 * shares.
 */
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHALLENGE_BOUNDS } from '../../../src/protocol/passkeys.js';
import { freePort, writeConfig } from '../../helpers/browser.js';
import { post } from '../../helpers/page-http.js';
import { startProtocol, TestClock, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE, tempDbFile } from '../../helpers/proxy.js';
import { hashPassword } from '../../../src/util/password.js';
import { PASSWORD } from '../../helpers/local-sign-in.js';

const database = tempDbFile();
let p: TestProtocol;
beforeAll(async () => {
  const hash = await hashPassword(PASSWORD, { N: 2 ** 14, r: 8, p: 1 });
  // Passkeys need a secure context: http://localhost is one, an IP address is not.
  const port = await freePort();
  const config = writeConfig(
    `server:\n  port: ${port}\n  issuer: http://localhost:${port}\n  trusted_proxies: ["127.0.0.1/32"]\napis:\n  - spec: ${PETSTORE}\n` +
      `sign_in:\n  local:\n    users:\n      - user_id: alice@example.com\n        password_hash: "${hash}"\n`,
  );
  p = await startProtocol({
    clock: new TestClock(),
    policy: 'rate_limits:\n  per_ip: 100000/1m\n',
    overrides: { config, port, db: database },
  });
});
afterAll(() => p?.close());

/** Open challenges by owner, read from the proxy's own database. */
function challengesByOwner(): Record<string, number> {
  const db = new Database(database, { readonly: true });
  try {
    const rows = db.prepare('SELECT owner, count(*) AS n FROM webauthn_challenges GROUP BY owner').all() as {
      owner: string;
      n: number;
    }[];
    return Object.fromEntries(rows.map((r) => [r.owner, r.n]));
  } finally {
    db.close();
  }
}

describe('passkey sign-in challenges', () => {
  it('are counted per client network: addresses of one IPv6 /64 share one bound', async () => {
    const from = (client: string) =>
      post(p, '/sign-in/passkey/options', {}, '', undefined, { 'x-forwarded-for': client });
    for (let i = 1; i <= CHALLENGE_BOUNDS.perOwner + 3; i++)
      expect((await from(`2001:db8:7:7::${i}`)).status).toBe(200);
    expect((await from('2001:db8:7:8::1')).status).toBe(200);
    expect((await from('192.0.2.7')).status).toBe(200);
    expect(challengesByOwner()).toEqual({
      'ip:2001:db8:7:7::/64': CHALLENGE_BOUNDS.perOwner,
      'ip:2001:db8:7:8::/64': 1,
      'ip:192.0.2.7': 1,
    });
  });
});
