/**
 * Approval notifications (issue 11, §7.2): a new CIBA request (and, when configured, a device
 * request) is POSTed as a signed JSON webhook to a real receiver on 127.0.0.1 that verifies the
 * HMAC over the raw body. Retries run on hand-driven timers (no sleeps): a receiver that fails
 * twice then succeeds, one that always fails, one that never answers; the request that created
 * the approval is never held up, the queue is bounded, and no log line carries the secret.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startProxy } from '../../../src/app.js';
import { resolveSettings } from '../../../src/config/settings.js';
import { createLogger } from '../../../src/log.js';
import type { Timers } from '../../../src/notify/webhook.js';
import { MAX_IN_FLIGHT } from '../../../src/notify/webhook.js';
import { writeConfig } from '../../helpers/browser.js';
import { generateTestKey } from '../../helpers/keys.js';
import { ADMIN_TOKEN, TestClock, TestProtocol, writePolicy } from '../../helpers/protocol.js';
import { PETSTORE, ROOT, tempDbFile } from '../../helpers/proxy.js';

const SECRET = 'webhook-secret-0123456789abcdef';
/** Receivers accept a signature at most this old (the documented replay window). */
const REPLAY_WINDOW_SEC = 300;
const POLICY = `
capabilities:
  high_risk: [create_pet]
approval:
  methods: [device_authorization, ciba]
  approvers: [alice@example.com]
rate_limits:
  unknown_host_registration: null
  per_ip: null
`;

/** Timers the test fires by hand. */
class ManualTimers implements Timers {
  private now = 0;
  private jobs: { at: number; fn: () => void }[] = [];
  set(fn: () => void, ms: number): () => void {
    const job = { at: this.now + ms, fn };
    this.jobs.push(job);
    return () => {
      this.jobs = this.jobs.filter((j) => j !== job);
    };
  }
  /** Moves time on and runs what came due, in order. */
  advance(ms: number): void {
    this.now += ms;
    const due = this.jobs.filter((j) => j.at <= this.now).sort((a, b) => a.at - b.at);
    this.jobs = this.jobs.filter((j) => j.at > this.now);
    for (const j of due) j.fn();
  }
  /** How long until each job still waiting. */
  waiting(): number[] {
    return this.jobs.map((j) => j.at - this.now).sort((a, b) => a - b);
  }
}

interface Received {
  readonly headers: IncomingHttpHeaders;
  readonly raw: Buffer;
  readonly url: string;
}

/** A webhook receiver: records every POST, answers with the next scripted status ('hang': never). */
class Receiver {
  readonly received: Received[] = [];
  private readonly sockets = new Set<Socket>();
  private constructor(
    private readonly server: Server,
    private readonly script: (n: number) => number | 'hang',
  ) {}

