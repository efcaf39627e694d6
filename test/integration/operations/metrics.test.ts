/**
 * Issue 12: the internal listener and the Prometheus metrics, on a real proxy in front of a real
 * recording upstream with really signed JWTs. The exposition text is parsed and exact values are
 * asserted; label values must stay within closed sets whatever the clients send.
 */
import { createServer, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGateway, type Gateway } from '../../helpers/gateway.js';
import { generateTestKey, type TestKey } from '../../helpers/keys.js';
import { ADMIN_TOKEN, INTROSPECTION_TOKEN, startProtocol } from '../../helpers/protocol.js';
import { startTestProxy } from '../../helpers/proxy.js';
import { json } from '../../helpers/upstream.js';

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** Prometheus text format: `name{a="x",b="y"} value` lines; comments skipped. */
function parseExposition(text: string): Sample[] {
  return text
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((line) => {
      const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
      if (!m) throw new Error(`not an exposition line: ${line}`);
      const labels: Record<string, string> = {};
      for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g))
        labels[l[1] as string] = l[2] as string;
      return { name: m[1] as string, labels, value: Number(m[3]) };
    });
}

function value(
  samples: readonly Sample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const want = Object.entries(labels);
  return samples.find(
    (s) =>
      s.name === name &&
      Object.keys(s.labels).length === want.length &&
      want.every(([k, v]) => s.labels[k] === v),
  )?.value;
}

