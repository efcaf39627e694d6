/**
 * A person's decision on an agent's capability stands over policy (§2.13, §5.3 partial approval):
 * a capability the approver left out, or approved narrowed or for a while, is not granted again
 * by policy defaults when the agent simply asks again; it goes back to a person.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { approve } from '../../../src/protocol/approval-decisions.js';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { generateTestKey } from '../../helpers/keys.js';
import { TestClock } from '../../helpers/protocol.js';

const clock = new TestClock();
let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway({
    clock,
    policy: [
      'rate_limits:',
      '  unknown_host_registration: null',
      'capabilities:',
      '  defaults: [get_item]',
    ].join('\n'),
  });
});
afterAll(() => gw.close());

async function askAgain(
  agent: Awaited<ReturnType<Gateway['p']['register']>>,
): Promise<{ status: number; grant: { status: string }; approval: unknown }> {
  const reply = await gw.p.request('POST', '/agent/request-capability', {
    token: await gw.p.agentToken(agent.agent, agent.body.agent_id),
    body: { capabilities: ['get_item'] },
  });
  return {
    status: reply.status,
    grant: reply.body.agent_capability_grants?.[0],
    approval: reply.body.approval,
  };
}

describe('a default capability a person decided on is asked again, not granted by policy', () => {
  it('left out of a partial approval: asking again opens an approval, and execution stays refused', async () => {
    const reg = await gw.p.register(await generateTestKey(), { capabilities: ['get_item', 'list_items'] });
    const approval = await gw.p.pendingApproval(reg.body.agent_id);
    await approve(gw.p.proxy.protocol, approval.id, {
      userId: 'alice',
      actor: 'alice',
      capabilities: ['list_items'],
    });
    expect((await gw.p.execute(reg.agent, reg.body.agent_id, 'get_item', { itemId: 'x' })).status).toBe(403);

    const again = await askAgain(reg);
    expect(again.status).toBe(200);
    expect(again.grant.status).toBe('pending');
    expect(again.approval).toBeDefined();
    const refused = await gw.p.execute(reg.agent, reg.body.agent_id, 'get_item', { itemId: 'x' });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toBe('capability_not_granted');
  });

  it('approved narrowed and for an hour: once it lapses, asking again does not bring it back wider', async () => {
    const reg = await gw.p.register(await generateTestKey(), {
      capabilities: [{ name: 'get_item', constraints: { itemId: { in: ['a', 'b'] } } }],
    });
    const approval = await gw.p.pendingApproval(reg.body.agent_id);
    await approve(gw.p.proxy.protocol, approval.id, {
      userId: 'bob',
      actor: 'bob',
      capabilities: ['get_item'],
      constraints: { get_item: { itemId: { in: ['a'] } } },
      grantLifetimeMs: 3_600_000,
    });
    // In steps, using it, so that the agent's own session stays alive (§2.4) while the grant lapses.
    for (let minutes = 0; minutes < 60; minutes += 20) {
      expect((await gw.p.execute(reg.agent, reg.body.agent_id, 'get_item', { itemId: 'a' })).status).toBe(
        200,
      );
      clock.advance(20 * 60_000);
    }
    clock.advance(1);
    expect((await gw.p.execute(reg.agent, reg.body.agent_id, 'get_item', { itemId: 'a' })).status).toBe(403);

    const again = await askAgain(reg);
    expect(again.grant.status).toBe('pending');
    expect(again.approval).toBeDefined();
    expect((await gw.p.execute(reg.agent, reg.body.agent_id, 'get_item', { itemId: 'z' })).status).toBe(403);
  });

  it('a default nobody decided on is still granted by policy without asking (§2.9)', async () => {
    const reg = await gw.p.register(await generateTestKey(), { capabilities: ['list_items'] });
    const approval = await gw.p.pendingApproval(reg.body.agent_id);
    await approve(gw.p.proxy.protocol, approval.id, { userId: 'carol', actor: 'carol' });
    const again = await askAgain(reg);
    expect(again.grant.status).toBe('active');
    expect(again.approval).toBeUndefined();
  });
});
