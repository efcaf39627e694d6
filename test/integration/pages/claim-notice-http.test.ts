/**
 * §9.3 / §2.10: approving a delegated agent of a host linked to nobody links the host to the
 * approver, and its autonomous agents become theirs with their history. The request page names
 * those agents and their latest activity before that happens. Over plain HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateTestKey } from '../../helpers/keys.js';
import {
  ALICE,
  csrfOf,
  hiddenFields,
  pendingRegistration,
  post,
  signIn,
  startPagesProxy,
} from '../../helpers/page-http.js';
import type { TestProtocol } from '../../helpers/protocol.js';

const POLICY = `capabilities:
  public: ["*"]
rate_limits:
  unknown_host_registration: null
  per_ip: 100000/1m
modes: [delegated, autonomous]
autonomous:
  bootstrap: policy
  grants: [list_pets]
`;

let p: TestProtocol;
beforeAll(async () => {
  p = await startPagesProxy('', { policy: POLICY });
});
afterAll(() => p.close());

async function requestPage(
  cookie: string,
  code: string,
): Promise<{ html: string; fields: Record<string, string> }> {
  const shown = await post(p, '/device', { csrf: await csrfOf(p, cookie), code }, cookie);
  expect(shown.status).toBe(200);
  return { html: shown.text, fields: hiddenFields(shown.text, 'approve-form') };
}

describe('a request that would claim autonomous agents (§9.3)', () => {
  it('names them and what they did before the approver links the host; approving claims them', async () => {
    const host = await generateTestKey();
    const crawler = await p.register(host, {
      name: 'Night crawler',
      mode: 'autonomous',
      capabilities: ['list_pets'],
    });
    expect(crawler.body.status).toBe('active');
    const r = await pendingRegistration(p, { capabilities: ['list_pets'] }, host);
    const { cookie } = await signIn(p);
    const { html, fields } = await requestPage(cookie, r.code);
    const notice = /<div id="claims"[\s\S]*?<\/div>/.exec(html)?.[0] ?? '';
    expect(notice).toContain('Approving links this host to you.');
    expect(notice).toContain('<strong>Night crawler</strong> (active)');
    expect(notice).toMatch(/Z agent\.registered: active<\/li>/);

    const approved = await post(p, '/device/approve', { ...fields, cap: '0', expires: 'never' }, cookie);
    expect(approved.status).toBe(200);
    const claimed = await p.admin('GET', `/admin/agents/${crawler.body.agent_id}`);
    expect(claimed.body).toMatchObject({ status: 'claimed', user_id: ALICE });
  });

  it('says nothing of the kind for a host without autonomous agents', async () => {
    const r = await pendingRegistration(p);
    const { cookie } = await signIn(p);
    expect((await requestPage(cookie, r.code)).html).not.toContain('id="claims"');
  });
});
