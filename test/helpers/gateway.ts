/**
 * The execute path end to end: a recording upstream (test/helpers/upstream.ts), the proxy in
 * front of it with a YAML config for the gateway fixture API (every parameter style, body type
 * and credential kind), and helpers to get an agent granted what a test needs.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../../src/log.js';
import type { Timers } from '../../src/notify/webhook.js';
import type { TestKey } from './keys.js';
import { ROOT, tempDbFile } from './proxy.js';
import type { TestClock, TestProtocol } from './protocol.js';
import { startInFrontOf } from './proxy-in-front.js';
import { TestUpstream } from './upstream.js';

export const GATEWAY_SPEC = join(ROOT, 'test/fixtures/specs/gateway.yaml');

export interface Gateway {
  readonly p: TestProtocol;
  readonly upstream: TestUpstream;
  /** The SQLite file: a later gateway started with `db` set to it sees the same state. */
  readonly db: string;
  close(): Promise<void>;
}

/**
 * The API entry's lines for the service's OAuth client-credentials client, its token endpoint on
 * the test upstream (`/oauth/token`); `secret` as YAML (a value, or `{env: NAME}`).
 */
export function oauthClientApi(clientId: string, secret: string): string {
  return [
    '    credentials:',
    '      oauthClient:',
    `        client_id: ${clientId}`,
    `        client_secret: ${secret}`,
    '        token_url: {{upstream}}/oauth/token',
    '',
  ].join('\n');
}

/**
 * `api`: extra YAML lines for the API entry (credentials, headers, operations…), indented by
 * four spaces; `{{upstream}}` is replaced by the upstream's URL. `config`: extra top-level YAML.
 * `db`: an existing SQLite file to reuse (e.g. a restart with another config); default a fresh one.
 */
export async function startGateway(
  options: {
    /** The OpenAPI document (default: the gateway fixture). */
    spec?: string;
    api?: string;
    config?: string;
    policy?: string;
    /** A policy file the test rewrites to reload (writePolicy); wins over `policy`. */
    policyFile?: string;
    env?: Readonly<Record<string, string>>;
    clock?: TestClock;
    /** Timers the proxy's timeouts run on (e.g. ClockTimers, to advance by hand). */
    timers?: Timers;
    db?: string;
    logger?: Logger;
    logSink?: (line: string) => void;
  } = {},
): Promise<Gateway> {
  const upstream = await TestUpstream.start();
  const dir = mkdtempSync(join(tmpdir(), 'aap-gw-'));
  const configFile = join(dir, 'proxy.yaml');
  const yaml = [
    'apis:',
    `  - spec: ${JSON.stringify(options.spec ?? GATEWAY_SPEC)}`,
    `    upstream: ${upstream.url}/v1`,
    ...(options.api ?? '').split('\n').filter((l) => l.trim() !== ''),
    ...(options.config ?? '').split('\n'),
  ]
    .join('\n')
    .replaceAll('{{upstream}}', upstream.url);
  writeFileSync(configFile, yaml);
  const db = options.db ?? tempDbFile();
  const { p, close } = await startInFrontOf(upstream, {
    // Tests register many agents from one IP; the unknown-host registration limit is tested elsewhere.
    policy: options.policy ?? 'rate_limits:\n  unknown_host_registration: null\n',
    overrides: {
      config: configFile,
      db,
      ...(options.policyFile !== undefined ? { policy: options.policyFile } : {}),
    },
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.env ? { env: options.env } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.timers ? { timers: options.timers } : {}),
    ...(options.logSink ? { logSink: options.logSink } : {}),
  });
  return { p, upstream, db, close };
}

/**
 * The text the proxy relays to `agent` when the gateway fixture's `stream_events` upstream answers
 * with an event stream that `write` sends (given the service key the proxy sent it).
 */
export async function relayedEvents(
  gw: Gateway,
  agent: { readonly agent: TestKey; readonly agentId: string },
  write: (res: ServerResponse, key: string) => void,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  gw.upstream.on('GET /v1/events', (req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', ...headers });
    write(res, String(req.headers['x-api-key']));
  });
  const token = await gw.p.agentToken(agent.agent, agent.agentId, {}, gw.p.executeLocation);
  const res = await fetch(`${gw.p.proxy.url}/capability/execute`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ capability: 'stream_events', arguments: {} }),
  });
  return { status: res.status, text: await res.text() };
}
