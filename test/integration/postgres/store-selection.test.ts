/**
 * `--db postgres://…` selects the PostgreSQL store (issue 13): the whole protocol runs on it, and
 * what one proxy stored a second proxy on the same database finds (after the first has stopped).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway } from '../../helpers/gateway.js';
import { startPostgres, type TestPostgres } from '../../helpers/postgres.js';

let postgres: TestPostgres;
beforeAll(async () => {
  postgres = await startPostgres();
});
afterAll(() => postgres.stop());

describe('the proxy on PostgreSQL', () => {
  it('registers, approves and executes, and a later proxy on the same database knows the agent', async () => {
    const db = await postgres.createDatabase();
    const first = await startGateway({ db });
    let agent: Awaited<ReturnType<typeof first.p.activeAgent>>;
    try {
      agent = await first.p.activeAgent(['get_item']);
      const reply = await first.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'a1' });
      expect(reply.status).toBe(200);
      expect(first.upstream.received('/v1/items/a1')).toHaveLength(1);
    } finally {
      await first.close();
    }

    const second = await startGateway({ db });
    try {
      const status = await second.p.admin('GET', `/admin/agents/${agent.agentId}`);
      expect(status.status).toBe(200);
      expect((status.body as { status: string }).status).toBe('active');
      const reply = await second.p.execute(agent.agent, agent.agentId, 'get_item', { itemId: 'a2' });
      expect(reply.status).toBe(200);
      expect(second.upstream.received('/v1/items/a2')).toHaveLength(1);
    } finally {
      await second.close();
    }
  });
});