async function get(
  base: string,
  path: string,
  token?: string,
): Promise<{ status: number; text: string; type: string | null }> {
  const res = await fetch(`${base}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  return { status: res.status, text: await res.text(), type: res.headers.get('content-type') };
}

const P = 'agent_auth_proxy_';
const POLICY = [
  'rate_limits:',
  '  unknown_host_registration: null',
  '  per_agent: 1000/1m',
  '  per_host: 1000/1m',
  '  per_user: 1000/1m',
  '  per_ip: 2/1m',
].join('\n');

describe('with --internal-port (server.internal_port)', () => {
  let gw: Gateway;
  let internal: string;
  let agent: TestKey;
  let agentId: string;
  beforeAll(async () => {
    gw = await startGateway({ config: 'server:\n  internal_port: 0', policy: POLICY });
    internal = gw.p.proxy.internalUrl ?? '';
    ({ agent, agentId } = await gw.p.activeAgent([
      'get_item',
      { name: 'create_transfer', constraints: { amount: { max: 1000 } } },
    ]));
  });
  afterAll(() => gw.close());

  it('serves the operator endpoints on the internal listener only', async () => {
    expect(internal).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(internal).not.toBe(gw.p.proxy.url);
    expect((await get(gw.p.proxy.url, '/metrics', ADMIN_TOKEN)).status).toBe(404);
    expect((await get(gw.p.proxy.url, '/admin/approvals', ADMIN_TOKEN)).status).toBe(404);
    const metrics = await get(internal, '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.type).toMatch(/^text\/plain; version=0\.0\.4/);
    const admin = await get(internal, '/admin/approvals', ADMIN_TOKEN);
    expect(admin.status).toBe(200);
    expect(JSON.parse(admin.text)).toHaveProperty('approvals');
    // The operator API keeps its token on the internal listener too.
    expect((await get(internal, '/admin/approvals')).status).toBe(401);
    for (const base of [gw.p.proxy.url, internal]) {
      expect((await get(base, '/healthz')).status).toBe(200);
      expect((await get(base, '/readyz')).status).toBe(200);
    }
  });

  it('counts executions, registrations, approvals, limits, routes and upstream latency exactly', async () => {
    gw.upstream.on('GET /v1/items/ok', (_req, res) => json(res, 200, { id: 'ok' }));
    gw.upstream.on('GET /v1/items/broken', (_req, res) => json(res, 500, { oops: true }));
    expect((await gw.p.execute(agent, agentId, 'get_item', { itemId: 'ok' })).status).toBe(200);
    expect((await gw.p.execute(agent, agentId, 'get_item', { itemId: 'broken' })).status).toBe(502);
    expect((await gw.p.execute(agent, agentId, 'list_items', {})).body.error).toBe('capability_not_granted');
    const violated = await gw.p.execute(agent, agentId, 'create_transfer', { amount: 5000, currency: 'USD' });
    expect(violated.body.error).toBe('constraint_violated');
    // A second registration, left pending: one approval waits.
    const { key: host } = await gw.p.linkedHost('bob');
    const second = await gw.p.register(host, { capabilities: ['list_items'] });
    expect(second.status).toBe(200);
    expect(await gw.p.pendingApproval(second.body.agent_id)).toMatchObject({ kind: 'registration' });
    // An id in the path: the series is the route's pattern.
    const status = await gw.p.request('GET', '/capability/status/job_does_not_exist', {
      token: await gw.p.agentToken(agent, agentId, {}, `${gw.p.issuer}/capability/status/job_does_not_exist`),
    });
    expect(status.status).toBe(404);
    // per_ip 2/1m on anonymous calls: the third is refused.
    for (let i = 0; i < 3; i++) await gw.p.request('GET', '/capability/list');

    await gw.p.proxy.flushActivity();
    const samples = parseExposition((await get(internal, '/metrics')).text);
    const executions = (capability: string, outcome: string): number | undefined =>
      value(samples, `${P}executions_total`, { capability, outcome });
    expect(executions('get_item', 'success')).toBe(1);
    expect(executions('get_item', 'upstream_error')).toBe(1);
    expect(executions('list_items', 'capability_not_granted')).toBe(1);
    expect(executions('create_transfer', 'constraint_violated')).toBe(1);
    expect(samples.filter((s) => s.name === `${P}executions_total`)).toHaveLength(4);
    expect(value(samples, `${P}registrations_total`, { outcome: 'success' })).toBe(2);
    expect(value(samples, `${P}approvals_pending`)).toBe(1);
    expect(value(samples, `${P}rate_limited_total`, { limit: 'per_ip' })).toBe(1);
    expect(value(samples, `${P}rate_limited_total`, { limit: 'per_agent' })).toBe(0);
    expect(value(samples, `${P}config_reloads_total`, { result: 'success' })).toBe(0);
    expect(value(samples, `${P}config_reloads_total`, { result: 'failure' })).toBe(0);
    const requests = (route: string, status: string): number | undefined =>
      value(samples, `${P}requests_total`, { route, status });
    expect(requests('/capability/execute', '200')).toBe(1);
    expect(requests('/capability/execute', '403')).toBe(2);
    expect(requests('/capability/execute', '502')).toBe(1);
    expect(requests('/capability/status/:id', '404')).toBe(1);
    expect(requests('/capability/list', '429')).toBe(1);
    const routes = new Set(samples.filter((s) => s.name === `${P}requests_total`).map((s) => s.labels.route));
    expect([...routes].some((r) => r?.includes('job_'))).toBe(false);
    // Two calls reached the upstream (the refused ones never left the proxy).
    expect(
      value(samples, `${P}upstream_request_duration_seconds_count`, {
        api: gw.p.proxy.catalog.apis[0]?.id ?? '',
      }),
    ).toBe(2);
    expect(
      value(samples, `${P}upstream_request_duration_seconds_sum`, {
        api: gw.p.proxy.catalog.apis[0]?.id ?? '',
      }),
    ).toBeGreaterThan(0);
    const writes = (transaction: string): number | undefined =>
      value(samples, `${P}database_write_duration_seconds_count`, { transaction });
    expect(writes('state')).toBeGreaterThan(0);
    expect(writes('activity')).toBeGreaterThan(0);
    expect(value(samples, `${P}replay_cache_entries`)).toBeGreaterThan(0);
    expect(value(samples, `${P}process_cpu_seconds_total`)).toBeGreaterThan(0);
    expect(value(samples, `${P}process_resident_memory_bytes`)).toBeGreaterThan(0);
  });

  it('50 unknown capability names add no label value beyond unknown', async () => {
    for (let i = 0; i < 50; i++) {
      const reply = await gw.p.execute(agent, agentId, `made_up_${Math.random().toString(36).slice(2)}`, {});
      expect(reply.status).toBe(404);
    }
    const samples = parseExposition((await get(internal, '/metrics')).text);
    const executions = samples.filter((s) => s.name === `${P}executions_total`);
    const names = new Set(executions.map((s) => s.labels.capability));
    expect([...names].sort()).toEqual(['create_transfer', 'get_item', 'list_items', 'unknown']);
    expect(
      value(samples, `${P}executions_total`, { capability: 'unknown', outcome: 'capability_not_found' }),
    ).toBe(50);
  });

  it('§8.2: counts JWTs refused for a wrong clock by claim, and nothing else there', async () => {
    const now = Math.floor(gw.p.clock.now() / 1000);
    const refused = async (claims: Record<string, unknown>): Promise<void> => {
      const reply = await gw.p.execute(agent, agentId, 'get_item', { itemId: 'ok' }, { extra: claims });
      expect(reply.body.error).toBe('invalid_jwt');
    };
    await refused({ iat: now + 120 }); // a client clock two minutes fast
    await refused({ iat: now - 200, exp: now - 140 }); // two minutes slow, or a JWT kept too long
    await refused({ iat: now - 200, exp: now - 140 });
    await refused({ aud: 'https://elsewhere.example' }); // refused, but not for time
    const samples = parseExposition((await get(internal, '/metrics')).text);
    expect(value(samples, `${P}jwt_clock_refusals_total`, { claim: 'iat' })).toBe(1);
    expect(value(samples, `${P}jwt_clock_refusals_total`, { claim: 'exp' })).toBe(2);
    expect(value(samples, `${P}jwt_clock_refusals_total`, { claim: 'nbf' })).toBeUndefined();
  });
});

describe('with --internal-port, introspection', () => {
  it('the public port does not take the admin token for introspection (it would confirm a guess)', async () => {
    const own = await startGateway({ config: 'server:\n  internal_port: 0' });
    try {
      const introspect = (token: string) =>
        fetch(`${own.p.proxy.url}/agent/introspect`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: JSON.stringify({ token: 'x.y.z' }),
        });
      expect((await introspect(ADMIN_TOKEN)).status).toBe(401);
      expect((await introspect(INTROSPECTION_TOKEN)).status).toBe(200);
    } finally {
      await own.close();
    }
  });
});

describe('without --internal-port', () => {
  it('keeps the operator API on the public port and /metrics behind the admin token', async () => {
    const p = await startProtocol();
    try {
      expect(p.proxy.internalUrl).toBeUndefined();
      expect((await p.admin('GET', '/admin/approvals')).status).toBe(200);
      expect((await get(p.proxy.url, '/metrics')).status).toBe(401);
      expect((await get(p.proxy.url, '/metrics', 'not-the-admin-token')).status).toBe(401);
      const metrics = await get(p.proxy.url, '/metrics', ADMIN_TOKEN);
      expect(metrics.status).toBe(200);
      expect(value(parseExposition(metrics.text), `${P}approvals_pending`)).toBe(0);
      expect((await get(p.proxy.url, '/healthz')).status).toBe(200);
    } finally {
      await p.close();
    }
  });

  it('serves no /metrics at all without an admin token', async () => {
    const proxy = await startTestProxy();
    try {
      expect((await get(proxy.url, '/metrics')).status).toBe(404);
      expect((await get(proxy.url, '/readyz')).status).toBe(200);
    } finally {
      await proxy.close();
    }
  });

  it('two proxies in one process keep separate registries', async () => {
    const [a, b] = await Promise.all([startProtocol(), startProtocol()]);
    try {
      await a.register(await generateTestKey());
      const registrations = async (p: typeof a): Promise<number> =>
        parseExposition((await get(p.proxy.url, '/metrics', ADMIN_TOKEN)).text)
          .filter((s) => s.name === `${P}registrations_total`)
          .reduce((n, s) => n + s.value, 0);
      expect(await registrations(a)).toBe(1);
      expect(await registrations(b)).toBe(0);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });
});

describe('internal port taken', () => {
  it('fails the start, naming the address, and releases the public port', async () => {
    const blocker = createServer();
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
    const taken = (blocker.address() as AddressInfo).port;
    const publicPort = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const { port } = probe.address() as AddressInfo;
        probe.close(() => resolve(port));
      });
    });
    try {
      await expect(startTestProxy({ port: publicPort, internalPort: taken })).rejects.toThrow(
        `cannot listen on 127.0.0.1:${taken}: EADDRINUSE`,
      );
      // The public listener was closed again: the same port can be taken now.
      const again = await startTestProxy({ port: publicPort });
      await again.close();
    } finally {
      await new Promise<void>((resolve) => blocker.close(() => resolve()));
    }
  });
});
