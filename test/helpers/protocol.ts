/**
 * A real proxy (HTTP on 127.0.0.1, SQLite file, operator API on) with a controllable clock, and
 * a small client that signs real Ed25519 JWTs for hosts and agents.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RunningProxy } from '../../src/app.js';
import type { CliOverrides } from '../../src/config/settings.js';
import type { Logger } from '../../src/log.js';
import type { Timers } from '../../src/notify/webhook.js';
import { agentJwt, generateTestKey, hostJwt, type TestKey } from './keys.js';
import { startTestProxy } from './proxy.js';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';
export const INTROSPECTION_TOKEN = 'test-introspection-token-0123456789';

/** Time under the test's control; starts at the real time so JWT libraries see sane values. */
export class TestClock {
  private t: number;
  constructor(start = Date.now()) {
    this.t = start;
  }
  now(): number {
    return this.t;
  }
  advance(ms: number): void {
    this.t += ms;
  }
}

/**
 * Timers on the test's clock: `advance` moves the clock and runs what came due, in order, so a
 * timer set for an approval's expiry fires when the test moves time past it, without sleeping.
 */
export class ClockTimers implements Timers {
  private jobs: { at: number; fn: () => void }[] = [];
  constructor(readonly clock: TestClock) {}
  set(fn: () => void, ms: number): () => void {
    const job = { at: this.clock.now() + ms, fn };
    this.jobs.push(job);
    return () => {
      this.jobs = this.jobs.filter((j) => j !== job);
    };
  }
  advance(ms: number): void {
    this.clock.advance(ms);
    const now = this.clock.now();
    const due = this.jobs.filter((j) => j.at <= now).sort((a, b) => a.at - b.at);
    this.jobs = this.jobs.filter((j) => j.at > now);
    for (const j of due) j.fn();
  }
}

export function writePolicy(yaml: string): string {
  const file = join(mkdtempSync(join(tmpdir(), 'aap-policy-')), 'policy.yaml');
  writeFileSync(file, withoutApprovalLimit(yaml));
  return file;
}

/**
 * Test files share one approver across many requests within one TestClock minute, which the
 * per-user approval limit (5 a minute, issue 16) would refuse; it is off unless a test sets it
 * (test/integration/protocol/approval-limits.test.ts does).
 */
function withoutApprovalLimit(yaml: string): string {
  if (yaml.includes('approval_requests_per_user')) return yaml;
  const block = /^rate_limits:[ \t]*\n([ \t]+)\S/m.exec(yaml);
  if (block) {
    return yaml.replace(
      /^rate_limits:[ \t]*\n/m,
      `rate_limits:\n${block[1]}approval_requests_per_user: null\n`,
    );
  }
  if (/^rate_limits:/m.test(yaml)) return yaml;
  return `${yaml}${yaml === '' || yaml.endsWith('\n') ? '' : '\n'}rate_limits:\n  approval_requests_per_user: null\n`;
}

export interface Reply {
  status: number;
  headers: Headers;
  body: any;
  /** The body as sent, before parsing. */
  text: string;
}

export class TestProtocol {
  constructor(
    readonly proxy: RunningProxy,
    readonly clock: TestClock,
  ) {}

  get issuer(): string {
    return this.proxy.issuer;
  }

  get executeLocation(): string {
    return `${this.proxy.issuer}/capability/execute`;
  }

  async request(
    method: string,
    path: string,
    options: {
      token?: string;
      body?: unknown;
      rawBody?: string;
      headers?: Record<string, string>;
      /** Another listener of the proxy (the internal one); default the public URL. */
      base?: string;
    } = {},
  ): Promise<Reply> {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    const res = await fetch(`${options.base ?? this.proxy.url}${path}`, {
      method,
      headers,
      ...(body !== undefined ? { body } : {}),
    });
    const text = await res.text();
    let parsed: unknown = undefined;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = text;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  }

  /** The operator API, on the internal listener when the proxy has one (server.internal_port). */
  admin(method: string, path: string, body?: unknown): Promise<Reply> {
    return this.request(method, path, {
      token: ADMIN_TOKEN,
      ...(body !== undefined ? { body } : {}),
      ...(this.proxy.internalUrl !== undefined ? { base: this.proxy.internalUrl } : {}),
    });
  }

  hostToken(
    host: TestKey,
    extra: Record<string, unknown> = {},
    header?: Record<string, unknown>,
  ): Promise<string> {
    return hostJwt(host, this.issuer, extra, { nowMs: this.clock.now(), ...(header ? { header } : {}) });
  }

  agentToken(
    agent: TestKey,
    agentId: string,
    extra: Record<string, unknown> = {},
    aud = this.issuer,
  ): Promise<string> {
    return agentJwt(agent, agentId, aud, extra, { nowMs: this.clock.now() });
  }

