/**
 * A principal whose stored status refuses it (pending host, revoked agent) is refused with 403
 * after its signature is verified; that refusal is charged to the client's failed-authentication
 * budget as a 401 is, so a refused key cannot make the server verify it without end (README
 * "Bounds": failed authentications; §8.13 compromised keys).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';

let p: TestProtocol | undefined;
afterEach(async () => {
  await p?.close();
  p = undefined;
});

/** Tight budgets: each limit would refuse well before 20 requests. */
const POLICY = [
  'rate_limits:',
  '  per_ip: 3/1m',
  '  per_host: 3/1m',
  '  per_agent: 3/1m',
  '  per_user: 3/1m',
  '  failed_auth_per_ip: 3/1m',
  '  unknown_host_registration: 5/10m',
  '',
].join('\n');

const ATTEMPTS = 20;

interface Line {
  msg?: string;
  route?: string;
  step?: string | null;
  status?: number;
  code?: string | null;
}

function requestLines(lines: string[]): Line[] {
  return lines
    .map((l): Line => {
      try {
        return JSON.parse(l) as Line;
      } catch {
        return {};
      }
    })
    .filter((l) => l.msg === 'request');
}

describe('refused principals are charged as failed authentications', () => {
  it('a pending (stranger) host hammering a host endpoint meets a limit, not 20 verified 403s', async () => {
    const lines: string[] = [];
    p = await startProtocol({ policy: POLICY, logSink: (l) => lines.push(l) });
    const host = await generateTestKey();
    const reg = await p.register(host);
    expect(reg.status, JSON.stringify(reg.body)).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < ATTEMPTS; i++) {
      const r = await p.request('POST', '/agent/revoke', {
        token: await p.hostToken(host),
        body: { agent_id: reg.body.agent_id },
      });
      statuses.push(r.status);
    }
    // Three refusals for the host's status, each verified; then the budget refuses before verification.
    expect(statuses).toEqual([403, 403, 403, ...Array<number>(ATTEMPTS - 3).fill(429)]);
    const revokes = requestLines(lines).filter((l) => l.route === 'POST /agent/revoke');
    expect(revokes.slice(0, 3).every((l) => l.step === 'host-token' && l.code === 'host_pending')).toBe(true);
    expect(revokes.slice(3).every((l) => l.code === 'rate_limited')).toBe(true);
  });

  it('the same pending-host token sent 20 times meets the limit', async () => {
    p = await startProtocol({ policy: POLICY });
    const host = await generateTestKey();
    const reg = await p.register(host);
    expect(reg.status).toBe(200);
    const token = await p.hostToken(host);
    const statuses: number[] = [];
    for (let i = 0; i < ATTEMPTS; i++) {
      const r = await p.request('POST', '/host/revoke', { token });
      statuses.push(r.status);
    }
    expect(statuses.filter((s) => s === 429).length, `statuses: ${statuses.join(',')}`).toBeGreaterThan(0);
  });

  it('a revoked agent (a compromised key, §8.13) hammering execute meets a limit', async () => {
    p = await startProtocol({ policy: POLICY });
    const a = await p.activeAgent(['list_pets']);
    const revoked = await p.admin('POST', `/admin/agents/${a.agentId}/revoke`, {});
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    const statuses: number[] = [];
    const codes = new Set<string>();
    for (let i = 0; i < ATTEMPTS; i++) {
      const r = await p.execute(a.agent, a.agentId, 'list_pets', {});
      statuses.push(r.status);
      codes.add(String((r.body as { error?: string }).error));
    }
    expect(codes.has('agent_revoked')).toBe(true);
    expect(statuses.filter((s) => s === 429).length, `statuses: ${statuses.join(',')}`).toBeGreaterThan(0);
  });
});
