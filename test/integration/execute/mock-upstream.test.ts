/**
 * `npm start` runs the bundled example behind the built-in mock upstream: execution must work
 * there end to end, answering from the document's examples.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';

let p: TestProtocol;
beforeAll(async () => {
  p = await startProtocol({ overrides: { mockUpstream: true } });
});
afterAll(() => p.close());

describe('execution against --mock-upstream', () => {
  it('answers get_pet with the example of its 200 response', async () => {
    const { agent, agentId } = await p.activeAgent(['get_pet']);
    const reply = await p.execute(agent, agentId, 'get_pet', { petId: 7 });
    expect(reply.status).toBe(200);
    expect(reply.body.data).toMatchObject({ name: expect.any(String) });
  });

  it('validates arguments before the mock is called, as for a real API', async () => {
    const { agent, agentId } = await p.activeAgent(['get_pet']);
    const reply = await p.execute(agent, agentId, 'get_pet', { petId: 'seven' });
    expect(reply.status).toBe(400);
    expect(reply.body.error).toBe('invalid_request');
  });
});
