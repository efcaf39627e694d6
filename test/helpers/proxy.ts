/** Boots the real proxy (real HTTP server on 127.0.0.1, port 0) for integration tests. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProxy, type RunningProxy } from '../../src/app.js';
import { resolveSettings, type CliOverrides } from '../../src/config/settings.js';
import { silentLogger, type Logger } from '../../src/log.js';
import type { Clock } from '../../src/clock.js';
import type { Timers } from '../../src/notify/webhook.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const PETSTORE = join(ROOT, 'examples/openapi/petstore.yaml');

/** A fresh SQLite file in its own temp directory. */
export function tempDbFile(): string {
  return join(mkdtempSync(join(tmpdir(), 'aap-db-')), 'proxy.db');
}

export async function startTestProxy(
  overrides: CliOverrides = {},
  deps: {
    clock?: Clock;
    env?: Readonly<Record<string, string>>;
    logger?: Logger;
    /** Receives the lines of the proxy's own logger (config log_level, log_format) instead. */
    logSink?: (line: string) => void;
    timers?: Timers;
  } = {},
): Promise<RunningProxy> {
  const cli: CliOverrides = {
    ...(overrides.config === undefined ? { specs: [PETSTORE] } : {}),
    host: '127.0.0.1',
    port: 0,
    db: tempDbFile(),
    ...overrides,
  };
  const settings = resolveSettings(cli, ROOT, deps.env ?? {});
  return startProxy(settings, {
    // reload() reads the config file again, as the CLI's SIGHUP does.
    rereadSettings: () => resolveSettings(cli, ROOT, deps.env ?? {}),
    ...(deps.logSink ? { logSink: deps.logSink } : { logger: deps.logger ?? silentLogger }),
    ...(deps.clock ? { clock: deps.clock } : {}),
    ...(deps.timers ? { timers: deps.timers } : {}),
  });
}

/** Writes a document to a fresh temp directory and returns its path. */
export function writeTempSpec(doc: unknown, name = 'spec.json'): string {
  const dir = mkdtempSync(join(tmpdir(), 'aap-spec-'));
  const file = join(dir, name);
  writeFileSync(file, JSON.stringify(doc, null, 2));
  return file;
}

/** A request with an optional bearer token and JSON body; the answer as getJson gives it. */
export function requestJson(
  url: string,
  method: string,
  token?: string,
  body?: unknown,
): Promise<{ status: number; headers: Headers; body: any }> {
  return getJson(url, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
}

export async function getJson(
  url: string,
  init?: RequestInit,
): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(url, init);
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}
