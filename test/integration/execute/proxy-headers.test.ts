/**
 * Issue 10, class 6: headers the proxy sets (identity headers, the operator's static headers)
 * always win — an operation's header parameter of the same name, in any spelling a server reads
 * as that name, is not offered as input, is refused when supplied, and never reaches the upstream.
 * Issue 10, class 15: an operation's own header parameter (`X-Request-Id`) stays the agent's; the
 * proxy's request id travels in its own, configurable header (`server.request_id_header`).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import type { TestProtocol } from '../../helpers/protocol.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type Agent = Awaited<ReturnType<TestProtocol['activeAgent']>>;

async function describeInput(gw: Gateway, agent: Agent, name: string): Promise<Record<string, unknown>> {
  const token = await gw.p.agentToken(agent.agent, agent.agentId);
  const reply = await gw.p.request('GET', `/capability/describe?name=${name}`, { token });
  expect(reply.status).toBe(200);
  return reply.body.input.properties as Record<string, unknown>;
}

describe('issue 10 class 6: identity and static headers always win', () => {
  let gw: Gateway;
  let agent: Agent;
  beforeAll(async () => {
    gw = await startGateway({
      api: ['    identity_headers: true', '    headers:', '      X-Tenant: acme'].join('\n'),
    });
    agent = await gw.p.activeAgent(['list_audit_events'], { userId: 'dana' });
  });
  afterAll(() => gw.close());
  afterEach(() => {
    gw.upstream.requests.length = 0;
  });

  it('header parameters named like identity headers (also X_Agent_User_Id, the CGI spelling) or a static header are not offered as input', async () => {
    const properties = await describeInput(gw, agent, 'list_audit_events');
    expect(Object.keys(properties).sort()).toEqual(['X-Request-Id', 'since']);
  });

  it.each([
    ['X-Agent-Id', 'agent-spoofed'],
    ['x-agent-id', 'agent-spoofed'],
    ['X_Agent_User_Id', 'mallory'],
    ['X-Tenant', 'other-tenant'],
  ])(
    'an agent supplying %s gets 400 invalid_request and the upstream receives nothing',
    async (name, value) => {
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'list_audit_events', { [name]: value });
      expect(reply.status).toBe(400);
      expect(reply.body.error).toBe('invalid_request');
      expect(gw.upstream.requests).toHaveLength(0);
    },
  );

  it("the upstream sees only the proxy's identity and static values, under no other spelling", async () => {
    const reply = await gw.p.execute(agent.agent, agent.agentId, 'list_audit_events', { since: '1d' });
    expect(reply.status).toBe(200);
    const [seen] = gw.upstream.requests;
    expect(seen?.headers['x-agent-id']).toBe(agent.agentId);
    expect(seen?.headers['x-agent-user-id']).toBe('dana');
    expect(seen?.headers['x-tenant']).toBe('acme');
    expect(seen?.headers['x_agent_user_id']).toBeUndefined();
  });
});

describe('issue 10 class 15: header parameters stay the agent’s; the request id has its own header', () => {
  describe('default server.request_id_header (x-request-id)', () => {
    let gw: Gateway;
    let agent: Agent;
    beforeAll(async () => {
      gw = await startGateway();
      agent = await gw.p.activeAgent(['list_audit_events', 'ping']);
    });
    afterAll(() => gw.close());
    afterEach(() => {
      gw.upstream.requests.length = 0;
    });

    it("an operation's own X-Request-Id parameter is forwarded with the agent's value, not replaced by the proxy's id", async () => {
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'list_audit_events', {
        'X-Request-Id': 'agent-correlation-42',
      });
      expect(reply.status).toBe(200);
      const [seen] = gw.upstream.requests;
      expect(seen?.headers['x-request-id']).toBe('agent-correlation-42');
    });

    it("without the agent's value that operation gets no request id at all (the proxy never fills the agent's parameter)", async () => {
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'list_audit_events', {});
      expect(reply.status).toBe(200);
      expect(gw.upstream.requests[0]?.headers['x-request-id']).toBeUndefined();
    });

    it("an operation without such a parameter gets the proxy's request id", async () => {
      const reply = await gw.p.execute(agent.agent, agent.agentId, 'ping');
      expect(reply.status).toBe(200);
      expect(gw.upstream.requests[0]?.headers['x-request-id']).toMatch(UUID);
    });
  });

  describe('server.request_id_header: X-Proxy-Request-Id', () => {
    let gw: Gateway;
    let agent: Agent;
    beforeAll(async () => {
      gw = await startGateway({ config: 'server:\n  request_id_header: X-Proxy-Request-Id' });
      agent = await gw.p.activeAgent(['list_audit_events', 'ping']);
    });
    afterAll(() => gw.close());
    afterEach(() => {
      gw.upstream.requests.length = 0;
    });

    it("the proxy's id goes upstream under that header for every operation; X-Request-Id is the agent's alone", async () => {
      const audit = await gw.p.execute(agent.agent, agent.agentId, 'list_audit_events', {
        'X-Request-Id': 'agent-correlation-7',
      });
      const ping = await gw.p.execute(agent.agent, agent.agentId, 'ping');
      expect(audit.status).toBe(200);
      expect(ping.status).toBe(200);
      const [first, second] = gw.upstream.requests;
      expect(first?.headers['x-request-id']).toBe('agent-correlation-7');
      expect(first?.headers['x-proxy-request-id']).toMatch(UUID);
      expect(second?.headers['x-proxy-request-id']).toMatch(UUID);
      expect(second?.headers['x-request-id']).toBeUndefined();
      expect(first?.headers['x-proxy-request-id']).not.toBe(second?.headers['x-proxy-request-id']);
    });
  });

  it('a request id header that a static header, an identity header or a credential scheme already uses stops start-up', async () => {
    await expect(
      startGateway({
        api: '    headers:\n      X-Correlation: operator-value',
        config: 'server:\n  request_id_header: x-correlation',
      }),
    ).rejects.toThrow(/apis\[0\]: header X-Correlation is server\.request_id_header/);
    await expect(
      startGateway({
        api: '    identity_headers: {agent: X-Correlation}',
        config: 'server:\n  request_id_header: X-Correlation',
      }),
    ).rejects.toThrow(/server\.request_id_header/);
    await expect(
      startGateway({
        api: '    credentials:\n      apiKeyHeader: service-key-0123456789',
        config: 'server:\n  request_id_header: X-Api-Key',
      }),
    ).rejects.toThrow(/server\.request_id_header x-api-key is the header of security scheme apiKeyHeader/);
    await expect(startGateway({ config: 'server:\n  request_id_header: Authorization' })).rejects.toThrow(
      /server\.request_id_header: Authorization is a header the proxy sets/,
    );
  });
});
