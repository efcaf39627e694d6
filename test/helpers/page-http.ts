/** The approval pages over plain HTTP (no browser): a proxy with local sign-in, cookies, forms. */
import { hashPassword } from '../../src/util/password.js';
import { freePort, writeConfig } from './browser.js';
import { generateTestKey, type TestKey } from './keys.js';
import { startProtocol, TestClock, type TestProtocol } from './protocol.js';
import { PETSTORE } from './proxy.js';
import { PASSWORD } from './local-sign-in.js';

export { PASSWORD };

export const ALICE = 'alice@example.com';
export const BOB = 'bob@example.com';
const POLICY =
  'capabilities:\n  public: ["*"]\nrate_limits:\n  unknown_host_registration: null\n  per_ip: 100000/1m\n';

export async function startPagesProxy(
  extraSignIn = '',
  opts: { issuer?: (port: number) => string; clock?: TestClock; policy?: string } = {},
): Promise<TestProtocol> {
  const hash = await hashPassword(PASSWORD, { N: 2 ** 14, r: 8, p: 1 });
  const port = await freePort();
  const issuer = opts.issuer ? opts.issuer(port) : `http://localhost:${port}`;
  const config = writeConfig(
    `server:\n  port: ${port}\n  issuer: ${issuer}\napis:\n  - spec: ${PETSTORE}\nsign_in:\n  fresh_auth: 5m\n  local:\n    users:\n      - user_id: ${ALICE}\n        password_hash: "${hash}"\n      - user_id: ${BOB}\n        password_hash: "${hash}"\n${extraSignIn}`,
  );
  return startProtocol({
    policy: opts.policy ?? POLICY,
    clock: opts.clock ?? new TestClock(),
    overrides: { config, port },
  });
}

export function originOf(p: TestProtocol): string {
  return new URL(p.issuer).origin;
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

export async function get(
  p: TestProtocol,
  path: string,
  cookie = '',
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await fetch(`${p.proxy.url}${path}`, {
    redirect: 'manual',
    headers: { ...(cookie ? { cookie } : {}), ...headers },
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

export async function post(
  p: TestProtocol,
  path: string,
  fields: Record<string, string> | URLSearchParams,
  cookie = '',
  origin: string | null = originOf(p),
  extra: Record<string, string> = {},
): Promise<Answer> {
  const res = await fetch(`${p.proxy.url}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      ...(cookie ? { cookie } : {}),
      ...(origin !== null ? { origin } : {}),
      'content-type': 'application/x-www-form-urlencoded',
      ...extra,
    },
    body: (fields instanceof URLSearchParams ? fields : new URLSearchParams(fields)).toString(),
  });
  return { status: res.status, headers: res.headers, text: await res.text() };
}

/** name=value of the session cookie set by an answer. */
export function cookieOf(a: Answer): string {
  const set = a.headers.get('set-cookie') ?? '';
  return set.split(';')[0] ?? '';
}

export async function signIn(
  p: TestProtocol,
  user = ALICE,
  ret = '/device',
  cookie = '',
): Promise<{ cookie: string; answer: Answer }> {
  const a = await post(p, '/sign-in', { user_id: user, password: PASSWORD, return: ret }, cookie);
  return { cookie: cookieOf(a), answer: a };
}

/** The session's CSRF token, from a page it renders. */
export async function csrfOf(p: TestProtocol, cookie: string): Promise<string> {
  const a = await get(p, '/device', cookie);
  const m = /name="csrf" value="([^"]+)"/.exec(a.text);
  if (!m) throw new Error(`no csrf in ${a.text.slice(0, 500)}`);
  return m[1] as string;
}

/** The hidden inputs of a form with id `formId` in `html`. */
export function hiddenFields(html: string, formId: string): Record<string, string> {
  const start = html.indexOf(`id="${formId}"`);
  if (start < 0) throw new Error(`no form ${formId}`);
  const end = html.indexOf('</form>', start);
  const chunk = html.slice(start, end);
  const out: Record<string, string> = {};
  for (const m of chunk.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)) {
    out[m[1] as string] = (m[2] as string).replace(/&amp;/g, '&').replace(/&quot;/g, '"');
  }
  return out;
}

export async function pendingRegistration(
  p: TestProtocol,
  body: Record<string, unknown> = {},
  host?: TestKey,
): Promise<{ code: string; host: TestKey; agentId: string; body: any }> {
  host ??= await generateTestKey();
  const reg = await p.register(host, {
    name: 'Shelter helper',
    host_name: 'Alice laptop',
    capabilities: ['list_pets'],
    reason: 'Keep the shelter list current',
    ...body,
  });
  if (reg.status !== 200) throw new Error(`register: ${reg.status} ${JSON.stringify(reg.body)}`);
  return { code: reg.body.approval.user_code, host, agentId: reg.body.agent_id, body: reg.body };
}
