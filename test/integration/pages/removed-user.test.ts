/** §8.11: a local account taken out of sign_in.local.users (then a restart) signs nobody in any more, old sessions included. */
import { expect, it } from 'vitest';
import { hashPassword } from '../../../src/util/password.js';
import { freePort, writeConfig } from '../../helpers/browser.js';
import { startProtocol, TestClock } from '../../helpers/protocol.js';
import { PETSTORE, tempDbFile } from '../../helpers/proxy.js';
import {
  ALICE,
  BOB,
  csrfOf,
  get,
  hiddenFields,
  PASSWORD,
  pendingRegistration,
  post,
  signIn,
} from '../../helpers/page-http.js';

const POLICY = 'capabilities:\n  public: ["*"]\nrate_limits:\n  unknown_host_registration: null\n';

it('after the operator removes bob from sign_in.local.users (restart), his old session still approves', async () => {
  const hash = await hashPassword(PASSWORD, { N: 2 ** 14, r: 8, p: 1 });
  const db = tempDbFile();
  const clock = new TestClock();
  const port = await freePort();
  const users = (list: string[]): string =>
    list.map((u) => `      - user_id: ${u}\n        password_hash: "${hash}"\n`).join('');
  const cfg = (list: string[]): string =>
    writeConfig(
      `server:\n  port: ${port}\n  issuer: http://localhost:${port}\napis:\n  - spec: ${PETSTORE}\nsign_in:\n  fresh_auth: 5m\n  local:\n    users:\n${users(list)}`,
    );
  const first = await startProtocol({
    policy: POLICY,
    clock,
    overrides: { config: cfg([ALICE, BOB]), port, db },
  });
  const { cookie } = await signIn(first, BOB);
  await first.close();

  // The operator takes bob out of the configuration and restarts the proxy.
  const second = await startProtocol({
    policy: POLICY,
    clock,
    overrides: { config: cfg([ALICE]), port, db },
  });
  try {
    // bob can no longer sign in ...
    const again = await post(second, '/sign-in', { user_id: BOB, password: PASSWORD });
    expect(again.status).toBe(400);
    // ... but the session he had is still honoured: expected to be gone with his account.
    const page = await get(second, '/device', cookie);
    const r = await pendingRegistration(second);
    let approved = false;
    if (page.text.includes('id="signed-in-as"')) {
      const csrf = await csrfOf(second, cookie);
      const shown = await post(second, '/device', { csrf, code: r.code }, cookie);
      const fields = hiddenFields(shown.text, 'approve-form');
      await post(second, '/device/approve', { ...fields, cap: '0', expires: 'never' }, cookie);
      approved = (await second.status(r.host, r.agentId)).body.status === 'active';
    }
    expect(approved, 'a removed account approved a request').toBe(false);
    expect(page.text).not.toContain(`>${BOB}<`);
  } finally {
    await second.close();
  }
});
