/** The config of a page test's proxy: the petstore on a free port with issuer http://localhost:PORT (so Chromium keeps its cookies and passkeys), and local accounts that sign in with PASSWORD. */
import { hashPassword } from '../../src/util/password.js';
import { freePort, writeConfig } from './browser.js';
import { PETSTORE } from './proxy.js';

export const PASSWORD = 'correct horse battery staple';

/** The `sign_in:` section with the local accounts `users`, all with PASSWORD; `extra` is its lines before `local:` (e.g. fresh_auth). */
export async function localSignIn(users: readonly string[], extra = ''): Promise<string> {
  const hash = await hashPassword(PASSWORD, { N: 2 ** 14, r: 8, p: 1 });
  const entries = users.map((u) => `      - user_id: ${u}\n        password_hash: "${hash}"\n`).join('');
  return `sign_in:\n${extra}  local:\n    users:\n${entries}`;
}

/** Writes the config (the petstore API, from `upstream` when given, then `signIn`) on a free port; the proxy overrides that use it. */
export async function localhostConfig(
  signIn: string,
  upstream?: string,
): Promise<{ config: string; port: number }> {
  const port = await freePort();
  const config = writeConfig(
    `server:\n  port: ${port}\n  issuer: http://localhost:${port}\napis:\n  - spec: ${PETSTORE}\n` +
      (upstream === undefined ? '' : `    upstream: ${upstream}\n`) +
      signIn,
  );
  return { config, port };
}
