/**
 * §2.9 / §8.11: approving a delegated agent of an unlinked host links the host, and its agents
 * then get the defaults without asking. So approving even a read-only request of such a host
 * grants what the defaults grant: the page lists them, and a passkey is asked for when one of them
 * can change data. Found by a review: a password session approved list_pets, linked the host, and
 * the agent then got create_pet by default.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ALICE,
  csrfOf,
  hiddenFields,
  originOf,
  pendingRegistration,
  post,
  signIn,
  startPagesProxy,
} from '../../helpers/page-http.js';
import { softPasskey } from '../../helpers/per-call.js';
import type { TestProtocol } from '../../helpers/protocol.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startPagesProxy('', {
    policy:
      'capabilities:\n  defaults: [list_pets, create_pet]\nrate_limits:\n  unknown_host_registration: null\n  per_ip: 100000/1m\n',
  });
});
afterAll(() => p.close());

async function opened(
  cookie: string,
  code: string,
): Promise<{ text: string; fields: Record<string, string> }> {
  const csrf = await csrfOf(p, cookie);
  const page = await post(p, '/device', { csrf, code }, cookie);
  expect(page.status).toBe(200);
  return {
    text: page.text,
    fields: { ...hiddenFields(page.text, 'approve-form'), cap: '0', expires: 'never' },
  };
}

describe('approving links the host: what its agents then get is shown, and weighed', () => {
  it('a read-only request whose host defaults can change data: listed, and a password alone cannot approve it', async () => {
    const alice = await signIn(p, ALICE);
    const r = await pendingRegistration(p, { capabilities: ['list_pets'] });
    const { text, fields } = await opened(alice.cookie, r.code);
    const notice = /<div id="link-unlocks"[\s\S]*?<\/div>/.exec(text)?.[0] ?? '';
    expect(notice).toContain('<code>create_pet</code> (can change data)');
    expect(notice).toMatch(/<code>list_pets<\/code><\/li>/);

    const refused = await post(p, '/device/approve', fields, alice.cookie);
    expect(refused.status).toBe(403);
    expect(refused.text).toContain('A passkey is required');
    expect((await p.status(r.host, r.agentId)).body.status).toBe('pending');

    const soft = await softPasskey(p, ALICE);
    const opts = await post(p, '/device/passkey-options', fields, alice.cookie);
    expect(opts.status).toBe(200);
    const challenge = (JSON.parse(opts.text) as { assertion: { challenge: string } }).assertion.challenge;
    const assertion = soft.assert({ challenge, rpId: 'localhost', origin: originOf(p) });
    const approved = await post(p, '/device/approve', { ...fields, assertion }, alice.cookie);
    expect(approved.status).toBe(200);
    expect((await p.status(r.host, r.agentId)).body.status).toBe('active');
  });

  it('a host already linked shows no such notice: approving links nothing', async () => {
    const alice = await signIn(p, ALICE);
    const linked = await p.linkedHost(ALICE);
    const r = await pendingRegistration(p, { capabilities: ['delete_pet'] }, linked.key);
    const csrf = await csrfOf(p, alice.cookie);
    const page = await post(p, '/device', { csrf, code: r.code }, alice.cookie);
    expect(page.text).not.toContain('id="link-unlocks"');
  });
});
