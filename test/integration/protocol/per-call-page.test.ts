/**
 * What the per-call page shows (README "Per-call approval" 2.): what the person reads is what is
 * sent, whatever the JSON's spelling of it; invisible characters in values are made visible
 * (`\u{…}`); field names are printed raw, but an agent cannot choose them (the top-level input
 * is closed).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  callIdOf,
  PageClient,
  type PerCallProxy,
  startPerCallProxy,
  writeSpecText,
  perCallPolicy,
} from '../../helpers/per-call.js';

const ALICE = 'alice@example.com';
const SPEC = `openapi: 3.1.0
info: { title: Pay, version: '1' }
servers: [{ url: https://pay.example.com }]
paths:
  /payments:
    post:
      operationId: pay
      summary: Pay someone
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              required: [to, amount]
              properties:
                to: { type: string, description: Destination account }
                amount: { type: number, description: Amount }
                meta: { type: object, description: Free-form metadata }
      responses:
        '200': { description: ok, content: { application/json: { schema: { type: object } } } }
`;
const POLICY = perCallPolicy('pay');

let s: PerCallProxy;
let alice: PageClient;
beforeAll(async () => {
  s = await startPerCallProxy({ spec: writeSpecText(SPEC), policy: POLICY, users: [ALICE] });
  alice = await PageClient.signIn(s.p.issuer, ALICE);
});
afterAll(() => s?.close());

async function page(args: Record<string, unknown>, raw?: string): Promise<string> {
  const { p } = s;
  const a = await p.activeAgent(['pay'], { userId: ALICE });
  const token = await p.agentToken(a.agent, a.agentId, {}, p.executeLocation);
  const reply = raw
    ? await p.request('POST', '/capability/execute', {
        token,
        rawBody: raw,
        headers: { 'content-type': 'application/json' },
      })
    : await p.execute(a.agent, a.agentId, 'pay', args);
  expect(reply.status).toBe(202);
  return (await alice.callForm(callIdOf(reply.body.status_url))).html;
}

describe('values on the per-call page (sound)', () => {
  it('hidden characters in nested keys and values are made visible', async () => {
    const html = await page({ to: 'a', amount: 1, meta: { ['x\u202Ey']: ['z\u200Bw'] } });
    expect(html).not.toMatch(/[\u202E\u200B]/);
    expect(html).toContain('\\u{202E}');
    expect(html).toContain('\\u{200B}');
  });

  it('1.0 / 1e0 / duplicate keys: the page shows what is sent (last key wins in both)', async () => {
    s.upstream.reset();
    const html = await page({}, '{"capability":"pay","arguments":{"to":"a","amount":1e0,"amount":2.50}}');
    expect(html).toContain('>2.5</bdo></pre>');
    expect(html).not.toContain('>1</bdo></pre>');
  });
});

describe('field names on the per-call page', () => {
  it('a value with U+202E is shown as \\u{202E} with a warning (control)', async () => {
    const { p } = s;
    const a = await p.activeAgent(['pay'], { userId: ALICE });
    const reply = await p.execute(a.agent, a.agentId, 'pay', { to: 'acct\u202E24', amount: 5 });
    expect(reply.status).toBe(202);
    const page = await alice.callForm(callIdOf(reply.body.status_url));
    expect(page.html).toContain('\\u{202E}');
    expect(page.html).not.toContain('\u202E');
  });

  it("field names are the schema's own: an agent cannot add one with hidden characters (sound)", async () => {
    const { p } = s;
    const a = await p.activeAgent(['pay'], { userId: ALICE });
    // The top-level input is additionalProperties: false (src/openapi/operation.ts:78), so the
    // names the page prints raw come from the operator's document, never from the agent.
    const args = { to: 'acct-42', amount: 5, 'amount\u200B': 500000 };
    const reply = await p.execute(a.agent, a.agentId, 'pay', args);
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
  });
});

describe('names that borrow a brand (§8.10)', () => {
  it('are warned of on the page and the inbox card, as on every approval page', async () => {
    const { p } = s;
    const { key: host } = await p.linkedHost(ALICE);
    const reg = await p.register(host, { name: 'PayPaI Security Update', capabilities: ['pay'] });
    expect(reg.status).toBe(200);
    const approval = await p.pendingApproval(reg.body.agent_id as string);
    if (approval) await p.admin('POST', `/admin/approvals/${approval.id as string}/approve`, {});
    const reply = await p.execute(reg.agent, reg.body.agent_id as string, 'pay', { to: 'a', amount: 1 });
    expect(reply.status).toBe(202);
    const id = callIdOf(reply.body.status_url as string);
    const { html } = await alice.callForm(id);
    expect(html).toContain('id="warnings"');
    expect(html).toMatch(/The agent name looks like the well-known name “PayPal” but is spelled differently/);
    const inbox = (await alice.get('/approvals')).html;
    const card = inbox.slice(inbox.indexOf(`id="call-${id}"`));
    expect(card.slice(0, card.indexOf('</li>'))).toMatch(/\d warnings?: review it carefully/);
  });
});
