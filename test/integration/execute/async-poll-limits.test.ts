/**
 * §5.11 status polls are made as a call of the mapped GET capability (issue 10, class 4), so that
 * capability's own limits apply to them as to a direct call. Regression: polls skipped
 * `rate_limits.per_capability` (and the `high_risk` limits folded into it), so an agent limited
 * to one `get_job` a minute reached the upstream with every poll.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { json } from '../../helpers/upstream.js';

let gw: Gateway;

beforeAll(async () => {
  gw = await startGateway({
    api: '    retries: 0',
    policy: [
      'rate_limits:',
      '  unknown_host_registration: null',
      '  per_capability:',
      '    get_job: {per_agent: 2/1m}',
    ].join('\n'),
  });
});
afterAll(() => gw.close());

describe('a status poll counts against the per-capability limits of the capability it is made as', () => {
  it('get_job per_agent 2/1m: a direct call and a poll use it up, the next poll is 429 and is not sent', async () => {
    const { agent, agentId } = await gw.p.activeAgent(['start_job', 'get_job']);
    gw.upstream.on('POST /v1/jobs', (_q, res) => json(res, 202, {}, { location: '/v1/jobs/j1' }));
    gw.upstream.on('GET /v1/jobs/j1', (_q, res) => json(res, 200, { status: 'running' }));
    expect((await gw.p.execute(agent, agentId, 'get_job', { jobId: 'j1' })).status).toBe(200);
    const started = await gw.p.execute(agent, agentId, 'start_job', { size: 1 });
    expect(started.status).toBe(202);
    const url = String(started.body.status_url);
    const poll = async () =>
      gw.p.request('GET', url.slice(gw.p.issuer.length), {
        token: await gw.p.agentToken(agent, agentId, {}, url),
      });

    const first = await poll();
    expect(first.status).toBe(200);
    expect(first.body.status).toBe('pending');
    for (let i = 0; i < 5; i++) {
      const refused = await poll();
      expect(refused.status).toBe(429);
      expect(refused.body.error).toBe('rate_limited');
    }
    // The direct call and the one poll within the limit; none of the refused polls.
    expect(gw.upstream.received('/v1/jobs/j1')).toHaveLength(2);
    // The direct call is refused alike: the polls used up the same budget.
    expect((await gw.p.execute(agent, agentId, 'get_job', { jobId: 'j1' })).status).toBe(429);
  });
});
