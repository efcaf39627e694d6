/**
 * The §10.10.2 hub (src/protocol/approval-events.ts) and why an ended grant ended
 * (src/protocol/grant-ending.ts): plain functions, no server.
 */
import { describe, expect, it } from 'vitest';
import { ApprovalEvents, finalStatus } from '../../../src/protocol/approval-events.js';
import { grantEnding } from '../../../src/protocol/grant-ending.js';
import type { AgentRecord, ApprovalRecord, GrantRecord } from '../../../src/storage/types.js';

describe('ApprovalEvents', () => {
  it('calls the listeners of one approval only, and keeps nothing once they unsubscribe', () => {
    const hub = new ApprovalEvents();
    const heard: string[] = [];
    const offA = hub.subscribe('apr_a', () => heard.push('a1'));
    const offA2 = hub.subscribe('apr_a', () => heard.push('a2'));
    const offB = hub.subscribe('apr_b', () => heard.push('b'));
    hub.publish('apr_a');
    expect(heard).toEqual(['a1', 'a2']);
    offA();
    offA2();
    offB();
    offB();
    expect(hub.listening).toBe(0);
    hub.publish('apr_a');
    expect(heard).toEqual(['a1', 'a2']);
  });

  it('a listener that throws does not keep the others from hearing', () => {
    const hub = new ApprovalEvents();
    let heard = 0;
    hub.subscribe('apr_a', () => {
      throw new Error('broken stream');
    });
    hub.subscribe('apr_a', () => heard++);
    hub.publish('apr_a');
    expect(heard).toBe(1);
  });

  it('an approval still pending is final only once its expiry passed', () => {
    const approval = { status: 'pending', expiresAt: 1000 } as const;
    expect(finalStatus(approval as unknown as ApprovalRecord, 999)).toBeUndefined();
    expect(finalStatus(approval as unknown as ApprovalRecord, 1000)).toBe('expired');
    expect(finalStatus({ ...approval, status: 'denied' } as unknown as ApprovalRecord, 0)).toBe('denied');
  });
});

describe('grantEnding', () => {
  const grant = (patch: Partial<GrantRecord>): GrantRecord => ({
    id: 'grt_1',
    agentId: 'agt_1',
    capability: 'list_pets',
    status: 'active',
    constraints: null,
    grantedBy: 'alice',
    deniedBy: null,
    reason: null,
    expiresAt: null,
    approvalId: null,
    createdAt: 0,
    updatedAt: 0,
    ...patch,
  });
  const agent = (status: AgentRecord['status']): AgentRecord => ({ status }) as unknown as AgentRecord;

  it.each([
    ['an allowed grant has not ended', grant({}), 'active', null],
    ['a pending one has not either', grant({ status: 'pending' }), 'active', null],
    ['denied', grant({ status: 'denied' }), 'active', 'denied'],
    ['revoked', grant({ status: 'revoked' }), 'active', 'revoked'],
    ['its own expiry passed (§3.3)', grant({ expiresAt: 100 }), 'active', 'expired'],
    ['its agent was revoked', grant({}), 'revoked', 'agent_revoked'],
    ['its agent was claimed', grant({}), 'claimed', 'agent_revoked'],
    ["its agent's session expired (§2.4)", grant({}), 'expired', 'agent_expired'],
  ] as const)('%s', (_, g, agentStatus, ending) => {
    expect(grantEnding(g, agent(agentStatus), 100)).toBe(ending);
  });
});