  /** POST /agent/register with a fresh (or given) agent key. */
  async register(
    host: TestKey,
    body: Record<string, unknown> = {},
    agent?: TestKey,
  ): Promise<Reply & { agent: TestKey }> {
    const agentKey = agent ?? (await generateTestKey());
    const token = await this.hostToken(host, { agent_public_key: agentKey.publicJwk });
    const reply = await this.request('POST', '/agent/register', {
      token,
      body: { name: 'test agent', ...body },
    });
    return { ...reply, agent: agentKey };
  }

  /** A POST signed by the host (a fresh host JWT), with an optional JSON body. */
  async hostPost(host: TestKey, path: string, body?: unknown): Promise<Reply> {
    return this.request('POST', path, {
      token: await this.hostToken(host),
      ...(body !== undefined ? { body } : {}),
    });
  }

  async status(host: TestKey, agentId: string): Promise<Reply> {
    return this.request('GET', `/agent/status?agent_id=${encodeURIComponent(agentId)}`, {
      token: await this.hostToken(host),
    });
  }

  /** The one pending approval for an agent, from the operator API. */
  async pendingApproval(agentId: string): Promise<any> {
    const reply = await this.admin('GET', `/admin/approvals?agent_id=${encodeURIComponent(agentId)}`);
    return reply.body.approvals.at(-1);
  }

  /**
   * A host linked to `userId` through the operator API (pre-registration), with optional
   * default capabilities.
   */
  async linkedHost(userId = 'alice', defaults: string[] = []): Promise<{ key: TestKey; hostId: string }> {
    const key = await generateTestKey();
    const reply = await this.admin('POST', '/admin/hosts', {
      name: 'linked host',
      public_key: key.publicJwk,
      user_id: userId,
      default_capabilities: defaults,
    });
    if (reply.status !== 201) throw new Error(`pre-registration failed: ${JSON.stringify(reply.body)}`);
    return { key, hostId: reply.body.host_id };
  }

  /** An active delegated agent of a linked host, granted `capabilities` through approval. */
  async activeAgent(
    capabilities: (string | { name: string; constraints?: unknown })[],
    options: { userId?: string } = {},
  ): Promise<{ host: TestKey; hostId: string; agent: TestKey; agentId: string; body: any }> {
    const { key: host, hostId } = await this.linkedHost(options.userId ?? 'alice');
    const reg = await this.register(host, { capabilities });
    if (reg.status !== 200) throw new Error(`registration failed: ${JSON.stringify(reg.body)}`);
    const agentId: string = reg.body.agent_id;
    const approval = await this.pendingApproval(agentId);
    if (approval) {
      const ok = await this.admin('POST', `/admin/approvals/${approval.id}/approve`, {});
      if (ok.status !== 200) throw new Error(`approval failed: ${JSON.stringify(ok.body)}`);
    }
    const status = await this.status(host, agentId);
    return { host, hostId, agent: reg.agent, agentId, body: status.body };
  }

  /** §5.11 `POST /capability/execute` with a fresh agent JWT (audience: the execute location). */
  async execute(
    agent: TestKey,
    agentId: string,
    capability: string,
    args?: Record<string, unknown>,
    options: { extra?: Record<string, unknown>; aud?: string; headers?: Record<string, string> } = {},
  ): Promise<Reply> {
    const token = await this.agentToken(
      agent,
      agentId,
      options.extra ?? {},
      options.aud ?? this.executeLocation,
    );
    return this.request('POST', '/capability/execute', {
      token,
      body: { capability, ...(args !== undefined ? { arguments: args } : {}) },
      ...(options.headers ? { headers: options.headers } : {}),
    });
  }

  close(): Promise<void> {
    return this.proxy.close();
  }
}

export async function startProtocol(
  options: {
    policy?: string;
    overrides?: CliOverrides;
    clock?: TestClock;
    env?: Readonly<Record<string, string>>;
    /** Receives the proxy's log (default: silent), e.g. to check that no secret is logged. */
    logger?: Logger;
    /** Receives the lines of the proxy's own logger (config log_level, log_format) instead. */
    logSink?: (line: string) => void;
    /** Timers run by hand (ClockTimers), e.g. notification streams' expiry and heartbeats. */
    timers?: Timers;
  } = {},
): Promise<TestProtocol> {
  const clock = options.clock ?? new TestClock();
  const proxy = await startTestProxy(
    {
      adminToken: ADMIN_TOKEN,
      introspectionToken: INTROSPECTION_TOKEN,
      ...(options.policy !== undefined ? { policy: writePolicy(options.policy) } : {}),
      ...options.overrides,
    },
    {
      clock,
      ...(options.env ? { env: options.env } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.logSink ? { logSink: options.logSink } : {}),
      ...(options.timers ? { timers: options.timers } : {}),
    },
  );
  return new TestProtocol(proxy, clock);
}
