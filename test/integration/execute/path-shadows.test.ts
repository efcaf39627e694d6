/**
 * OpenAPI matches concrete paths before templated ones, and so does the upstream: a value of a
 * templated operation's parameter must not make its call a sibling's (a blocked or per-call one,
 * reached through another grant). upstream/path-shadows.ts.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { json } from '../../helpers/upstream.js';

const ANSWER = "{ '200': { description: ok, content: { application/json: { schema: { type: object } } } } }";
const SPEC = `openapi: 3.0.3
info: { title: Reports, version: 1.0.0 }
paths:
  /reports/{reportId}:
    get:
      operationId: getReport
      parameters: [{ name: reportId, in: path, required: true, schema: { type: string } }]
      responses: ${ANSWER}
  /reports/payroll:
    get: { operationId: getPayroll, responses: ${ANSWER} }
  /reports/salaries:
    get: { operationId: getSalaries, responses: ${ANSWER} }
  /reports/payroll/lines:
    get: { operationId: getPayrollLines, responses: ${ANSWER} }
`;

let gw: Gateway;
beforeAll(async () => {
  const spec = join(mkdtempSync(join(tmpdir(), 'aap-shadows-')), 'reports.yaml');
  writeFileSync(spec, SPEC);
  gw = await startGateway({
    spec,
    policy: [
      'rate_limits:',
      '  unknown_host_registration: null',
      'capabilities:',
      '  defaults: [get_report]',
      '  blocked: [get_payroll]',
      '  per_call: [get_salaries]',
    ].join('\n'),
  });
  gw.upstream.on('GET /v1/reports/q3', (_req, res) => json(res, 200, { id: 'q3' }));
});
afterAll(() => gw.close());

it('a parameter value naming a concrete sibling (blocked, per-call) is refused before the upstream', async () => {
  const { agent, agentId } = await gw.p.activeAgent(['get_report']);
  for (const reportId of ['payroll', 'salaries']) {
    gw.upstream.reset();
    const refused = await gw.p.execute(agent, agentId, 'get_report', { reportId });
    expect({ status: refused.status, error: refused.body.error }).toEqual({
      status: 403,
      error: 'capability_not_granted',
    });
    expect(refused.body.message).toContain(`GET /reports/${reportId}`);
    expect(gw.upstream.requests).toEqual([]);
  }
  // Any other value is the operation's own: sent as built.
  gw.upstream.reset();
  const own = await gw.p.execute(agent, agentId, 'get_report', { reportId: 'q3' });
  expect(own.status).toBe(200);
  expect(gw.upstream.requests.map((r) => r.path)).toEqual(['/v1/reports/q3']);
  // A value spelling the sibling's name with an escape stays one literal segment upstream.
  gw.upstream.reset();
  await gw.p.execute(agent, agentId, 'get_report', { reportId: 'pay%72oll' });
  expect(gw.upstream.requests.map((r) => r.path)).toEqual(['/v1/reports/pay%2572oll']);
});
