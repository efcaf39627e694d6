/**
 * Per-call approval tests (issue 16 §1): a real proxy whose issuer is http://localhost:PORT (so
 * passkeys work), in front of a recording upstream serving the payments fixture, with local
 * approver accounts; and an approver that works the pages over plain HTTP (cookies, CSRF token
 * and Origin as a browser sends them) with a software passkey.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../../src/log.js';
import { hashPassword } from '../../src/util/password.js';
import { freePort, writeConfig } from './browser.js';
import { TestClock, type TestProtocol } from './protocol.js';
import { startInFrontOf } from './proxy-in-front.js';
import { ROOT } from './proxy.js';
import { TestUpstream } from './upstream.js';
import { SoftAuthenticator } from './webauthn.js';
import { PASSWORD } from './local-sign-in.js';

export { PASSWORD };

export const PER_CALL_SPEC = join(ROOT, 'test/fixtures/specs/per-call.yaml');

export interface PerCallProxy {
  readonly p: TestProtocol;
  readonly upstream: TestUpstream;
  readonly clock: TestClock;
  close(): Promise<void>;
}

/** A YAML OpenAPI document written to a fresh temp directory; its path. */
export function writeSpecText(yaml: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'aap-per-call-spec-')), 'spec.yaml');
  writeFileSync(file, yaml);
  return file;
}

export async function startPerCallProxy(options: {
  policy: string;
  users: readonly string[];
  config?: string;
  /** Extra lines of the API's entry (credentials…), indented by four spaces; `{{upstream}}` is its URL. */
  api?: string;
  /** The API document (default: PER_CALL_SPEC). */
  spec?: string;
  /** Receives the proxy's log (default: silent). */
  logger?: Logger;
}): Promise<PerCallProxy> {
  const hash = await hashPassword(PASSWORD, { N: 2 ** 14, r: 8, p: 1 });
  const users = options.users
    .map((u) => `      - user_id: ${u}\n        password_hash: "${hash}"\n`)
    .join('');
  const port = await freePort();
  const upstream = await TestUpstream.start();
  const config = writeConfig(
    `server:\n  port: ${port}\n  issuer: http://localhost:${port}\napis:\n  - spec: ${options.spec ?? PER_CALL_SPEC}\n    upstream: ${upstream.url}\n` +
      (options.api ?? '').replaceAll('{{upstream}}', upstream.url) +
      `sign_in:\n  fresh_auth: 5m\n  local:\n    users:\n${users}${options.config ?? ''}`,
  );
  const clock = new TestClock();
  const { p, close } = await startInFrontOf(upstream, {
    policy: options.policy,
    clock,
    overrides: { config, port },
    ...(options.logger ? { logger: options.logger } : {}),
  });
  return { p, upstream, clock, close };
}

/** A policy in which each call of `capabilities` waits for a person's approval, strangers unthrottled. */
export function perCallPolicy(capabilities: string): string {
  return `capabilities:\n  per_call: [${capabilities}]\nrate_limits:\n  unknown_host_registration: null\n`;
}

/** A passkey of `userId`, stored as an enrolment would store it; the test holds the authenticator. */
export async function softPasskey(
  p: TestProtocol,
  userId: string,
  credentialId?: Buffer,
): Promise<SoftAuthenticator> {
  const userHandle = randomBytes(16).toString('base64url');
  const soft = new SoftAuthenticator(userHandle, credentialId);
  await p.proxy.protocol.store.write((tx) =>
    tx.insertPasskey({
      id: soft.id,
      userId,
      userHandle,
      publicKey: soft.cosePublicKey(),
      counter: 0,
      transports: ['internal'],
      name: 'test key',
      createdAt: p.clock.now(),
      lastUsedAt: null,
    }),
  );
  return soft;
}

/** A signed-in approver on the pages, over plain HTTP. */
export class PageClient {
  private constructor(
    readonly origin: string,
    private readonly cookie: string,
  ) {}

  static async signIn(origin: string, userId: string): Promise<PageClient> {
    const res = await fetch(`${origin}/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ user_id: userId, password: PASSWORD, return: '/approvals' }),
    });
    const cookie = (res.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    if (res.status !== 303 || cookie === '') throw new Error(`sign-in failed: ${res.status}`);
    return new PageClient(origin, cookie);
  }

  /** Whether this browser is still signed in: the account page shows its own (with a CSRF token). */
  async signedIn(): Promise<boolean> {
    const { status, html } = await this.get('/account');
    if (status !== 200) throw new Error(`account page: ${status}`);
    return html.includes('name="csrf"') && !html.includes('id="sign-in-link"');
  }

  async get(path: string): Promise<{ status: number; html: string }> {
    const res = await fetch(`${this.origin}${path}`, { headers: { cookie: this.cookie } });
    return { status: res.status, html: await res.text() };
  }

  async post(path: string, fields: Record<string, string>): Promise<{ status: number; text: string }> {
    const res = await fetch(`${this.origin}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        cookie: this.cookie,
        origin: this.origin,
        'content-type': 'application/x-www-form-urlencoded',
      },
      body: new URLSearchParams(fields),
    });
    return { status: res.status, text: await res.text() };
  }

  /** The call page's form fields: the CSRF token and the shown hash. */
  async callForm(callId: string): Promise<{ status: number; csrf: string; shown: string; html: string }> {
    const { status, html } = await this.get(`/approvals/calls/${callId}`);
    const field = (name: string): string =>
      new RegExp(`name="${name}" value="([^"]*)"`).exec(html)?.[1] ?? '';
    return { status, csrf: field('csrf'), shown: field('shown'), html };
  }

  /** A passkey assertion for approving `callId` with `fields` (what the page script does). */
  async assertion(
    callId: string,
    soft: SoftAuthenticator,
    fields: { csrf: string; shown: string },
  ): Promise<string> {
    const options = await this.post(`/approvals/calls/${callId}/passkey-options`, fields);
    if (options.status !== 200) throw new Error(`passkey options: ${options.status} ${options.text}`);
    const challenge = (JSON.parse(options.text) as { assertion: { challenge: string } }).assertion.challenge;
    return soft.assert({ challenge, rpId: 'localhost', origin: this.origin });
  }

  /** Opens the call, confirms with the passkey, and posts Approve; the answer. */
  async approve(callId: string, soft: SoftAuthenticator): Promise<{ status: number; text: string }> {
    const form = await this.callForm(callId);
    const assertion = await this.assertion(callId, soft, form);
    return this.post(`/approvals/calls/${callId}/approve`, { csrf: form.csrf, shown: form.shown, assertion });
  }
}

/** The call id of a per-call status URL. */
export function callIdOf(statusUrl: string): string {
  return statusUrl.slice(statusUrl.lastIndexOf('/') + 1);
}
