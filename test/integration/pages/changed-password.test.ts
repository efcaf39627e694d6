/**
 * §8.11: a restart with a changed password_hash ends the password sessions the old password
 * started (config/sign-in.ts credentialTag); the other accounts' sessions stay.
 */
import { expect, it } from 'vitest';
import { hashPassword } from '../../../src/util/password.js';
import { freePort, writeConfig } from '../../helpers/browser.js';
import { startProtocol, TestClock } from '../../helpers/protocol.js';
import { PETSTORE, tempDbFile } from '../../helpers/proxy.js';
import { ALICE, BOB, cookieOf, get, PASSWORD, post, signIn } from '../../helpers/page-http.js';

const POLICY = 'capabilities:\n  public: ["*"]\n';
const NEW_PASSWORD = 'a-new-password-after-the-leak';

it('after the operator changes bob’s password_hash (restart), his old session signs nobody in', async () => {
  const cost = { N: 2 ** 14, r: 8, p: 1 };
  const before = await hashPassword(PASSWORD, cost);
  const after = await hashPassword(NEW_PASSWORD, cost);
  const db = tempDbFile();
  const clock = new TestClock();
  const port = await freePort();
  const cfg = (bobHash: string): string =>
    writeConfig(
      `server:\n  port: ${port}\n  issuer: http://localhost:${port}\napis:\n  - spec: ${PETSTORE}\n` +
        `sign_in:\n  fresh_auth: 5m\n  local:\n    users:\n` +
        `      - user_id: ${ALICE}\n        password_hash: "${before}"\n` +
        `      - user_id: ${BOB}\n        password_hash: "${bobHash}"\n`,
    );
  const first = await startProtocol({ policy: POLICY, clock, overrides: { config: cfg(before), port, db } });
  const bob = await signIn(first, BOB);
  const alice = await signIn(first, ALICE);
  expect((await get(first, '/device', bob.cookie)).text).toContain('id="signed-in-as"');
  await first.close();

  const second = await startProtocol({ policy: POLICY, clock, overrides: { config: cfg(after), port, db } });
  try {
    const stale = await get(second, '/device', bob.cookie);
    expect(stale.text).not.toContain('id="signed-in-as"');
    expect(stale.text).not.toContain(`>${BOB}<`);
    // alice's password did not change: her session stays.
    expect((await get(second, '/device', alice.cookie)).text).toContain('id="signed-in-as"');
    // The old password no longer signs bob in; the new one does, and that session is kept.
    expect((await post(second, '/sign-in', { user_id: BOB, password: PASSWORD })).status).toBe(400);
    const fresh = await post(second, '/sign-in', { user_id: BOB, password: NEW_PASSWORD, return: '/device' });
    expect(fresh.status).toBe(303);
    expect((await get(second, '/device', cookieOf(fresh))).text).toContain('id="signed-in-as"');
  } finally {
    await second.close();
  }
});
