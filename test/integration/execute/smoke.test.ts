import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';

let gw: Gateway;
beforeAll(async () => {
  gw = await startGateway({
    api: `    credentials:\n      apiKeyHeader: {env: GW_KEY}\n`,
    env: { GW_KEY: 'service-key-0123456789' },
  });
});
afterAll(() => gw.close());

describe('execute smoke', () => {
  it('calls the upstream with the service key and returns data', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['get_item']);
    const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'abc' });
    expect(reply.status).toBe(200);
    const seen = gw.upstream.received('/v1/items/abc');
    expect(seen).toHaveLength(1);
    expect(seen[0]?.headers['x-api-key']).toBe('service-key-0123456789');
    expect(seen[0]?.headers.authorization).toBeUndefined();
    expect(reply.body.data.method).toBe('GET');
  });
});
