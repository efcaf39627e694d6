/**
 * §9.3 / §2.10: approving a delegated agent of a host linked to nobody links the host to the
 * approver, and its autonomous agents become theirs with their history. The request page names
 * those agents and their latest activity before that happens. Over plain HTTP.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_CLAIMS_READ } from '../../../src/protocol/device.js';
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
import type { AgentStatus } from '../../../src/storage/types.js';

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

/**
 * A delegated agent's pending request under a new host linked to nobody, which then gets `count`
 * autonomous agents in `status`, written straight to the store (registering them would take long).
 */
async function requestWithAgents(count: number, status: AgentStatus): Promise<{ code: string }> {
  const r = await pendingRegistration(p, { capabilities: ['list_pets'] }, await generateTestKey());
  const hostId = (await p.admin('GET', `/admin/agents/${r.agentId}`)).body.host_id as string;
  const now = p.clock.now();
  await p.proxy.protocol.store.write(async (tx) => {
    for (let i = 0; i < count; i++) {
      await tx.insertAgent({
        id: `agt_${status}_${hostId}_${i}`,
        hostId,
        userId: null,
        name: `${status} ${i}`,
        publicJwk: { kty: 'OKP', crv: 'Ed25519', x: String(i).padStart(43, 'A') },
        keyThumbprint: `${hostId}-${i}`,
        mode: 'autonomous',
        status,
        lastUsedAt: null,
        activatedAt: now,
        createdAt: now + 1 + i,
        updatedAt: now + 1 + i,
      });
    }
  });
  return { code: r.code };
}

/** The claims notice of the request page for `code`, as a signed-in approver sees it. */
async function claimsNoticeOf(code: string): Promise<string> {
  const { cookie } = await signIn(p);
  return /<div id="claims"[\s\S]*?<\/div>/.exec((await requestPage(cookie, code)).html)?.[0] ?? '';
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
    expect(notice).toContain('Approving connects this app (its host) to your account.');
    expect(notice).toContain('<strong>Night crawler</strong> (active)');
    expect(notice).toMatch(/Z agent\.registered: active<\/li>/);

    const approved = await post(p, '/device/approve', { ...fields, cap: '0', expires: 'never' }, cookie);
    expect(approved.status).toBe(200);
    const claimed = await p.admin('GET', `/admin/agents/${crawler.body.agent_id}`);
    expect(claimed.body).toMatchObject({ status: 'claimed', user_id: ALICE });
  });

  it(`reads at most ${MAX_CLAIMS_READ} of the host's agents per view, and says when there are more`, async () => {
    // An operator-approved host linked to nobody may hold any number of agents: 1,200 here.
    const { code } = await requestWithAgents(MAX_CLAIMS_READ + 200, 'active');
    const notice = await claimsNoticeOf(code);
    // The pending agent itself is the first of the 1,000 read; 999 autonomous ones, 5 of them shown.
    expect(notice).toContain(`… and at least 994 more (this app has over ${MAX_CLAIMS_READ} agents).`);
    expect(notice.match(/<li>/g)).toHaveLength(5);
  });

  it(`past ${MAX_CLAIMS_READ} agents with no autonomous one among those read, it still warns`, async () => {
    const { code } = await requestWithAgents(MAX_CLAIMS_READ + 1, 'revoked');
    // Observed before: no notice at all, though approving would claim any autonomous agent past the 1,000.
    expect(await claimsNoticeOf(code)).toContain(
      `It has over ${MAX_CLAIMS_READ} agents; the autonomous ones among them become yours`,
    );
  });

  it('says nothing of the kind for a host without autonomous agents', async () => {
    const r = await pendingRegistration(p);
    const { cookie } = await signIn(p);
    expect((await requestPage(cookie, r.code)).html).not.toContain('id="claims"');
  });
});