  static async start(script: (n: number) => number | 'hang'): Promise<Receiver> {
    const server = createServer();
    const r = new Receiver(server, script);
    server.on('connection', (s) => {
      r.sockets.add(s);
      s.on('close', () => r.sockets.delete(s));
    });
    server.on('request', (req, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        r.received.push({ headers: req.headers, raw: Buffer.concat(chunks), url: req.url ?? '' });
        const answer = r.script(r.received.length);
        if (answer !== 'hang') res.writeHead(answer).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return r;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks/s3cret-path`;
  }

  close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** What a receiver does with X-AgentAuth-Signature (README): HMAC over "t.rawbody", in time. */
function verify(r: Received, secret: string, nowSec: number): boolean {
  const header = String(r.headers['x-agentauth-signature'] ?? '');
  const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  if (!match) return false;
  const t = Number(match[1]);
  if (Math.abs(nowSec - t) > REPLAY_WINDOW_SEC) return false;
  const expected = createHmac('sha256', secret).update(`${t}.`).update(r.raw).digest();
  return timingSafeEqual(expected, Buffer.from(match[2] as string, 'hex'));
}

let proxy: TestProtocol | undefined;
let receiver: Receiver | undefined;
afterEach(async () => {
  await proxy?.close();
  await receiver?.close();
  proxy = undefined;
  receiver = undefined;
});

interface Started {
  readonly p: TestProtocol;
  readonly clock: TestClock;
  readonly timers: ManualTimers;
  readonly logs: string[];
}

async function start(script: (n: number) => number | 'hang', webhook = ''): Promise<Started> {
  receiver = await Receiver.start(script);
  const config = writeConfig(`apis:
  - spec: ${PETSTORE}
notifications:
  webhook:
    url: ${receiver.url}
    secret: { env: HOOK_SECRET }
    retry_backoff: 1s
    max_attempts: 3
${webhook}`);
  const settings = resolveSettings(
    {
      config,
      host: '127.0.0.1',
      port: 0,
      db: tempDbFile(),
      adminToken: ADMIN_TOKEN,
      policy: writePolicy(POLICY),
    },
    ROOT,
    { HOOK_SECRET: SECRET },
  );
  const clock = new TestClock();
  const timers = new ManualTimers();
  const logs: string[] = [];
  const logger = createLogger(
    'debug',
    (line) => logs.push(line),
    () => clock.now(),
  );
  const running = await startProxy(settings, { clock, timers, logger });
  proxy = new TestProtocol(running, clock);
  return { p: proxy, clock, timers, logs };
}

function notifier(p: TestProtocol) {
  const n = p.proxy.notifier;
  if (!n) throw new Error('no notifier configured');
  return n;
}

/** A delegated registration addressed to alice by CIBA (§7.5: login_hint names an approver). */
async function cibaRequest(p: TestProtocol, name = 'Shelter helper') {
  const host = await generateTestKey();
  const reg = await p.register(host, {
    name,
    host_name: 'Alice laptop',
    capabilities: ['list_pets', 'create_pet'],
    login_hint: 'alice@example.com',
    binding_message: 'Approve Shelter helper',
    reason: 'my private reason',
  });
  expect(reg.status).toBe(200);
  expect(reg.body.approval.method).toBe('ciba');
  return { ...reg, host };
}

describe('a CIBA request notifies the approver', () => {
  it('POSTs a JSON webhook whose HMAC signature the receiver verifies, with a link to the inbox and no way to decide', async () => {
    const { p, clock } = await start(() => 204);
    const reg = await cibaRequest(p);
    await notifier(p).whenIdle();
    expect(receiver?.received).toHaveLength(1);
    const got = receiver?.received[0] as Received;
    expect(got.url).toBe('/hooks/s3cret-path');
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['x-agentauth-event']).toBe('approval.requested');
    expect(verify(got, SECRET, Math.floor(clock.now() / 1000))).toBe(true);

    const body = JSON.parse(got.raw.toString('utf8'));
    const approval = await p.pendingApproval(reg.body.agent_id);
    expect(body).toEqual({
      id: got.headers['x-agentauth-delivery'],
      type: 'approval.requested',
      event: 'ciba',
      approval: {
        id: approval.id,
        kind: 'registration',
        method: 'ciba',
        url: `${p.issuer}/approvals`,
        binding_message: 'Approve Shelter helper',
        created_at: expect.any(String),
        expires_at: expect.any(String),
      },
      user_id: 'alice@example.com',
      agent: { id: reg.body.agent_id, name: 'Shelter helper', mode: 'delegated' },
      host: { id: expect.stringMatching(/^hst_/), name: 'Alice laptop' },
      capabilities: [
        { name: 'list_pets', description: expect.any(String), method: 'GET', high_risk: false },
        { name: 'create_pet', description: expect.any(String), method: 'POST', high_risk: true },
      ],
      sent_at: new Date(clock.now()).toISOString(),
    });
    // §9.5: the free-text reason stays on the proxy; the secret never travels.
    expect(got.raw.toString()).not.toContain('my private reason');
    expect(got.raw.toString()).not.toContain(SECRET);
    expect(notifier(p).stats()).toMatchObject({ accepted: 1, delivered: 1, attempts: 1, failedAttempts: 0 });
  });

  it('a CIBA request whose login_hint names no approver notifies nobody (it reaches nobody, §7.2)', async () => {
    const { p } = await start(() => 204);
    const reg = await p.register(await generateTestKey(), {
      capabilities: ['list_pets'],
      login_hint: 'nobody@example.com',
    });
    expect(reg.body.approval.method).toBe('ciba');
    await cibaRequest(p);
    await notifier(p).whenIdle();
    expect(
      receiver?.received.map((r) => (JSON.parse(r.raw.toString('utf8')) as { user_id: string }).user_id),
    ).toEqual(['alice@example.com']);
  });

  it('a forged or replayed notification fails the receiver’s check: tampered body, wrong secret, stale timestamp', async () => {
    const { p, clock } = await start(() => 204);
    await cibaRequest(p);
    await notifier(p).whenIdle();
    const got = receiver?.received[0] as Received;
    const now = Math.floor(clock.now() / 1000);
    const tampered = { ...got, raw: Buffer.from(got.raw.toString().replace('alice@', 'mallory@')) };
    expect(verify(tampered, SECRET, now)).toBe(false);
    expect(verify(got, 'another-secret-0123456789abcdef', now)).toBe(false);
    expect(verify(got, SECRET, now + REPLAY_WINDOW_SEC + 1)).toBe(false);
    expect(verify(got, SECRET, now)).toBe(true);
  });

  it('device requests are announced only when events lists device, with the /device link and its code', async () => {
    const quiet = await start(() => 204);
    const device = await quiet.p.register(await generateTestKey(), { capabilities: ['list_pets'] });
    expect(device.body.approval.method).toBe('device_authorization');
    await notifier(quiet.p).whenIdle();
    expect(receiver?.received).toHaveLength(0);
    expect(notifier(quiet.p).stats()).toMatchObject({ accepted: 0, skipped: 1 });
    await proxy?.close();
    await receiver?.close();

    const { p } = await start(() => 204, '    events: [ciba, device]\n');
    const reg = await p.register(await generateTestKey(), { capabilities: ['list_pets'] });
    await notifier(p).whenIdle();
    const body = JSON.parse((receiver?.received[0] as Received).raw.toString());
    const code: string = reg.body.approval.user_code;
    expect(body.event).toBe('device');
    expect(body.approval).toMatchObject({
      method: 'device_authorization',
      user_code: code,
      url: `${p.issuer}/device?code=${code}`,
    });
    expect(body.user_id).toBeNull();
  });
});

describe('delivery failures', () => {
  it('a receiver that fails twice then succeeds: retried after 1 s, then 2 s, delivered once under one delivery id', async () => {
    const { p, clock, timers } = await start((n) => (n <= 2 ? 503 : 204));
    await cibaRequest(p);
    const n = notifier(p);
    await n.whenIdle();
    expect(n.stats()).toMatchObject({ attempts: 1, failedAttempts: 1, retries: 1, delivered: 0, waiting: 1 });
    expect(timers.waiting()).toEqual([1000]);
    timers.advance(999);
    await n.whenIdle();
    expect(receiver?.received).toHaveLength(1);
    timers.advance(1);
    await n.whenIdle();
    expect(receiver?.received).toHaveLength(2);
    expect(timers.waiting()).toEqual([2000]);
    clock.advance(3000);
    timers.advance(2000);
    await n.whenIdle();
    expect(n.stats()).toMatchObject({
      attempts: 3,
      failedAttempts: 2,
      retries: 2,
      delivered: 1,
      gaveUp: 0,
      waiting: 0,
    });
    const got = receiver?.received ?? [];
    expect(new Set(got.map((r) => r.headers['x-agentauth-delivery'])).size).toBe(1);
    // Each attempt is signed afresh: the last one with the time it was sent.
    expect(verify(got[2] as Received, SECRET, Math.floor(clock.now() / 1000))).toBe(true);
    expect(timers.waiting()).toEqual([]);
  });

  it('a receiver that always fails: given up after max_attempts, counted and logged without the secret or the URL path; the agent is unaffected', async () => {
    const { p, timers, logs } = await start(() => 500);
    const reg = await cibaRequest(p);
    const n = notifier(p);
    await n.whenIdle();
    timers.advance(1000);
    await n.whenIdle();
    timers.advance(2000);
    await n.whenIdle();
    expect(n.stats()).toMatchObject({
      attempts: 3,
      failedAttempts: 3,
      retries: 2,
      gaveUp: 1,
      delivered: 0,
      waiting: 0,
    });
    expect(timers.waiting()).toEqual([]);
    const failures = logs.filter((l) => l.includes('notification'));
    expect(
      failures.some((l) => l.includes('"msg":"notification given up"') && l.includes('status 500')),
    ).toBe(true);
    for (const line of logs) {
      expect(line).not.toContain(SECRET);
      expect(line).not.toContain('s3cret-path');
    }
    // The request it announced is untouched: still waiting, still decidable by the operator.
    expect((await p.status(reg.host, reg.body.agent_id)).body.status).toBe('pending');
    expect((await p.pendingApproval(reg.body.agent_id)).method).toBe('ciba');
  });

  it('a receiver that never answers does not hold up the registration; each attempt times out on its own timer', async () => {
    const { p, timers } = await start(() => 'hang');
    const started = Date.now();
    const reg = await cibaRequest(p);
    expect(reg.body.status).toBe('pending');
    const n = notifier(p);
    // The registration was answered while the webhook is still waiting for its receiver.
    expect(n.stats().inFlight).toBe(1);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(timers.waiting()).toEqual([5000]);
    timers.advance(5000);
    await n.whenIdle();
    expect(n.stats()).toMatchObject({ attempts: 1, failedAttempts: 1, retries: 1, inFlight: 0 });
  });

  it(`the queue is bounded: with ${MAX_IN_FLIGHT} attempts hanging and max_queue 2, the oldest waiting notice is dropped, logged and counted`, async () => {
    const { p, logs } = await start(() => 'hang', '    max_queue: 2\n');
    for (let i = 0; i < MAX_IN_FLIGHT + 3; i++) await cibaRequest(p, `agent ${i}`);
    const stats = notifier(p).stats();
    expect(stats).toMatchObject({
      accepted: MAX_IN_FLIGHT + 3,
      inFlight: MAX_IN_FLIGHT,
      waiting: 2,
      dropped: 1,
    });
    expect(logs.filter((l) => l.includes('notification dropped: the queue is full'))).toHaveLength(1);
  });
});
