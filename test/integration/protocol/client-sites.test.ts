/**
 * Budgets a stranger can multiply by holding more addresses. Per IPv6 /64 alone, one person with
 * a /48 (what end sites, and free tunnel brokers, hand out) had 65,536 clients' budgets; the clients
 * of one /48 now share SITE_SHARE times one client's. And a host nobody approved, which anyone can
 * make, is charged to its client as well as to itself, so making hosts makes no new budgets.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { SITE_SHARE } from '../../../src/http/rate-limits.js';
import { writeConfig } from '../../helpers/browser.js';
import { generateTestKey } from '../../helpers/keys.js';
import { startProtocol, type TestProtocol } from '../../helpers/protocol.js';
import { PETSTORE } from '../../helpers/proxy.js';

let p: TestProtocol | undefined;
afterEach(async () => {
  await p?.close();
  p = undefined;
});

async function start(rateLimits: string): Promise<TestProtocol> {
  const config = writeConfig(
    `server:\n  trusted_proxies: ["127.0.0.1/32"]\napis:\n  - spec: ${JSON.stringify(PETSTORE)}\nmock_upstream: true\n`,
  );
  p = await startProtocol({ policy: `rate_limits:\n${rateLimits}`, overrides: { config } });
  return p;
}

describe('IPv6 clients of one /48', () => {
  it(`share ${SITE_SHARE} × one client's per_ip budget, whichever /64 each request comes from`, async () => {
    const q = await start('  per_ip: 2/1m\n');
    const from = (n: number) => ({ headers: { 'x-forwarded-for': `2001:db8:7:${n.toString(16)}::1` } });
    const statuses: number[] = [];
    for (let n = 0; n < SITE_SHARE * 2 + 1; n++) {
      statuses.push((await q.request('GET', '/capability/list', from(n))).status);
    }
    expect(statuses.slice(0, SITE_SHARE * 2).every((s) => s === 200)).toBe(true);
    const refused = await q.request('GET', '/capability/list', from(SITE_SHARE * 2 + 1));
    expect(refused.status).toBe(429);
    expect(refused.body.message).toContain('2001:db8:7::/48');
    // Another /48 has its own.
    const other = await q.request('GET', '/capability/list', {
      headers: { 'x-forwarded-for': '2001:db8:8:1::1' },
    });
    expect(other.status).toBe(200);
  });
});

describe('a host nobody approved', () => {
  it("is charged to its client's per_ip budget as well: new hosts make no new budgets", async () => {
    const q = await start('  per_ip: 3/1m\n  per_host: 1000/1m\n  unknown_host_registration: null\n');
    const client = { headers: { 'x-forwarded-for': '198.51.100.7' } };
    const host = await generateTestKey();
    const reg = await q.register(host, { name: 'pending agent' });
    expect(reg.body.status).toBe('pending');
    const poll = async () =>
      q.request('GET', `/agent/status?agent_id=${reg.body.agent_id}`, {
        token: await q.hostToken(host),
        ...client,
      });
    for (let i = 0; i < 3; i++) expect((await poll()).status).toBe(200);
    const refused = await poll();
    expect(refused.status).toBe(429);
    expect(refused.body.message).toContain('198.51.100.7');
  });
});

describe('new hosts one client keeps pending', () => {
  it('a tenth of pending_hosts.max_hosts over the time pending rows are kept, beside the ten-minute budget', async () => {
    const q = await start('  unknown_host_registration: 1000/10m\npending_hosts:\n  max_hosts: 30\n');
    const from = (ip: string) => ({ headers: { 'x-forwarded-for': ip } });
    const register = async (ip: string) => {
      const host = await generateTestKey();
      return q.request('POST', '/agent/register', {
        token: await q.hostToken(host, {
          agent_public_key: (await generateTestKey()).publicJwk,
        }),
        body: { name: 'agent' },
        ...from(ip),
      });
    };
    for (let i = 0; i < 3; i++) expect((await register('198.51.100.20')).status).toBe(200);
    const refused = await register('198.51.100.20');
    expect(refused.status).toBe(429);
    expect(refused.body.message).toContain('New hosts kept pending from 198.51.100.20');
    // Another client still registers: the pool (30) is far from full.
    expect((await register('198.51.100.21')).status).toBe(200);
  });
});
